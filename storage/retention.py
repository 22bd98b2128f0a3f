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


def closed_folder_due(directory: str, config: TopicConfig, now_ms: int) -> bool:
    """Whether time or size retention would delete a segment of a partition folder no process has open
    (a hibernated partition), read from file names, sizes and time indexes only, without opening the log.

    A hint that errs towards True: each segment's time is the largest timestamp in its time index,
    which is never later than its largest record timestamp, so a due segment is never missed; a
    partition found due is opened by its actor, whose own retention decides.
    """
    if not config.deletes or (config.retention_ms < 0 and config.retention_bytes < 0):
        return False
    try:
        names = sorted(n for n in os.listdir(directory) if n.endswith(".log") and n[:-4].isdigit())
    except FileNotFoundError:
        return False
    segments = []
    for name in names:
        path = os.path.join(directory, name)
        try:
            size = os.path.getsize(path)
        except FileNotFoundError:
            return True  # the folder changed under us: let the actor look
        segments.append(SegmentFacts(int(name[:-4]), -1, size, _largest_indexed_time(path[:-4] + ".timeindex"), path))
    return len(segments) > 1 and deletable_prefix(segments, config, now_ms, -1) > 0


def _largest_indexed_time(path: str) -> int:
    """The largest timestamp of a time index file (8-byte time, 4-byte relative offset per entry), -1 if none."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return -1
    usable = len(data) - len(data) % 12
    return max((int.from_bytes(data[i:i + 8], "big", signed=True) for i in range(0, usable, 12)), default=-1)
