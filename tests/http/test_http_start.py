"""`logan-ray start` serves the HTTP API and console with the broker; `--http` moves it, `--http off` disables it."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest

CLI = [sys.executable, "-m", "logan_ray.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(data_dir: str, *args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*CLI, "--data-dir", data_dir, "start", "--foreground", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        lines.append(line)
        if "is running" in line:
            return proc, "".join(lines)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("broker did not start:\n" + "".join(lines))


def _stop(proc: subprocess.Popen) -> str:
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 0 and "stopped cleanly" in out, out
    return out


@pytest.mark.slow
def test_start_serves_api_and_console_on_the_http_address_and_stops_it(tmp_path):
    port = _free_port()
    proc, banner = _start(str(tmp_path / "data"), "--http", f"127.0.0.1:{port}/api")
    try:
        base = f"http://127.0.0.1:{port}/api"
        assert f"http:          {base}/" in banner
        r = httpx.post(f"{base}/topic", json={"name": "events"}, timeout=30)
        assert r.status_code == 201, r.text
        r = httpx.post(f"{base}/publish", json={"topic": "events", "records": [{"value": "hi"}]}, timeout=30)
        assert r.json()["records"][0]["offset"] == 0
        page = httpx.get(f"{base}/console", timeout=30)
        assert page.status_code == 200 and "logan-ray" in page.text
        shown = [t["name"] for t in httpx.get(f"{base}/console/state", timeout=30).json()["topics"]]
        assert "events" in shown, shown
    finally:
        _stop(proc)
    with pytest.raises(httpx.ConnectError):  # Serve went down with the broker
        httpx.get(f"http://127.0.0.1:{port}/api/topic", timeout=5)


def test_bad_http_setting_is_one_clear_line_and_nothing_starts(tmp_path):
    r = subprocess.run([*CLI, "--data-dir", str(tmp_path / "d"), "start", "--foreground", "--http", "localhost:http"],
                       capture_output=True, timeout=60)
    assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"--http" in r.stderr
    assert not os.path.exists(tmp_path / "d" / "broker.json")


def test_an_open_http_api_beyond_loopback_is_refused_in_one_line_and_nothing_starts(tmp_path):
    r = subprocess.run([*CLI, "--data-dir", str(tmp_path / "d"), "start", "--foreground", "--http",
                        f"0.0.0.0:{_free_port()}"], capture_output=True, timeout=60)
    assert r.returncode == 1 and r.stderr.count(b"\n") == 1, r.stderr
    assert b"--http-insecure" in r.stderr and b"0.0.0.0" in r.stderr
    assert not os.path.exists(tmp_path / "d" / "broker.json")


def test_http_insecure_lets_it_through_with_one_warning_line(tmp_path):
    """Through to the next check (a taken port, so that nothing starts): the warning comes first, once."""
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        r = subprocess.run([*CLI, "--data-dir", str(tmp_path / "d"), "start", "--foreground", "--port", "0",
                            "--http", f"0.0.0.0:{port}", "--http-insecure"], capture_output=True, timeout=60)
    lines = r.stderr.decode().splitlines()
    assert r.returncode == 1 and len(lines) == 2, lines
    assert "WARNING" in lines[0] and "no authentication" in lines[0] and "cannot serve the HTTP API" in lines[1]


@pytest.mark.parametrize("listener", ["the HTTP API", "Kafka"])
def test_a_taken_port_is_one_clear_line_and_a_non_zero_exit_before_ray_starts(tmp_path, listener):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        where = (["--port", "0", "--http", f"127.0.0.1:{port}"] if listener == "the HTTP API"
                 else ["--port", str(port), "--http", "off"])
        started = time.monotonic()
        r = subprocess.run([*CLI, "--data-dir", str(tmp_path / "d"), "start", "--foreground", *where],
                           capture_output=True, timeout=150)
    assert r.returncode == 1, r.stdout + r.stderr
    err = r.stderr.decode()
    errors = [line for line in err.splitlines() if line.startswith("logan-ray: error:")]
    assert len(errors) == 1 and errors[0].startswith(f"logan-ray: error: cannot serve {listener} on 127.0.0.1:{port}")
    assert "Traceback" not in err and time.monotonic() - started < 10  # found before Ray starts
    assert not os.path.exists(tmp_path / "d" / "broker.json")
