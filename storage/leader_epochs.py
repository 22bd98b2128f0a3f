"""The leader-epoch cache of one partition and its ``leader-epoch-checkpoint`` file.

Why it exists (KIP-101, KIP-279, KIP-320): an offset alone does not name a
record once a log can lose an unsynced tail or, with replication, diverge
between replicas; (leader epoch, offset) does. Each batch carries the epoch of
the leader that appended it (``partitionLeaderEpoch``), and this cache keeps,
for every epoch, the first offset written in it. From it a leader answers
OffsetForLeaderEpoch ("where did epoch E end in your log?"), which lets a
consumer detect that the records it read were truncated away and a follower
find where its log diverges from the leader's.

Semantics are those of Kafka's ``LeaderEpochFileCache``; the file format is
Kafka's checkpoint text format (version line ``0``, a count line, then one
``<epoch> <startOffset>`` line per entry), replaced atomically and fsynced
whenever an entry is added (so it never misses an epoch that reached the log)
and when truncation changes it. A checkpoint may be *ahead* of the log after
a crash (an epoch was assigned, then the unsynced records under it were lost):
:func:`load_leader_epochs` cuts it back to the recovered log and fills in
epochs from the batch headers it can see.

Pure data structure plus one small file: the caller (``PartitionLog``) holds
the lock that orders it with appends.
"""
from __future__ import annotations

import bisect
import logging
import os
from typing import Callable, Iterable, NamedTuple

from .atomic import atomic_write

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
#: Kafka's "no epoch" / "no offset" (OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH[_OFFSET]).
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class CorruptCheckpointError(ValueError):
    """The checkpoint file cannot be parsed; the caller rebuilds the cache from the log."""


def parse_checkpoint(text: str) -> list[EpochEntry]:
    """Entries of a checkpoint file's text; CorruptCheckpointError when it is not Kafka's format."""
    lines = text.splitlines()
    try:
        if len(lines) < 2 or int(lines[0]) != CHECKPOINT_VERSION:
            raise CorruptCheckpointError(f"expected version {CHECKPOINT_VERSION} and a count, got {lines[:2]!r}")
        count = int(lines[1])
        if count < 0 or len(lines) != 2 + count:
            raise CorruptCheckpointError(f"count line says {count} entries, file has {len(lines) - 2}")
        entries = []
        for line in lines[2:]:
            epoch, offset = line.split()
            entries.append(EpochEntry(int(epoch), int(offset)))
    except (ValueError, TypeError) as e:
        if isinstance(e, CorruptCheckpointError):
            raise
        raise CorruptCheckpointError(str(e)) from None
    return entries


def format_checkpoint(entries: Iterable[EpochEntry]) -> bytes:
    entries = list(entries)
    lines = [str(CHECKPOINT_VERSION), str(len(entries))] + [f"{e.epoch} {e.start_offset}" for e in entries]
    return ("\n".join(lines) + "\n").encode()


class LeaderEpochCache:
    """Epoch -> start offset, both strictly increasing; persisted in ``<directory>/leader-epoch-checkpoint``.

    ``entries`` seeds the cache without reading or writing the file (loading
    and tests); otherwise the file is read (a missing file is an empty cache).
    """

    def __init__(self, directory: str, entries: Iterable[EpochEntry] | None = None) -> None:
        self.path = os.path.join(directory, CHECKPOINT_FILE)
        self._epochs: list[int] = []
        self._starts: list[int] = []
        if entries is None:
            entries = read_checkpoint_file(self.path) or []
        for e in entries:
            self._assign(EpochEntry(*e))

    # ------------------------------------------------------------- reading
    @property
    def entries(self) -> list[EpochEntry]:
        return [EpochEntry(e, s) for e, s in zip(self._epochs, self._starts)]

    def __len__(self) -> int:
        return len(self._epochs)

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, or UNDEFINED_EPOCH (-1) when the cache is empty."""
        return self._epochs[-1] if self._epochs else UNDEFINED_EPOCH

    @property
    def latest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[-1], self._starts[-1]) if self._epochs else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return EpochEntry(self._epochs[0], self._starts[0]) if self._epochs else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, exactly as Kafka's ``endOffsetFor``.

        The epoch returned is the largest known epoch <= ``requested_epoch``;
        its end offset is the start offset of the next larger epoch, or the log
        end when the latest epoch is asked for. Undefined (-1, -1) for epoch -1
        and for an epoch above every known one; an epoch below every known one
        gets (requested epoch, start offset of the first epoch).
        """
        epochs = self._epochs
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if epochs and epochs[-1] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(epochs, requested_epoch)  # first index with epoch > requested
        if higher == len(epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self._starts[0]
        return epochs[higher - 1], self._starts[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch the record at ``offset`` was written in (ListOffsets' leader_epoch), or -1."""
        i = bisect.bisect_right(self._starts, offset)
        return self._epochs[i - 1] if i else UNDEFINED_EPOCH

    # ------------------------------------------------------------- changes
    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True (and the file rewritten) when it changed.

        As Kafka: a no-op unless the epoch differs from the latest one or moves
        its start earlier; entries that would break monotonicity (an epoch >=
        the new one, or a start >= the new start) are dropped first.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if not self._assign(EpochEntry(epoch, start_offset)):
            return False
        self.flush()
        return True

    def _assign(self, entry: EpochEntry) -> bool:
        if self._epochs and entry.epoch == self._epochs[-1] and entry.start_offset >= self._starts[-1]:
            return False
        removed = []
        while self._epochs and (self._epochs[-1] >= entry.epoch or self._starts[-1] >= entry.start_offset):
            removed.append(EpochEntry(self._epochs.pop(), self._starts.pop()))
        if len(removed) > 1 or (removed and removed[0].start_offset != entry.start_offset):
            log.warning("%s: new epoch entry %s truncated conflicting entries %s", self.path, entry, removed)
        self._epochs.append(entry.epoch)
        self._starts.append(entry.start_offset)
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop every entry starting at or after ``end_offset`` (the log was cut back to it)."""
        if not self._cut_end(end_offset):
            return False
        self.flush()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at ``start_offset``: the epoch holding it starts there, older ones go.

        Exclusive, as Kafka's: an entry starting exactly at ``start_offset`` stays.
        """
        if not self._cut_start(start_offset):
            return False
        self.flush()
        return True

    def _cut_end(self, end_offset: int) -> bool:
        if end_offset < 0 or not self._starts or self._starts[-1] < end_offset:
            return False
        keep = bisect.bisect_left(self._starts, end_offset)
        del self._epochs[keep:], self._starts[keep:]
        return True

    def _cut_start(self, start_offset: int) -> bool:
        if not self._starts or self._starts[0] >= start_offset:
            return False
        last = bisect.bisect_right(self._starts, start_offset) - 1  # the entry holding start_offset
        epoch = self._epochs[last]
        del self._epochs[:last + 1], self._starts[:last + 1]
        self._epochs.insert(0, epoch)
        self._starts.insert(0, start_offset)
        return True

    def flush(self) -> None:
        """Replace the checkpoint file atomically (temp file, fsync, rename, folder fsync)."""
        atomic_write(self.path, format_checkpoint(self.entries))

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.entries})"


def fence(name: str, current_leader_epoch: int, leader_epoch: int) -> None:
    """KIP-320 fencing of a request's ``current_leader_epoch`` against the leader's ``leader_epoch``:
    older raises FencedLeaderEpochError, newer UnknownLeaderEpochError; -1 (any negative) skips
    the check, as in Kafka. Used by the partition actor and by reads of a closed partition."""
    from .errors import FencedLeaderEpochError, UnknownLeaderEpochError

    if current_leader_epoch < 0 or current_leader_epoch == leader_epoch:
        return
    if current_leader_epoch < leader_epoch:
        raise FencedLeaderEpochError(f"partition {name}: leader epoch {current_leader_epoch} is fenced; "
                                     f"the leader is in epoch {leader_epoch}")
    raise UnknownLeaderEpochError(f"partition {name}: leader epoch {current_leader_epoch} "
                                  f"is newer than the leader's {leader_epoch}")


def read_checkpoint_file(path: str) -> list[EpochEntry] | None:
    """The entries of a checkpoint file; None when it is missing or unreadable (then: rebuild)."""
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    try:
        return parse_checkpoint(text)
    except CorruptCheckpointError as e:
        log.warning("ignoring unreadable leader epoch checkpoint %s (%s); rebuilding it from the log", path, e)
        return None


def load_leader_epochs(
    directory: str,
    *,
    log_start: int,
    log_end: int,
    headers_from: Callable[[int], Iterable[tuple[int, int]]],
) -> LeaderEpochCache:
    """The cache of a partition folder, made consistent with the log as it was recovered.

    ``headers_from(offset)`` yields ``(partition leader epoch, base offset)`` of
    each batch from ``offset`` on (headers only). Without a usable checkpoint
    every batch of the log is walked, once (the rebuilt file is written). With
    one, entries past the log end (an epoch began, then unsynced records before
    it were lost) or before the log start are cut. The file is never *behind*
    the log: an append checkpoints a new epoch (fsynced) before writing any
    batch of it, so no rescan of the recovered tail is needed.
    """
    entries = read_checkpoint_file(os.path.join(directory, CHECKPOINT_FILE))
    cache = LeaderEpochCache(directory, entries or [])
    changed = False
    if entries is None:
        changed = True  # write the file (even empty): its presence means the next open need not walk the log
        if log_start < log_end:
            for epoch, base in headers_from(log_start):
                if epoch >= 0 and base >= log_start:
                    cache._assign(EpochEntry(epoch, base))
    else:
        before = cache.entries
        changed = cache._cut_end(log_end) | cache._cut_start(log_start)
        if changed:
            log.warning("%s: leader epoch checkpoint %s was ahead of the log [%d, %d); now %s", directory,
                        before, log_start, log_end, cache.entries)
    if changed:
        cache.flush()
    return cache


__all__ = [
    "CHECKPOINT_FILE",
    "UNDEFINED_EPOCH",
    "UNDEFINED_EPOCH_OFFSET",
    "EpochEntry",
    "LeaderEpochCache",
    "fence",
    "load_leader_epochs",
    "parse_checkpoint",
    "format_checkpoint",
]
