"""The cleaner's first pass: scan the dirty segments' keys into the offset map.

Kafka's ``buildOffsetMap``: every keyed record from the first dirty offset on
puts ``key digest -> offset`` into a fixed-size :class:`.offset_map.OffsetMap`;
when the map fills up the pass covers only the batches that fitted.
"""
from __future__ import annotations

from typing import Callable, Sequence

from .batch_header import CONTROL_BIT, LOG_OVERHEAD, BatchHeader
from .cleanable import CleanView, SegmentView
from .cleaner_batches import MALFORMED, batch_records, iter_batches
from .cleaner_result import CleanStats, MapTooSmallError
from .offset_map import OffsetMap
from .raw_records import scan_records


def build_map(view: CleanView, dirty: Sequence[SegmentView], first_dirty: int, limit: int,
               offset_map: OffsetMap, fds: dict[str, int], stats: CleanStats,
               aborted: Callable[[BatchHeader], bool] = lambda h: False) -> int:
    """Fill the map from the dirty segments; returns the end offset the map covers.

    Batches of aborted transactions (``aborted``) stay out of the map: their
    records are removed and must not supersede anything.

    No CRC check here: the copy pass checks every batch before writing
    anything, so a damaged batch aborts the pass whatever it put in the map.
    """
    for seg in dirty:
        for buf, mv, rel, h in iter_batches(fds[seg.path], seg, check_crc=False):
            base, attrs, lod, count = h.base_offset, h.attributes, h.last_offset_delta, h.record_count
            if base >= limit:
                return limit
            size = h.batch_length + LOG_OVERHEAD
            stats.dirty_bytes += size
            if base + lod < first_dirty or attrs & CONTROL_BIT or count == 0 or aborted(h):
                continue
            if count > offset_map.room:
                if not len(offset_map):
                    raise MapTooSmallError(
                        f"{view.name}: the offset map holds {offset_map.capacity} keys, too few for one batch "
                        f"of {count} records at offset {base}; give the cleaner more memory")
                stats.dirty_bytes -= size
                stats.map_full = True
                return base
            try:
                keys, deltas, _, _, _ = scan_records(*batch_records(buf, mv, rel, size, attrs), count)
            except MALFORMED:
                continue  # the copy pass keeps such a batch as it is
            offsets = [base + d for d in deltas]
            if None in keys or base < first_dirty:
                pairs = [(k, o) for k, o in zip(keys, offsets) if k is not None and o >= first_dirty]
                keys = [k for k, _ in pairs]
                offsets = [o for _, o in pairs]
            offset_map.put_many(keys, offsets)
    return limit


__all__ = ["build_map"]
