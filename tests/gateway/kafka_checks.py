"""Shared expectations for the real-client gateway tests.

Every client test produces the same shape of data (keyed and unkeyed records per
compression codec, with explicit or measured timestamps) and checks the same
facts: everything comes back once, keys sit on their murmur2 partition, end
offsets add up, and a timestamp lookup finds the first record at or after it.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass

from logan_ray.partitioner import partition_for_key

PARTITIONS = 3
KEYED = 12
UNKEYED = 6
#: Makes values compressible: clients send a batch uncompressed when compression would not shrink it.
PAD = "abcdefgh" * 16


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes
    timestamp: int = -1


@dataclass(frozen=True)
class Got:
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    timestamp: int


def records_for(codec: str, base_ts: int, keyed: int = KEYED, unkeyed: int = UNKEYED) -> list[Rec]:
    """Keyed and unkeyed records of one codec; timestamps rise by 1 ms per record."""
    out = []
    for i in range(keyed):
        out.append(Rec(f"key-{i % 7}".encode(), f"{codec}-keyed-{i}-{PAD}".encode(), base_ts + len(out)))
    for i in range(unkeyed):
        out.append(Rec(None, f"{codec}-unkeyed-{i}-{PAD}".encode(), base_ts + len(out)))
    return out


def check_all_back(produced: list[Rec], got: list[Got], partitions: int = PARTITIONS) -> None:
    """Each produced record came back exactly once, keyed ones on the murmur2 partition."""
    want = collections.Counter((r.key, r.value) for r in produced)
    have = collections.Counter((g.key, g.value) for g in got)
    assert have == want, f"missing {want - have}, unexpected {have - want}"
    for g in got:
        if g.key is not None:
            assert g.partition == partition_for_key(g.key, partitions), (g.key, g.partition)
    seen = collections.Counter((g.partition, g.offset) for g in got)
    assert max(seen.values()) == 1, "an offset was delivered twice"
    per_partition = collections.defaultdict(list)
    for g in got:
        per_partition[g.partition].append(g.offset)
    for p, offsets in per_partition.items():
        assert sorted(offsets) == list(range(len(offsets))), f"partition {p} has gaps: {sorted(offsets)}"


def check_timestamps(produced: list[Rec], got: list[Got]) -> None:
    """Create-time timestamps chosen by the producer are stored and returned unchanged."""
    ts_of = {(r.key, r.value): r.timestamp for r in produced}
    for g in got:
        assert g.timestamp == ts_of[(g.key, g.value)], (g, ts_of[(g.key, g.value)])


def expected_offsets_for_time(got: list[Got], target: int, partitions: int = PARTITIONS) -> dict[int, int]:
    """Per partition: first offset whose timestamp is >= target, or -1 (Kafka's answer)."""
    out = {}
    for p in range(partitions):
        hits = [g.offset for g in got if g.partition == p and g.timestamp >= target]
        out[p] = min(hits) if hits else -1
    return out


def end_offsets(got: list[Got], partitions: int = PARTITIONS) -> dict[int, int]:
    counts = collections.Counter(g.partition for g in got)
    return {p: counts.get(p, 0) for p in range(partitions)}


CODEC_IDS = {"none": 0, "None": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}


def codecs_stored(client, topic: str, partitions: int = PARTITIONS) -> set[int]:
    """Compression ids of the batches on disk: proves the client really used each codec."""
    from logan_ray._ray import get
    from logan_ray.storage.batch_header import iter_headers

    out: set[int] = set()
    for p in range(partitions):
        data, _, _ = get(client.partition_actor(topic, p).fetch.remote(0, 64 << 20))
        out |= {h.compression for _, h in iter_headers(data)}
    return out
