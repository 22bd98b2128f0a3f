"""Which old segments retention may delete.

Kept apart from the log so the policy is a pure function of segment facts,
easy to test and to reason about. Deletion is always a prefix of the closed
segments: the log stays a contiguous range of offsets, and the active segment
is never deleted.
"""
from __future__ import annotations

import os
from typing import NamedTuple, Sequence

from .config import TopicConfig


class SegmentFacts(NamedTuple):
    base_offset: int
    next_offset: int
    size: int
    max_timestamp: int  # -1 when no batch carried a timestamp
    path: str


def segment_time(seg: SegmentFacts) -> int:
    """The time retention.ms compares with; the file's mtime if there are no timestamps (as Kafka)."""
    if seg.max_timestamp >= 0:
        return seg.max_timestamp
    try:
        return int(os.stat(seg.path).st_mtime * 1000)
    except FileNotFoundError:
        return 0


def deletable_prefix(segments: Sequence[SegmentFacts], config: TopicConfig, now_ms: int, log_start_offset: int) -> int:
    """How many of the oldest segments may go (never the last, active one).

    In order, as Kafka applies them: segments wholly below the log start
    offset (DeleteRecords), then ``retention.ms`` (segment's largest timestamp
    older than now - retention.ms), then ``retention.bytes`` (drop oldest
    while the log stays at or above the limit without it). Time and size
    retention only apply with the ``delete`` cleanup policy.
    """
    closed = len(segments) - 1
    count = 0
    while count < closed and segments[count + 1].base_offset <= log_start_offset:
        count += 1
    if not config.deletes:
        return count
    if config.retention_ms >= 0:
        horizon = now_ms - config.retention_ms
        while count < closed and segment_time(segments[count]) < horizon:
            count += 1
    if config.retention_bytes >= 0:
        excess = sum(s.size for s in segments[count:]) - config.retention_bytes
        while count < closed and excess - segments[count].size >= 0:
            excess -= segments[count].size
            count += 1
    return count
