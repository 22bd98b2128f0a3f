"""Timestamp to offset, for ListOffsets: the time indexes narrow the search, one batch is decoded.

Functions over a log's segments and log start offset; the caller
(``PartitionLog``) holds its lock and handles the special timestamps.
"""
from __future__ import annotations

from typing import Callable, Iterator, Sequence

from .batch_header import TIMESTAMP_TYPE_BIT
from .errors import CorruptRecordError, InvalidTimestampError
from .records import decode_batch
from .segment import BatchRef, Segment


# ListOffsets special timestamps, accepted by offset_for_timestamp for convenience.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


def offset_for_timestamp(segments: Sequence[Segment], log_start: int, log_end: int,
                         timestamp: int) -> tuple[int, int] | None:
    """ListOffsets over a log's segments: -1 gives (log end, -1), -2 (log start, -1), -3 the first
    record holding the largest timestamp, any other time the first record at or after it.

    Shared by the live log (``PartitionLog``) and the read-only view of a closed folder
    (``ClosedLog``), so both answer alike.
    """
    if timestamp == LATEST_TIMESTAMP:
        return log_end, -1
    if timestamp == EARLIEST_TIMESTAMP:
        return log_start, -1
    if timestamp == MAX_TIMESTAMP:
        return first_with_max_timestamp(segments, log_start)
    if timestamp < 0:
        raise InvalidTimestampError(f"cannot look up negative timestamp {timestamp}")
    return first_at_or_after(segments, log_start, timestamp)


def first_at_or_after(segments: Sequence[Segment], log_start: int, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or above ``log_start`` with timestamp >= ``timestamp``."""
    for seg in segments:
        if seg.next_offset <= log_start or seg.max_timestamp < timestamp:
            continue
        start = max(seg.timeindex.lookup_before(timestamp), log_start, seg.base_offset)
        for ref in _good_batches(seg, start):
            if ref.max_timestamp < timestamp or ref.last_offset < log_start:
                continue
            hit = _first_record(seg, ref, lambda ts: ts >= timestamp, log_start)
            if hit is not None:
                return hit
    return None


def first_with_max_timestamp(segments: Sequence[Segment], log_start: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record at or above ``log_start`` holding the largest timestamp."""
    live = [s for s in segments if s.next_offset > log_start and s.max_timestamp >= 0]
    if not live:
        return None
    seg = max(live, key=lambda s: s.max_timestamp)  # first segment reaching the max
    target = seg.max_timestamp
    start = max(seg.offset_of_max, log_start, seg.base_offset)
    for ref in _good_batches(seg, start):
        if ref.max_timestamp == target and ref.last_offset >= log_start:
            hit = _first_record(seg, ref, lambda ts: ts == target, log_start)
            if hit is not None:
                return hit
    # The record holding the max lies below the log start (DeleteRecords):
    # find the largest remaining timestamp the slow way.
    best: tuple[Segment, BatchRef] | None = None
    for s in live:
        for ref in _good_batches(s, max(s.base_offset, log_start)):
            if best is None or ref.max_timestamp > best[1].max_timestamp:
                best = (s, ref)
    if best is None or best[1].max_timestamp < 0:
        return None
    value = best[1].max_timestamp
    return _first_record(best[0], best[1], lambda ts: ts == value, log_start)


def _good_batches(seg: Segment, offset: int) -> Iterator[BatchRef]:
    for ref, kind, reason in seg.batches_from(offset):
        if kind is not None:
            raise CorruptRecordError(f"corrupt batch near offset {ref.base_offset}: {reason}", path=seg.path, position=ref.position)
        yield ref


def _first_record(seg: Segment, ref: BatchRef, match: Callable[[int], bool], log_start: int) -> tuple[int, int] | None:
    if ref.attributes & TIMESTAMP_TYPE_BIT:
        # LogAppendTime: every record carries the batch timestamp.
        return (max(ref.base_offset, log_start), ref.max_timestamp) if match(ref.max_timestamp) else None
    data = seg.pread(ref.position, ref.size)
    try:
        _, records = decode_batch(data, verify_crc=True)
    except CorruptRecordError as e:
        raise CorruptRecordError(str(e), path=seg.path, position=ref.position) from None
    for r in records:
        if r.offset >= log_start and match(r.timestamp):
            return r.offset, r.timestamp
    return None
