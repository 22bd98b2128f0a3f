"""Making a partition log durable up to a point: the group commit behind ``acks=all``.

One ``fdatasync`` covers everything appended before it started, and callers
arriving while it runs are served by the next one. The recovery point moves
only after a sync succeeded (the folder included when segment files were
created). An fsync error takes the log offline (every call then raises
KafkaStorageError) because the kernel may already have dropped the unwritten
pages and reports that only once: only reopening, which rescans from the last
recovery point, brings it back. Syncs run on duplicated descriptors outside
``st.lock`` so appends and reads go on meanwhile.
"""
from __future__ import annotations

import logging
import os

from .errors import LogClosedError
from .log_state import LogState
from .recovery import RECOVERY_POINT_FILE, write_checkpoint
from .segment import Segment
from .sync import fdatasync, fsync_dir

log = logging.getLogger(__name__)


def flush(st: LogState) -> None:
    """fsync everything appended so far and move the recovery point to the log end."""
    with st.lock:
        st.check_open()
        upto = st.log_end
    sync_to(st, upto)


def flush_to(st: LogState, upto: int) -> int:
    """Make every offset below ``upto`` durable (group commit); returns the recovery point.

    Returns at once if a flush already covered ``upto``. Otherwise it syncs up
    to the log end as it is when this call's turn comes: callers that queued
    behind a running fdatasync share the next one instead of each paying for
    their own.
    """
    if st.recovery_point >= upto:
        return st.recovery_point
    with st.flush_lock:
        if st.recovery_point >= upto:  # the sync we waited for covered us
            return st.recovery_point
        with st.lock:
            st.check_open()
            end = st.log_end
        sync_to(st, end)
    if st.recovery_point < upto:  # closed meanwhile with everything flushed, or truncated
        with st.lock:
            st.check_open()
    return st.recovery_point


def sync_to(st: LogState, upto: int) -> None:
    """fdatasync the segments holding offsets below ``upto`` (and rolled ones not yet durable)."""
    with st.flush_lock:
        with st.lock:
            if st.closed:
                return
            if st.offline is not None:
                st.check_open()
            started = st.clock()
            jobs: list[tuple[Segment, int, bool]] = []
            active = st.segments[-1]
            for seg in st.segments:
                if seg.base_offset >= upto and seg is not active:
                    break
                if seg is active:
                    if upto > max(st.recovery_point, seg.base_offset):  # it holds offsets below upto
                        jobs.append((seg, seg.dup_fd(), False))
                elif not seg.durable:
                    jobs.append((seg, seg.dup_fd(), True))
            if not jobs and upto <= st.recovery_point:
                return
            sync_dir, st.dir_dirty = st.dir_dirty, False
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
                fsync_dir(st.directory)
        except BaseException as e:
            for _, fd, _ in jobs[closed:]:
                try:
                    os.close(fd)
                except OSError:
                    pass
            if isinstance(e, OSError):
                with st.lock:
                    if st.closed:
                        raise LogClosedError(f"partition log {st.name} was closed during a flush") from e
                # Linux may already have dropped the pages that failed to write and will
                # report the error only once: no later sync may vouch for them.
                raise st.go_offline("fsync", e) from e
            raise
        with st.lock:
            for seg, _, sealed in jobs:
                if sealed:
                    seg.durable = True
            st.last_flush_ms = started
            st.stats["flushes"] += 1
            advanced = upto > st.recovery_point
            if advanced:
                st.recovery_point = upto
            closed = st.closed
        if advanced and not closed:
            try:
                write_checkpoint(st.path(RECOVERY_POINT_FILE), upto, durable=False)
            except OSError as e:  # a stale checkpoint only means a longer rescan after a crash
                log.warning("%s: could not record the recovery point %d: %s", st.name, upto, e)
