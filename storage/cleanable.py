"""Which part of a log a cleaner may clean now, from a picklable snapshot of its segments.

Kafka's ``LogCleanerManager`` decisions: the dirty part runs from the cleaner
checkpoint to the first uncleanable offset (the active segment, anything not
yet fsynced, segments younger than ``min.compaction.lag.ms``); the dirty
ratio decides whether a scheduled pass is worth it.
"""
from __future__ import annotations

from typing import NamedTuple

from .cleaner_checkpoint import CleanerCheckpoint
from .config import TopicConfig


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
    for s in closed:
        if not s.durable or s.next_offset > view.recovery_point or (lag > 0 and s.max_timestamp > now_ms - lag):
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
