"""Dropping a partition log's oldest segments: retention.ms / retention.bytes, and Kafka DeleteRecords.

Which segments may go is the pure policy of :mod:`.retention`; this module
applies it to a live log. The log always stays one contiguous range of
offsets: only a prefix of the closed segments is dropped, never the active
one. A new log start offset is persisted (fsynced) before any file goes, so a
crash cannot resurrect deleted records; the files themselves go later,
through :mod:`.pending_deletes`.
"""
from __future__ import annotations

import logging
import os

from . import pending_deletes
from .errors import OffsetOutOfRangeError
from .log_state import LogState
from .producer_snapshot import delete_snapshots
from .recovery import LOG_START_FILE, write_checkpoint
from .retention import SegmentFacts, deletable_prefix

log = logging.getLogger(__name__)


def apply_retention(st: LogState, now_ms: int | None) -> int:
    """Delete whole closed segments past retention.ms / retention.bytes; returns how many."""
    with st.lock:
        st.check_open()
        now = st.clock() if now_ms is None else now_ms
        facts = [SegmentFacts(s.base_offset, s.next_offset, s.size, s.max_timestamp, s.path) for s in st.segments]
        count = deletable_prefix(facts, st.config, now, st.log_start)
        if count:
            drop_prefix(st, count, now)
        due = pending_deletes.take_due(st, now)
    pending_deletes.delete_files(st, due)
    return count


def delete_records(st: LogState, before_offset: int, high_watermark: int | None) -> int:
    """Kafka DeleteRecords: move the log start offset up to ``before_offset``; returns the new low watermark.

    ``-1`` means the high watermark (the log end unless given).
    """
    due: list = []
    with st.lock:
        st.check_open()
        hw = st.log_end if high_watermark is None else min(high_watermark, st.log_end)
        target = hw if before_offset == -1 else before_offset
        if not isinstance(target, int) or target < 0 or target > hw:
            raise OffsetOutOfRangeError(
                f"cannot delete records before offset {before_offset} in partition {st.name}: "
                f"it must be -1 or between 0 and the high watermark {hw} (log start {st.log_start})"
            )
        if target > st.log_start:
            st.log_start = target
            write_checkpoint(st.path(LOG_START_FILE), target, durable=True)
            st.leader_epochs.truncate_from_start(target)
            delete_snapshots(st.directory, below=target, keep_newest=True)
            now = st.clock()
            count = 0
            while count < len(st.segments) - 1 and st.segments[count + 1].base_offset <= target:
                count += 1
            if count:
                drop_prefix(st, count, now)
            due = pending_deletes.take_due(st, now)
        low = st.log_start
    pending_deletes.delete_files(st, due)
    return low


def drop_prefix(st: LogState, count: int, now: int) -> None:
    """Drop the ``count`` oldest segments from the log; the caller holds ``st.lock``."""
    dropped = st.segments[:count]
    del st.segments[:count]
    del st.bases[:count]
    new_start = max(st.log_start, st.segments[0].base_offset)
    if new_start != st.log_start or not os.path.exists(st.path(LOG_START_FILE)):
        st.log_start = new_start
        write_checkpoint(st.path(LOG_START_FILE), new_start, durable=True)
        st.leader_epochs.truncate_from_start(new_start)
    pending_deletes.schedule(st, dropped, now)
    st.stats["segments_deleted"] += count
    delete_snapshots(st.directory, below=st.log_start, keep_newest=True)
    log.info("%s deleted %d segments; log start offset now %d", st.name, count, st.log_start)
