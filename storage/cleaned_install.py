"""Installing a cleaning pass into the live log: the checks, the swap, and the old files after it.

:func:`install_cleaned` (behind ``PartitionLog.install_cleaned``) holds the
log's lock and runs the swap protocol of :mod:`.swap`: each cleaned segment is
opened and checked against the run of segments it replaces, and the replaced
files are deleted after ``file.delete.delay.ms`` and only then their manifest.
"""
from __future__ import annotations

import logging
import os
from typing import NamedTuple

from . import pending_deletes
from .cleaner_checkpoint import CleanerCheckpoint, write_checkpoint
from .cleaner_result import CleanedGroup, CleanResult
from .compaction import step
from .config import TopicConfig
from .log_state import LogState
from .segment import Segment
from .swap import PENDING_SUFFIX, discard_pending, write_manifest
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


def install_cleaned(st: LogState, result: CleanResult) -> SwapReport:
    """Swap a cleaning pass's segments into the live log; the short critical section of compaction.

    Groups go in offset order; each replaces its old segments only if they are
    still exactly what the cleaner read (retention, DeleteRecords or another
    swap may have changed the log meanwhile), otherwise it and the rest are
    discarded. One fsynced manifest commits all of them (see :mod:`.swap`),
    then renames and the in-memory switch follow. Old files stay for
    ``file.delete.delay.ms`` (readers of earlier slices keep working: new files
    never reuse their names). The cleaner checkpoint moves only once every
    group is in.
    """
    if os.path.abspath(result.directory) != st.directory:
        raise ValueError(f"cleaning result for {result.directory} handed to the log in {st.directory}")
    with st.lock:
        st.check_open()
        now = st.clock()
        groups = list(result.groups)
        prepared = []
        for gi, group in enumerate(groups):
            new = prepare_cleaned(st.name, st.directory, st.segments, group, st.config)
            if new is None:
                for rest in groups[gi:]:
                    discard_pending(st.directory, rest.stem)
                log.warning("%s: the log changed during cleaning; discarded %d cleaned segments",
                            st.name, len(groups) - gi)
                break
            prepared.append(new)
        installed, replaced = len(prepared), sum(len(old) for _, _, old in prepared)
        if prepared:
            for (seg, _, old), group in zip(prepared, groups):
                # The cleaned segment indexes the aborts whose marker it kept with data of theirs
                # still in the log (the cleaner's choice, see .cleaner_txn); an entry whose data is
                # gone can make no read_committed client drop a record, so dropping it is safe.
                entries = group.aborted
                if entries is None:  # a pass that did not say: adopt every entry of the replaced segments
                    entries = tuple(e for o in old for e in o.txnindex.entries)
                seg.txnindex.replace(entries)
                seg.txnindex.sync()
            step("before-manifest")
            manifest = write_manifest(st.directory, [(seg.stem, [o.stem for o in old]) for seg, _, old in prepared])
            step("manifest-written")
            for seg, _, old in prepared:
                seg.finalize()
                step("renamed")
                seg.durable = True
                first = st.segments.index(old[0])
                st.segments[first:first + len(old)] = [seg]
            st.bases = [s.base_offset for s in st.segments]
            fsync_dir(st.directory)
            replaced_segments = ReplacedSegments(manifest, [o for _, _, old in prepared for o in old])
            pending_deletes.schedule(st, [replaced_segments], now)
        if installed == len(groups):
            checkpoint = result.checkpoint
            if checkpoint.clean_offset > st.log_end:  # the log was cut back meanwhile
                checkpoint = CleanerCheckpoint(st.log_start)
            write_checkpoint(st.directory, checkpoint)
            st.cleaner_checkpoint = checkpoint
            step("checkpoint-written")
        st.stats["cleanings"] += 1
        st.stats["segments_cleaned"] += replaced
        due = pending_deletes.take_due(st, now)
        report = SwapReport(installed, len(groups) - installed, replaced, st.cleaner_checkpoint.clean_offset)
    pending_deletes.delete_files(st, due)
    return report
