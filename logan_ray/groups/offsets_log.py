"""Records of the internal ``__consumer_offsets`` topic: keys, values, partitioning.

Committed offsets live in logan-ray's own log, so they survive restarts with the
same guarantees as any record, and the topic is compacted (``cleanup.policy=compact``):
the key identifies what a record is about, the newest value wins, and a null value
(tombstone) deletes. Keys and values are msgpack, with a leading kind tag so the
format can grow:

- ``[1, group, topic, partition]`` -> ``{"o": offset, "e": leader epoch, "m": metadata, "t": commit ms}``
- ``[2, group]`` -> the group's last stable generation: protocol, leader, and members with
  their metadata and assignment. Restoring it lets members of a stable group carry on
  through a coordinator restart without a rebalance (as Kafka does); a group caught
  mid-rebalance restarts from its last stable generation and its members rejoin.

A group always maps to the same partition (murmur2 of its id, as keyed records),
so one coordinator owning a partition owns every record of its groups.
"""
from __future__ import annotations

from typing import Any, Iterable, NamedTuple

import msgpack

from logan_ray.common.partitioner import partition_for_key
from logan_ray.storage.record_builder import build_batch

OFFSET_KEY = 1
GROUP_KEY = 2


class OffsetEntry(NamedTuple):
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp: int


def partition_for_group(group_id: str, partitions: int) -> int:
    return partition_for_key(group_id.encode(), partitions)


def offset_key(group_id: str, topic: str, partition: int) -> bytes:
    return msgpack.packb([OFFSET_KEY, group_id, topic, partition])


def group_key(group_id: str) -> bytes:
    return msgpack.packb([GROUP_KEY, group_id])


def decode_key(key: bytes | None) -> tuple | None:
    """("offset", group, topic, partition), ("group", group), or None for a record we do not know."""
    if not key:
        return None
    try:
        k = msgpack.unpackb(key)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError):
        return None
    if isinstance(k, list) and k:
        if k[0] == OFFSET_KEY and len(k) == 4:
            return ("offset", k[1], k[2], k[3])
        if k[0] == GROUP_KEY and len(k) == 2:
            return ("group", k[1])
    return None


def encode_offset(entry: OffsetEntry) -> bytes:
    return msgpack.packb({"o": entry.offset, "e": entry.leader_epoch, "m": entry.metadata, "t": entry.commit_timestamp})


def decode_offset(value: bytes) -> OffsetEntry:
    v = msgpack.unpackb(value)
    return OffsetEntry(v["o"], v.get("e", -1), v.get("m"), v.get("t", -1))


def encode_group(group: Any, now_ms: int) -> bytes:
    return msgpack.packb({
        "pt": group.protocol_type, "g": group.generation, "p": group.protocol_name, "l": group.leader, "t": now_ms,
        "m": [[m.member_id, m.instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms, m.session_timeout_ms,
               m.metadata(group.protocol_name), m.assignment] for m in group.members.values()],
    }, use_bin_type=True)


def load_group(group: Any, value: bytes, member_cls: type) -> None:
    """Restore a group's last stable (or empty) generation into ``group`` (a :class:`.group.Group`)."""
    v = msgpack.unpackb(value, raw=False)
    group.protocol_type = v["pt"]
    group.generation = v["g"]
    group.protocol_name = v["p"]
    group.members.clear()
    group.static_members.clear()
    for mid, iid, client_id, host, rebalance, session, metadata, assignment in v["m"]:
        m = member_cls(mid, iid, client_id, host, rebalance, session, v["pt"] or "", [(v["p"], bytes(metadata))])
        m.assignment = bytes(assignment)
        group.members[mid] = m
        if iid is not None:
            group.static_members[iid] = mid
    group.leader = v["l"] if v["l"] in group.members else next(iter(group.members), None)
    group.state = "Stable" if group.members else "Empty"


def build_records(records: Iterable[tuple[bytes, bytes | None]], timestamp_ms: int | None = None) -> bytes:
    """One v2 batch carrying the records, in order (keys always set; None values are tombstones)."""
    records = list(records)
    return build_batch([v for _, v in records], [k for k, _ in records], timestamps=timestamp_ms)
