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
  with every record kept is copied verbatim, one with none is dropped (Kafka
  keeps such an empty batch when it carries an idempotent producer's last
  state; logan-ray rebuilds that state from the active segment, which is never
  cleaned, so nothing depends on it).
* Tombstones (null values) are kept until ``delete.retention.ms`` after the
  pass that first cleaned them (Kafka 3's delete horizon, tracked in the
  checkpoint's pass history instead of rewriting batch timestamps), so a
  consumer that reads from the start within that time sees every delete.
* Records without a key are removed (Kafka's cleaner does the same; Kafka
  brokers refuse them on compacted topics in the first place).
* Control batches (transaction markers) are copied unchanged and transactional
  batches are compacted like any other: logan-ray has no transactions yet, so
  there are no aborted records to drop and no marker can be proven obsolete.

The output of each group is ``<stem>.log.cleaned`` plus indexes, fsynced
(:mod:`.cleaned_segment`); :mod:`.swap` explains how it replaces the old files
crash-safely. What may be cleaned is decided in :mod:`.cleanable`, how far
cleaning got is kept in :mod:`.cleaner_checkpoint`.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple, Sequence

from .batch_header import CONTROL_BIT, HEADER_SIZE, LOG_OVERHEAD, TIMESTAMP_TYPE_BIT, BatchHeader, named
from .cleanable import CleanView, SegmentView, dirty_stats
from .cleaned_segment import CleanedSegmentWriter
from .cleaner_checkpoint import CleanerCheckpoint
from .compression import NONE, decompress
from .errors import CorruptRecordError
from .file_batches import SCAN_CHUNK, FileBatches
from .index import MAX_RELATIVE_OFFSET
from .offset_map import OffsetMap
from .raw_records import RawRecord, rebuild_batch, scan_records
from .segment_files import segment_stem
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


# ------------------------------------------------------------------ results


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


# ------------------------------------------------------------- batch reading


def _iter_batches(fd: int, seg: SegmentView, *, check_crc: bool = True) -> Iterator[tuple[bytearray, memoryview, int, BatchHeader]]:
    """Yield ``(buffer, its memoryview, position in buffer, header)`` for every batch.

    Reads the file in large chunks; the buffer is reused, so callers must
    finish with a batch before asking for the next. Framing and offset order
    are always checked (the base offset lies outside the CRC), CRC32C on request.
    """
    path = seg.path
    reader = FileBatches(fd, seg.size, SCAN_CHUNK)
    expected = seg.base_offset
    for pos, fields in reader.walk(0):
        h = named(fields)
        base, lod = h.base_offset, h.last_offset_delta
        if base < expected or lod < 0 or base + lod >= seg.next_offset:
            raise CorruptRecordError(f"batch offsets {base}+{lod} out of order (expected >= {expected}, "
                                     f"< {seg.next_offset})", path=path, position=pos)
        expected = base + lod + 1
        size = h.batch_length + LOG_OVERHEAD
        got = reader.batch(pos, size)
        if got is None:
            raise CorruptRecordError(f"file ends inside a batch of {size} bytes", path=path, position=pos)
        if check_crc and not reader.crc_ok(pos, h):
            raise CorruptRecordError("record batch CRC32C mismatch", path=path, position=pos)
        buf, mv, rel = got
        yield buf, mv, rel, h
    if reader.problem is not None:
        raise CorruptRecordError(f"bad batch framing: {reader.problem}", path=path, position=reader.stop_position)


def _records(buf: bytearray, mv: memoryview, rel: int, size: int, attributes: int) -> tuple[bytes | bytearray, int, int]:
    """``(buffer, start, end)`` of a batch's records: in place when uncompressed, no copy.

    Unlike :func:`.records.records_blob` (a memoryview of just the records) this
    hands the record scan the reader's whole bytearray and bounds in it, which
    the pure-Python scan indexes faster than a memoryview.
    """
    codec = attributes & 0x07
    if codec == NONE:
        return buf, rel + HEADER_SIZE, rel + size
    data = decompress(codec, mv[rel + HEADER_SIZE : rel + size])
    return data, 0, len(data)


_MALFORMED = (CorruptRecordError, IndexError, ValueError)  # what parsing bad record bytes raises


# ------------------------------------------------------------------ map pass


def _build_map(view: CleanView, dirty: Sequence[SegmentView], first_dirty: int, limit: int,
               offset_map: OffsetMap, fds: dict[str, int], stats: CleanStats) -> int:
    """Fill the map from the dirty segments; returns the end offset the map covers.

    No CRC check here: the copy pass checks every batch before writing
    anything, so a damaged batch aborts the pass whatever it put in the map.
    """
    for seg in dirty:
        for buf, mv, rel, h in _iter_batches(fds[seg.path], seg, check_crc=False):
            base, attrs, lod, count = h.base_offset, h.attributes, h.last_offset_delta, h.record_count
            if base >= limit:
                return limit
            size = h.batch_length + LOG_OVERHEAD
            stats.dirty_bytes += size
            if base + lod < first_dirty or attrs & CONTROL_BIT or count == 0:
                continue
            if count > offset_map.room:
                if not len(offset_map):
                    raise MapTooSmallError(
                        f"{view.name}: the offset map holds {offset_map.capacity} keys, too few for one batch "
                        f"of {count} records at offset {base}; give the cleaner more memory")
                stats.dirty_bytes -= size
                stats.map_full = True
                return base
            try:
                keys, deltas, _, _, _ = scan_records(*_records(buf, mv, rel, size, attrs), count)
            except _MALFORMED:
                continue  # the copy pass keeps such a batch as it is
            offsets = [base + d for d in deltas]
            if None in keys or base < first_dirty:
                pairs = [(k, o) for k, o in zip(keys, offsets) if k is not None and o >= first_dirty]
                keys = [k for k, _ in pairs]
                offsets = [o for _, o in pairs]
            offset_map.put_many(keys, offsets)
    return limit


# ----------------------------------------------------------------- copy pass


def fits(group_first: SegmentView, written: int, nxt: SegmentView, max_bytes: int) -> bool:
    """May ``nxt`` join a cleaned segment that starts with ``group_first`` and holds ``written`` bytes?

    Decided as the copy goes, on the bytes already written plus the next
    segment's whole size (it may keep everything), so the result stays within
    ``segment.bytes`` while small neighbours merge in the same pass; Kafka
    groups by sizes before cleaning and so merges a pass later. Relative
    offsets in the merged index must also fit 31 bits.
    """
    return written + nxt.size <= max_bytes and nxt.next_offset - 1 - group_first.base_offset <= MAX_RELATIVE_OFFSET


class _Copier:
    """The retain decision for every batch of the segments being recopied."""

    def __init__(self, name: str, offset_map: OffsetMap, log_start: int, tombstone_horizon: int, stats: CleanStats):
        self.name = name
        self.map = offset_map
        self.log_start = log_start
        self.horizon = tombstone_horizon
        self.stats = stats

    def filter(self, buf: bytearray, mv: memoryview, rel: int, h: BatchHeader) -> tuple[object | None, int, bool]:
        """``(bytes to write or None, max timestamp, changed)`` for one (CRC-checked) batch."""
        st = self.stats
        base, attrs, lod, max_ts, count = h.base_offset, h.attributes, h.last_offset_delta, h.max_timestamp, h.record_count
        base_ts = h.base_timestamp
        size = h.batch_length + LOG_OVERHEAD
        st.batches_read += 1
        if attrs & CONTROL_BIT:
            st.control_batches += 1
            return mv[rel : rel + size], max_ts, False
        st.records_read += count
        if base + lod < self.log_start:
            st.records_removed += count
            st.batches_dropped += 1
            return None, max_ts, True
        try:
            blob, start, stop = _records(buf, mv, rel, size, attrs)
            keys, deltas, ts_deltas, nulls, starts = scan_records(blob, start, stop, count)
        except _MALFORMED as e:
            # CRC-valid but undecodable records (a broken client): keep the batch as it is.
            st.malformed_batches += 1
            st.records_kept += count
            log.warning("%s: batch at offset %d has malformed records (%s); kept uncleaned", self.name, base, e)
            return mv[rel : rel + size], max_ts, False
        horizon = self.horizon
        if None in keys:
            keyed = [i for i, k in enumerate(keys) if k is not None]
            st.keyless_removed += count - len(keyed)
            latest: list = [None] * count
            for i, lat in zip(keyed, self.map.latest_many([keys[i] for i in keyed])):
                latest[i] = lat
        else:
            keyed = None
            latest = self.map.latest_many(keys)
        # Superseded: a later offset of the key is in the map (None: not in the map).
        keep = [i for i, d, lat in zip(range(count), deltas, latest) if lat is None or base + d >= lat]
        if keyed is not None:
            keep = [i for i in keep if keys[i] is not None]
        tombstones = 0
        if horizon > base and True in nulls:
            kept_before = len(keep)
            keep = [i for i in keep if not nulls[i] or base + deltas[i] >= horizon]
            tombstones = kept_before - len(keep)
        kept = len(keep)
        st.records_kept += kept
        st.records_removed += count - kept
        st.tombstones_removed += tombstones
        if kept == count:
            return mv[rel : rel + size], max_ts, False
        if kept == 0:
            st.batches_dropped += 1
            return None, max_ts, True
        lat_time = attrs & TIMESTAMP_TYPE_BIT
        records = [
            RawRecord(base + deltas[i], max_ts if lat_time else base_ts + ts_deltas[i], keys[i], nulls[i],
                      starts[i], starts[i + 1])
            for i in keep
        ]
        rebuilt = rebuild_batch(h, blob, records, keep_last_offset_delta=True)
        st.batches_rebuilt += 1
        new_max = max_ts if lat_time else max(r.timestamp for r in records)
        return rebuilt, new_max, True


class _GroupWriter:
    """Streams the recopied segments into as few cleaned segments as ``segment.bytes`` allows."""

    def __init__(self, view: CleanView, copier: _Copier, fds: dict[str, int], result: "CleanResult"):
        self.view = view
        self.copier = copier
        self.fds = fds
        self.result = result
        self.writer: CleanedSegmentWriter | None = None
        self.group: list[SegmentView] = []
        self.changed = False
        self.committed = committed_stems(view.directory)

    def add(self, seg: SegmentView) -> None:
        if self.writer is not None and not fits(self.group[0], self.writer.position, seg, self.view.config.segment_bytes):
            self.finish()
        if self.writer is None:
            self._start(seg)
        writer = self.writer
        assert writer is not None
        self.group.append(seg)
        self.changed = self.changed or len(self.group) > 1
        for buf, mv, rel, h in _iter_batches(self.fds[seg.path], seg):
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
                                               tuple(ReplacedSegment(s.base_offset, s.path, s.size) for s in group)))
        step("group-written")

    def abort(self) -> None:
        if self.writer is not None:
            self.writer.abort()
            discard_pending(self.view.directory, self.writer.stem)
            self.writer = None


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
        end = _build_map(view, dirty, ds.first_dirty, ds.first_uncleanable, offset_map, fds, stats)
        stats.map_entries = len(offset_map)
        stats.map_seconds = time.perf_counter() - started
        step("map-built")
        horizon = min(view.checkpoint.tombstone_horizon(now, config.delete_retention_ms), ds.first_dirty)
        copier = _Copier(view.name, offset_map, view.log_start, horizon, stats)
        to_copy = [s for s in candidates if s.base_offset < end]
        result = CleanResult(view.directory, view.name, ds.first_dirty, end,
                             view.checkpoint.after_pass(end, now, config.delete_retention_ms), stats=stats)
        copy_started = time.perf_counter()
        groups = _GroupWriter(view, copier, fds, result)
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


class Compaction(NamedTuple):
    result: CleanResult
    swap: object  # the log's SwapReport: groups installed or discarded


def compact(plog, now_ms: int | None = None, *, map_bytes: int = DEFAULT_MAP_BYTES, force: bool = True,
            max_passes: int = 100) -> list[Compaction]:
    """Clean and install in this process, pass after pass until the dirty part is covered.

    For a log owned by this process (tests, tools, benchmarks); a broker runs
    :func:`clean` in its cleaner actor and installs through the partition actor.
    """
    done = []
    for _ in range(max_passes):
        result = clean(plog.cleaning_view(), now_ms, map_bytes=map_bytes, force=force)
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
