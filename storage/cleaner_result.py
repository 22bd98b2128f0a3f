"""What a cleaning pass produced: its cleaned segments, the segments they replace, its counters.

A :class:`CleanResult` is made by :func:`.compaction.clean` in the cleaner's
process and installed by the log's owner (:mod:`.cleaned_install`), so it is
plain data that crosses a Ray call unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from .cleaner_checkpoint import CleanerCheckpoint
from .txn_index import AbortedTxn


class ReplacedSegment(NamedTuple):
    base_offset: int
    path: str
    size: int


class CleanedGroup(NamedTuple):
    """One ``.cleaned`` segment and the segments it replaces."""

    base_offset: int
    generation: int
    stem: str
    size: int
    replaced: tuple[ReplacedSegment, ...]
    # The aborted transactions its .txnindex holds: those whose marker it keeps with data of
    # theirs still in the log (None: adopt every entry of the replaced segments).
    aborted: tuple[AbortedTxn, ...] | None = None


@dataclass
class CleanStats:
    dirty_bytes: int = 0  # bytes of dirty segments scanned into the map
    bytes_before: int = 0  # size of every segment recopied
    bytes_after: int = 0
    segments_before: int = 0
    segments_after: int = 0
    batches_read: int = 0
    records_read: int = 0
    records_kept: int = 0
    records_removed: int = 0  # superseded, expired tombstones, keyless, below the log start
    tombstones_removed: int = 0
    keyless_removed: int = 0
    batches_rebuilt: int = 0
    batches_dropped: int = 0
    control_batches: int = 0
    aborted_records_removed: int = 0  # records of aborted transactions
    producer_batches_kept: int = 0  # a producer's last batch, emptied or whole, kept for its state
    markers_removed: int = 0  # transaction markers whose transaction has no data left, past the horizon
    malformed_batches: int = 0  # CRC-valid batches whose records do not decode: kept as they are
    map_entries: int = 0
    map_capacity: int = 0
    map_full: bool = False  # the pass stopped early; more passes follow
    map_seconds: float = 0.0
    copy_seconds: float = 0.0
    duration_s: float = 0.0

    @property
    def dirty_mb_per_s(self) -> float:
        return self.dirty_bytes / 1e6 / self.duration_s if self.duration_s > 0 else 0.0


@dataclass
class CleanResult:
    """A finished pass waiting to be installed by the log's owner."""

    directory: str
    name: str
    first_dirty: int
    end_offset: int  # the new clean offset: everything below was covered by the map
    checkpoint: CleanerCheckpoint  # to persist once every group is installed
    groups: list[CleanedGroup] = field(default_factory=list)
    stats: CleanStats = field(default_factory=CleanStats)


class MapTooSmallError(Exception):
    """Not even one dirty batch fits the offset map: give the cleaner more memory."""


def describe(result: CleanResult) -> str:
    """One log line about a pass."""
    s = result.stats
    return (
        f"cleaned {result.name} offsets [{result.first_dirty}, {result.end_offset}) dirty: "
        f"{s.segments_before} segments / {s.bytes_before} bytes -> {s.segments_after} / {s.bytes_after} bytes, "
        f"{s.records_removed} of {s.records_read} records removed ({s.tombstones_removed} tombstones, "
        f"{s.keyless_removed} without key), map {s.map_entries}/{s.map_capacity} keys"
        f"{' (full: more passes needed)' if s.map_full else ''}, "
        f"{s.duration_s:.2f} s, {s.dirty_mb_per_s:.0f} MB/s of dirty log"
    )


__all__ = ["ReplacedSegment", "CleanedGroup", "CleanStats", "CleanResult", "MapTooSmallError", "describe"]
