"""How long ``logan-ray start`` takes, and how many Ray worker processes it starts, next to Ray's own
head start (``ray start --head``), in one run.

Run: ``python bench/broker_start.py [--rounds 3]`` (dependencies: ``./scripts/setup.sh --bench``)

Each round starts a broker in the background on a fresh data folder and a free port with
``--http off`` (as a user does, minus Serve), measures the command's wall time (it returns once
the broker answers), counts the worker processes of the broker's Ray session from its logs
(``worker-*.out``: one per process Ray started for an actor or a task), and stops it. Then the
same for a bare ``ray start --head`` / ``ray stop``: what no broker on Ray can start faster than.
A worker process costs about a second of CPU on a 2-core machine (docs/benchmarks.md), so the
count is the part of the start that logan-ray decides.
"""
from __future__ import annotations

import argparse
import glob
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from machine import describe  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)
from needs import need  # noqa: E402

CLI = [sys.executable, "-m", "logan_ray.cli"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _newest_session(before: set[str]) -> str | None:
    fresh = [s for s in glob.glob("/tmp/ray/session_2*") if s not in before]
    return max(fresh, key=os.path.getmtime) if fresh else None


def _workers(session: str | None) -> tuple[int, dict[str, int]]:
    """Worker processes of a Ray session, and how many ran each actor class or task."""
    if session is None:
        return 0, {}
    kinds: dict[str, int] = {}
    files = glob.glob(os.path.join(session, "logs", "worker-*.out"))
    for path in files:
        with open(path, errors="replace") as f:
            head = f.read(300)
        name = next((w.split(":", 2)[-1] for w in head.split() if w.startswith((":actor_name:", ":task_name:"))), "?")
        kinds[name] = kinds.get(name, 0) + 1
    return len(files), kinds


def broker_round(env: dict[str, str]) -> tuple[float, int, dict[str, int]]:
    before = set(glob.glob("/tmp/ray/session_2*"))
    data = tempfile.mkdtemp(prefix="bench-start-")
    started = time.perf_counter()
    subprocess.run([*CLI, "--data-dir", data, "start", "--port", str(_free_port()), "--http", "off"], env=env,
                   check=True, capture_output=True, timeout=300)
    took = time.perf_counter() - started
    time.sleep(3)  # anything the start left running in the background shows in the logs too
    count, kinds = _workers(_newest_session(before))
    subprocess.run([*CLI, "--data-dir", data, "stop"], env=env, check=True, capture_output=True, timeout=120)
    return took, count, kinds


def ray_round(env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(["ray", "start", "--head", "--port", str(_free_port()), "--include-dashboard=true",
                    "--dashboard-host=127.0.0.1"], env=env, check=True, capture_output=True, timeout=300)
    took = time.perf_counter() - started
    subprocess.run(["ray", "stop", "--force"], env=env, check=True, capture_output=True, timeout=120)
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "token"}
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    print(describe())
    broker, counts, kinds = [], [], {}
    ray_head = []
    for _ in range(args.rounds):
        took, count, seen = broker_round(env)
        broker.append(took)
        counts.append(count)
        kinds = seen
        ray_head.append(ray_round(env))
    print(f"logan-ray start (--http off): median {statistics.median(broker):.1f} s "
          f"({', '.join(f'{t:.1f}' for t in broker)}); worker processes {counts}")
    print(f"  workers of the last round: {', '.join(f'{k} x{n}' for k, n in sorted(kinds.items()))}")
    print(f"ray start --head:             median {statistics.median(ray_head):.1f} s "
          f"({', '.join(f'{t:.1f}' for t in ray_head)})")


if __name__ == "__main__":
    need("logan_ray", "ray")
    main()
