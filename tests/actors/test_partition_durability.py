"""acks=all on a partition actor: answered only once fsynced, with one fdatasync shared by concurrent appends."""
from __future__ import annotations

import ray

from logan_ray.storage.record_builder import build_batch


def _stats(actor) -> dict:
    return ray.get(actor.stats.remote())


def test_append_durable_answers_after_fsync_and_plain_append_does_not(client, topic_name):
    client.create_topic(topic_name)
    actor = client.partition_actor(topic_name, 0)
    ray.get(actor.append.remote(build_batch([b"a1", b"a2"])))
    s = _stats(actor)
    assert (s["log_end_offset"], s["recovery_point"]) == (2, 0)  # acks=1: page cache only
    base, _, _ = ray.get(actor.append_durable.remote(build_batch([b"d1"])))
    s = _stats(actor)
    assert base == 2 and s["log_end_offset"] == 3 and s["recovery_point"] == 3


def test_concurrent_durable_appends_share_fdatasyncs(client, topic_name):
    client.create_topic(topic_name)
    actor = client.partition_actor(topic_name, 0)
    ray.get(actor.append_durable.remote(build_batch([b"warm-up"])))
    before = _stats(actor)["flushes"]
    refs = [actor.append_durable.remote(build_batch([b"v%d" % i])) for i in range(64)]
    bases = sorted(r[0] for r in ray.get(refs))
    s = _stats(actor)
    assert bases == list(range(1, 65))
    assert s["recovery_point"] == s["log_end_offset"] == 65
    assert s["flushes"] - before < 64 // 2, s["flushes"] - before  # group commit, not one sync per append
