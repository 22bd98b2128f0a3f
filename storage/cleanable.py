"""Which part of a log a cleaner may clean now, from a picklable snapshot of its segments.

Kafka's ``LogCleanerManager`` decisions: the dirty part runs from the cleaner
checkpoint to the first uncleanable offset (the active segment, anything not
yet fsynced, segments younger than ``min.compaction.lag.ms``, the segment
holding the last stable offset and those after it); the dirty ratio decides
whether a scheduled pass is worth it.

Why the LSO: records of a transaction still open (or whose marker is not yet
replicated) must not be judged yet: they may still be aborted, and an aborted
record must never supersede a committed one. By whole segments: a segment
holding the LSO is uncleanable, so nothing at or past it is ever rewritten.
"""
from __future__ import annotations

from typing import NamedTuple

from .cleaner_checkpoint import CleanerCheckpoint
from .config import TopicConfig
from .txn_index import AbortedTxn


class SegmentView(NamedTuple):
    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int
    path: str
    generation: int
    durable: bool  # closed and fsynced


class CleanView(NamedTuple):
    """What a cleaner needs to know about a partition log (picklable, for other processes)."""

    directory: str
    name: str
    segments: tuple[SegmentView, ...]  # the last one is the active segment
    log_start: int
    log_end: int
    recovery_point: int
    config: TopicConfig
    checkpoint: CleanerCheckpoint
    now_ms: int  # the log's clock when the view was taken
    # Transactions not yet stable when the view was taken: (first offset, marker offset), -1 while
    # open; completed ones count until a high watermark passes their marker (see last_stable_offset).
    unstable_txns: tuple[tuple[int, int], ...] = ()
    aborted: tuple[AbortedTxn, ...] = ()  # every segment's .txnindex entries, in offset order
    producer_last: tuple[tuple[int, int], ...] = ()  # (producer id, base offset of its last data batch)
    high_watermark: int | None = None  # when the log's owner told it (a broker); None: unknown


def last_stable_offset(view: CleanView) -> int | None:
    """The LSO the cleaner must stay below; None when no transaction and no high watermark bound it.

    Kafka's ``log.lastStableOffset``: the first offset of the oldest transaction
    still open or whose marker is at or past the high watermark, capped by the
    high watermark. Without a known high watermark every completed transaction
    the log has not seen replicated counts as unstable (the safe side).
    """
    hw = view.high_watermark
    firsts = [first for first, marker in view.unstable_txns if marker < 0 or hw is None or marker >= hw]
    if hw is not None:
        firsts.append(hw)
    return min(firsts, default=None)


def with_high_watermark(view: CleanView, high_watermark: int) -> CleanView:
    """The view with the high watermark its partition's leader reports (a broker's cleaner)."""
    return view._replace(high_watermark=high_watermark)


class DirtyStats(NamedTuple):
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    ratio: float  # dirty / (clean + dirty), Kafka's cleanable ratio


def first_dirty_offset(view: CleanView) -> int:
    """The checkpoint, unless it lies outside the log (truncated, deleted records): then the log start."""
    offset = view.checkpoint.clean_offset
    if offset < view.log_start or offset > view.log_end:
        return view.log_start
    return offset


def dirty_stats(view: CleanView, now_ms: int) -> DirtyStats:
    """How much of the log a pass could clean now, by whole segments."""
    first_dirty = first_dirty_offset(view)
    closed = view.segments[:-1]
    uncleanable = view.segments[-1].base_offset
    lag = view.config.min_compaction_lag_ms
    lso = last_stable_offset(view)
    for s in closed:
        if (not s.durable or s.next_offset > view.recovery_point or (lag > 0 and s.max_timestamp > now_ms - lag)
                or (lso is not None and s.next_offset > lso)):
            uncleanable = s.base_offset
            break
    clean = dirty = 0
    for s in closed:
        if s.base_offset >= uncleanable:
            break
        if s.next_offset <= first_dirty:
            clean += s.size
        else:
            dirty += s.size
    total = clean + dirty
    return DirtyStats(first_dirty, uncleanable, clean, dirty, dirty / total if total else 0.0)
