"""Shared helpers for the segment/log tests (imported by module name)."""
from __future__ import annotations

import hashlib
import os
import struct

import crc32c

from logan_ray.storage.config import TopicConfig
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.records import build_batch


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
