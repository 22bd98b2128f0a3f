"""The cleaner's second pass: rewrite the covered segments into as few cleaned segments as fit.

Each recopied segment's batches go through the :class:`.cleaner_retain.Retainer`
and into a :class:`.cleaned_segment.CleanedSegmentWriter`; neighbouring small
segments merge up to ``segment.bytes`` (:func:`fits`), and a lone segment
that comes out unchanged is not replaced.
"""
from __future__ import annotations

from typing import Callable

from .cleanable import CleanView, SegmentView
from .cleaned_segment import CleanedSegmentWriter
from .cleaner_batches import iter_batches
from .cleaner_result import CleanedGroup, CleanResult, ReplacedSegment
from .cleaner_retain import Retainer
from .index import MAX_RELATIVE_OFFSET
from .segment_files import segment_stem
from .swap import committed_stems, discard_pending


def fits(group_first: SegmentView, written: int, nxt: SegmentView, max_bytes: int) -> bool:
    """May ``nxt`` join a cleaned segment that starts with ``group_first`` and holds ``written`` bytes?

    Decided as the copy goes, on the bytes already written plus the next
    segment's whole size (it may keep everything), so the result stays within
    ``segment.bytes`` while small neighbours merge in the same pass; Kafka
    groups by sizes before cleaning and so merges a pass later. Relative
    offsets in the merged index must also fit 31 bits.
    """
    return written + nxt.size <= max_bytes and nxt.next_offset - 1 - group_first.base_offset <= MAX_RELATIVE_OFFSET


class GroupWriter:
    """Streams the recopied segments into as few cleaned segments as ``segment.bytes`` allows."""

    def __init__(self, view: CleanView, copier: Retainer, fds: dict[str, int], result: CleanResult,
                 step: Callable[[str], None]):
        self.view = view
        self.copier = copier
        self.fds = fds
        self.result = result
        self.writer: CleanedSegmentWriter | None = None
        self.group: list[SegmentView] = []
        self.changed = False
        self.committed = committed_stems(view.directory)
        self.step = step  # the pass's crash-test hook

    def add(self, seg: SegmentView) -> None:
        if self.writer is not None and not fits(self.group[0], self.writer.position, seg, self.view.config.segment_bytes):
            self.finish()
        if self.writer is None:
            self._start(seg)
        writer = self.writer
        assert writer is not None
        self.group.append(seg)
        self.changed = self.changed or len(self.group) > 1
        for buf, mv, rel, h in iter_batches(self.fds[seg.path], seg):
            data, max_ts, altered = self.copier.filter(buf, mv, rel, h)
            if altered:
                self.changed = True
            if data is not None:
                writer.add(data, h.base_offset, max_ts)

    def _start(self, first: SegmentView) -> None:
        stem = segment_stem(first.base_offset, first.generation + 1)
        if stem in self.committed:
            # A committed swap of this very name is still unfinished (its owner hit an
            # error mid-swap): its .cleaned files are data now. Reopening the log finishes it.
            raise RuntimeError(f"{self.view.name}: an unfinished swap of {stem} is pending; reopen the partition log")
        discard_pending(self.view.directory, stem)  # leftovers of a crashed earlier attempt
        self.writer = CleanedSegmentWriter(self.view.directory, first.base_offset, first.generation + 1, self.view.config)
        self.group = []
        self.changed = False

    def finish(self) -> None:
        """Close the current cleaned segment; a lone segment that came out unchanged is not replaced."""
        writer, group = self.writer, self.group
        if writer is None:
            return
        self.writer = None
        entries = self.copier.txn.take_entries()
        st = self.result.stats
        before = sum(s.size for s in group)
        st.bytes_before += before
        st.segments_before += len(group)
        st.segments_after += 1
        if not self.changed:
            writer.abort()
            discard_pending(self.view.directory, writer.stem)
            st.bytes_after += before
            return
        size = writer.finish()
        st.bytes_after += size
        self.result.groups.append(CleanedGroup(group[0].base_offset, writer.generation, writer.stem, size,
                                               tuple(ReplacedSegment(s.base_offset, s.path, s.size) for s in group),
                                               tuple(entries)))
        self.step("group-written")

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
            discard_pending(self.view.directory, self.writer.stem)
            self.writer = None


__all__ = ["fits", "GroupWriter"]
