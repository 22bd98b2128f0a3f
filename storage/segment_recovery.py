"""Recovering one segment: walk the whole file, rebuild its indexes, decide what to keep.

Kafka's ``LogSegment.recover``: used by the loader (:mod:`.recovery`) for
segments past the recovery point or with unusable indexes, and by
``PartitionLog.verify``. The fast path (:func:`_good_run`) consumes sound
batches at about one ``memcpy`` plus one hardware CRC pass per byte; the
careful walker (:meth:`.segment.Segment.walk`) then classifies whatever stopped
it, and broken framing in acknowledged data is resynchronised on the next
CRC-valid batch (:func:`_resync`) instead of cutting the log there.
"""
from __future__ import annotations

import logging
import os

from .batch_header import CONTROL_BIT, HEADER_SIZE, LOG_OVERHEAD, MAGIC, crc_matches, framing_error, header_at
from .file_batches import SCAN_CHUNK, FileBatches
from .index import MAX_RELATIVE_OFFSET, OffsetIndex, TimeIndex
from .segment import BatchRef, CorruptBatch, Segment
from .verified_ranges import VerifiedRanges

log = logging.getLogger(__name__)

UNACKED = 1 << 63  # "every offset is acknowledged"


class ScanOutcome:
    """What a full scan of a segment found; applied by :func:`apply_scan`."""

    __slots__ = (
        "index", "timeindex", "valid_end", "next_offset", "max_timestamp", "offset_of_max",
        "corrupt", "holes", "truncate_at", "truncate_reason", "batches", "control_batches", "verified",
        "checked_crc",
    )

    def __init__(self) -> None:
        self.valid_end = 0
        self.next_offset = 0
        self.max_timestamp = -1
        self.offset_of_max = -1
        self.corrupt: list[CorruptBatch] = []
        self.holes: dict[int, tuple[int, int]] = {}
        self.truncate_at: int | None = None
        self.truncate_reason = ""
        self.batches = 0
        self.control_batches = 0  # transaction markers among them: none means the .txnindex is empty
        self.verified: list[tuple[int, int]] = []
        self.checked_crc = False


def scan(
    seg: Segment, *, check_crc: bool, acked_before: int = UNACKED, is_last: bool = True, indexes: bool = True
) -> ScanOutcome:
    """Walk the whole file, rebuilding indexes, and decide what to keep.

    A bad batch at an offset >= ``acked_before`` (not flushed, so never
    acknowledged as durable) ends the valid data: everything from it on is
    a torn or corrupt tail to truncate. A bad batch below it is reported and
    kept; if its framing is broken the walk resynchronises on the next
    CRC-valid batch so later acknowledged data stays readable.

    ``indexes=False`` (a scrub, which keeps the segment's own indexes) leaves
    :attr:`ScanOutcome.index` and ``timeindex`` empty: not building entries
    nobody installs keeps the per-batch work of a scrub down.
    """
    out = ScanOutcome()
    out.checked_crc = check_crc
    out.index = OffsetIndex(seg.index_path, seg.base_offset, seg.index_bytes)
    out.timeindex = TimeIndex(seg.timeindex_path, seg.base_offset, seg.index_bytes)
    end = seg.file_size()
    out.next_offset = seg.base_offset
    state = [0, -1, -1]  # bytes since the last index entry, max timestamp, its batch offset
    interval = seg.index_interval if indexes else 1 << 62  # never reached: no entries
    position = 0
    expected = seg.base_offset  # -1: accept any base offset (after a damaged batch)
    run_start: int | None = 0  # start of the current run of CRC-checked good batches

    def close_run(upto: int) -> None:
        if check_crc and run_start is not None and upto > run_start:
            out.verified.append((run_start, upto))

    saved_holes = seg.holes
    seg.holes = {}  # rediscover holes instead of trusting old ones
    try:
        while True:
            position, expected = _good_run(seg, out, state, position, end, expected, check_crc, interval)
            if position >= end:
                break
            # The fast loop stopped on something: classify it with the careful walker.
            ref, kind, reason = next(
                seg.walk(position, end, expected=None if expected < 0 else expected, check_crc=check_crc)
            )
            if kind is None:  # nothing wrong after all (defensive; the fast loop is stricter)
                _account(out, state, ref, interval)
                position, expected = ref.position + ref.size, ref.last_offset + 1
                continue
            close_run(ref.position)
            run_start = None
            bad_offset = out.next_offset  # the first offset not yet accounted for
            if bad_offset >= acked_before:
                out.truncate_at = ref.position
                out.truncate_reason = reason or kind
                break
            bad = CorruptBatch(seg.path, ref.position, bad_offset, reason or kind)
            out.corrupt.append(bad)
            log.error("corrupt batch in %s at position %d (offset %d): %s", seg.path, ref.position, bad_offset, bad.reason)
            if kind == "framing":
                resume = _resync(seg, ref.position, end, bad_offset)
                if resume is None:
                    if is_last:
                        out.truncate_at = ref.position
                        out.truncate_reason = f"{reason}; no valid batch follows, so the tail is unreadable"
                    else:
                        out.holes[ref.position] = (end, -1)  # the log sets the resume offset
                    break
                out.holes[ref.position] = resume
                position, expected = resume
            else:  # damaged content or offset, usable framing: keep going after it
                out.next_offset = max(out.next_offset, ref.last_offset + 1)
                position = ref.position + ref.size
                expected = ref.last_offset + 1 if kind == "offset" else -1
            run_start = position
            out.valid_end = position
        close_run(out.valid_end)
    finally:
        seg.holes = saved_holes
    max_ts, off_max = state[1], state[2]
    if max_ts >= 0 and indexes:
        out.timeindex.maybe_append(max_ts, off_max)
    out.max_timestamp, out.offset_of_max = max_ts, off_max
    return out

def _account(out: ScanOutcome, state: list[int], ref: BatchRef, interval: int) -> None:
    if ref.max_timestamp > state[1]:
        state[1], state[2] = ref.max_timestamp, ref.base_offset
    if state[0] > interval:
        out.index.append(ref.base_offset, ref.position)
        out.timeindex.maybe_append(state[1], state[2])
        state[0] = 0
    state[0] += ref.size
    out.next_offset = ref.last_offset + 1
    out.valid_end = ref.position + ref.size
    out.batches += 1
    if ref.attributes & CONTROL_BIT:
        out.control_batches += 1

def _good_run(
    seg: Segment, out: ScanOutcome, state: list[int], position: int, end: int, expected: int, check_crc: bool,
    interval: int,
) -> tuple[int, int]:
    """Consume consecutive sound batches from ``position`` as fast as Python allows.

    This is recovery's hot loop: one ``preadv`` per 8 MiB, then per batch one
    header unpack and one C-speed CRC over a memoryview, no allocations
    beyond that. It stops at the first batch it does not like and returns
    ``(position, expected offset)`` there; :func:`scan` then lets the
    careful walker say what is wrong.
    """
    reader = FileBatches(seg.fd, end, SCAN_CHUNK)
    index_append = out.index.append
    time_append = out.timeindex.maybe_append
    since, max_ts, off_max = state
    gaps_ok = seg.compacted  # cleaned segments: base offsets only have to increase
    batches = controls = 0
    try:
        for position, h in reader.walk(position, end, check_crc=check_crc):
            base, length, _epoch, _magic, _crc, attributes, delta, _bts, batch_max_ts, _pid, _pep, _seq, _count = h
            if expected >= 0 and (base < expected if gaps_ok else base != expected):
                break
            if batch_max_ts > max_ts:
                max_ts, off_max = batch_max_ts, base
            if since > interval:
                index_append(base, position)
                time_append(max_ts, off_max)
                since = 0
            size = length + LOG_OVERHEAD
            since += size
            expected = base + delta + 1
            position += size
            batches += 1
            if attributes & CONTROL_BIT:
                controls += 1
    finally:
        reader.close()
    state[:] = [since, max_ts, off_max]
    out.control_batches += controls
    if batches:
        out.batches += batches
        out.next_offset = expected
        out.valid_end = position
    return position, expected

def _resync(seg: Segment, bad_position: int, end: int, min_offset: int) -> tuple[int, int] | None:
    """Find the next position after ``bad_position`` holding a CRC-valid batch.

    Only used for broken framing in acknowledged data: the magic byte sits
    16 bytes into a header, so candidates are found with ``find`` and then
    confirmed by length, offset plausibility and a full CRC.
    """
    fd = seg.fd
    window = SCAN_CHUNK
    pos = bad_position + 1
    magic_byte = bytes([MAGIC])
    while pos < end - HEADER_SIZE + 1:
        chunk = os.pread(fd, min(window + HEADER_SIZE, end - pos), pos)
        if len(chunk) < HEADER_SIZE:
            return None
        i = chunk.find(magic_byte, 16)
        while i != -1 and i - 16 + HEADER_SIZE <= len(chunk):
            cand = pos + i - 16
            h = header_at(chunk, i - 16)
            lod, count = h.last_offset_delta, h.record_count
            if (
                framing_error(h, end - cand) is None
                and min_offset <= h.base_offset < min_offset + MAX_RELATIVE_OFFSET
                and 0 <= lod
                and 0 <= count <= lod + 1
            ):
                data = os.pread(fd, h.size, cand)
                if len(data) == h.size and crc_matches(data, 0, h):
                    return cand, h.base_offset
            i = chunk.find(magic_byte, i + 1)
        pos += window
    return None

def apply_scan(seg: Segment, out: ScanOutcome) -> int:
    """Adopt a scan: truncate a bad tail, install rebuilt indexes. Returns bytes cut."""
    cut = 0
    if out.truncate_at is not None:
        cut = seg.file_size() - out.truncate_at
        os.ftruncate(seg.fd, out.truncate_at)
        seg.size = out.truncate_at
        out.holes = {p: r for p, r in out.holes.items() if p < out.truncate_at}
    else:
        seg.size = seg.file_size()
    seg.index, seg.timeindex = out.index, out.timeindex
    seg.next_offset = out.next_offset
    seg.max_timestamp, seg.offset_of_max = out.max_timestamp, out.offset_of_max
    seg.holes = dict(out.holes)
    seg.corrupt = {c.position: c for c in out.corrupt if c.position < seg.size}
    seg.verified = VerifiedRanges()
    for s, e in out.verified:
        seg.verified.add(s, min(e, seg.size))
    last = seg.index.last_entry
    seg.bytes_since_index = seg.size - last[1] if last else seg.size
    seg.write_indexes(rewrite=True)
    return cut
