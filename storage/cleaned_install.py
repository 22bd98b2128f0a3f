"""Installing a cleaning pass into the live log: the checks before the swap, and the old files after it.

``PartitionLog.install_cleaned`` holds the log's lock and runs the swap
protocol of :mod:`.swap`; this module holds what it works with: a cleaned
segment opened and checked against the run of segments it replaces, and the
replaced files, deleted after ``file.delete.delay.ms`` and only then their
manifest.
"""
from __future__ import annotations

import logging
import os
from typing import NamedTuple

from .compaction import CleanedGroup, step
from .config import TopicConfig
from .segment import Segment
from .swap import PENDING_SUFFIX
from .sync import fsync_dir

log = logging.getLogger(__name__)


class SwapReport(NamedTuple):
    installed: int  # cleaned segments swapped in
    discarded: int  # cleaned segments thrown away (the log changed under them)
    replaced: int  # old segments replaced
    checkpoint: int  # the cleaner checkpoint (clean offset) afterwards


class ReplacedSegments:
    """Old segments of one swap, deleted after the delay, then their manifest (see :mod:`.swap`)."""

    def __init__(self, manifest: str, segments: list[Segment]):
        self.manifest = manifest
        self.segments = segments

    def delete_files(self) -> None:
        for seg in self.segments:
            seg.delete_files()
        fsync_dir(os.path.dirname(self.manifest))  # the files are gone for good before the manifest goes
        step("old-files-deleted")
        try:
            os.remove(self.manifest)
        except FileNotFoundError:
            pass

    def close(self) -> None:
        for seg in self.segments:
            seg.close()


def prepare_cleaned(
    name: str, directory: str, segments: list[Segment], group: CleanedGroup, config: TopicConfig
) -> tuple[Segment, int, list[Segment]] | None:
    """Open a cleaned segment and find the run it replaces; None if either is not as expected."""
    paths = [r.path for r in group.replaced]
    first = next((i for i, s in enumerate(segments) if s.path == paths[0]), None)
    if first is None:
        return None
    old = segments[first:first + len(paths)]
    if (
        first + len(paths) >= len(segments)  # never the active segment
        or [s.path for s in old] != paths
        or [s.size for s in old] != [r.size for r in group.replaced]
        or old[0].base_offset != group.base_offset
    ):
        return None
    seg = Segment(directory, group.base_offset, index_bytes=config.segment_index_bytes,
                  index_interval=config.index_interval_bytes, generation=group.generation,
                  pending_suffix=PENDING_SUFFIX)
    if not os.path.exists(seg.path) or os.path.getsize(seg.path) != group.size:
        return None
    if not seg.load_trusted() or seg.next_offset > segments[first + len(paths)].base_offset:
        seg.close()
        log.error("%s: cleaned segment %s failed its checks; not installed", name, seg.path)
        return None
    return seg, first, old
