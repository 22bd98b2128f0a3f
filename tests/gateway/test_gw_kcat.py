"""kcat (Debian's build, linking librdkafka 2.0.x) against a real gateway over TCP.

kcat has no admin commands, so the topic is created, described and deleted
through logan-ray's Python API; everything else (produce with each codec,
metadata listing, consume from the beginning and from a timestamp, offset
queries) goes through kcat itself.
"""
from __future__ import annotations

import json
import subprocess
import time

from kafka_checks import CODEC_IDS, PAD, PARTITIONS, codecs_stored, Got, Rec, check_all_back, expected_offsets_for_time

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def kcat(*args: str, stdin: bytes | None = None, timeout: float = 60) -> str:
    proc = subprocess.run(["kcat", *args], input=stdin, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    return proc.stdout.decode()


def consume(gateway: str, topic: str, *extra: str) -> list[Got]:
    out = kcat("-C", "-b", gateway, "-t", topic, "-e", "-J", "-q", *extra)
    got = []
    for line in out.splitlines():
        m = json.loads(line)
        key = m["key"].encode() if m["key"] is not None else None
        got.append(Got(m["partition"], m["offset"], key, m["payload"].encode(), m["ts"]))
    return got


def test_kcat_full_cycle(client, gateway, topic_name):
    client.create_topic(topic_name, PARTITIONS, {"retention.ms": "3600000"})
    listing = json.loads(kcat("-L", "-b", gateway, "-t", topic_name, "-J"))
    assert [t["topic"] for t in listing["topics"]] == [topic_name]
    assert len(listing["topics"][0]["partitions"]) == PARTITIONS
    assert listing["brokers"] and listing["brokers"][0]["name"] == gateway

    produced: list[Rec] = []
    starts = {}
    for codec in CODECS:
        starts[codec] = int(time.time() * 1000)
        keyed = [Rec(f"key-{i % 7}".encode(), f"{codec}-keyed-{i}-{PAD}".encode()) for i in range(12)]
        unkeyed = [Rec(None, f"{codec}-unkeyed-{i}-{PAD}".encode()) for i in range(6)]
        common = ["-P", "-b", gateway, "-t", topic_name, "-z", codec, "-X", "partitioner=murmur2_random"]
        kcat(*common, "-K", ":", stdin=b"".join(r.key + b":" + r.value + b"\n" for r in keyed))
        kcat(*common, stdin=b"".join(r.value + b"\n" for r in unkeyed))
        produced += keyed + unkeyed
        time.sleep(0.05)  # separate the codecs' timestamps

    got = consume(gateway, topic_name, "-o", "beginning")
    check_all_back(produced, got)
    assert codecs_stored(client, topic_name) == {CODEC_IDS[c] for c in CODECS}
    assert sum(client.partition_offsets(topic_name)[p][1] for p in range(PARTITIONS)) == len(produced)

    # end offsets through kcat's offset query (-1 = latest) and a timestamp lookup
    target = starts["lz4"]
    want = expected_offsets_for_time(got, target)
    for p in range(PARTITIONS):
        latest = json.loads(kcat("-Q", "-b", gateway, "-t", f"{topic_name}:{p}:-1", "-J"))
        assert latest[topic_name][str(p)]["offset"] == sum(1 for g in got if g.partition == p)
        at = json.loads(kcat("-Q", "-b", gateway, "-t", f"{topic_name}:{p}:{target}", "-J"))
        assert at[topic_name][str(p)]["offset"] == want[p]
    later = consume(gateway, topic_name, "-o", f"s@{target}")
    assert sorted(g.value for g in later) == sorted(g.value for g in got if g.timestamp >= target)

    config = client.topic_config(topic_name)
    assert config["retention.ms"] == "3600000"
    client.delete_topic(topic_name)
    assert topic_name not in json.dumps(json.loads(kcat("-L", "-b", gateway, "-J"))["topics"])
