"""Log compaction: keep at least the latest record of every key, as Kafka's log cleaner does.

A cleaning pass over one partition folder, runnable in any process that can
read the files (the cleaner actor runs it beside the partition actor, which
keeps serving). Closed segments never change, so the cleaner reads them
directly; only the final swap needs the log's owner (:meth:`PartitionLog.install_cleaned`).

One pass, in Kafka's terms:

* The log splits into a *clean* part (below the cleaner checkpoint, already
  cleaned), a *dirty* part (from the checkpoint to the first uncleanable
  offset) and the uncleanable tail: the active segment, anything not yet
  fsynced (so no record is ever removed because of a record a power loss could
  take back) and segments younger than ``min.compaction.lag.ms``.
* The dirty part is scanned into an :class:`OffsetMap` (key digest -> latest
  offset) of fixed capacity; if it fills up, the pass covers only the dirty
  batches that fitted and the next pass continues from there.
* Every segment below the covered end is recopied, grouped so neighbouring
  small segments merge up to ``segment.bytes``. A record is kept unless a later
  offset of its key is in the map. Kept records are copied byte for byte; a
  batch keeps its base offset, base timestamp, producer fields and its last
  offset delta (Kafka's rule for v2 batches), so offsets never move; a batch
  with every record kept is copied verbatim, one with none is dropped, unless
  it is its producer's last data batch: then it stays emptied (its header
  keeps the producer's epoch and last sequence for a replay, as Kafka keeps
  it) or, holding one record, whole (an empty batch must span offsets).
* Tombstones (null values) are kept until ``delete.retention.ms`` after the
  pass that first cleaned them (Kafka 3's delete horizon, tracked in the
  checkpoint's pass history instead of rewriting batch timestamps), so a
  consumer that reads from the start within that time sees every delete.
* Records without a key are removed (Kafka's cleaner does the same; Kafka
  brokers refuse them on compacted topics in the first place).
* Transactions (:mod:`.cleaner_txn`): the pass never reaches the last stable
  offset (:mod:`.cleanable`); batches of aborted transactions (known from the
  ``.txnindex`` entries in the view) are removed and stay out of the offset
  map; committed transactional records are compacted by key like any other; a
  marker stays while its transaction has a batch in the log, then goes once
  below the delete horizon, like a tombstone; a cleaned segment's ``.txnindex``
  keeps the aborts whose marker and data remain.

The output of each group is ``<stem>.log.cleaned`` plus indexes, fsynced
(:mod:`.cleaned_segment`); :mod:`.swap` explains how it replaces the old files
crash-safely. What may be cleaned is decided in :mod:`.cleanable`, how far
cleaning got is kept in :mod:`.cleaner_checkpoint`. The pass's rooms:
:mod:`.cleaner_key_scan` (the offset map), :mod:`.cleaner_retain` (which
records stay), :mod:`.cleaner_rewrite` (the cleaned segments),
:mod:`.cleaner_batches` (reading segments) and :mod:`.cleaner_result`
(what a pass hands over).
"""
from __future__ import annotations

import logging
import os
import time
from typing import Callable, NamedTuple

from .cleanable import CleanView, dirty_stats, with_high_watermark
from .cleaner_key_scan import build_map
from .cleaner_result import CleanedGroup, CleanResult, CleanStats, MapTooSmallError, ReplacedSegment, describe
from .cleaner_retain import Retainer
from .cleaner_txn import TxnCleaning
from .cleaner_rewrite import GroupWriter, fits
from .offset_map import OffsetMap
from .swap import PENDING_SUFFIX, committed_stems, discard_pending
from .sync import fsync_dir

log = logging.getLogger(__name__)

DEFAULT_MAP_BYTES = 128 << 20  # Kafka's log.cleaner.dedupe.buffer.size default

# Crash-test hook: called with a step name at every point where a crash
# matters ("group-written", "before-manifest", "manifest-written", ...).
# Tests set it in a child process to SIGKILL itself there.
crash_hook: Callable[[str], None] | None = None


def step(name: str) -> None:
    if crash_hook is not None:
        crash_hook(name)


# ------------------------------------------------------------------- a pass


def clean(view: CleanView, now_ms: int | None = None, *, map_bytes: int = DEFAULT_MAP_BYTES,
          force: bool = False) -> CleanResult | None:
    """Run one cleaning pass over ``view``'s files; None when there is nothing to do.

    Without ``force`` the pass runs only when the dirty ratio reaches
    ``min.cleanable.dirty.ratio``; with it, whenever there is a closed segment
    (which also expires tombstones and merges small segments in a quiet log).
    The result must then be handed to the log's ``install_cleaned`` (or
    ``discard_cleaned``).
    """
    started = time.perf_counter()
    now = view.now_ms if now_ms is None else now_ms
    config = view.config
    if not config.compacts:
        raise ValueError(f"{view.name}: cleanup.policy={config.cleanup_policy} does not allow compaction")
    discard_stale(view.directory)
    ds = dirty_stats(view, now)
    if not force and (ds.dirty_bytes == 0 or ds.ratio < config.min_cleanable_dirty_ratio):
        return None
    candidates = [s for s in view.segments[:-1] if s.base_offset < ds.first_uncleanable]
    if not candidates:
        return None
    stats = CleanStats()
    offset_map = OffsetMap(map_bytes)
    stats.map_capacity = offset_map.capacity
    fds: dict[str, int] = {}
    try:
        for s in candidates:  # open everything first: later deletions by retention cannot bite
            fds[s.path] = os.open(s.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        dirty = [s for s in candidates if s.next_offset > ds.first_dirty]
        horizon = min(view.checkpoint.tombstone_horizon(now, config.delete_retention_ms), ds.first_dirty)
        txn = TxnCleaning(view.aborted, horizon)
        end = build_map(view, dirty, ds.first_dirty, ds.first_uncleanable, offset_map, fds, stats, txn.is_aborted)
        stats.map_entries = len(offset_map)
        stats.map_seconds = time.perf_counter() - started
        step("map-built")
        copier = Retainer(view.name, offset_map, view.log_start, horizon, stats, txn, dict(view.producer_last))
        to_copy = [s for s in candidates if s.base_offset < end]
        result = CleanResult(view.directory, view.name, ds.first_dirty, end,
                             view.checkpoint.after_pass(end, now, config.delete_retention_ms), stats=stats)
        copy_started = time.perf_counter()
        groups = GroupWriter(view, copier, fds, result, step)
        try:
            for seg in to_copy:
                groups.add(seg)
            groups.finish()
        except BaseException:
            groups.abort()
            discard(result)
            raise
        fsync_dir(view.directory)
        step("cleaned-synced")
        stats.copy_seconds = time.perf_counter() - copy_started
    finally:
        for fd in fds.values():
            os.close(fd)
    stats.duration_s = time.perf_counter() - started
    return result


def discard_stale(directory: str) -> list[str]:
    """Remove ``.cleaned`` files no manifest commits: what a killed cleaner left behind."""
    removed = []
    committed = committed_stems(directory)
    for name in os.listdir(directory):
        if name.endswith(PENDING_SUFFIX):
            stem = name.split(".", 1)[0]
            if stem not in committed:
                try:
                    os.remove(os.path.join(directory, name))
                    removed.append(name)
                except FileNotFoundError:
                    pass
    if removed:
        log.info("removed %d files of an interrupted cleaning in %s", len(removed), directory)
    return removed


def discard(result: CleanResult) -> None:
    """Delete a pass's ``.cleaned`` files that were not installed."""
    for g in result.groups:
        discard_pending(result.directory, g.stem)


class Compaction(NamedTuple):
    result: CleanResult
    swap: object  # the log's SwapReport: groups installed or discarded


def compact(plog, now_ms: int | None = None, *, map_bytes: int = DEFAULT_MAP_BYTES, force: bool = True,
            max_passes: int = 100, high_watermark: int | None = None) -> list[Compaction]:
    """Clean and install in this process, pass after pass until the dirty part is covered.

    For a log owned by this process (tests, tools, benchmarks); a broker runs
    :func:`clean` in its cleaner actor and installs through the partition actor.
    Such a log has no followers, so its end is its high watermark unless told.
    """
    done = []
    for _ in range(max_passes):
        view = plog.cleaning_view()
        view = with_high_watermark(view, view.log_end if high_watermark is None else high_watermark)
        result = clean(view, now_ms, map_bytes=map_bytes, force=force)
        if result is None:
            break
        done.append(Compaction(result, plog.install_cleaned(result)))
        log.info("%s", describe(result))
        if not result.stats.map_full:
            break
        force = True
    return done


__all__ = [
    "CleanedGroup",
    "ReplacedSegment",
    "CleanStats",
    "CleanResult",
    "Compaction",
    "MapTooSmallError",
    "DEFAULT_MAP_BYTES",
    "fits",
    "clean",
    "discard",
    "discard_stale",
    "describe",
    "compact",
]
