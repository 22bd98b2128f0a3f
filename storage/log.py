"""The log of one topic partition: append, locate/read, timestamps, retention, durability.

A partition folder holds segment files (see :mod:`.segment`) plus three small
files: the recovery point (offset fsynced to), the log start offset (moved by
retention and DeleteRecords) and a clean-shutdown marker written by
``close()``; and idempotent-producer snapshots written at each roll and at
``close()`` (see :mod:`.producer_snapshot`), so opening reads only the batch
headers after the newest one. Batches are stored exactly as received, with only the
broker-owned header fields patched, so fetches can ``sendfile`` them.

Locking: one re-entrant lock guards all state and every file access except
fsync, which runs on duplicated descriptors outside it so a flush (possibly
from another thread) never blocks appends or reads for the duration of the
disk write.

Durability: :meth:`PartitionLog.flush_to` is the group commit behind
``acks=all``: one ``fdatasync`` covers everything appended before it started,
and callers arriving while it runs are served by the next one. The recovery
point moves only after a sync succeeded (folder included when segment files
were created). An fsync or write error takes the log offline (every call
raises KafkaStorageError) because the kernel may already have dropped the
unwritten pages: only reopening, which rescans from the last recovery point,
brings it back. A full disk only fails the append (its bytes are cut back off
the file), so appends resume at the right offset once space returns.
"""
from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from typing import Callable, NamedTuple

from . import compaction as _compaction
from .batch_header import named, set_base_offset, set_log_append_time, set_partition_leader_epoch, validate_batch
from .cleaned_install import ReplacedSegments, SwapReport, prepare_cleaned
from .cleanable import CleanView, DirtyStats, SegmentView, dirty_stats
from .cleaner_checkpoint import CleanerCheckpoint
from .cleaner_checkpoint import read_checkpoint as read_cleaner_checkpoint
from .cleaner_checkpoint import write_checkpoint as write_cleaner_checkpoint
from .config import TopicConfig
from .errors import (
    CorruptRecordError,
    FencedLeaderEpochError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaStorageError,
    LogClosedError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    UnsupportedCompressionError,
)
from .file_batches import FileBatches
from .index import MAX_RELATIVE_OFFSET
from .leader_epochs import LeaderEpochCache, load_leader_epochs
from .log_read import batch_ranges
from .producer_snapshot import ProducerStateLoad, delete_snapshots, load_producer_state, write_snapshot
from .producer_state import DEFAULT_EXPIRATION_MS, ProducerStateTable
from .recovery import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    RecoveryReport,
    load_segments,
    read_checkpoint,
    write_checkpoint,
)
from .retention import SegmentFacts, deletable_prefix
from .roll_flusher import RollFlusher
from .segment import CorruptBatch, FileSlice, Segment
from .segment_recovery import scan as scan_segment
from .swap import discard_pending, write_manifest
from .sync import fdatasync, free_bytes, fsync_dir, is_no_space
from .time_lookup import first_at_or_after, first_with_max_timestamp

log = logging.getLogger(__name__)

MAX_COMPRESSION_CODEC = 4  # none, gzip, snappy, lz4, zstd

# ListOffsets special timestamps, accepted by offset_for_timestamp for convenience.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class AppendInfo(NamedTuple):
    base_offset: int
    last_offset: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    size: int


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
        self.directory = os.path.abspath(directory)
        self.name = os.path.basename(self.directory.rstrip(os.sep))
        self._config = config if config is not None else TopicConfig()
        self._clock = clock or _wall_clock_ms
        self._lock = threading.RLock()
        self._flush_lock = threading.RLock()  # flush_to holds it around _flush_to
        self._closed = False
        self._closing = False  # close() started: no more appends, flushes still allowed
        self._offline: str | None = None  # why the log stopped serving after a disk error
        # Segment files were created (or removed) since the folder was last fsynced: true at
        # first, as opening may have created the first segment or cut a torn tail away.
        self._dir_dirty = True
        self._no_space_logged = False
        if not os.path.isdir(self.directory):
            os.makedirs(self.directory, exist_ok=True)
            fsync_dir(os.path.dirname(self.directory))  # the partition folder itself survives a power loss

        marker = os.path.join(self.directory, CLEAN_SHUTDOWN_FILE)
        clean = os.path.exists(marker)
        self._recovery_point = read_checkpoint(self._path(RECOVERY_POINT_FILE)) or 0
        rescanned_from = None if clean else self._recovery_point
        log_start = read_checkpoint(self._path(LOG_START_FILE)) or 0
        now = self._clock()
        segments, report = load_segments(
            self.directory,
            index_bytes=self._config.segment_index_bytes,
            index_interval=self._config.index_interval_bytes,
            clean=clean,
            recovery_point=self._recovery_point,
            log_start=log_start,
            full=verify == "full",
            now_ms=now,
        )
        self._segments: list[Segment] = segments
        self._bases = [s.base_offset for s in segments]
        self._log_end = segments[-1].next_offset
        self._log_start = min(max(log_start, segments[0].base_offset), self._log_end)
        if self._recovery_point > self._log_end:
            self._recovery_point = self._log_end
            write_checkpoint(self._path(RECOVERY_POINT_FILE), self._log_end, durable=True)
        if clean:
            self._recovery_point = self._log_end
        self.recovery_report: RecoveryReport = report
        if report.truncated_bytes or report.corrupt or report.segments_scanned:
            log.log(
                logging.WARNING if report.truncated_bytes or report.corrupt else logging.INFO,
                "%s recovered in %.3f s: scanned %d bytes in %d segments, truncated %d bytes, %d corrupt batches kept",
                self.name, report.duration_s, report.bytes_scanned, report.segments_scanned,
                report.truncated_bytes, len(report.corrupt),
            )
        self._producer_id_expiration_ms = producer_id_expiration_ms
        self._replay_bytes = 0
        self.producer_state: ProducerStateTable
        self.producer_state, self.producer_load = load_producer_state(
            self.directory, log_end=self._log_end, fallback_from=self._segments[-1].base_offset,
            replay=self._replay_headers, now_ms=now, expiration_ms=producer_id_expiration_ms,
            log_append_time=self._config.log_append_time,
        )
        self.producer_load: ProducerStateLoad
        # Leader epochs (see .leader_epochs): checked against the recovered log, rebuilt if the file is gone.
        self.leader_epochs: LeaderEpochCache = load_leader_epochs(
            self.directory, log_start=self._log_start, log_end=self._log_end,
            headers_from=self._epoch_headers, rescan_from=rescanned_from)
        if clean:
            # From now on a crash must be detected: the marker goes, durably.
            os.remove(marker)
            fsync_dir(self.directory)
        self._pending_deletes: list[tuple[int, Segment | ReplacedSegments]] = []
        self._cleaner_checkpoint = read_cleaner_checkpoint(self.directory)
        self._last_flush_ms = now
        self._flusher = RollFlusher(self.name, self._flush_to)
        self._stats = {
            "appends": 0, "appended_bytes": 0, "appended_records": 0, "rolls": 0, "flushes": 0,
            "reads": 0, "read_bytes": 0, "segments_deleted": 0, "cleanings": 0, "segments_cleaned": 0,
        }

    # ------------------------------------------------------------- properties
    def _path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    @property
    def config(self) -> TopicConfig:
        return self._config

    def update_config(self, config: TopicConfig) -> None:
        """Apply new topic settings; index settings take effect from the next segment."""
        with self._lock:
            self._config = config

    @property
    def log_start_offset(self) -> int:
        return self._log_start

    @property
    def log_end_offset(self) -> int:
        """The next offset to be assigned."""
        return self._log_end

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(s.size for s in self._segments)

    @property
    def segment_count(self) -> int:
        return len(self._segments)

    @property
    def segments(self) -> list[SegmentInfo]:
        with self._lock:
            return [SegmentInfo(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.path) for s in self._segments]

    @property
    def closed(self) -> bool:
        return self._closed

    def stats(self) -> dict[str, int | float | str]:
        with self._lock:
            out: dict[str, int | float | str] = dict(self._stats)
            out.update(
                name=self.name,
                log_start_offset=self._log_start,
                log_end_offset=self._log_end,
                recovery_point=self._recovery_point,
                offline=self._offline or "",
                size_bytes=sum(s.size for s in self._segments),
                segment_count=len(self._segments),
                pending_deletes=len(self._pending_deletes),
                verified_bytes=sum(s.verified.covered() for s in self._segments),
                corrupt_batches=sum(len(s.corrupt) for s in self._segments),
                recovery_seconds=self.recovery_report.duration_s,
                cleaner_checkpoint=self._cleaner_checkpoint.clean_offset,
                producers=len(self.producer_state),
                producer_snapshot_offset=-1 if self.producer_load.snapshot_offset is None else self.producer_load.snapshot_offset,
                producer_batches_replayed=self.producer_load.batches_replayed,
                producer_replay_bytes=self._replay_bytes,
            )
            return out

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"partition log {self.name} is closed")
        if self._offline is not None:
            raise KafkaStorageError(f"partition log {self.name} is offline after a disk error ({self._offline}); "
                                    "reopen it (restart the partition) to recover")

    @property
    def offline(self) -> str | None:
        """Why the log went offline after a disk error, or None while it serves."""
        return self._offline

    def _go_offline(self, what: str, exc: BaseException) -> KafkaStorageError:
        """Stop serving: the disk lost or may have lost writes the page cache still shows."""
        with self._lock:
            first = self._offline is None
            if first:
                self._offline = f"{what}: {exc}"
        if first:
            log.error("partition log %s is offline: %s failed: %s (recovery point stays at %d)",
                      self.name, what, exc, self._recovery_point)
        return KafkaStorageError(f"partition log {self.name}: {what} failed: {exc}; the log is offline")

    def _write_failed(self, seg: Segment, exc: OSError) -> KafkaStorageError:
        """A write to ``seg`` failed: a full disk fails just this append, anything else the log."""
        if is_no_space(exc) and not seg.torn:
            if not self._no_space_logged:
                self._no_space_logged = True
                log.error("partition log %s: disk full writing %s (%d bytes free): appends fail with "
                          "KAFKA_STORAGE_ERROR until space returns", self.name, seg.path, free_bytes(self.directory))
            return KafkaStorageError(f"partition log {self.name}: no space left on the disk holding {seg.path}")
        return self._go_offline(f"write to {seg.path}", exc)

    # ------------------------------------------------------------------ append
    def append(self, data: bytes | bytearray | memoryview, *, leader_epoch: int | None = None) -> AppendInfo:
        """Validate and append one or more concatenated v2 batches, all or nothing.

        Every batch is checked (framing, magic, CRC32C, counts, size) before a
        single byte is written; offsets are assigned by patching base offsets,
        so record bytes are never re-encoded. One ``pwrite`` per call.
        Every batch is stamped with ``leader_epoch`` (None: the log's latest
        epoch, -1 if it has none), as a Kafka leader overwrites whatever the
        client sent; an epoch older than the latest is refused (a fenced leader).
        """
        buf = bytearray(data)  # our own copy: offsets get patched
        total = len(buf)
        config = self._config
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

        rolled_at = None
        with self._lock:
            self._check_open()
            if self._closing:
                raise LogClosedError(f"partition log {self.name} is closing")
            now = self._clock()
            first_offset = self._log_end
            last_offset = first_offset + records - 1
            seg = self._segments[-1]
            lat = config.log_append_time
            epoch = self.leader_epochs.latest_epoch if leader_epoch is None else leader_epoch
            if epoch < self.leader_epochs.latest_epoch:
                raise FencedLeaderEpochError(f"partition log {self.name}: append in leader epoch {epoch}, but "
                                             f"epoch {self.leader_epochs.latest_epoch} has begun")
            try:
                if epoch >= 0:
                    self.leader_epochs.assign(epoch, first_offset)  # fsynced before any batch of it is written
                if self._should_roll(seg, total, now, last_offset):
                    seg = self._roll(now)
                    rolled_at = seg.base_offset
                offset = first_offset
                batches = []
                for bpos, h in headers:
                    set_base_offset(buf, offset, bpos)
                    set_partition_leader_epoch(buf, epoch, bpos)
                    if lat:
                        set_log_append_time(buf, now, bpos)
                        max_ts = now
                    else:
                        max_ts = h.max_timestamp
                    batches.append((bpos, offset, offset + h.last_offset_delta, max_ts, h.size))
                    offset += h.last_offset_delta + 1
                seg.append(buf, batches, now)
            except OSError as e:
                if rolled_at is not None:
                    self._flusher.request(rolled_at)
                raise self._write_failed(seg, e) from e
            if self._no_space_logged:
                self._no_space_logged = False
                log.warning("partition log %s: appends succeed again (%d bytes free)", self.name,
                            free_bytes(self.directory))
            self._log_end = offset
            for (_, h), (_, base, _, _, _) in zip(headers, batches):
                if h.producer_id >= 0:
                    self.producer_state.record(h, base, now if lat else -1, now)
            st = self._stats
            st["appends"] += 1
            st["appended_bytes"] += total
            st["appended_records"] += records
            log_start = self._log_start
            need_flush = (
                self._log_end - self._recovery_point >= config.flush_messages
                or now - self._last_flush_ms >= config.flush_ms
            )
        if rolled_at is not None:
            self._flusher.request(rolled_at)
        info = AppendInfo(first_offset, offset - 1, now if lat else -1, log_start, records, total)
        if need_flush:
            try:
                self.flush()
            except KafkaStorageError as e:
                raise KafkaStorageError(str(e), appended=info) from e  # the data is in the log: say so
            except LogClosedError:
                pass  # close() flushes everything itself
        return info

    def _should_roll(self, seg: Segment, size: int, now: int, last_offset: int) -> bool:
        if seg.size == 0:
            return False  # an empty segment takes anything, even an oversize append
        config = self._config
        return (
            seg.size + size > config.segment_bytes
            or (seg.rolling_base_ms is not None and now - seg.rolling_base_ms >= config.segment_ms)
            or seg.index.is_full
            or seg.timeindex.is_full
            or last_offset - seg.base_offset > MAX_RELATIVE_OFFSET
        )

    def _roll(self, now: int) -> Segment:
        old = self._segments[-1]
        old.seal()
        new = Segment.create(
            self.directory,
            self._log_end,
            index_bytes=self._config.segment_index_bytes,
            index_interval=self._config.index_interval_bytes,
        )
        self._dir_dirty = True  # the new names reach the disk with the next flush, before the recovery point moves
        self._segments.append(new)
        self._bases.append(new.base_offset)
        # Producer state as of the new segment's start: a restart replays only what follows.
        # It is derived data: if it cannot be written, opening falls back to an older one.
        try:
            write_snapshot(self.directory, new.base_offset, self.producer_state, durable=False)
        except OSError as e:
            log.warning("%s: producer snapshot at offset %d not written: %s", self.name, new.base_offset, e)
        self._stats["rolls"] += 1
        log.debug("%s rolled a new segment at offset %d", self.name, new.base_offset)
        return new

    def roll(self) -> None:
        """Start a new segment now (if the active one holds data)."""
        with self._lock:
            self._check_open()
            if self._segments[-1].size == 0:
                return
            new = self._roll(self._clock())
        self._flusher.request(new.base_offset)

    # ------------------------------------------------------------ leader epochs
    @property
    def leader_epoch(self) -> int:
        """The latest leader epoch (the one appends are stamped with), -1 before any."""
        return self.leader_epochs.latest_epoch

    def start_leader_epoch(self, epoch: int) -> None:
        """Become leader in ``epoch``: it starts at the log end (Kafka's ``maybeAssignEpochStartOffset``).

        Idempotent for the current epoch; an older one raises FencedLeaderEpochError.
        """
        with self._lock:
            self._check_open()
            if epoch < self.leader_epochs.latest_epoch:
                raise FencedLeaderEpochError(f"partition log {self.name}: leader epoch {epoch} is older than "
                                             f"{self.leader_epochs.latest_epoch}")
            self.leader_epochs.assign(epoch, self._log_end)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch; (-1, -1) when undefined (see .leader_epochs)."""
        with self._lock:
            self._check_open()
            return self.leader_epochs.end_offset_for(epoch, self._log_end)

    def epoch_for_offset(self, offset: int) -> int:
        """The leader epoch the record at ``offset`` was written in, -1 if unknown."""
        with self._lock:
            return self.leader_epochs.epoch_for_offset(offset)

    def _epoch_headers(self, offset: int):
        """(partition leader epoch, base offset) of each batch from ``offset`` on, from headers only."""
        for h, _ in self._replay_headers(offset):
            yield h.partition_leader_epoch, h.base_offset

    # ------------------------------------------------------------------- flush
    def flush(self) -> None:
        """fsync everything appended so far and move the recovery point to the log end."""
        with self._lock:
            self._check_open()
            upto = self._log_end
        self._flush_to(upto)

    def flush_to(self, upto: int) -> int:
        """Make every offset below ``upto`` durable (group commit); returns the recovery point.

        Returns at once if a flush already covered ``upto``. Otherwise it syncs
        up to the log end as it is when this call's turn comes: callers that
        queued behind a running fdatasync share the next one instead of each
        paying for their own. Raises KafkaStorageError if the disk fails.
        """
        if self._recovery_point >= upto:
            return self._recovery_point
        with self._flush_lock:
            if self._recovery_point >= upto:  # the sync we waited for covered us
                return self._recovery_point
            with self._lock:
                self._check_open()
                end = self._log_end
            self._flush_to(end)
        if self._recovery_point < upto:  # closed meanwhile with everything flushed, or truncated
            with self._lock:
                self._check_open()
        return self._recovery_point

    def _flush_to(self, upto: int) -> None:
        with self._flush_lock:
            with self._lock:
                if self._closed:
                    return
                if self._offline is not None:
                    self._check_open()
                started = self._clock()
                jobs: list[tuple[Segment, int, bool]] = []
                active = self._segments[-1]
                for seg in self._segments:
                    if seg.base_offset >= upto and seg is not active:
                        break
                    if seg is active:
                        if upto > self._recovery_point:
                            jobs.append((seg, seg.dup_fd(), False))
                    elif not seg.durable:
                        jobs.append((seg, seg.dup_fd(), True))
                if not jobs and upto <= self._recovery_point:
                    return
                sync_dir, self._dir_dirty = self._dir_dirty, False
            closed = 0
            try:
                for seg, fd, sealed in jobs:
                    try:
                        fdatasync(fd, seg.path)
                    finally:
                        closed += 1
                        os.close(fd)
                    if sealed:
                        try:
                            seg.sync_indexes()
                        except FileNotFoundError:
                            pass  # deleted by retention meanwhile
                if sync_dir:
                    fsync_dir(self.directory)
            except BaseException as e:
                for _, fd, _ in jobs[closed:]:
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                if isinstance(e, OSError):
                    with self._lock:
                        if self._closed:
                            raise LogClosedError(f"partition log {self.name} was closed during a flush") from e
                    # Linux may already have dropped the pages that failed to write and will
                    # report the error only once: no later sync may vouch for them.
                    raise self._go_offline("fsync", e) from e
                raise
            with self._lock:
                for seg, _, sealed in jobs:
                    if sealed:
                        seg.durable = True
                self._last_flush_ms = started
                self._stats["flushes"] += 1
                advanced = upto > self._recovery_point
                if advanced:
                    self._recovery_point = upto
                closed = self._closed
            if advanced and not closed:
                try:
                    write_checkpoint(self._path(RECOVERY_POINT_FILE), upto, durable=False)
                except OSError as e:  # a stale checkpoint only means a longer rescan after a crash
                    log.warning("%s: could not record the recovery point %d: %s", self.name, upto, e)

    # -------------------------------------------------------------------- reads
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
        with self._lock:
            return [FileSlice(seg.path, pos, length) for seg, pos, length in self._locate(offset, max_bytes, max_offset, min_one)]

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True) -> bytes:
        """Like :meth:`locate` but returns the concatenated (CRC-checked) batch bytes."""
        with self._lock:
            parts = [seg.pread(pos, length) for seg, pos, length in self._locate(offset, max_bytes, max_offset, min_one)]
            data = parts[0] if len(parts) == 1 else b"".join(parts)
            self._stats["reads"] += 1
            self._stats["read_bytes"] += len(data)
            return data

    def read_records(self, offset: int, max_bytes: int = 1 << 20, *, max_offset: int | None = None) -> list:
        """Decoded records from ``offset`` on (convenience; the broker serves bytes)."""
        from .records import decode_records

        data = self.read(offset, max_bytes, max_offset=max_offset)
        records = decode_records(data)
        if records and records[0].offset < offset:
            records = [r for r in records if r.offset >= offset]
        return records

    def _out_of_range(self, offset: int) -> OffsetOutOfRangeError:
        return OffsetOutOfRangeError(
            f"offset {offset} is out of range for partition {self.name}: "
            f"valid offsets are {self._log_start} (log start) to {self._log_end} (log end)"
        )

    def _locate(self, offset: int, max_bytes: int, max_offset: int | None, min_one: bool) -> list[tuple[Segment, int, int]]:
        self._check_open()
        if not isinstance(offset, int) or offset < self._log_start or offset > self._log_end:
            raise self._out_of_range(offset)
        limit = self._log_end if max_offset is None else min(max_offset, self._log_end)
        return batch_ranges(self._segments, self._bases, offset, max_bytes, limit, min_one)

    # --------------------------------------------------------------- timestamps
    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with timestamp >= ``timestamp`` (ListOffsets).

        The time index narrows the search to one batch range; only the one
        candidate batch is decoded. Special values: -1 gives (log end, -1),
        -2 gives (log start, -1), -3 is :meth:`max_timestamp_offset`.
        """
        with self._lock:
            self._check_open()
            if timestamp == LATEST_TIMESTAMP:
                return self._log_end, -1
            if timestamp == EARLIEST_TIMESTAMP:
                return self._log_start, -1
            if timestamp == MAX_TIMESTAMP:
                return self.max_timestamp_offset()
            if timestamp < 0:
                raise InvalidTimestampError(f"cannot look up negative timestamp {timestamp}")
            return first_at_or_after(self._segments, self._log_start, timestamp)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record holding the largest timestamp (ListOffsets -3)."""
        with self._lock:
            self._check_open()
            return first_with_max_timestamp(self._segments, self._log_start)

    # ------------------------------------------------------------ producer state
    def expire_producers(self, now_ms: int | None = None) -> int:
        """Forget producers idle for ``producer.id.expiration.ms``; returns how many."""
        with self._lock:
            now = self._clock() if now_ms is None else now_ms
            return len(self.producer_state.expire(now, self._producer_id_expiration_ms))

    def _replay_headers(self, offset: int):
        """``(header, from a cleaned segment)`` of each batch from ``offset`` on, reading headers only."""
        for seg in list(self._segments):
            if seg.next_offset <= offset or seg.size == 0:
                continue
            reader = FileBatches(seg.fd, seg.size)
            try:
                position, base = seg.find(max(offset, seg.base_offset))
                for ref, kind, _ in seg.walk(position, expected=base, reader=reader):
                    if kind is not None or ref.base_offset < offset:
                        continue  # an unreadable batch has no header to trust
                    yield named(ref.fields), seg.compacted
            except CorruptRecordError as e:
                log.warning("%s: producer state replay stopped in %s: %s", self.name, seg.path, e)
            finally:
                self._replay_bytes += reader.bytes_read

    # ---------------------------------------------------------------- retention
    def apply_retention(self, now_ms: int | None = None) -> int:
        """Delete whole closed segments past retention.ms / retention.bytes; returns how many."""
        with self._lock:
            self._check_open()
            now = self._clock() if now_ms is None else now_ms
            facts = [SegmentFacts(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.path) for s in self._segments]
            count = deletable_prefix(facts, self._config, now, self._log_start)
            if count:
                self._drop_prefix(count, now)
            due = self._take_due(now)
        self._delete_files(due)
        return count

    def delete_records(self, before_offset: int, *, high_watermark: int | None = None) -> int:
        """Kafka DeleteRecords: move the log start offset up to ``before_offset``; returns the new low watermark.

        ``-1`` means the high watermark (the log end unless given). The new
        start is persisted before any file goes, so a crash cannot resurrect
        deleted records.
        """
        due: list = []
        with self._lock:
            self._check_open()
            hw = self._log_end if high_watermark is None else min(high_watermark, self._log_end)
            target = hw if before_offset == -1 else before_offset
            if not isinstance(target, int) or target < 0 or target > hw:
                raise OffsetOutOfRangeError(
                    f"cannot delete records before offset {before_offset} in partition {self.name}: "
                    f"it must be -1 or between 0 and the high watermark {hw} (log start {self._log_start})"
                )
            if target > self._log_start:
                self._log_start = target
                write_checkpoint(self._path(LOG_START_FILE), target, durable=True)
                self.leader_epochs.truncate_from_start(target)
                delete_snapshots(self.directory, below=target, keep_newest=True)
                now = self._clock()
                count = 0
                while count < len(self._segments) - 1 and self._segments[count + 1].base_offset <= target:
                    count += 1
                if count:
                    self._drop_prefix(count, now)
                due = self._take_due(now)
            low = self._log_start
        self._delete_files(due)
        return low

    def _drop_prefix(self, count: int, now: int) -> None:
        dropped = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        new_start = max(self._log_start, self._segments[0].base_offset)
        if new_start != self._log_start or not os.path.exists(self._path(LOG_START_FILE)):
            self._log_start = new_start
            write_checkpoint(self._path(LOG_START_FILE), new_start, durable=True)
            self.leader_epochs.truncate_from_start(new_start)
        due = now + self._config.file_delete_delay_ms
        # Files stay a while (file.delete.delay.ms) so in-flight sendfile() of
        # slices handed out earlier still find them; a restart removes them anyway.
        self._pending_deletes.extend((due, seg) for seg in dropped)
        self._stats["segments_deleted"] += count
        delete_snapshots(self.directory, below=self._log_start, keep_newest=True)
        log.info("%s deleted %d segments; log start offset now %d", self.name, count, self._log_start)

    # --------------------------------------------------------------- compaction
    @property
    def cleaner_checkpoint(self) -> CleanerCheckpoint:
        return self._cleaner_checkpoint

    def cleaning_view(self) -> CleanView:
        """A snapshot of the segments for a cleaner, which may run in another process."""
        with self._lock:
            self._check_open()
            active = self._segments[-1]
            segments = tuple(
                SegmentView(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.path, s.generation,
                                        s.durable and s is not active)
                for s in self._segments
            )
            return CleanView(self.directory, self.name, segments, self._log_start, self._log_end,
                                         self._recovery_point, self._config, self._cleaner_checkpoint, self._clock())

    def dirty_stats(self) -> DirtyStats:
        view = self.cleaning_view()
        return dirty_stats(view, view.now_ms)

    def install_cleaned(self, result: "_compaction.CleanResult") -> SwapReport:
        """Swap a cleaning pass's segments in; the short critical section of compaction.

        Groups go in offset order; each replaces its old segments only if they
        are still exactly what the cleaner read (retention, DeleteRecords or
        another swap may have changed the log meanwhile), otherwise it and the
        rest are discarded. One fsynced manifest commits all of them (see
        :mod:`.swap`), then renames and the in-memory switch follow. Old files
        stay for ``file.delete.delay.ms`` (readers of earlier slices keep
        working: new files never reuse their names). The cleaner checkpoint
        moves only once every group is in.
        """
        if os.path.abspath(result.directory) != self.directory:
            raise ValueError(f"cleaning result for {result.directory} handed to the log in {self.directory}")
        with self._lock:
            self._check_open()
            now = self._clock()
            groups = list(result.groups)
            prepared = []
            for gi, group in enumerate(groups):
                new = prepare_cleaned(self.name, self.directory, self._segments, group, self._config)
                if new is None:
                    for rest in groups[gi:]:
                        discard_pending(self.directory, rest.stem)
                    log.warning("%s: the log changed during cleaning; discarded %d cleaned segments",
                                self.name, len(groups) - gi)
                    break
                prepared.append(new)
            installed, replaced = len(prepared), sum(len(old) for _, _, old in prepared)
            if prepared:
                _compaction.step("before-manifest")
                manifest = write_manifest(self.directory, [(seg.stem, [o.stem for o in old]) for seg, _, old in prepared])
                _compaction.step("manifest-written")
                for seg, _, old in prepared:
                    seg.finalize()
                    _compaction.step("renamed")
                    seg.durable = True
                    first = self._segments.index(old[0])
                    self._segments[first:first + len(old)] = [seg]
                self._bases = [s.base_offset for s in self._segments]
                fsync_dir(self.directory)
                replaced_segments = ReplacedSegments(manifest, [o for _, _, old in prepared for o in old])
                self._pending_deletes.append((now + self._config.file_delete_delay_ms, replaced_segments))
            if installed == len(groups):
                checkpoint = result.checkpoint
                if checkpoint.clean_offset > self._log_end:  # the log was cut back meanwhile
                    checkpoint = CleanerCheckpoint(self._log_start)
                write_cleaner_checkpoint(self.directory, checkpoint)
                self._cleaner_checkpoint = checkpoint
                _compaction.step("checkpoint-written")
            self._stats["cleanings"] += 1
            self._stats["segments_cleaned"] += replaced
            due = self._take_due(now)
            report = SwapReport(installed, len(groups) - installed, replaced, self._cleaner_checkpoint.clean_offset)
        self._delete_files(due)
        return report


    def discard_cleaned(self, result: "_compaction.CleanResult") -> None:
        """Throw away a pass that will not be installed."""
        _compaction.discard(result)

    def _purge(self, now: int | None) -> None:
        self._delete_files(self._take_due(now))

    def _delete_files(self, due: list) -> None:
        """Delete segments whose delay ran out, then fsync the folder so they stay gone."""
        if not due:
            return
        for item in due:
            item.delete_files()
        try:
            fsync_dir(self.directory)
        except FileNotFoundError:
            pass  # the partition was deleted meanwhile
        except OSError as e:
            if not self._closed:
                raise self._go_offline("fsync of the folder after deleting segments", e) from e

    def _take_due(self, now: int | None) -> list:
        """Pending deletions that are due (all with None), removed from the list.

        Callers delete them after releasing the lock: unlinking a large file
        takes milliseconds that appends and reads need not wait for.
        """
        keep, due = [], []
        for when, item in self._pending_deletes:
            (due if now is None or when <= now else keep).append((when, item))
        self._pending_deletes = keep
        return [item for _, item in due]

    # ---------------------------------------------------------- verification
    def verify(self) -> list[CorruptBatch]:
        """CRC-check every batch of every segment; report, never truncate.

        Bad batches found are remembered so reads of them raise
        CorruptRecordError naming the file and position.
        """
        found: list[CorruptBatch] = []
        with self._lock:
            segments = list(self._segments)
        for i, seg in enumerate(segments):
            with self._lock:  # one segment at a time, so appends are not blocked for long
                self._check_open()
                if seg not in self._segments:
                    continue
                outcome = scan_segment(seg, check_crc=True, is_last=False)
                for c in outcome.corrupt:
                    seg.corrupt.setdefault(c.position, c)
                for s, e in outcome.verified:
                    seg.verified.add(s, e)
                for p, (rp, ro) in outcome.holes.items():
                    if ro >= 0:
                        seg.holes.setdefault(p, (rp, ro))
                found.extend(outcome.corrupt)
        for c in found:
            log.error("verification: corrupt batch in %s at position %d (offset %d): %s", c.path, c.position, c.offset, c.reason)
        return found

    # ---------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Flush everything, persist indexes and checkpoints, then mark a clean shutdown."""
        with self._lock:
            if self._closed:
                return
            self._closing = True  # appends racing with close() fail instead of missing the final flush
        self._flusher.stop()
        try:
            self.flush()
        except KafkaStorageError:
            pass  # offline now: closed below without the clean-shutdown marker
        with self._flush_lock, self._lock:
            if self._closed:
                return
            if self._offline is not None:
                self._close_files()  # no marker: the next open recovers from the last recovery point
                return
            try:
                active = self._segments[-1]
                active.seal()
                for seg in self._segments:
                    if not seg.durable:
                        seg.write_indexes()
                        seg.sync_indexes()
                write_checkpoint(self._path(RECOVERY_POINT_FILE), self._log_end, durable=True)
                write_checkpoint(self._path(LOG_START_FILE), self._log_start, durable=True)
                write_snapshot(self.directory, self._log_end, self.producer_state, durable=True)
                self._purge(None)
            except (OSError, KafkaStorageError) as e:
                err = e if isinstance(e, KafkaStorageError) else self._go_offline("close", e)
                self._close_files()
                raise err from e
            self._close_files()
            marker = self._path(CLEAN_SHUTDOWN_FILE)
            with open(marker, "w") as f:
                f.write(f"{self._log_end}\n")
                f.flush()
                os.fsync(f.fileno())
            fsync_dir(self.directory)

    def _close_files(self) -> None:
        for seg in self._segments:
            seg.close()
        for _, item in self._pending_deletes:
            item.close()
        self._closed = True

    def delete(self) -> None:
        """Remove the partition folder and everything in it."""
        self._flusher.stop()
        with self._flush_lock, self._lock:
            self._closed = True
            for seg in self._segments:
                seg.close()
            for _, seg in self._pending_deletes:
                seg.close()
            self._pending_deletes = []
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "PartitionLog":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PartitionLog({self.directory!r}, offsets [{self._log_start}, {self._log_end}), {len(self._segments)} segments)"


__all__ = ["PartitionLog", "AppendInfo", "SegmentInfo", "FileSlice", "CorruptBatch", "RecoveryReport"]
