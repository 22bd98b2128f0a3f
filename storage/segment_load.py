"""Adopting a segment's files at open without a full scan, when its indexes can be trusted.

Part of :class:`.segment.Segment` (a mixin: it uses the segment's paths,
sizes, ``walk`` and index settings). A segment whose indexes do not pass
these checks is scanned instead (:mod:`.segment_recovery`).
"""
from __future__ import annotations

from .batch_header import HEADER_SIZE, parse_header
from .index import OffsetIndex, TimeIndex


class TrustedLoad:
    """``load_trusted`` and ``read_rolling_base``: what a segment reads about itself at open."""

    __slots__ = ()

    def load_trusted(self) -> bool:
        """Adopt on-disk indexes after checking them; False means "scan me instead".

        Used for segments below the recovery point (flushed) or after a clean
        shutdown. The indexes must be whole, sorted and point at real batch
        headers; the tail after the last index entry is walked to find the
        next offset, which also proves the file ends on a batch boundary.
        """
        self.size = self.file_size()
        index = OffsetIndex.load(self.index_path, self.base_offset, self.index_bytes, max(self.size, 1))
        timeindex = TimeIndex.load(self.timeindex_path, self.base_offset, self.index_bytes)
        if index is None or timeindex is None:
            return False
        if self.size and not timeindex.last_entry:
            return False  # a sealed, non-empty segment always has a final time entry
        start_offset, start_pos = index.lookup(1 << 62)
        last_ref = None
        for ref, kind, _ in self.walk(start_pos, expected=start_offset):
            if kind is not None:
                return False
            last_ref = ref
        if last_ref is not None:
            if last_ref.position + last_ref.size != self.size:
                return False
            self.next_offset = last_ref.last_offset + 1
        elif self.size:
            return False
        entry = timeindex.last_entry
        if entry is not None and entry[1] >= self.next_offset:
            return False
        self.index, self.timeindex = index, timeindex
        if entry is not None:
            self.max_timestamp, self.offset_of_max = entry
        self.bytes_since_index = self.size - start_pos if index.last_entry else self.size
        return True

    def read_rolling_base(self, now_ms: int) -> None:
        """After a restart, time segment.ms from the first batch's timestamp (as Kafka does)."""
        if self.size < HEADER_SIZE:
            self.rolling_base_ms = None
            return
        first_max_ts = parse_header(self.pread(0, HEADER_SIZE)).max_timestamp
        self.rolling_base_ms = first_max_ts if 0 <= first_max_ts <= now_ms else now_ms


__all__ = ["TrustedLoad"]
