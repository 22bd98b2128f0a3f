"""The log of one topic partition: the one public face of the storage engine.

:class:`PartitionLog` is a facade: it keeps the public API (append, flush,
locate/read, timestamps, retention, compaction, verification, lifecycle) in
one place while each job lives in a module named after it, all working on one
shared :class:`~.log_state.LogState` (which documents the locking and the
invariants):

* :mod:`.log_lifecycle`: open (recovery, producer state), close, delete;
* :mod:`.log_append`: validate and append batches, roll segments;
* :mod:`.log_replica`: a follower's byte-for-byte append and runtime truncation;
* :mod:`.log_flush`: fsync up to a point, the group commit behind ``acks=all``;
* :mod:`.log_read`: which file ranges answer a fetch;
* :mod:`.time_lookup`: offsets by timestamp (ListOffsets);
* :mod:`.log_retention`: retention and DeleteRecords (a prefix of segments goes);
* :mod:`.pending_deletes`: dropped files deleted after ``file.delete.delay.ms``;
* :mod:`.cleaned_install`: swapping a compaction pass in;
* :mod:`.log_verify`: scrubbing every batch's CRC;
* :mod:`.leader_epochs`: the leader-epoch cache and its checkpoint (OffsetForLeaderEpoch);
* :mod:`.log_txn`: transaction markers, the ``.txnindex`` files, the last stable offset.

Batches are stored exactly as received, with only the broker-owned header
fields patched, so fetches can ``sendfile`` them. A disk error takes the log
offline (every call raises KafkaStorageError) until it is reopened; a full
disk only fails the append.
"""
from __future__ import annotations

import time
from typing import Callable, NamedTuple

from . import cleaned_install, log_append, log_flush, log_lifecycle, log_replica, log_retention, log_txn, log_verify
from .cleanable import CleanView, DirtyStats, SegmentView, dirty_stats
from .cleaned_install import SwapReport
from .cleaner_checkpoint import CleanerCheckpoint
from .compaction import CleanResult, discard
from .config import TopicConfig
from .errors import FencedLeaderEpochError
from .leader_epochs import LeaderEpochCache
from .log_append import AppendInfo
from .log_read import locate_ranges
from .producer_snapshot import ProducerStateLoad
from .producer_state import DEFAULT_EXPIRATION_MS, ProducerStateTable
from .recovery import RecoveryReport
from .roll_flusher import RollFlusher
from .segment import CorruptBatch, FileSlice, Segment
from .time_lookup import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP, first_with_max_timestamp  # noqa: F401 (re-exported)
from .time_lookup import offset_for_timestamp as _offset_for_timestamp
from .txn_index import AbortedTxn


class SegmentInfo(NamedTuple):
    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int
    path: str


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class PartitionLog:
    """An append-only, segmented, crash-recoverable Kafka partition log.

    ``directory`` is the partition folder (``<data-dir>/<topic>-<partition>``),
    created if missing. ``clock`` returns milliseconds and drives LogAppendTime,
    ``segment.ms``, ``flush.ms`` and retention (tests inject one).
    ``verify="full"`` CRC-checks every segment on open and reports corrupt
    acknowledged batches in :attr:`recovery_report` instead of trusting them.
    """

    def __init__(
        self,
        directory: str,
        config: TopicConfig | None = None,
        *,
        clock: Callable[[], int] | None = None,
        verify: str = "normal",
        producer_id_expiration_ms: int = DEFAULT_EXPIRATION_MS,
    ):
        if verify not in ("normal", "full"):
            raise ValueError(f"verify must be 'normal' or 'full', not {verify!r}")
        self._st = log_lifecycle.open_log(
            directory, config if config is not None else TopicConfig(), clock or _wall_clock_ms,
            verify == "full", producer_id_expiration_ms,
        )
        self.directory = self._st.directory
        self.name = self._st.name

    # ------------------------------------------------------------- properties
    @property
    def config(self) -> TopicConfig:
        return self._st.config

    def update_config(self, config: TopicConfig) -> None:
        """Apply new topic settings; index settings take effect from the next segment."""
        with self._st.lock:
            self._st.config = config

    @property
    def log_start_offset(self) -> int:
        return self._st.log_start

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._st.log_end

    @property
    def recovery_point(self) -> int:
        return self._st.recovery_point

    @property
    def recovery_report(self) -> RecoveryReport:
        """What opening found: bytes scanned and truncated, corrupt batches kept."""
        return self._st.recovery_report

    @property
    def producer_state(self) -> ProducerStateTable:
        return self._st.producer_state

    @property
    def producer_load(self) -> ProducerStateLoad:
        """How opening rebuilt the producer state (snapshot used, batches replayed)."""
        return self._st.producer_load

    @property
    def size_bytes(self) -> int:
        with self._st.lock:
            return sum(s.size for s in self._st.segments)

    @property
    def segment_count(self) -> int:
        return len(self._st.segments)

    @property
    def segments(self) -> list[SegmentInfo]:
        with self._st.lock:
            return [SegmentInfo(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.path) for s in self._st.segments]

    @property
    def closed(self) -> bool:
        return self._st.closed

    @property
    def offline(self) -> str | None:
        """Why the log went offline after a disk error, or None while it serves."""
        return self._st.offline

    # Internals that crash tests and benches reach for to drop a log "like a killed process".
    @property
    def _segments(self) -> list[Segment]:
        return self._st.segments

    @property
    def _flusher(self) -> RollFlusher:
        return self._st.flusher

    @property
    def _closed(self) -> bool:
        return self._st.closed

    @_closed.setter
    def _closed(self, value: bool) -> None:
        self._st.closed = value

    def stats(self) -> dict[str, int | float | str]:
        """Counters and gauges of this log, for the broker's metrics."""
        return self._st.snapshot()

    # ------------------------------------------------------------ append, flush
    def append(self, data: bytes | bytearray | memoryview, *, leader_epoch: int | None = None) -> AppendInfo:
        """Validate and append one or more concatenated v2 batches, all or nothing.

        Every batch is checked (framing, magic, CRC32C, counts, size) before a
        single byte is written; offsets are assigned by patching base offsets,
        so record bytes are never re-encoded. One ``pwrite`` per call.
        """
        return log_append.append(self._st, data, leader_epoch)

    # ------------------------------------------------------------ follower side
    def append_as_follower(self, data: bytes | bytearray | memoryview) -> AppendInfo:
        """Append a leader's fetched batches byte for byte, epochs included (see :mod:`.log_replica`)."""
        return log_replica.append_as_follower(self._st, data)

    def truncate_to(self, offset: int) -> int:
        """Cut every batch holding an offset >= ``offset``, durably; returns the new log end (:mod:`.log_replica`)."""
        return log_replica.truncate_to(self._st, offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (a follower behind the leader's log start; :mod:`.log_replica`)."""
        log_replica.truncate_fully_and_start_at(self._st, offset)

    # ------------------------------------------------------------ leader epochs
    @property
    def leader_epochs(self) -> LeaderEpochCache:
        """Epoch -> start offset of this log (see :mod:`.leader_epochs`); read it under no lock of yours."""
        return self._st.leader_epochs

    @property
    def leader_epoch(self) -> int:
        """The latest leader epoch (the one appends are stamped with), -1 before any."""
        return self._st.leader_epochs.latest_epoch

    def start_leader_epoch(self, epoch: int) -> None:
        """Become leader in ``epoch``: it starts at the log end (Kafka's ``maybeAssignEpochStartOffset``).

        Idempotent for the current epoch; an older one raises FencedLeaderEpochError.
        """
        with self._st.lock:
            self._st.check_open()
            latest = self._st.leader_epochs.latest_epoch
            if epoch < latest:
                raise FencedLeaderEpochError(f"partition log {self.name}: leader epoch {epoch} is older than {latest}")
            self._st.leader_epochs.assign(epoch, self._st.log_end)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; (-1, -1) when undefined (see :mod:`.leader_epochs`)."""
        with self._st.lock:
            self._st.check_open()
            return self._st.leader_epochs.end_offset_for(epoch, self._st.log_end)

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch the record at ``offset`` was written in, -1 if unknown."""
        with self._st.lock:
            return self._st.leader_epochs.epoch_for_offset(offset)

    def roll(self) -> None:
        """Start a new segment now (if the active one holds data)."""
        log_append.roll_now(self._st)

    def flush(self) -> None:
        """fsync everything appended so far and move the recovery point to the log end."""
        log_flush.flush(self._st)

    def flush_to(self, upto: int) -> int:
        """Make every offset below ``upto`` durable (group commit); returns the recovery point.

        Returns at once if a flush already covered ``upto``; callers that queue
        behind a running fdatasync share the next one. Raises
        KafkaStorageError if the disk fails.
        """
        return log_flush.flush_to(self._st, upto)

    # ------------------------------------------------------------ reads, timestamps
    def locate(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True
    ) -> list[FileSlice]:
        """Batch-aligned file ranges holding data from ``offset`` on, for ``sendfile``.

        The batch containing ``offset`` is included whole. ``max_offset`` is an
        exclusive bound (a high watermark): only batches wholly below it are
        returned. With ``min_one`` the first batch is returned even if it is
        larger than ``max_bytes``. Every returned byte has been CRC-checked by
        this process (on append, recovery or here, once).
        """
        with self._st.lock:
            ranges = locate_ranges(self._st, offset, max_bytes, max_offset, min_one)
            return [FileSlice(seg.path, pos, length) for seg, pos, length in ranges]

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True) -> bytes:
        """Like :meth:`locate` but returns the concatenated (CRC-checked) batch bytes."""
        with self._st.lock:
            ranges = locate_ranges(self._st, offset, max_bytes, max_offset, min_one)
            parts = [seg.pread(pos, length) for seg, pos, length in ranges]
            data = parts[0] if len(parts) == 1 else b"".join(parts)
            self._st.stats["reads"] += 1
            self._st.stats["read_bytes"] += len(data)
            return data

    def read_records(self, offset: int, max_bytes: int = 1 << 20, *, max_offset: int | None = None) -> list:
        """Decoded records from ``offset`` on (convenience; the broker serves bytes)."""
        from .records import decode_records

        data = self.read(offset, max_bytes, max_offset=max_offset)
        records = decode_records(data)
        if records and records[0].offset < offset:
            records = [r for r in records if r.offset >= offset]
        return records

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` (ListOffsets).

        The time index narrows the search to one batch range; only the one
        candidate batch is decoded. Special values: -1 gives (log end, -1),
        -2 gives (log start, -1), -3 is :meth:`max_timestamp_offset`.
        """
        with self._st.lock:
            self._st.check_open()
            return _offset_for_timestamp(self._st.segments, self._st.log_start, self._st.log_end, timestamp)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the largest timestamp (ListOffsets -3)."""
        with self._st.lock:
            self._st.check_open()
            return first_with_max_timestamp(self._st.segments, self._st.log_start)

    # ------------------------------------------------------------ producer state
    def expire_producers(self, now_ms: int | None = None) -> list[int]:
        """Forget producers idle for ``producer.id.expiration.ms``; returns their ids."""
        st = self._st
        with st.lock:
            now = st.clock() if now_ms is None else now_ms
            return st.producer_state.expire(now, st.producer_id_expiration_ms)

    # ------------------------------------------------------------ transactions
    @property
    def ongoing_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each transaction open in this partition (a copy)."""
        with self._st.lock:
            return dict(self._st.producer_state.txns.ongoing)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The last stable offset (LSO) for ``high_watermark``: a ``read_committed`` fetch reads below it.

        The first offset of the oldest transaction still open, or of a completed
        one whose marker is not yet below the high watermark, if below it; else
        the high watermark (Kafka's rule; see :mod:`.txn_state`).
        """
        return log_txn.last_stable_offset(self._st, high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)``, from the ``.txnindex`` files.

        What a ``read_committed`` fetch returns beside its records, so the client
        drops the aborted ones (Kafka's ``collectAbortedTransactions``).
        """
        return log_txn.aborted_transactions(self._st, fetch_offset, upper_bound)

    def set_producer_id_expiration_ms(self, expiration_ms: int) -> None:
        """The broker's ``producer.id.expiration.ms`` changed (a dynamic broker config)."""
        with self._st.lock:
            self._st.producer_id_expiration_ms = expiration_ms

    # ---------------------------------------------------------------- retention
    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole closed segments past retention.ms / retention.bytes; returns how many."""
        return log_retention.apply_retention(self._st, now_ms)

    def delete_records(self, before_offset: int, *, high_watermark: int | None = None) -> int:
        """Kafka DeleteRecords: move the log start offset up to ``before_offset``; returns the new low watermark.

        ``-1`` means the high watermark (the log end unless given). The new
        start is persisted before any file goes, so a crash cannot resurrect
        deleted records.
        """
        return log_retention.delete_records(self._st, before_offset, high_watermark)

    # --------------------------------------------------------------- compaction
    @property
    def cleaner_checkpoint(self) -> CleanerCheckpoint:
        return self._st.cleaner_checkpoint

    def cleaning_view(self) -> CleanView:
        """A snapshot of the segments for a cleaner, which may run in another process."""
        st = self._st
        with st.lock:
            st.check_open()
            active = st.segments[-1]
            segments = tuple(
                SegmentView(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.path, s.generation,
                            s.durable and s is not active)
                for s in st.segments
            )
            return CleanView(st.directory, st.name, segments, st.log_start, st.log_end,
                             st.recovery_point, st.config, st.cleaner_checkpoint, st.clock(), *log_txn.for_cleaner(st))

    def dirty_stats(self) -> DirtyStats:
        view = self.cleaning_view()
        return dirty_stats(view, view.now_ms)

    def install_cleaned(self, result: CleanResult) -> SwapReport:
        """Swap a cleaning pass's segments in (see :func:`.cleaned_install.install_cleaned`)."""
        return cleaned_install.install_cleaned(self._st, result)

    def discard_cleaned(self, result: CleanResult) -> None:
        """Throw away a pass that will not be installed."""
        discard(result)

    # ------------------------------------------------------- verify, lifecycle
    def verify(self) -> list[CorruptBatch]:
        """CRC-check every batch of every segment; report, never truncate.

        Bad batches found are remembered so reads of them raise
        CorruptRecordError naming the file and position.
        """
        return log_verify.verify(self._st)

    def close(self) -> None:
        """Flush everything, persist indexes and checkpoints, then mark a clean shutdown."""
        log_lifecycle.close(self._st)

    def delete(self) -> None:
        """Remove the partition folder and everything in it."""
        log_lifecycle.delete(self._st)

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        st = self._st
        return f"PartitionLog({self.directory!r}, offsets [{st.log_start}, {st.log_end}), {len(st.segments)} segments)"


__all__ = ["PartitionLog", "AppendInfo", "SegmentInfo", "FileSlice", "CorruptBatch", "RecoveryReport"]
