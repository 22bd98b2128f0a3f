"""Sparse offset and time indexes of one log segment.

Both indexes are derived data: they can always be rebuilt from the ``.log``
file, so they are kept in memory (compact ``array`` columns searched with
``bisect``) and written to disk only when a segment is rolled or the log is
closed. Loading never trusts a file blindly: :meth:`OffsetIndex.load` and
:meth:`TimeIndex.load` return ``None`` for anything inconsistent and the
caller rebuilds.

File formats (big-endian, as in Kafka):

* ``.index``: 8-byte entries ``u32 relative offset, u32 file position``; the
  relative offset is the base offset of the batch starting at that position,
  minus the segment's base offset.
* ``.timeindex``: 12-byte entries ``i64 timestamp, u32 relative offset``; the
  timestamp is the segment's largest timestamp so far and the offset is the
  base offset of the (first) batch holding it.
"""
from __future__ import annotations

import operator
import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right

from .file_modes import private_opener


OFFSET_ENTRY_SIZE = 8
TIME_ENTRY_SIZE = 12
MAX_RELATIVE_OFFSET = 0x7FFFFFFF  # Kafka keeps relative offsets within Int.MaxValue
MAX_POSITION = 0xFFFFFFFF

_TIME_ENTRY = struct.Struct(">qI")
_OFFSET_ENTRY = struct.Struct(">II")


def _strictly_increasing(values: array) -> bool:
    # map over C comparisons: no per-element Python bytecode.
    return all(map(operator.lt, values, values[1:]))


def _write_file(path: str, data: bytes, append: bool) -> None:
    with open(path, "ab" if append else "wb", opener=private_opener) as f:
        f.write(data)

class OffsetIndex:
    """Maps relative offsets to file positions, one entry per index interval."""

    __slots__ = ("path", "base_offset", "capacity", "_rel", "_pos", "_written")

    def __init__(self, path: str, base_offset: int, max_index_bytes: int):
        self.path = path
        self.base_offset = base_offset
        self.capacity = max(1, max_index_bytes // OFFSET_ENTRY_SIZE)
        self._rel = array("I")
        self._pos = array("I")
        self._written = 0  # entries already in the file; -1: file must be rewritten

    def __len__(self) -> int:
        return len(self._rel)

    @property
    def is_full(self) -> bool:
        return len(self._rel) >= self.capacity

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(absolute offset, position) of the last entry."""
        if not self._rel:
            return None
        return self.base_offset + self._rel[-1], self._pos[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in zip(self._rel, self._pos)]

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._rel and (rel <= self._rel[-1] or position <= self._pos[-1]):
            return  # never out of order; a duplicate adds nothing to a sparse index
        self._rel.append(rel)
        self._pos.append(position)

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last indexed batch starting at or before ``offset``.

        Falls back to the segment start, which is always a batch boundary.
        """
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def lookup_position(self, position: int) -> tuple[int, int]:
        """(offset, position) of the last indexed batch at or before ``position``."""
        i = bisect_right(self._pos, position) - 1
        if i < 0:
            return self.base_offset, 0
        return self.base_offset + self._rel[i], self._pos[i]

    def first_after_position(self, position: int) -> tuple[int, int] | None:
        i = bisect_right(self._pos, position)
        if i >= len(self._pos):
            return None
        return self.base_offset + self._rel[i], self._pos[i]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries at or after ``position`` (the log was truncated there)."""
        i = bisect_left(self._pos, position)
        if i < len(self._rel):
            del self._rel[i:], self._pos[i:]
            self._written = -1  # the file holds dropped entries: rewrite it

    # -- persistence --------------------------------------------------------
    def _encode(self, start: int) -> bytes:
        pairs = array("I", bytes(8 * (len(self._rel) - start)))
        pairs[0::2] = self._rel[start:]
        pairs[1::2] = self._pos[start:]
        if sys.byteorder == "little":
            pairs.byteswap()
        return pairs.tobytes()

    def write(self, *, rewrite: bool = False) -> None:
        """Persist entries not yet in the file (all of them when ``rewrite``)."""
        try:
            if rewrite or self._written < 0 or not os.path.exists(self.path):
                _write_file(self.path, self._encode(0), append=False)
            elif self._written < len(self._rel):
                _write_file(self.path, self._encode(self._written), append=True)
        except BaseException:
            self._written = -1  # a full disk may have left half an entry: rewrite the file next time
            raise
        self._written = len(self._rel)

    @classmethod
    def load(cls, path: str, base_offset: int, max_index_bytes: int, log_size: int) -> "OffsetIndex | None":
        """Read an index file, or None when missing or inconsistent.

        Checks what can be checked without the log: whole entries, strictly
        increasing offsets and positions, positions inside the log. The caller
        then confirms the last entry against the batch header it points at.
        """
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        if len(data) % OFFSET_ENTRY_SIZE:
            return None
        pairs = array("I")
        pairs.frombytes(data)
        if sys.byteorder == "little":
            pairs.byteswap()
        index = cls(path, base_offset, max_index_bytes)
        index._rel = pairs[0::2]
        index._pos = pairs[1::2]
        index._written = len(index._rel)
        if index._rel:
            if index._pos[-1] >= log_size or index._rel[-1] > MAX_RELATIVE_OFFSET:
                return None
            if not (_strictly_increasing(index._rel) and _strictly_increasing(index._pos)):
                return None
        return index


class TimeIndex:
    """Maps growing max timestamps to the batch that first reached them."""

    __slots__ = ("path", "base_offset", "capacity", "_ts", "_rel", "_written")

    def __init__(self, path: str, base_offset: int, max_index_bytes: int):
        self.path = path
        self.base_offset = base_offset
        self.capacity = max(1, max_index_bytes // TIME_ENTRY_SIZE)
        self._ts = array("q")
        self._rel = array("I")
        self._written = 0

    def __len__(self) -> int:
        return len(self._ts)

    @property
    def is_full(self) -> bool:
        return len(self._ts) >= self.capacity

    @property
    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry."""
        if not self._ts:
            return None
        return self._ts[-1], self.base_offset + self._rel[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self._ts, self._rel)]

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry only when the max timestamp grew (keeps both columns sorted)."""
        if self._ts and timestamp <= self._ts[-1]:
            return
        rel = offset - self.base_offset
        if self._rel and rel < self._rel[-1]:
            return
        self._ts.append(timestamp)
        self._rel.append(rel)

    def lookup_before(self, timestamp: int) -> int:
        """Offset from which a search for the first record with ts >= ``timestamp`` may start.

        Every record in batches up to an entry has a timestamp <= the entry's,
        so starting at the last entry whose timestamp is strictly smaller skips
        only records that cannot match.
        """
        i = bisect_left(self._ts, timestamp) - 1
        if i < 0:
            return self.base_offset
        return self.base_offset + self._rel[i]

    def truncate_to_offset(self, offset: int) -> None:
        i = bisect_left(self._rel, offset - self.base_offset)
        if i < len(self._ts):
            del self._ts[i:], self._rel[i:]
            self._written = -1

    def write(self, *, rewrite: bool = False) -> None:
        """Persist entries not yet in the file (all of them when ``rewrite``)."""
        full = rewrite or self._written < 0 or not os.path.exists(self.path)
        start = 0 if full else self._written
        if full or start < len(self._ts):
            data = b"".join(_TIME_ENTRY.pack(t, r) for t, r in zip(self._ts[start:], self._rel[start:]))
            try:
                _write_file(self.path, data, append=not full)
            except BaseException:
                self._written = -1  # a full disk may have left half an entry: rewrite the file next time
                raise
        self._written = len(self._ts)

    @classmethod
    def load(cls, path: str, base_offset: int, max_index_bytes: int) -> "TimeIndex | None":
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        if len(data) % TIME_ENTRY_SIZE:
            return None
        index = cls(path, base_offset, max_index_bytes)
        for t, r in _TIME_ENTRY.iter_unpack(data):
            index._ts.append(t)
            index._rel.append(r)
        index._written = len(index._ts)
        if index._ts:
            if index._rel[-1] > MAX_RELATIVE_OFFSET:
                return None
            if not _strictly_increasing(index._ts) or not all(map(operator.le, index._rel, index._rel[1:])):
                return None
        return index
