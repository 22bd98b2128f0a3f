"""`logan-ray start --foreground` is findable as soon as it listens, and a signal at any moment
of its start-up stops it cleanly: exit 0 (SIGTERM) or 130 (Ctrl-C), one line, no trace, and
none of its processes (Ray's included) left behind.

Each test starts one broker (its own Ray) as a subprocess; run them one file at a time
(they take about a minute and a half together on two cores).
"""
from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

CLI = [sys.executable, "-m", "logan_ray.cli"]
STOPPED = "logan-ray stopped cleanly.\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Broker:
    """A `logan-ray start --foreground` child and every process it (or its Ray) started, seen
    by polling its process tree every 50 ms."""

    def __init__(self, tmp_path: Path, *extra: str) -> None:
        self.data_dir = str(tmp_path / "data")
        self.env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}  # the user's own file stays as it is
        self.env.pop("LOGAN_RAY_DATA_DIR", None)
        self.port = free_port()
        self.started = time.monotonic()
        self.proc = subprocess.Popen([*CLI, "--data-dir", self.data_dir, "start", "--foreground",
                                      "--port", str(self.port), *extra], env=self.env,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        self.seen: dict[int, psutil.Process] = {}
        self._watching = True
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        me = psutil.Process(self.proc.pid)
        while self._watching:
            try:
                for child in me.children(recursive=True):
                    self.seen.setdefault(child.pid, child)
            except psutil.Error:
                return
            time.sleep(0.05)

    def runtime_file(self) -> dict | None:
        try:
            with open(os.path.join(self.data_dir, "broker.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def wait_for(self, what, timeout: float = 150):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = what()
            if found:
                return found
            assert self.proc.poll() is None, self.proc.communicate()
            time.sleep(0.02)
        raise AssertionError(f"not within {timeout} s: {what}")

    def kafka_accepts(self) -> bool:
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def cli(self, *args: str, timeout: float = 120, wait: bool = True):
        proc = subprocess.Popen([*CLI, "--data-dir", self.data_dir, *args], env=self.env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
        if not wait:
            return proc
        out, err = proc.communicate(timeout=timeout)
        return proc.returncode, out.decode(), err.decode()

    def signal_at(self, signum: int, seconds: float) -> None:
        time.sleep(max(0.0, self.started + seconds - time.monotonic()))
        self.proc.send_signal(signum)

    def stopped(self, timeout: float = 120) -> tuple[int, str, str]:
        """Exit status, stdout and stderr, once it and everything it started are gone."""
        out, err = self.proc.communicate(timeout=timeout)
        self._watching = False
        self._watcher.join()
        self.assert_nothing_left()
        return self.proc.returncode, out.decode(), err.decode()

    def assert_nothing_left(self, timeout: float = 20) -> None:
        """No process of its tree, and none of its Ray session (gcs_server, raylet, agents: their
        command lines name the session, ``session_<date>_<broker pid>``)."""
        session = re.compile(rf"session_[0-9_-]+_{self.proc.pid}\b")
        deadline = time.monotonic() + timeout
        while True:
            left = [p for p in self.seen.values() if _alive(p)]
            left += [p for p in psutil.process_iter(["cmdline"]) if p.pid not in self.seen and _alive(p)
                     and session.search(" ".join(p.info["cmdline"] or ()))]
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        described = [f"{p.pid} {_name(p)}" for p in left]
        for p in left:  # the test's own clean-up, after the verdict
            try:
                p.kill()
            except psutil.Error:
                pass
        assert not described, f"left running after the broker exited: {described}"


def _alive(p: psutil.Process) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _name(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())[:100]
    except psutil.Error:
        return "?"


def assert_clean_stop(status: int, out: str, err: str, expected: int, *, started: bool = False) -> None:
    assert status == expected, (status, out, err)
    assert "Traceback" not in err and "received at time" not in err, err  # Python's trace, Ray's C++ trace
    if started:
        assert out.endswith("logan-ray is running; Ctrl-C or SIGTERM stops it.\n" + STOPPED), out
    else:
        assert out == STOPPED, out  # one line


def test_a_command_run_when_kafka_starts_accepting_finds_the_broker(tmp_path):
    # HTTP on (on a free port): Serve starts after the gateways, which made the gap long
    broker = Broker(tmp_path, "--http", f"127.0.0.1:{free_port()}")
    try:
        # long before Ray is up (the runtime file is written first, within a second): it waits
        broker.wait_for(lambda: broker.runtime_file() or time.monotonic() > broker.started + 2)
        early = broker.cli("topic", "create", "early", wait=False)
        broker.wait_for(broker.kafka_accepts)
        status, out, err = broker.cli("topic", "create", "events")
        assert status == 0 and out == "created topic events with 1 partitions\n", (status, out, err)
        out, err = (b.decode() for b in early.communicate(timeout=120))
        assert early.returncode == 0 and out == "created topic early with 1 partitions\n", (out, err)
        assert re.fullmatch(rf"logan-ray: the broker \(pid {broker.proc.pid}\) at \S+ is starting; waiting for it "
                            r"\(up to 60 s\)\n", err), err
        ready = broker.wait_for(lambda: (broker.runtime_file() or {}).get("state") == "ready" and broker.runtime_file())
        assert ready["kafka"] == f"127.0.0.1:{broker.port}" and ready["http"]
    finally:
        broker.proc.send_signal(signal.SIGTERM)
        status, out, err = broker.stopped()
    assert_clean_stop(status, out, err, 0, started=True)
    assert "worker processes have been started" not in out + err  # Ray's worker-pool notice: in broker.log
    assert not os.path.exists(os.path.join(broker.data_dir, "broker.json"))


@pytest.mark.parametrize("seconds", [0.5, 2.0])
def test_sigterm_early_in_start_up_stops_cleanly(tmp_path, seconds):
    broker = Broker(tmp_path, "--http", "off")
    broker.signal_at(signal.SIGTERM, seconds)
    assert_clean_stop(*broker.stopped(), 0)
    assert not os.path.exists(os.path.join(broker.data_dir, "broker.json"))


def test_sigterm_while_the_gateways_start_stops_cleanly(tmp_path):
    broker = Broker(tmp_path, "--http", "off")
    broker.wait_for(lambda: (broker.runtime_file() or {}).get("ray_address"))  # router up, gateways next
    broker.proc.send_signal(signal.SIGTERM)
    assert_clean_stop(*broker.stopped(), 0)


def test_ctrl_c_during_start_up_stops_cleanly_with_status_130(tmp_path):
    broker = Broker(tmp_path, "--http", "off")
    broker.signal_at(signal.SIGINT, 5.0)
    assert_clean_stop(*broker.stopped(), 130)


def test_the_cli_module_does_not_import_ray():
    # `logan-ray start` takes its signals before Ray's import; a module of the CLI importing Ray at
    # its top would leave the first second of every start to the default SIGTERM (killed, status -15).
    code = "import sys, logan_ray.cli; print('ray' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == "False\n"
