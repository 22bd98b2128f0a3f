"""Jepsen's Kafka queue workload under host faults, short enough for the suite (issue 32 item 9).

Three idempotent acks=all producers and a consumer group of two over three partitions of an
RF=3, ``min.insync.replicas=2`` topic on a three-node ``ray.cluster_utils.Cluster``, ~40 s,
with one SIGSTOP of a non-head node for 6 s and one SIGKILL of a non-head node (which then
reboots at its address); the consumers read during the faults, a fresh consumer reads every
partition from offset 0 after them. The run and its checks: tests/tooling/queue_cluster_run.py,
queue_workload.py, queue_checker.py; the longer run with more faults: bench/jepsen.py.

Duplicates are not asserted here: the runs so far wrote records twice after a failover (a new
leader answered no acks=all batch for ~30 s, librdkafka timed the messages out, bumped its
producer epoch and sent them again: docs/jepsen.md, "Findings"). That is an open defect of
issue 32, reported by bench/jepsen.py, not a flaky test to mark.
"""
from __future__ import annotations

import json
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tooling"))
from cluster_child import run_child  # noqa: E402

SCRIPT = "import json, queue_cluster_run; queue_cluster_run.main(**json.loads(%r))" % json.dumps(
    {"seconds": 40, "schedule": ["wait:8", "stop:6", "wait:4", "kill"]})


@pytest.fixture(scope="module")
def run() -> dict:
    out, result = run_child(SCRIPT, timeout=480)
    print(result.get("table", ""))
    print({k: result.get(k) for k in ("faults", "isr_wait_s", "client_errors", "workload_s", "high_watermarks")})
    for actor, lines in (result.get("control_log") or {}).items():  # what the controller and brokers did, if it fails
        print(f"--- {actor}", *lines, sep="\n  ")
    result["_stderr"] = out.stderr[-4000:]
    return result


def _common(r: dict) -> None:
    assert "counts" in r, r["_stderr"]
    assert [f["fault"] for f in r["faults"]] == ["SIGSTOP", "SIGKILL"]
    assert r["isr_full_at_start"] and all(f["isr_full"] for f in r["faults"])
    assert r["stats"]["acked"] > 1000 and r["stats"]["polls"] > 20
    # the drain read every partition to its end
    assert "drain incomplete" not in r["client_errors"], r["client_errors"]


@pytest.mark.slow
def test_the_queue_workload_under_a_stopped_and_a_killed_host_loses_no_write_and_keeps_every_order(run):
    r = run
    _common(r)
    for cls in ("lost-write", "inconsistent-offsets", "nonmonotonic-send", "nonmonotonic-poll", "poll-skip",
                "int-nonmonotonic-poll", "int-poll-skip", "unseen", "committed-offset-regression"):
        assert r["counts"][cls] == 0, (cls, r["examples"][cls], r["table"])
