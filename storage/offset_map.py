"""The cleaner's key -> latest offset map, with a fixed memory budget.

Like Kafka's SkimpyOffsetMap it stores a 16-byte MD5 digest per key instead of
the key, so an entry costs the same whatever the key's size and the budget
fixes the number of keys one cleaning pass can cover; when the dirty part of a
log holds more keys, the cleaner covers it in several passes. Two keys with
the same digest would be treated as one (a 2^-128-ish event, accepted by
Kafka too).

The table is a ``dict`` keyed by the digests: its open addressing runs in C,
and whole batches go in and out with ``update``/``map`` so no Python bytecode
runs per record here. ``ENTRY_BYTES`` is what one entry costs in CPython
(digest object, offset int, table slot, growth slack), measured.
"""
from __future__ import annotations

import hashlib
from operator import methodcaller
from typing import Iterable, Sequence

ENTRY_BYTES = 160
_digest = methodcaller("digest")
_md5 = hashlib.md5


def digests(keys: Iterable[bytes]) -> list[bytes]:
    """MD5 digests of non-null keys, computed without a Python call per key."""
    return list(map(_digest, map(_md5, keys)))


class OffsetMap:
    """At most ``capacity`` keys, each mapped to the largest offset put for it."""

    __slots__ = ("capacity", "_table", "latest_offset")

    def __init__(self, memory_bytes: int):
        if memory_bytes < ENTRY_BYTES:
            raise ValueError(f"an offset map needs at least {ENTRY_BYTES} bytes, got {memory_bytes}")
        self.capacity = memory_bytes // ENTRY_BYTES
        self._table: dict[bytes, int] = {}
        self.latest_offset = -1  # largest offset ever put

    def __len__(self) -> int:
        return len(self._table)

    @property
    def room(self) -> int:
        """Keys that can still be added with certainty (each put may add a new key)."""
        return self.capacity - len(self._table)

    def put_many(self, keys: Sequence[bytes], offsets: Sequence[int]) -> None:
        """Record ``offsets[i]`` as the latest offset of ``keys[i]``; offsets must ascend."""
        if not keys:
            return
        if len(self._table) + len(keys) > self.capacity:
            raise OverflowError(f"offset map full: {len(self._table)} keys + {len(keys)} > capacity {self.capacity}")
        self._table.update(zip(digests(keys), offsets))
        if offsets[-1] > self.latest_offset:
            self.latest_offset = offsets[-1]

    def latest_many(self, keys: Sequence[bytes]) -> list[int | None]:
        """Latest offset of each key, None for keys never put."""
        return list(map(self._table.get, digests(keys)))

    def get(self, key: bytes) -> int | None:
        return self._table.get(_md5(key).digest())

    def clear(self) -> None:
        self._table.clear()
        self.latest_offset = -1


__all__ = ["OffsetMap", "ENTRY_BYTES", "digests"]
