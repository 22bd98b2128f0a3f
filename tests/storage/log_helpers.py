"""Shared helpers for the segment/log tests (imported by module name)."""
from __future__ import annotations

import hashlib
import os
import struct

import crc32c

from logan_ray.storage.batch_header import parse_header, set_base_offset
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.segment import Segment


class FakeClock:
    """Millisecond clock the test moves by hand."""

    def __init__(self, now: int = 1_700_000_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


def batch(first_value: int, count: int = 1, *, ts: int | list[int] | None = 1_000, pad: int = 0, key: bytes | None = None) -> bytes:
    """A batch whose record values encode their intended sequence number."""
    values = [b"value-%d" % (first_value + i) + b"x" * pad for i in range(count)]
    keys = [key] * count if key is not None else None
    return build_batch(values, keys, timestamps=ts)


def open_log(path, clock=None, verify: str = "normal", **overrides) -> PartitionLog:
    config = TopicConfig.from_dict({k.replace("_", "."): v for k, v in overrides.items()})
    return PartitionLog(str(path), config, clock=clock, verify=verify)


def disk_state(directory) -> dict[str, tuple[int, str]]:
    """Name -> (size, sha1) of every file, to prove an operation changed nothing."""
    out = {}
    for name in sorted(os.listdir(directory)):
        p = os.path.join(directory, name)
        with open(p, "rb") as f:
            data = f.read()
        out[name] = (len(data), hashlib.sha1(data).hexdigest())
    return out


def recrc(buf: bytearray) -> bytearray:
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    return buf


def log_files(directory, suffix: str = ".log") -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(suffix))


def all_records(lg: PartitionLog) -> list:
    out = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        recs = lg.read_records(offset, 1 << 20)
        assert recs, f"no records at {offset}"
        out.extend(recs)
        offset = recs[-1].offset + 1
    return out


def make_segment(tmp_path, base=0, interval=100, index_bytes=1 << 20) -> Segment:
    return Segment.create(str(tmp_path), base, index_bytes=index_bytes, index_interval=interval)


def fill(seg: Segment, sizes_counts, ts_of=lambda i: 1000 + i):
    """Append one batch per (pad, count), offsets from the segment's next offset."""
    placed = []
    for i, (pad, count) in enumerate(sizes_counts):
        b = bytearray(batch(i, count, ts=ts_of(i), pad=pad))
        base = seg.next_offset
        set_base_offset(b, base)
        h = parse_header(b)
        placed.append((seg.size, base, base + count - 1, h.size))
        seg.append(b, [(0, base, base + count - 1, h.max_timestamp, h.size)], now_ms=1)
    return placed


def lose_power(volatile, log) -> None:
    """The power goes under an open log: every unsynced write is gone, the log's close
    fails and only releases descriptors, then the disk comes back for recovery."""
    volatile.power_loss()
    try:
        log.close()
    except Exception:
        pass
    volatile.mount()
