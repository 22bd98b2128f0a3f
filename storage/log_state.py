"""The state one partition log's modules share, and its health: open, closing, closed or offline.

:class:`~.log.PartitionLog` is a facade over modules with one job each
(:mod:`.log_lifecycle`, :mod:`.log_append`, :mod:`.log_flush`,
:mod:`.log_retention`, :mod:`.cleaned_install`, :mod:`.log_verify`); they all
work on one :class:`LogState`, so each can be read on its own while the
invariants stay in one place:

* ``lock`` (re-entrant) guards every field and every file access except
  fsync, which runs on duplicated descriptors outside it so a flush never
  blocks appends or reads for the duration of the disk write;
* ``flush_lock`` serialises flushes (and close/delete against them), taken
  before ``lock`` when both are needed;
* ``segments`` is never empty (the last one is the active segment) and
  ``bases`` mirrors their base offsets for bisecting;
* ``log_start <= log_end`` and ``recovery_point <= log_end``; the recovery
  point only moves after a sync succeeded.
"""
from __future__ import annotations

import bisect
import logging
import os
import threading
from typing import TYPE_CHECKING, Callable, Protocol

from .errors import KafkaStorageError, LogClosedError

if TYPE_CHECKING:
    from .cleaner_checkpoint import CleanerCheckpoint
    from .config import TopicConfig
    from .leader_epochs import LeaderEpochCache
    from .producer_snapshot import ProducerStateLoad
    from .producer_state import ProducerStateTable
    from .recovery import RecoveryReport
    from .roll_flusher import RollFlusher
    from .segment import Segment

log = logging.getLogger(__name__)


class DroppedFiles(Protocol):
    """What waits in ``pending_deletes``: a dropped segment, or the segments one cleaner swap replaced."""

    def delete_files(self) -> None: ...

    def close(self) -> None: ...


class LogState:
    """Everything a partition log knows; filled in by :func:`.log_lifecycle.open_log`."""

    directory: str
    name: str
    config: "TopicConfig"
    clock: Callable[[], int]
    segments: "list[Segment]"
    bases: list[int]
    log_end: int
    log_start: int
    recovery_point: int
    recovery_report: "RecoveryReport"
    producer_id_expiration_ms: int
    producer_state: "ProducerStateTable"
    producer_load: "ProducerStateLoad"
    leader_epochs: "LeaderEpochCache"  # epoch -> first offset, in leader-epoch-checkpoint (see .leader_epochs)
    pending_deletes: list[tuple[int, DroppedFiles]]  # (due time in ms, files)
    cleaner_checkpoint: "CleanerCheckpoint"
    last_flush_ms: int
    flusher: "RollFlusher"
    stats: dict[str, int]

    def __init__(self, directory: str, config: "TopicConfig", clock: Callable[[], int]):
        self.directory = directory
        self.name = os.path.basename(directory.rstrip(os.sep))
        self.config = config
        self.clock = clock
        self.lock = threading.RLock()
        self.flush_lock = threading.RLock()  # flush_to holds it around sync_to
        self.closed = False
        self.closing = False  # close() started: no more appends, flushes still allowed
        self.offline: str | None = None  # why the log stopped serving after a disk error
        # Segment files were created (or removed) since the folder was last fsynced: true at
        # first, as opening may have created the first segment or cut a torn tail away.
        self.dir_dirty = True
        self.no_space_logged = False
        self.replay_bytes = 0
        self.stats = {
            "appends": 0, "appended_bytes": 0, "appended_records": 0, "rolls": 0, "flushes": 0,
            "reads": 0, "read_bytes": 0, "segments_deleted": 0, "cleanings": 0, "segments_cleaned": 0,
        }

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def segment_at(self, offset: int) -> int:
        """Index in ``segments`` of the segment holding ``offset`` (the first one for offsets below it)."""
        return max(bisect.bisect_right(self.bases, offset) - 1, 0)

    def check_open(self) -> None:
        """Raise unless the log serves: closed, or offline after a disk error, it does not."""
        if self.closed:
            raise LogClosedError(f"partition log {self.name} is closed")
        if self.offline is not None:
            raise KafkaStorageError(f"partition log {self.name} is offline after a disk error ({self.offline}); "
                                    "reopen it (restart the partition) to recover")

    def go_offline(self, what: str, exc: BaseException) -> KafkaStorageError:
        """Stop serving: the disk lost or may have lost writes the page cache still shows."""
        with self.lock:
            first = self.offline is None
            if first:
                self.offline = f"{what}: {exc}"
        if first:
            log.error("partition log %s is offline: %s failed: %s (recovery point stays at %d)",
                      self.name, what, exc, self.recovery_point)
        return KafkaStorageError(f"partition log {self.name}: {what} failed: {exc}; the log is offline")

    def snapshot(self) -> dict[str, int | float | str]:
        """The counters plus the gauges of the moment (offsets, sizes, recovery, producers), taken under the lock."""
        with self.lock:
            out: dict[str, int | float | str] = dict(self.stats)
            out.update(
                name=self.name,
                log_start_offset=self.log_start,
                log_end_offset=self.log_end,
                recovery_point=self.recovery_point,
                offline=self.offline or "",
                size_bytes=sum(s.size for s in self.segments),
                segment_count=len(self.segments),
                pending_deletes=len(self.pending_deletes),
                verified_bytes=sum(s.verified.covered() for s in self.segments),
                corrupt_batches=sum(len(s.corrupt) for s in self.segments),
                recovery_seconds=self.recovery_report.duration_s,
                cleaner_checkpoint=self.cleaner_checkpoint.clean_offset,
                producers=len(self.producer_state),
                producer_snapshot_offset=-1 if self.producer_load.snapshot_offset is None else self.producer_load.snapshot_offset,
                producer_batches_replayed=self.producer_load.batches_replayed,
                producer_replay_bytes=self.replay_bytes,
                leader_epoch=self.leader_epochs.latest_epoch,
            )
            return out
