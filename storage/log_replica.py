"""A follower's side of a partition log: append the leader's batches as they are, and truncate.

A follower replica must hold the leader's bytes exactly (so it can take over
and serve them with ``sendfile``, and so logs can be compared byte for byte):
:func:`append_as_follower` writes fetched batches without patching anything,
keeping the leader's base offsets and ``partitionLeaderEpoch``, and assigns
each new epoch in the leader-epoch cache at the base offset of its first batch
(Kafka's ``UnifiedLog.appendAsFollower``). It checks what a follower can:
framing, CRC32C, counts, that the first batch starts at this log's end and
that the batches are contiguous.

:func:`truncate_to` cuts the log back at runtime (Kafka's ``truncateTo``), as a
follower does when the leader answers a fetch with ``diverging_epoch``: later
segments and their indexes go, the segment holding the cut is shortened (its
aborted transactions past the cut too), the producer state is rebuilt, the recovery point and the epoch cache are moved
back. The recovery point is lowered durably *before* any file is cut (a crash
in between can only bring back records that are then rescanned, never trust
records that are gone), and the cut itself is fsynced before the call returns.

:func:`truncate_fully_and_start_at` empties the log and restarts it at a later
offset (Kafka's ``truncateFullyAndStartAt``), as a follower does whose log end
is below the leader's log start (a new replica of a partition whose retention or
DeleteRecords moved on, or a follower away for longer than the retention).
"""
from __future__ import annotations

import bisect
import logging
import os

from .batch_header import BatchHeader, validate_batch
from .errors import CorruptRecordError, InvalidRecordError, LogClosedError
from .log_append import AppendInfo, write_batches
from .log_lifecycle import replay_headers
from .log_txn import marker_in_log
from .log_state import LogState
from .producer_snapshot import delete_snapshots, load_producer_state
from . import pending_deletes
from .recovery import LOG_START_FILE, RECOVERY_POINT_FILE, write_checkpoint
from .segment import Segment
from .sync import fdatasync, fsync_dir

log = logging.getLogger(__name__)


class OffsetMismatchError(InvalidRecordError):
    """Fetched batches do not continue this log (Kafka's UnexpectedAppendOffsetException)."""


def validate_follower_batches(buf: bytearray | bytes | memoryview) -> tuple[list[tuple[int, BatchHeader]], int]:
    """``([(position, header)], record count)`` of a leader's contiguous batches, or the error.

    Unlike a produce, the total may exceed ``max.message.bytes`` (a fetch
    carries many batches); each batch is still checked whole (CRC included).
    """
    total = len(buf)
    if total == 0:
        raise InvalidRecordError("follower append holds no record batches")
    headers: list[tuple[int, BatchHeader]] = []
    pos = records = 0
    expected = None
    while pos < total:
        try:
            h = validate_batch(buf, pos)
        except (CorruptRecordError, InvalidRecordError) as e:
            raise type(e)(f"batch {len(headers)} at byte {pos} of {total}: {e}") from None
        if h.last_offset_delta != h.record_count - 1:
            raise InvalidRecordError(f"batch at byte {pos}: last offset delta {h.last_offset_delta} does not "
                                     f"match record count {h.record_count}")
        if expected is not None and h.base_offset != expected:
            raise OffsetMismatchError(f"batch at byte {pos} starts at offset {h.base_offset}, "
                                      f"the previous one ended before {expected}")
        expected = h.base_offset + h.last_offset_delta + 1
        headers.append((pos, h))
        records += h.record_count
        pos += h.size
    return headers, records


class FollowerPlacement:
    """Batches go in as the leader wrote them; new epochs enter the cache at their first batch."""

    def begin(self, st: LogState, headers: list[tuple[int, BatchHeader]]) -> None:
        first = headers[0][1].base_offset
        if first != st.log_end:
            raise OffsetMismatchError(f"partition log {st.name}: leader batches start at offset {first}, "
                                      f"this log ends at {st.log_end}")
        cache = st.leader_epochs
        for _, h in headers:
            if h.partition_leader_epoch > cache.latest_epoch:
                cache.assign(h.partition_leader_epoch, h.base_offset)  # fsynced before the write

    def place(self, buf: bytearray, bpos: int, h: BatchHeader, offset: int, now: int, lat: bool) -> int:
        return h.max_timestamp

    def append_time(self, h: BatchHeader, now: int, lat: bool) -> int:
        return h.max_timestamp if h.is_log_append_time else -1


def append_as_follower(st: LogState, data: bytes | bytearray | memoryview) -> AppendInfo:
    """Append a leader's batches byte for byte at this log's end (see the module docstring)."""
    buf = bytearray(data)
    headers, records = validate_follower_batches(buf)
    return write_batches(st, buf, headers, records, FollowerPlacement())


def truncate_to(st: LogState, offset: int) -> int:
    """Remove every batch holding an offset >= ``offset``; returns the new log end.

    A batch straddling ``offset`` goes whole, so the new end is at or below
    ``offset`` (leaders only send batch-aligned points: epoch ends, fetch
    offsets). Truncating below the log start is refused.
    """
    with st.flush_lock, st.lock:
        st.check_open()
        if st.closing:
            raise LogClosedError(f"partition log {st.name} is closing")
        if offset >= st.log_end:
            return st.log_end
        if offset < st.log_start:
            raise InvalidRecordError(f"partition log {st.name}: cannot truncate to {offset}, "
                                     f"below the log start {st.log_start}")
        i = max(bisect.bisect_right(st.bases, offset) - 1, 0)
        seg = st.segments[i]
        position, new_end = seg.find(offset) if offset < seg.next_offset else (seg.size, seg.next_offset)
        try:
            if st.recovery_point > new_end:  # never trust, after a crash, records being cut now
                st.recovery_point = new_end
                write_checkpoint(st.path(RECOVERY_POINT_FILE), new_end, durable=True)
            for gone in st.segments[i + 1:]:
                gone.delete_files()
            del st.segments[i + 1:], st.bases[i + 1:]
            _cut_segment(seg, position, new_end)
            fdatasync(seg.fd, seg.path)
            fsync_dir(st.directory)
        except OSError as e:
            raise st.go_offline(f"truncate to {offset}", e) from e
        st.log_end = new_end
        st.leader_epochs.truncate_from_end(new_end)
        delete_snapshots(st.directory, above=new_end)
        try:
            seg.txnindex.truncate_to(new_end)  # aborts whose markers were cut
        except OSError as e:
            raise st.go_offline(f"truncate {seg.txnindex.path}", e) from e
        st.producer_state, st.producer_load = load_producer_state(
            st.directory, log_end=new_end, fallback_from=seg.base_offset,
            replay=lambda start: replay_headers(st, start), now_ms=st.clock(),
            expiration_ms=st.producer_id_expiration_ms, log_append_time=st.config.log_append_time,
            marker_of=lambda h: marker_in_log(st, h),
        )
        log.info("%s truncated to offset %d (asked %d)", st.name, new_end, offset)
        return new_end


def _cut_segment(seg, position: int, new_end: int) -> None:
    """Shorten ``seg`` to ``position`` (a batch boundary) and make it the active segment again."""
    os.ftruncate(seg.fd, position)
    seg.size = position
    seg.next_offset = new_end
    seg.torn = False
    seg.durable = False
    seg.index.truncate_to_position(position)
    seg.timeindex.truncate_to_offset(new_end)
    seg.holes = {p: r for p, r in seg.holes.items() if p < position}
    seg.corrupt = {p: c for p, c in seg.corrupt.items() if p < position}
    seg.verified.truncate(position)
    seg.max_timestamp, seg.offset_of_max = -1, -1
    for ref, kind, _ in seg.walk(0, position):
        if kind is None and ref.max_timestamp > seg.max_timestamp:
            seg.max_timestamp, seg.offset_of_max = ref.max_timestamp, ref.base_offset
    last = seg.index.last_entry
    seg.bytes_since_index = position - last[1] if last else position
    if position == 0:
        seg.rolling_base_ms = None
    seg.write_indexes(rewrite=True)



def truncate_fully_and_start_at(st: LogState, offset: int) -> None:
    """Drop every record and make the log start and end at ``offset``: at or past its log end, or
    anywhere when it holds no record (the first batch a leader sends may start below the offset a
    follower asked for: the leader's log start can lie inside a batch, after DeleteRecords).

    Crash-safe by order: the new log start is checkpointed (fsynced) first, so a
    crash at any later point reopens a log that starts at ``offset`` or, before
    the new segment exists, at its old end (opening clamps the start to the end;
    the follower then asks again). Never a log with the old records and a gap.
    The old segments go through the delayed deletion of retention; the epoch
    cache and the producer state are emptied, as Kafka's.
    """
    with st.flush_lock, st.lock:
        st.check_open()
        if st.closing:
            raise LogClosedError(f"partition log {st.name} is closing")
        if offset < st.log_end and st.log_start < st.log_end:
            raise InvalidRecordError(f"partition log {st.name}: cannot restart at {offset}, below its log end "
                                     f"{st.log_end} (truncate to a point instead)")
        if offset == st.log_start == st.log_end:
            return
        now = st.clock()
        dropped = list(st.segments)
        try:
            write_checkpoint(st.path(LOG_START_FILE), offset, durable=True)
            new = Segment.create(st.directory, offset, index_bytes=st.config.segment_index_bytes,
                                 index_interval=st.config.index_interval_bytes)
            fsync_dir(st.directory)
            st.segments, st.bases = [new], [offset]
            st.log_start = st.log_end = st.recovery_point = offset
            write_checkpoint(st.path(RECOVERY_POINT_FILE), offset, durable=True)
        except OSError as e:
            raise st.go_offline(f"truncate fully and start at {offset}", e) from e
        pending_deletes.schedule(st, dropped, now)
        st.leader_epochs.truncate_from_end(0)
        delete_snapshots(st.directory, below=offset + 1)
        st.producer_state, st.producer_load = load_producer_state(
            st.directory, log_end=offset, fallback_from=offset, replay=lambda start: replay_headers(st, start),
            now_ms=now, expiration_ms=st.producer_id_expiration_ms, log_append_time=st.config.log_append_time,
            marker_of=lambda h: marker_in_log(st, h),
        )
        log.warning("%s truncated fully: it starts at offset %d now (the leader's log start)", st.name, offset)
