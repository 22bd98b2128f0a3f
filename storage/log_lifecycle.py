"""Opening, closing and deleting a partition log.

A partition folder holds segment files (see :mod:`.segment`) plus three small
files: the recovery point (offset fsynced to), the log start offset (moved by
retention and DeleteRecords) and a clean-shutdown marker written by
:func:`close`; and idempotent-producer snapshots written at each roll and at
close (see :mod:`.producer_snapshot`); and the leader-epoch checkpoint (see
:mod:`.leader_epochs`), checked against the recovered log on open. Opening trusts everything below the
recovery point (everything after a clean shutdown) and rescans only the rest
(see :mod:`.recovery`), then rebuilds producer state by reading only the batch
headers after the newest snapshot (and the markers among them: open
transactions and the ``.txnindex`` files recovery left stale, :mod:`.log_txn`). The marker is removed durably on open, so
any later stop without :func:`close` is detected as a crash.
"""
from __future__ import annotations

import logging
import os
import shutil
from typing import Callable, Iterator

from . import pending_deletes
from .batch_header import BatchHeader, named
from .cleaner_checkpoint import read_checkpoint as read_cleaner_checkpoint
from .config import TopicConfig
from .errors import CorruptRecordError, KafkaStorageError
from .file_batches import FileBatches
from .file_modes import make_private_dirs, private_opener
from .leader_epochs import load_leader_epochs
from .log_flush import flush, sync_to
from .log_state import LogState
from .log_txn import rebuild_hooks, stale_indexes_rebuilt
from .producer_snapshot import load_producer_state, write_snapshot
from .recovery import (
    CLEAN_SHUTDOWN_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    load_segments,
    read_checkpoint,
    write_checkpoint,
)
from .roll_flusher import RollFlusher
from .sync import fsync_dir

log = logging.getLogger(__name__)


def open_log(directory: str, config: TopicConfig, clock: Callable[[], int], full_verify: bool,
             producer_id_expiration_ms: int) -> LogState:
    """Load (recovering if needed) the log in ``directory``, creating the folder if missing."""
    st = LogState(os.path.abspath(directory), config, clock)
    if not os.path.isdir(st.directory):
        make_private_dirs(st.directory)
        fsync_dir(os.path.dirname(st.directory))  # the partition folder itself survives a power loss

    marker = st.path(CLEAN_SHUTDOWN_FILE)
    clean = os.path.exists(marker)
    st.recovery_point = read_checkpoint(st.path(RECOVERY_POINT_FILE)) or 0
    log_start = read_checkpoint(st.path(LOG_START_FILE)) or 0
    now = clock()
    segments, report = load_segments(
        st.directory,
        index_bytes=config.segment_index_bytes,
        index_interval=config.index_interval_bytes,
        clean=clean,
        recovery_point=st.recovery_point,
        log_start=log_start,
        full=full_verify,
        now_ms=now,
    )
    st.segments = segments
    st.bases = [s.base_offset for s in segments]
    st.log_end = segments[-1].next_offset
    st.log_start = min(max(log_start, segments[0].base_offset), st.log_end)
    if st.recovery_point > st.log_end:
        st.recovery_point = st.log_end
        write_checkpoint(st.path(RECOVERY_POINT_FILE), st.log_end, durable=True)
    if clean:
        st.recovery_point = st.log_end
    st.recovery_report = report
    if report.truncated_bytes or report.corrupt or report.segments_scanned:
        log.log(
            logging.WARNING if report.truncated_bytes or report.corrupt else logging.INFO,
            "%s recovered in %.3f s: scanned %d bytes in %d segments, truncated %d bytes, %d corrupt batches kept",
            st.name, report.duration_s, report.bytes_scanned, report.segments_scanned,
            report.truncated_bytes, len(report.corrupt),
        )
    st.producer_id_expiration_ms = producer_id_expiration_ms
    # The same replay ends the transactions whose markers follow the snapshot and refills the
    # transaction indexes recovery found stale (see .log_txn).
    st.producer_state, st.producer_load = load_producer_state(
        st.directory, log_end=st.log_end, fallback_from=st.segments[-1].base_offset,
        replay=lambda offset: replay_headers(st, offset), now_ms=now, expiration_ms=producer_id_expiration_ms,
        log_append_time=config.log_append_time, **rebuild_hooks(st),
    )
    stale_indexes_rebuilt(st)
    # A checkpoint ahead of the recovered log (lost unsynced records) is cut back; a missing one is rebuilt.
    st.leader_epochs = load_leader_epochs(
        st.directory, log_start=st.log_start, log_end=st.log_end,
        headers_from=lambda offset: ((h.partition_leader_epoch, h.base_offset) for h, _ in replay_headers(st, offset)))
    if clean:
        # From now on a crash must be detected: the marker goes, durably.
        os.remove(marker)
        fsync_dir(st.directory)
    st.pending_deletes = []
    st.cleaner_checkpoint = read_cleaner_checkpoint(st.directory)
    st.last_flush_ms = now
    st.flusher = RollFlusher(st.name, lambda upto: sync_to(st, upto))
    return st


def replay_headers(st: LogState, offset: int) -> Iterator[tuple[BatchHeader, bool]]:
    """``(header, from a cleaned segment)`` of each batch from ``offset`` on, reading headers only."""
    for seg in list(st.segments):
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
            log.warning("%s: producer state replay stopped in %s: %s", st.name, seg.path, e)
        finally:
            st.replay_bytes += reader.bytes_read


def close(st: LogState) -> None:
    """Flush everything, persist indexes and checkpoints, then mark a clean shutdown."""
    with st.lock:
        if st.closed:
            return
        st.closing = True  # appends racing with close() fail instead of missing the final flush
    st.flusher.stop()
    try:
        flush(st)
    except KafkaStorageError:
        pass  # offline now: closed below without the clean-shutdown marker
    with st.flush_lock, st.lock:
        if st.closed:
            return
        if st.offline is not None:
            _close_files(st)  # no marker: the next open recovers from the last recovery point
            return
        try:
            active = st.segments[-1]
            active.seal()
            for seg in st.segments:
                if not seg.durable:
                    seg.write_indexes()
                    seg.sync_indexes()
            write_checkpoint(st.path(RECOVERY_POINT_FILE), st.log_end, durable=True)
            write_checkpoint(st.path(LOG_START_FILE), st.log_start, durable=True)
            write_snapshot(st.directory, st.log_end, st.producer_state, durable=True)
            pending_deletes.purge(st, None)
        except (OSError, KafkaStorageError) as e:
            err = e if isinstance(e, KafkaStorageError) else st.go_offline("close", e)
            _close_files(st)
            raise err from e
        _close_files(st)
        marker = st.path(CLEAN_SHUTDOWN_FILE)
        with open(marker, "w", opener=private_opener) as f:
            f.write(f"{st.log_end}\n")
            f.flush()
            os.fsync(f.fileno())
        fsync_dir(st.directory)


def _close_files(st: LogState) -> None:
    for seg in st.segments:
        seg.close()
    for _, item in st.pending_deletes:
        item.close()
    st.closed = True


def delete(st: LogState) -> None:
    """Remove the partition folder and everything in it."""
    st.flusher.stop()
    with st.flush_lock, st.lock:
        st.closed = True
        for seg in st.segments:
            seg.close()
        for _, item in st.pending_deletes:
            item.close()
        st.pending_deletes = []
        shutil.rmtree(st.directory, ignore_errors=True)
