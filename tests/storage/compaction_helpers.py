"""Shared helpers for the compaction tests: keyed workloads and a brute-force model of the result."""
from __future__ import annotations

import random
from typing import NamedTuple

from log_helpers import FakeClock, open_log  # noqa: F401  (re-exported for the tests)

from logan_ray.storage.log import PartitionLog
from logan_ray.storage.record_builder import build_batch

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


class Rec(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int


def value_for(offset_hint: int, i: int, pad: int) -> bytes:
    return b"v%d.%d:" % (offset_hint, i) + b"p" * pad


def write_updates(lg: PartitionLog, rnd: random.Random, batches: int, keys: int, *, clock: FakeClock | None = None,
                  tombstones: float = 0.0, keyless: float = 0.0, codecs: list[str] | None = None,
                  max_records: int = 8, max_pad: int = 120) -> list[Rec]:
    """Append random keyed batches; returns every record written, in offset order."""
    out: list[Rec] = []
    for b in range(batches):
        n = rnd.randint(1, max_records)
        ks: list[bytes | None] = []
        vs: list[bytes | None] = []
        for i in range(n):
            r = rnd.random()
            ks.append(None if r < keyless else b"key-%04d" % rnd.randrange(keys))
            vs.append(None if rnd.random() < tombstones else value_for(lg.log_end_offset, i, rnd.randrange(max_pad)))
        ts = clock() if clock is not None else 1_000_000 + lg.log_end_offset
        tss = [ts + i for i in range(n)]
        codec = (codecs or ["none"])[b % len(codecs or ["none"])]
        info = lg.append(build_batch(vs, ks, timestamps=tss, compression=codec))
        out.extend(Rec(info.base_offset + i, k, v, t) for i, (k, v, t) in enumerate(zip(ks, vs, tss)))
        if clock is not None:
            clock.advance(rnd.randint(0, 5))
    return out


def expected_after(records: list[Rec], end: int, *, tombstone_horizon: int = 0, log_start: int = 0) -> list[Rec]:
    """What a log must hold once everything below ``end`` has been cleaned.

    Below ``end``: the latest record of each key among the records below
    ``end``, minus keyless records and tombstones below ``tombstone_horizon``.
    From ``end`` on: everything.
    """
    latest: dict[bytes, int] = {}
    for r in records:
        if r.offset < end and r.key is not None:
            latest[r.key] = r.offset
    out = []
    for r in records:
        if r.offset < log_start:
            continue
        if r.offset >= end:
            out.append(r)
        elif r.key is not None and latest[r.key] == r.offset and not (r.value is None and r.offset < tombstone_horizon):
            out.append(r)
    return out


def read_all(lg: PartitionLog, start: int | None = None) -> list[Rec]:
    """Every record from ``start`` (default: log start) to the log end, stepping by batch ends like a consumer."""
    from logan_ray.storage.batch_header import iter_headers
    from logan_ray.storage.records import decode_records

    offset = lg.log_start_offset if start is None else start
    out: list[Rec] = []
    while offset < lg.log_end_offset:
        data = lg.read(offset, 64 << 10)
        if not data:
            break  # everything up to the log end was cleaned away: a client waits here for new records
        out.extend(Rec(r.offset, r.key, r.value, r.timestamp) for r in decode_records(data) if r.offset >= offset)
        offset = max(h.next_offset for _, h in iter_headers(data))
    return out


def seal(lg: PartitionLog) -> None:
    """Close the active segment and make everything durable, so all of it is cleanable."""
    lg.roll()
    lg.flush()
