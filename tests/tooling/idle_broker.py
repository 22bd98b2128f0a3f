"""An idle broker, measured: start ``logan-ray start --foreground`` as a user does, read the CPU
each process of its tree uses while nothing happens, and list the actors alive at rest.

Shared by ``bench/idle_cpu.py`` (the figures, per process) and the suite's guard
(tests/cli/test_idle_broker.py).
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def label(proc: Any) -> str:
    """A name a reader recognises: Ray's process title (``ray::RouterActor``...) or the program."""
    try:
        cmd = proc.cmdline()
    except Exception:  # noqa: BLE001 - gone meanwhile
        return "?"
    if not cmd:
        return proc.name()
    if cmd[0].startswith("ray::"):
        return cmd[0].split(" ")[0]
    base = os.path.basename(cmd[0])
    for part in cmd[1:3]:
        if part.endswith(".py"):
            return f"{base} {os.path.basename(part)}"
    return base


def _cpu_seconds(root_pid: int) -> dict[int, tuple[str, float]]:
    import psutil

    root = psutil.Process(root_pid)
    out = {}
    for p in [root, *root.children(recursive=True)]:
        try:
            t = p.cpu_times()
            out[p.pid] = (label(p), t.user + t.system)
        except psutil.Error:
            pass
    return out


def cpu_per_process(root_pid: int, window_s: float) -> list[tuple[float, int, str]]:
    """(percent of one core, pid, label) of each process of the tree over ``window_s``, busiest first."""
    before = _cpu_seconds(root_pid)
    time.sleep(window_s)
    after = _cpu_seconds(root_pid)
    rows = [(100.0 * (end - before.get(pid, (name, 0.0))[1]) / window_s, pid, name)
            for pid, (name, end) in after.items()]
    return sorted(rows, reverse=True)


class IdleBroker:
    """``logan-ray start --foreground`` on a fresh folder and a free port, stopped on exit."""

    def __init__(self, data_dir: str, http: bool = False) -> None:
        self.data_dir, self.port = data_dir, free_port()
        cmd = [sys.executable, "-m", "logan_ray.cli", "--data-dir", data_dir, "start", "--foreground",
               "--port", str(self.port)]
        if not http:
            cmd += ["--http", "off"]
        #: its own runtime-file folder: neither the user's broker nor a test session's is found or touched
        self.env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="token",
                        XDG_STATE_HOME=os.path.join(data_dir + "-state"))
        self.env.pop("LOGAN_RAY_DATA_DIR", None)
        self.env.pop("RAY_ADDRESS", None)
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)

    def wait_ready(self, timeout_s: float = 180.0) -> float:
        """Seconds until the gateway accepts Kafka connections."""
        started = time.monotonic()
        while time.monotonic() - started < timeout_s:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the broker exited ({self.proc.returncode}): "
                                   f"{self.proc.stderr.read().decode()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return time.monotonic() - started
            except OSError:
                time.sleep(0.5)
        raise TimeoutError(f"the broker did not accept Kafka connections on {self.port} in {timeout_s:.0f} s")

    def alive_actors(self) -> list[str]:
        """``Class:name`` of every actor alive, read from Ray's state API by the ``logan-ray`` CLI's
        own way in (a child process: this one may run another Ray session)."""
        script = ("import logan_ray, ray, sys\n"
                  "from ray.util.state import list_actors\n"
                  "c = logan_ray.connect(data_dir=sys.argv[1])\n"
                  "at = ray.get_runtime_context().gcs_address  # another Ray may run on this machine\n"
                  "print('\\n'.join(sorted(f'{a.class_name}:{a.name}' for a in list_actors("
                  "address=at, filters=[('state', '=', 'ALIVE')], limit=10000))))\n"
                  "c.close()\n")
        r = subprocess.run([sys.executable, "-c", script, self.data_dir], env=self.env, capture_output=True,
                           timeout=120)
        if r.returncode != 0:
            raise RuntimeError(r.stderr.decode()[-2000:])
        return [line for line in r.stdout.decode().splitlines() if ":" in line and " " not in line]

    def stop(self) -> None:
        """SIGTERM to the CLI alone (as Ctrl-C would: it stops its Ray itself; a signal to the whole
        group would take Ray's processes from under its shutdown), then nothing of the group left."""
        try:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def __enter__(self) -> "IdleBroker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
