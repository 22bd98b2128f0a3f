"""Only the leader host's raylet stops: never two leaders acknowledging (issue 32 item 6).

The node's gateway and partition actor run on while Ray declares the node dead; a Kafka
client (through the gateways) and a Python ``Producer`` (through Ray, straight to the old
leader's actor) write ``acks=1``. The controller elects a new leader only after the old
node's last broker lease ran out, and the old leader's actor refuses appends once its node's
lease lapsed (actors/lease_board.py), so the old leader acknowledges nothing after the new
one began to. ``acks=1`` records the old leader acknowledged before its followers fetched
them are lost (as in Kafka) and only counted. The run: tests/tooling/raylet_stop_run.py
(also ``bench/raylet_stop.py``).
"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tests", "tooling"))
from cluster_child import run_child  # noqa: E402
from raylet_stop_run import SCRIPT, judge  # noqa: E402


@pytest.mark.slow
def test_a_leader_whose_raylet_alone_stops_acknowledges_nothing_after_the_new_leader_begins():
    out, r = run_child(SCRIPT, timeout=480)
    assert "read" in r, out.stderr[-3000:]
    summary = judge(r)
    print(summary)
    assert summary["elected"], summary
    assert summary["acked_kafka"] > 100 and summary["acked_python"] > 100, summary
    assert summary["two_leaders_acknowledging"]["overlap_s"] == 0, summary
    assert summary["other_problems"] == [], summary
