"""Jepsen's Kafka queue workload under mixed host faults, checked for Jepsen's anomalies (issue 32 item 9).

Usage: python bench/jepsen.py [--minutes 10] [--producers 3] [--consumers 2] [--partitions 3] [--rate 40]
                              [--history FILE]

Starts a three-node ``ray.cluster_utils.Cluster`` on this machine in a child process (its own Ray;
no other Ray is touched), an RF=3 ``min.insync.replicas=2`` topic, idempotent acks=all
confluent-kafka producers and a consumer group reading and committing during the faults, and
cycles faults on the non-head nodes: SIGSTOP of every process of a node for 6 s, SIGKILL of a
node (which reboots at its address 5 s later), each after the ISR is full again. After
``--minutes`` a fresh consumer reads every partition from offset 0, and the checker
(tests/tooling/queue_checker.py) prints its table. ``--history`` keeps every event as JSON lines.
The link cuts, full disk and power loss of the issue need the namespace bed and are not run
here yet (docs/jepsen.md).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "confluent_kafka", "ray", "psutil")

RUN = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "tooling",
                   "queue_cluster_run.py")
#: one round of faults (~45 s with the waits for the ISR); repeated for the whole run
ROUND = ["wait:8", "stop:6", "wait:10", "kill", "wait:10"]


def schedule(minutes: float) -> list[str]:
    """Enough rounds to fill the run; the run stops taking faults when its time is up."""
    rounds = max(1, int(minutes * 60 / 30) + 1)
    return ROUND * rounds


def main() -> None:
    from machine import describe

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--producers", type=int, default=3)
    ap.add_argument("--consumers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--rate", type=float, default=40.0, help="sends per second per producer")
    ap.add_argument("--history", help="write every event of the history here (JSON lines)")
    a = ap.parse_args()
    print(describe())
    print(f"queue workload: {a.producers} idempotent acks=all producers x {a.rate:g}/s, a group of {a.consumers}"
          f" consumers, {a.partitions} partitions RF=3 min.insync.replicas=2, {a.minutes:g} min of faults "
          f"(SIGSTOP 6 s, SIGKILL + reboot) on a three-node ray.cluster_utils.Cluster", flush=True)
    args = {"seconds": a.minutes * 60, "schedule": schedule(a.minutes), "partitions": a.partitions,
            "producers": a.producers, "consumers": a.consumers, "rate": a.rate, "dump": a.history,
            "faults_end_with_time": True}
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, RUN, json.dumps(args)], capture_output=True, text=True, errors="replace",
                         timeout=a.minutes * 60 + 900)
    result = None
    for line in reversed(out.stdout.splitlines()):
        if line.startswith("{"):
            try:
                result = json.loads(line)
                break
            except ValueError:
                continue
    if not result or "table" not in result:
        print("the run ended without a result; its stderr ends:\n" + out.stderr[-3000:], file=sys.stderr)
        sys.exit(1)
    faults = result["faults"]
    print(f"faults: {sum(f['fault'] == 'SIGSTOP' for f in faults)} SIGSTOP, "
          f"{sum(f['fault'] == 'SIGKILL' for f in faults)} SIGKILL, at s "
          + ", ".join(f"{f['at_s']:.0f} {f['fault']}" for f in faults))
    print(f"client errors: {result['client_errors']}")
    print(f"wall time {time.monotonic() - t0:.0f} s, workload {result['workload_s']} s\n")
    print(result["table"])
    for cls, examples in result["examples"].items():
        for e in examples[:3]:
            print(f"  {cls}: {e}")
    sys.exit(0 if result["valid"] else 1)


if __name__ == "__main__":
    main()
