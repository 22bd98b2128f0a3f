"""kafkajs (npm, Node.js) against a real gateway over TCP.

The Node side lives in tests/clients/node (``npm install`` there, as
scripts/setup.sh does); it reads a JSON spec on stdin and prints what kafkajs saw.
"""
from __future__ import annotations

import json
import os
import subprocess
import time

from kafka_checks import (
    CODEC_IDS,
    PARTITIONS,
    Got,
    check_all_back,
    check_timestamps,
    codecs_stored,
    expected_offsets_for_time,
    records_for,
)

NODE_DIR = os.path.join(os.path.dirname(__file__), "..", "clients", "node")
# kafkajs ships gzip; snappy comes from the kafkajs-snappy codec package (pure JS)
CODECS = ["none", "gzip", "snappy"]


def run_node(script: str, spec: dict, timeout: float = 90) -> dict:
    assert os.path.isdir(os.path.join(NODE_DIR, "node_modules", "kafkajs")), \
        "run `npm install` in tests/clients/node (scripts/setup.sh --test does)"
    proc = subprocess.run(["node", script], cwd=NODE_DIR, input=json.dumps(spec).encode(), capture_output=True,
                          timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return json.loads(proc.stdout)


def test_kafkajs_full_cycle(client, gateway, topic_name):
    base = int(time.time() * 1000) - 100_000
    batches, produced = [], []
    for i, codec in enumerate(CODECS):
        recs = records_for(codec, base + i * 1000)
        produced += recs
        batches.append({"codec": codec, "records": [[r.key.decode() if r.key else None, r.value.decode(), r.timestamp]
                                                     for r in recs]})
    target = base + 1000 + 3
    spec = {"bootstrap": gateway, "topic": topic_name, "partitions": PARTITIONS,
            "config": {"retention.ms": "3600000"}, "batches": batches, "target": target}
    result = run_node("full_cycle.js", spec)
    assert result["created"] is True and result["listed"] is True

    def got(rows):
        return [Got(r["partition"], r["offset"], r["key"].encode() if r["key"] is not None else None,
                    r["value"].encode(), r["timestamp"]) for r in rows]

    consumed = got(result["consumed"])
    check_all_back(produced, consumed)
    check_timestamps(produced, consumed)
    assert all(o["low"] == 0 for o in result["offsets"])
    assert sum(o["high"] for o in result["offsets"]) == len(produced)
    want = expected_offsets_for_time(consumed, target)
    assert {o["partition"]: o["offset"] for o in result["byTime"]} == want
    later = got(result["fromTime"])
    assert sorted(g.value for g in later) == sorted(g.value for g in consumed if g.timestamp >= target)
    assert result["configs"]["retention.ms"] == {"value": "3600000", "isDefault": False}
    assert result["configs"]["cleanup.policy"]["value"] == "delete"
    assert codecs_stored(client, topic_name) == {CODEC_IDS[c] for c in CODECS}
    deleted = run_node("full_cycle.js", {"bootstrap": gateway, "topic": topic_name, "mode": "delete"})
    assert deleted["listedAfterDelete"] is False
    assert topic_name not in client.list_topics()
