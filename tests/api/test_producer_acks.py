"""The Python producer's acks: "all" is acknowledged only once fsynced, 1 once appended."""
from __future__ import annotations

import ray


def test_acks_all_send_is_on_disk_when_acknowledged(client, topic_name):
    client.create_topic(topic_name)
    actor = client.partition_actor(topic_name, 0)
    fast = client.producer(acks=1, linger_ms=0)
    fast.send(topic_name, b"one", partition=0).result(timeout=30)
    fast.close()
    s = ray.get(actor.stats.remote())
    assert (s["log_end_offset"], s["recovery_point"]) == (1, 0)
    safe = client.producer(acks="all", linger_ms=0)
    md = safe.send(topic_name, b"all", partition=0).result(timeout=30)
    safe.close()
    s = ray.get(actor.stats.remote())
    assert md.offset == 1 and s["recovery_point"] == s["log_end_offset"] == 2
