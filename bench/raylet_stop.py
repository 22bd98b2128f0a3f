"""Only the leader host's raylet stops: do two leaders ever acknowledge? (issue 32, item 6; a reproduction)

Usage: python bench/raylet_stop.py

Ray calls a node dead when its raylet stops answering health checks, while the node's
gateway and partition actors run on: they still reach clients, and a Python ``Producer``
(actor calls go from worker to worker, not through the raylet) still reaches the old
leader's actor. A three-node ``ray.cluster_utils.Cluster`` (its own Ray, in a child
process), an RF=3 topic, a confluent-kafka producer (through the gateways) and a Python
``Producer`` (through Ray) writing ``acks=1`` to one partition; the raylet of that
partition's leader's host is SIGSTOPped until a new leader is elected, then 4 s more.
It passes when the old leader acknowledged nothing after the new leader acknowledged
its first record (``acks=1`` records the old leader acknowledged before its followers
fetched them are lost in Kafka too, and are only counted), and nothing else is wrong with
the history; it prints how long the election took, the overlap and the losses. The run and
its judgement are tests/tooling/raylet_stop_run.py, which the suite runs too
(bench/soaks/test_raylet_stop.py).
"""
from __future__ import annotations

import json
import os
import sys

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOOLING = os.path.join(ROOT, "tests", "tooling")


def main() -> int:
    need("logan_ray", "confluent_kafka", "ray")
    sys.path.insert(0, TOOLING)
    from cluster_child import run_child
    from machine import describe
    from raylet_stop_run import SCRIPT, judge

    print(describe())
    os.environ.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="token")
    proc, r = run_child(SCRIPT, timeout=600)
    if "read" not in r:
        print(proc.stderr[-3000:])
        return 2
    summary = judge(r)
    print(json.dumps(summary, indent=1))
    ok = summary["elected"] and summary["two_leaders_acknowledging"]["overlap_s"] == 0 \
        and not summary["other_problems"]
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
