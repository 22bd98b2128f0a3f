"""Appending to a partition log: validate whole batches, assign offsets, write once, roll segments.

Every batch of an append is checked (framing, magic, CRC32C, counts, size)
before a single byte is written; offsets are assigned by patching the
broker-owned header fields in place (see :mod:`.batch_header`), so record bytes
are never re-encoded and a fetch can later ``sendfile`` them as stored. One
``pwrite`` per call. A full disk fails only the append (its bytes are cut back
off the file), so appends resume at the right offset once space returns; any
other write error takes the log offline (:meth:`.LogState.go_offline`).
A transaction marker ends its producer's transaction, and an ABORT is
indexed in the segment's ``.txnindex`` (:mod:`.log_txn`).
Every batch is stamped with the leader epoch it is appended in, and a new
epoch's start offset is checkpointed (fsynced) before its first batch is
written (Kafka's ``maybeAssignEpochStartOffset``), see :mod:`.leader_epochs`.
"""
from __future__ import annotations

import logging
from typing import NamedTuple

from .batch_header import BatchHeader, set_base_offset, set_log_append_time, set_partition_leader_epoch, validate_batch
from .errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    KafkaStorageError,
    LogClosedError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from .config import TopicConfig
from .index import MAX_RELATIVE_OFFSET
from .log_flush import flush
from .log_state import LogState
from .log_txn import index_aborted, markers_of
from .producer_snapshot import write_snapshot
from .segment import Segment
from .sync import free_bytes, is_no_space

log = logging.getLogger(__name__)

MAX_COMPRESSION_CODEC = 4  # none, gzip, snappy, lz4, zstd


class AppendInfo(NamedTuple):
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    size: int


def validate_append(buf: bytearray, config: TopicConfig) -> tuple[list[tuple[int, BatchHeader]], int]:
    """``([(position, header)], record count)`` of the concatenated batches in ``buf``, or the Kafka error.

    Pure: nothing is written, so a refused append leaves no trace in the log.
    """
    total = len(buf)
    if total == 0:
        raise InvalidRecordError("produce data holds no record batches")
    headers = []
    pos = 0
    records = 0
    while pos < total:
        where = f"batch {len(headers)} at byte {pos} of {total}"
        try:
            h = validate_batch(buf, pos)
        except (CorruptRecordError, InvalidRecordError) as e:
            raise type(e)(f"{where}: {e}") from None
        if h.size > config.max_message_bytes:
            raise RecordTooLargeError(
                f"{where}: batch of {h.size} bytes exceeds max.message.bytes={config.max_message_bytes}"
            )
        if h.last_offset_delta != h.record_count - 1:
            raise InvalidRecordError(
                f"{where}: last offset delta {h.last_offset_delta} does not match record count {h.record_count}"
            )
        if h.compression > MAX_COMPRESSION_CODEC:
            raise UnsupportedCompressionError(f"{where}: unknown compression codec id {h.compression}")
        headers.append((pos, h))
        records += h.record_count
        pos += h.size
    if total > config.max_message_bytes:
        raise RecordTooLargeError(
            f"produce data of {total} bytes in {len(headers)} batches exceeds max.message.bytes={config.max_message_bytes}"
        )
    return headers, records


class LeaderPlacement:
    """How a leader places batches: offsets from the log end, its epoch and LogAppendTime stamped in."""

    def __init__(self, leader_epoch: int | None) -> None:
        self.leader_epoch = leader_epoch
        self.epoch = -1

    def begin(self, st: LogState, headers: list[tuple[int, BatchHeader]]) -> None:
        """Under ``st.lock``, before any write: fence an old epoch, checkpoint a new one (fsynced)."""
        latest = st.leader_epochs.latest_epoch
        epoch = self.epoch = latest if self.leader_epoch is None else self.leader_epoch
        if epoch < latest:
            raise FencedLeaderEpochError(f"partition log {st.name}: append in leader epoch {epoch}, but "
                                         f"epoch {latest} has begun")
        if epoch >= 0:
            st.leader_epochs.assign(epoch, st.log_end)

    def place(self, buf: bytearray, bpos: int, h: BatchHeader, offset: int, now: int, lat: bool) -> int:
        """Patch one batch's broker-owned fields; returns its max timestamp."""
        set_base_offset(buf, offset, bpos)
        set_partition_leader_epoch(buf, self.epoch, bpos)
        if lat:
            set_log_append_time(buf, now, bpos)
            return now
        return h.max_timestamp

    def append_time(self, h: BatchHeader, now: int, lat: bool) -> int:
        """The LogAppendTime the producer state remembers for this batch (-1: CreateTime)."""
        return now if lat else -1


def append(st: LogState, data: bytes | bytearray | memoryview, leader_epoch: int | None) -> AppendInfo:
    """Validate and append one or more concatenated v2 batches, all or nothing (see the module docstring).

    Every batch is stamped with ``leader_epoch`` (None: the log's latest epoch,
    -1 if it has none), as a Kafka leader overwrites whatever the client sent;
    an epoch older than the latest is refused (a fenced leader).
    """
    buf = bytearray(data)  # our own copy: offsets get patched
    headers, records = validate_append(buf, st.config)
    return write_batches(st, buf, headers, records, LeaderPlacement(leader_epoch))


def write_batches(st: LogState, buf: bytearray, headers: list[tuple[int, BatchHeader]], records: int,
                  placement) -> AppendInfo:
    """Write validated batches at the log end with one ``pwrite``, rolling first if due.

    ``placement`` (a :class:`LeaderPlacement`, or a follower's in
    :mod:`.log_replica`) checks and patches each batch under the lock; the
    rest (rolls, indexes, producer state, flush policy, disk errors) is the
    same for leaders and followers.
    """
    total = len(buf)
    config = st.config
    rolled_at = None
    markers = markers_of(buf, headers)  # transaction markers; a malformed one fails the append here
    with st.lock:
        st.check_open()
        if st.closing:
            raise LogClosedError(f"partition log {st.name} is closing")
        now = st.clock()
        first_offset = st.log_end
        last_offset = first_offset + records - 1
        seg = st.segments[-1]
        lat = config.log_append_time
        try:
            placement.begin(st, headers)  # a new epoch is fsynced before any batch of it is written
            if should_roll(st, seg, total, now, last_offset):
                seg = roll(st, now)
                rolled_at = seg.base_offset
            offset = first_offset
            batches = []
            for bpos, h in headers:
                max_ts = placement.place(buf, bpos, h, offset, now, lat)
                batches.append((bpos, offset, offset + h.last_offset_delta, max_ts, h.size))
                offset += h.last_offset_delta + 1
            seg.append(buf, batches, now)
        except OSError as e:
            if rolled_at is not None:
                st.flusher.request(rolled_at)
            raise _write_failed(st, seg, e) from e
        if st.no_space_logged:
            st.no_space_logged = False
            log.warning("partition log %s: appends succeed again (%d bytes free)", st.name,
                        free_bytes(st.directory))
        st.log_end = offset
        for (bpos, h), (_, base, _, _, _) in zip(headers, batches):
            if h.producer_id < 0:
                continue
            marker = markers.get(bpos) if h.is_control else None
            if marker is not None:
                try:
                    index_aborted(st, st.producer_state.complete_txn(h, base, marker, now))
                except OSError as e:
                    raise st.go_offline(f"write to {seg.txnindex.path}", e) from e
            elif not h.is_control:
                st.producer_state.record(h, base, placement.append_time(h, now, lat), now)
        stats = st.stats
        stats["appends"] += 1
        stats["appended_bytes"] += total
        stats["appended_records"] += records
        log_start = st.log_start
        need_flush = (
            st.log_end - st.recovery_point >= config.flush_messages
            or now - st.last_flush_ms >= config.flush_ms
        )
    if rolled_at is not None:
        st.flusher.request(rolled_at)
    info = AppendInfo(first_offset, offset - 1, now if lat else -1, log_start, records, total)
    if need_flush:
        try:
            flush(st)
        except KafkaStorageError as e:
            raise KafkaStorageError(str(e), appended=info) from e  # the data is in the log: say so
        except LogClosedError:
            pass  # close() flushes everything itself
    return info


def _write_failed(st: LogState, seg: Segment, exc: OSError) -> KafkaStorageError:
    """A write to ``seg`` failed: a full disk fails just this append, anything else the log."""
    if is_no_space(exc) and not seg.torn:
        if not st.no_space_logged:
            st.no_space_logged = True
            log.error("partition log %s: disk full writing %s (%d bytes free): appends fail with "
                      "KAFKA_STORAGE_ERROR until space returns", st.name, seg.path, free_bytes(st.directory))
        return KafkaStorageError(f"partition log {st.name}: no space left on the disk holding {seg.path}")
    return st.go_offline(f"write to {seg.path}", exc)


def should_roll(st: LogState, seg: Segment, size: int, now: int, last_offset: int) -> bool:
    """Whether an append of ``size`` bytes ending at ``last_offset`` needs a new segment first."""
    if seg.size == 0:
        return False  # an empty segment takes anything, even an oversize append
    config = st.config
    return (
        seg.size + size > config.segment_bytes
        or (seg.rolling_base_ms is not None and now - seg.rolling_base_ms >= config.segment_ms)
        or seg.index.is_full
        or seg.timeindex.is_full
        or last_offset - seg.base_offset > MAX_RELATIVE_OFFSET
    )


def roll(st: LogState, now: int) -> Segment:
    """Seal the active segment and start a new one at the log end; the caller holds ``st.lock``.

    The caller asks the background flusher to make the old one durable: a roll
    never waits for a disk write.
    """
    old = st.segments[-1]
    old.seal()
    new = Segment.create(
        st.directory,
        st.log_end,
        index_bytes=st.config.segment_index_bytes,
        index_interval=st.config.index_interval_bytes,
    )
    st.dir_dirty = True  # the new names reach the disk with the next flush, before the recovery point moves
    st.segments.append(new)
    st.bases.append(new.base_offset)
    # Producer state as of the new segment's start: a restart replays only what follows.
    # It is derived data: if it cannot be written, opening falls back to an older one.
    try:
        write_snapshot(st.directory, new.base_offset, st.producer_state, durable=False)
    except OSError as e:
        log.warning("%s: producer snapshot at offset %d not written: %s", st.name, new.base_offset, e)
    st.stats["rolls"] += 1
    log.debug("%s rolled a new segment at offset %d", st.name, new.base_offset)
    return new


def roll_now(st: LogState) -> None:
    """Start a new segment now (if the active one holds data)."""
    with st.lock:
        st.check_open()
        if st.segments[-1].size == 0:
            return
        new = roll(st, st.clock())
    st.flusher.request(new.base_offset)
