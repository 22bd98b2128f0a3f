"""A read-only view of a partition folder that no process has open (an inactive partition).

Why: a consumer polls every partition it is assigned, all the time. If a read had to
start the partition's actor, no partition a consumer reads would ever hibernate. A
cleanly closed folder (``close()`` wrote the clean-shutdown marker after flushing the
segments, indexes and checkpoints) can be served as it is: the segment files, their
indexes and the checkpoints are exactly what the next open would trust without a scan.

The view opens nothing for writing, creates, renames or deletes nothing, and reuses
the live log's read code: the same :class:`~.log_state.LogState` fields and
:func:`~.log_read.locate_ranges` (batch-aligned file ranges, CRC-checked before
they are served), the same timestamp lookup (:func:`~.time_lookup.offset_for_timestamp`)
and the same leader-epoch cache.

Consistency: only the partition's actor changes its folder (appends, retention,
DeleteRecords, compaction all go through it), and the actor's open removes the
clean-shutdown marker before it changes anything; its next close writes a new one.
So a view is valid exactly while the marker it was opened with is still there
(:meth:`ClosedLog.current`, one ``stat``). A folder that is not cleanly closed
(a crash, a swap left to finish) has no view: :meth:`ClosedLog.open` returns None
and the caller starts the actor, which recovers it. A reader that was handed a
file range of a segment deleted since (the partition woke, applied retention and
slept again) gets ``FileNotFoundError`` when it opens the path and asks again.
"""
from __future__ import annotations

import os
import time
from typing import NamedTuple

from .config import TopicConfig
from .errors import LogClosedError
from .leader_epochs import CHECKPOINT_FILE, LeaderEpochCache, read_checkpoint_file
from .log_read import locate_ranges
from .log_state import LogState
from .producer_snapshot import read_snapshot
from .recovery import CLEAN_SHUTDOWN_FILE, LOG_START_FILE, read_checkpoint
from .segment import FileSlice, Segment
from .segment_files import LOG_SUFFIX, parse_segment_file, segment_stem
from .time_lookup import offset_for_timestamp

#: Names that mean a folder needs its owner's attention before it can be read (an unfinished
#: cleaner swap, leftovers of an interrupted write): the actor's open deals with them.
_UNSETTLED_SUFFIXES = (".swap", ".cleaned", ".tmp", ".deleted")


class _Stamp(NamedTuple):
    """What proves a folder unchanged since a view was opened: the clean-shutdown marker's identity,
    or for a folder never opened by an actor, that its first segment file still does not exist."""

    inode: int
    mtime_ns: int
    first_segment: str | None  # path that must not exist (never-activated folders), else None


class ReadOnlySegment(Segment):
    """A segment whose file is opened read-only and never created (a missing file raises)."""

    @property
    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        return self._fd


def _stamp(directory: str) -> _Stamp | None:
    try:
        st = os.stat(os.path.join(directory, CLEAN_SHUTDOWN_FILE))
    except FileNotFoundError:
        return None
    return _Stamp(st.st_ino, st.st_mtime_ns, None)


class ClosedLog:
    """Fetch and ListOffsets answers from a closed partition folder, without opening the log."""

    def __init__(self, st: LogState, leader_epochs: LeaderEpochCache, stamp: _Stamp) -> None:
        self._st = st
        self._stamp = stamp
        #: time.monotonic() of the last check that found the folder unchanged; None once one found it changed
        self._verified: float | None = -1.0
        self.leader_epochs = leader_epochs
        self.directory = st.directory
        self._txn: bool | None = None  # has_transactions, once asked

    # ------------------------------------------------------------------ opening
    @classmethod
    def open(cls, directory: str) -> "ClosedLog | None":
        """The view of ``directory``, or None when it is not cleanly closed (its actor must open it).

        A folder without any segment file and without a marker is a partition no actor ever
        opened (created by CreateTopics): an empty log at its log start offset (0).
        """
        directory = os.path.abspath(directory)
        stamp = _stamp(directory)
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return None
        if any(n.endswith(_UNSETTLED_SUFFIXES) for n in names):
            return None
        files = sorted(f for f in (parse_segment_file(n) for n in names) if f is not None)
        if len({base for base, _ in files}) != len(files):
            return None  # two generations of one segment: the actor's open sorts that out
        log_start = read_checkpoint(os.path.join(directory, LOG_START_FILE)) or 0
        st = LogState(directory, TopicConfig(), lambda: 0)
        if stamp is None:
            if files:
                return None  # open now, or not closed cleanly: only its actor may read it
            first = os.path.join(directory, segment_stem(log_start) + LOG_SUFFIX)
            stamp = _Stamp(0, 0, first)
            st.segments, st.bases = [], []
            st.log_start = st.log_end = log_start
            view = cls(st, LeaderEpochCache(directory, []), stamp)
            return view if view.current() else None
        while len(files) > 1 and files[1][0] <= log_start:
            files.pop(0)  # wholly below the log start: deleted logically, its files may linger
        cfg = st.config
        segments: list[Segment] = []
        try:
            for i, (base, generation) in enumerate(files):
                seg = ReadOnlySegment(directory, base, index_bytes=cfg.segment_index_bytes,
                                      index_interval=cfg.index_interval_bytes, generation=generation)
                segments.append(seg)
                if not seg.load_trusted():
                    raise LogClosedError(f"{seg.path} needs recovery")
            segments = [s for j, s in enumerate(segments) if s.size or j == len(segments) - 1 or s.compacted]
            if not segments:
                raise LogClosedError("no segment")
            entries = read_checkpoint_file(os.path.join(directory, CHECKPOINT_FILE)) or []
        except (OSError, LogClosedError):
            for s in segments:
                s.close()
            return None
        st.segments = segments
        st.bases = [s.base_offset for s in segments]
        st.log_end = segments[-1].next_offset
        st.log_start = min(max(log_start, segments[0].base_offset), st.log_end)
        view = cls(st, LeaderEpochCache(directory, entries), stamp)
        if not view.current():  # an actor opened the folder while we read it
            view.close()
            return None
        return view

    def current(self, max_age_s: float = 0.0) -> bool:
        """True while the folder is as it was when the view was opened (no actor opened it since).

        ``max_age_s``: trust a check made that recently instead of looking again. A view a little
        late to notice its actor started only answers from the files as they were closed (records
        at their offsets; a log end or log start that just moved on is seen on the next check);
        the files' own checks cost one or two system calls, which a Fetch naming a thousand idle
        partitions paid for each of them on every request."""
        if self._verified is None:
            return False  # found changed once: a folder never returns to the state a view was made of
        now = time.monotonic()
        if max_age_s > 0 and now - self._verified < max_age_s:
            return True
        if self._stamp.first_segment is not None:
            fresh = _stamp(self.directory) is None and not os.path.exists(self._stamp.first_segment)
        else:
            fresh = _stamp(self.directory) == self._stamp
        self._verified = now if fresh else None
        return fresh

    def close(self) -> None:
        for seg in self._st.segments:
            seg.close()
        self._st.closed = True

    # ------------------------------------------------------------------ reading
    @property
    def log_start_offset(self) -> int:
        return self._st.log_start

    @property
    def log_end_offset(self) -> int:
        return self._st.log_end

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._st.segments)

    @property
    def segment_count(self) -> int:
        return len(self._st.segments)

    def has_transactions(self) -> bool:
        """Whether a ``read_committed`` read may differ from a plain one: an aborted transaction in
        a ``.txnindex`` (or one missing), or a transaction open at close in the producer snapshot
        the clean close wrote at the log end (none there: unknown, so True). Read once per view."""
        if self._txn is None:
            self._txn = _has_transactions(self._st)
        return self._txn

    def locate(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
               min_one: bool = True) -> list[FileSlice]:
        """Batch-aligned file ranges from ``offset`` on, as ``PartitionLog.locate`` answers them."""
        with self._st.lock:
            ranges = locate_ranges(self._st, offset, max_bytes, max_offset, min_one)
            return [FileSlice(seg.path, pos, length) for seg, pos, length in ranges]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """As ``PartitionLog.offset_for_timestamp`` (special values -1, -2, -3 included)."""
        with self._st.lock:
            self._st.check_open()
            return offset_for_timestamp(self._st.segments, self._st.log_start, self._st.log_end, timestamp)

    def epoch_for_offset(self, offset: int) -> int:
        return self.leader_epochs.epoch_for_offset(offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.leader_epochs.end_offset_for(epoch, self._st.log_end)

    def __repr__(self) -> str:
        return f"ClosedLog({self.directory!r}, [{self._st.log_start}, {self._st.log_end}))"


def _has_transactions(st: LogState) -> bool:
    for seg in st.segments:
        try:
            if os.path.getsize(seg.txnindex.path) > 0:
                return True
        except OSError:
            return True  # no index: its aborts are unknown
    if not st.segments:
        return False  # never written
    try:
        entries = read_snapshot(st.directory, st.log_end)
    except (OSError, ValueError):
        return True
    return any(e.current_txn_first_offset >= 0 for e in entries)


def closed_folder_stats(directory: str) -> dict[str, int] | None:
    """Log start/end offset, size and segment count of a cleanly closed partition folder, from its
    checkpoints (no scan); None when it is not cleanly closed (the caller asks its actor)."""
    view = ClosedLog.open(directory)
    if view is None:
        return None
    try:
        return {"log_start_offset": view.log_start_offset, "log_end_offset": view.log_end_offset,
                "size_bytes": view.size_bytes, "segment_count": view.segment_count}
    finally:
        view.close()
