"""The runtime file: where commands find the running broker, and when they must not trust it."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from logan_ray import runtime_file


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_STATE_HOME", raising=False)
    monkeypatch.delenv("LOGAN_RAY_DATA_DIR", raising=False)
    return tmp_path


def info(data_dir, pid=None):
    return {"pid": pid or os.getpid(), "data_dir": str(data_dir), "ray_address": "127.0.0.1:6379",
            "kafka": "127.0.0.1:9092"}


def test_a_broker_with_another_data_dir_is_found_through_the_per_user_file(home):
    data_dir = home / "elsewhere"
    data_dir.mkdir()
    runtime_file.publish(info(data_dir))
    assert json.loads((data_dir / "broker.json").read_text())["kafka"] == "127.0.0.1:9092"
    assert runtime_file.find().info["data_dir"] == str(data_dir)
    assert runtime_file.find(str(home / "other")).info is None  # an explicit data dir is the only place looked at
    runtime_file.withdraw(str(data_dir), os.getpid())
    assert not (data_dir / "broker.json").exists() and not os.path.exists(runtime_file.user_path())


def test_logan_ray_data_dir_counts_as_explicit(home, monkeypatch):
    data_dir = home / "d"
    data_dir.mkdir()
    runtime_file.publish(info(data_dir))
    monkeypatch.setenv("LOGAN_RAY_DATA_DIR", str(home / "other"))
    lookup = runtime_file.find()
    assert lookup.info is None and lookup.tried == [str(home / "other" / "broker.json")]


def test_a_dead_pid_makes_the_file_stale(home):
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    data_dir = home / ".logan-ray"
    data_dir.mkdir()
    (data_dir / "broker.json").write_text(json.dumps(info(data_dir, p.pid)))
    lookup = runtime_file.find()
    assert lookup.info is None
    assert lookup.stale == [f"{data_dir / 'broker.json'} (pid {p.pid} is gone)"]
    assert "ignored stale" in runtime_file.not_found_message(lookup)


def test_a_reused_pid_makes_the_file_stale(home):
    data_dir = home / "d"
    data_dir.mkdir()
    runtime_file.publish(info(data_dir))
    stored = json.loads((data_dir / "broker.json").read_text())
    assert stored["pid_start_time"] is not None
    stored["pid_start_time"] -= 1  # the same pid, but a process started at another time
    (data_dir / "broker.json").write_text(json.dumps(stored))
    assert runtime_file.find(str(data_dir)).info is None


def test_withdraw_leaves_another_brokers_files_alone(home):
    data_dir = home / "d"
    data_dir.mkdir()
    runtime_file.publish(info(data_dir))
    runtime_file.withdraw(str(data_dir), os.getpid() + 1)  # e.g. a second broker that failed to start
    assert (data_dir / "broker.json").exists() and os.path.exists(runtime_file.user_path())


def test_a_zombie_is_not_a_running_broker(home):
    # Exited but not yet reaped (its parent has not waited): `logan-ray stop` must see it as stopped.
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while runtime_file.process_alive(p.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not runtime_file.process_alive(p.pid)
    assert os.path.exists(f"/proc/{p.pid}")  # still there as a zombie until reaped
    p.wait()
    assert runtime_file.process_alive(os.getpid())


@pytest.fixture
def other_process():
    """A live process that is not this one, to stand for a broker."""
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield p.pid
    p.kill()
    p.wait()


def test_a_command_waits_for_a_starting_broker_until_it_publishes_its_ray_address(home, other_process):
    data_dir = home / "d"
    data_dir.mkdir()
    starting = {"pid": other_process, "data_dir": str(data_dir), "state": runtime_file.STARTING}
    runtime_file.publish(starting)
    threading.Timer(0.5, runtime_file.publish, [{**starting, "ray_address": "127.0.0.1:6379"}]).start()
    said = []
    lookup = runtime_file.await_reachable(str(data_dir), timeout=30, on_wait=said.append)
    assert lookup.info["ray_address"] == "127.0.0.1:6379" and not runtime_file.is_ready(lookup.info)
    assert len(said) == 1 and "is starting; waiting for it" in runtime_file.waiting_message(said[0])


def test_a_broker_still_starting_at_the_deadline_is_reported_as_such(home, other_process):
    data_dir = home / "d"
    data_dir.mkdir()
    runtime_file.publish({"pid": other_process, "data_dir": str(data_dir), "state": runtime_file.STARTING})
    t0 = time.monotonic()
    lookup = runtime_file.await_reachable(str(data_dir), timeout=0.5)
    assert 0.5 <= time.monotonic() - t0 < 5 and not runtime_file.reachable(lookup.info)
    assert runtime_file.still_starting_message(lookup, 0.5).startswith(
        f"the broker (pid {other_process}) at {data_dir / 'broker.json'} is still starting after 0 s")


def test_a_starting_broker_does_not_wait_for_its_own_file(home):
    data_dir = home / "d"
    data_dir.mkdir()
    runtime_file.publish({"pid": os.getpid(), "data_dir": str(data_dir), "state": runtime_file.STARTING})
    t0 = time.monotonic()
    assert runtime_file.await_reachable(str(data_dir), timeout=30).info["pid"] == os.getpid()
    assert time.monotonic() - t0 < 1
