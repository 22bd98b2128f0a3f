"""Replay of __consumer_offsets survives records it cannot decode (real Ray, real partition actors).

Before: one undecodable record made the coordinator's replay raise, so every group
API failed, forever, on every restart. Now such a record (or batch) is logged,
counted and skipped, and the records around it are applied.
"""
from __future__ import annotations

import time

import ray

from bombs import zstd_bomb_batch
from logan_ray.actors.group_coordinator import ensure_group_coordinator, group_coordinator
from logan_ray.groups import OFFSETS_TOPIC, offsets_log
from logan_ray.protocol import errors as E
from logan_ray.storage.record_builder import build_batch


def _commit(coord, group: str, topic: str, offset: int) -> None:
    body = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
            "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": offset,
                                                       "committed_metadata": f"at {offset}"}]}]}
    res = ray.get(coord.offset_commit.remote(body, 9))
    assert res["topics"][0]["partitions"][0]["error_code"] == E.NONE


def _committed(coord, group: str, topic: str) -> int:
    body = {"groups": [{"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}],
            "require_stable": False}
    res = ray.get(coord.offset_fetch.remote(body, 9))
    return res["groups"][0]["topics"][0]["partitions"][0]["committed_offset"]


def _restart(handle) -> None:
    old = ray.get(handle.pid.remote())
    ray.kill(handle, no_restart=False)  # Ray restarts it; it replays __consumer_offsets
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if ray.get(handle.pid.remote(), timeout=5) != old and ray.get(handle.ready.remote(), timeout=30) >= 0:
                return
        except Exception:
            pass
        time.sleep(0.1)
    raise AssertionError("the coordinator did not come back")


def test_replay_skips_and_counts_records_it_cannot_decode(client, topic_name):
    coord = ensure_group_coordinator(initial_rebalance_delay_ms=200, min_session_timeout_ms=100)
    client.create_topic(topic_name, partitions=1)
    group = f"replay-{topic_name}"
    _commit(coord, group, topic_name, 5)
    parts = client.partitions(OFFSETS_TOPIC)
    target = client.partition_actor(OFFSETS_TOPIC, offsets_log.partition_for_group(group, len(parts)))
    garbage = [
        build_batch([b"\xc1 not msgpack"], [offsets_log.offset_key(group, topic_name, 0)]),  # bad offset value
        build_batch([b"\xc1\xc1"], [offsets_log.group_key(group)]),  # bad group metadata
        zstd_bomb_batch(frame_bytes=512 << 10),  # a batch that decompresses to 16 GiB
    ]
    for batch in garbage:  # as if written by a buggy broker or damaged on disk: the broker's own path
        ray.get(target.append.remote(batch, internal=True))
    _commit(coord, group, topic_name, 7)  # a good record after the bad ones

    handle = group_coordinator(group)
    _restart(handle)
    stats = ray.get(handle.stats.remote())
    assert stats["skipped_records"] >= 3
    assert _committed(handle, group, topic_name) == 7  # group APIs answer, with the latest commit
    _commit(handle, group, topic_name, 9)
    assert _committed(handle, group, topic_name) == 9
    ensure_group_coordinator(initial_rebalance_delay_ms=200, min_session_timeout_ms=100)  # restart -> defaults
