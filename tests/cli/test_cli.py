"""The logan-ray command end to end: a real broker process, real Ray, SIGTERM, restart."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

CLI = [sys.executable, "-m", "logan_ray.cli"]


def run(data_dir, *args, stdin: bytes | None = None, timeout: float = 120):
    return subprocess.run([*CLI, "--data-dir", data_dir, *args], input=stdin, capture_output=True, timeout=timeout)


def start_foreground(data_dir):
    proc = subprocess.Popen([*CLI, "--data-dir", data_dir, "start", "--foreground", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    lines = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline().decode()
        lines.append(line)
        if "is running" in line:
            return proc, "".join(lines)
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("broker did not start:\n" + "".join(lines))


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    out = proc.communicate(timeout=120)[0].decode()
    assert proc.returncode == 0, out
    assert "stopped cleanly" in out
    return out


@pytest.fixture
def data_dir(tmp_path):
    return str(tmp_path / "data")


def test_cli_end_to_end_then_a_background_restart_keeps_everything(data_dir):
    proc, banner = start_foreground(data_dir)
    try:
        assert "ray dashboard: http://127.0.0.1:" in banner
        assert "kafka:         127.0.0.1:" in banner  # the gateway, on a free port here
        r = run(data_dir, "topic", "create", "events", "--partitions", "2", "--config", "retention.ms=3600000")
        assert r.returncode == 0, r.stderr
        lines = b"".join(b"k%d:value-%d\n" % (i % 5, i) for i in range(500))
        r = run(data_dir, "produce", "events", "--key-separator", ":", stdin=lines)
        assert r.returncode == 0, r.stderr
        assert b"produced 500 records" in r.stderr
        r = run(data_dir, "consume", "events", "--from-beginning", "--max-messages", "500")
        assert r.returncode == 0, r.stderr
        assert sorted(r.stdout.splitlines()) == sorted(b"value-%d" % i for i in range(500))
        r = run(data_dir, "status")
        assert r.returncode == 0 and b"events" in r.stdout
        # the operator's recovery after a disk error (tests/gateway/test_gw_power_loss.py has the real fault)
        r = run(data_dir, "partition", "reopen", "events", "0")
        assert r.returncode == 0, r.stderr
        assert re.fullmatch(rb"reopened events-0: offsets \[0, \d+\)\n", r.stdout), r.stdout
        r = run(data_dir, "topic", "describe", "events")
        assert b"retention.ms=3600000" in r.stdout
        topic_id = re.search(rb"partitions, id ([0-9a-f-]{36})", r.stdout).group(1)
        node = re.search(rb"partition 0: node ([0-9a-f]{12})", r.stdout).group(1).decode()
        # leadership by hand (logan_ray/node_cli.py) on one node: nothing can leave it, and it is said so
        r = run(data_dir, "node", "drain", "zz")
        assert r.returncode == 1 and r.stderr == b"logan-ray: error: no single alive Ray node matches 'zz' (0 do)\n"
        r = run(data_dir, "node", "drain", node)  # one replica each: they stay, listed, exit 1
        assert r.returncode == 1 and b"events-0: no eligible replica\n" in r.stdout, r.stdout
        assert re.search(rb"node [0-9a-f]{8} drains: 0 leaderships moved, \d+ stay\n$", r.stdout), r.stdout
        r = run(data_dir, "node", "undrain", node)
        assert r.returncode == 0 and r.stdout == f"node {node[:8]} may lead partitions again\n".encode(), r
        r = run(data_dir, "leaders", "elect", "--topic", "events", "--partition", "1")
        assert r.returncode == 0 and r.stdout == b"events-1: not needed\n", r  # its only replica leads
        r = run(data_dir, "leaders", "elect", "--topic", "nope")
        assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"nope" in r.stderr, r
        # bad input: one clear line, non-zero exit, nothing created
        r = run(data_dir, "topic", "create", "bad name!")
        assert r.returncode == 1 and r.stderr.count(b"\n") == 1 and b"bad name!" in r.stderr
        assert b"Traceback" not in r.stderr
        r = run(data_dir, "topic", "create", "t2", "--config", "nope=1")
        assert r.returncode == 1 and b"nope" in r.stderr and b"Traceback" not in r.stderr
        # the internal topics exist from the start (created with the broker), listed as kafka-topics lists them
        assert run(data_dir, "topic", "list").stdout.split() == [b"__consumer_offsets", b"__transaction_state", b"events"]
    finally:
        stop(proc)
    assert os.path.exists(os.path.join(data_dir, "events-0"))
    # restart on the same data dir, this time in the background (`start` returns, `stop` ends
    # it): everything is still there
    r = run(data_dir, "start", "--port", "0", timeout=200)
    try:
        assert r.returncode == 0, r.stderr + r.stdout
        assert b"started in the background" in r.stdout
        r = run(data_dir, "consume", "events", "--from-beginning", "--max-messages", "500", "--key-separator", "=")
        assert r.returncode == 0, r.stderr
        assert len(r.stdout.splitlines()) == 500 and b"k0=value-0" in r.stdout.splitlines()
        r = run(data_dir, "topic", "describe", "events")
        assert b"retention.ms=3600000" in r.stdout
        assert b"id " + topic_id in r.stdout  # the topic id is durable
    finally:
        s = run(data_dir, "stop")
    assert s.returncode == 0, s.stderr
    assert not os.path.exists(os.path.join(data_dir, "broker.json"))


def test_cli_without_broker_says_so(data_dir):
    r = run(data_dir, "topic", "list", timeout=60)
    assert r.returncode == 1
    assert b"no logan-ray broker found at" in r.stderr and b"Traceback" not in r.stderr


