"""Opening a partition folder: find segments, trust or rescan them, report.

Rules (close to Kafka's):

* A clean-shutdown marker means every segment and index was flushed by
  ``close()``: indexes are loaded after sanity checks, nothing is rescanned.
* Otherwise segments from the one holding the recovery point (the offset the
  log was last fsynced to) are rescanned with CRC checks and their indexes
  rebuilt. A bad batch at or after the recovery point was never acknowledged
  as durable, so it and everything after it is truncated. A bad batch before
  it is acknowledged data: it is reported and kept, never truncated away.
* ``full=True`` CRC-scans every segment and reports, without truncating
  acknowledged data.
* Indexes are derived: any index that fails its checks is rebuilt.
* The transaction index (``.txnindex``) of every rescanned segment that holds
  a transaction marker (or damage) is emptied and marked stale, like a missing
  one; the log rebuilds stale ones from the batches when it rebuilds the
  producer state (:mod:`.log_lifecycle`). A rescanned segment without markers
  gets an empty index, which is whole. A torn tail of a trusted one is cut off.
* Segment swaps by the log cleaner (see :mod:`.swap`) that were committed (a
  ``.swap`` manifest exists) are finished first; uncommitted ``.cleaned``
  files are deleted. Cleaned segments may be empty or leave offset gaps, and
  are kept as they are.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field

from .file_modes import private_opener
from .segment import CorruptBatch, Segment
from .segment_files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX, parse_segment_file, segment_stem
from .segment_recovery import apply_scan, scan
from .swap import finish_swaps
from .sync import fsync_dir, fsync_fd

log = logging.getLogger(__name__)

RECOVERY_POINT_FILE = "recovery-point-offset-checkpoint"
LOG_START_FILE = "log-start-offset-checkpoint"
CLEAN_SHUTDOWN_FILE = ".clean-shutdown"
_STRAY_SUFFIXES = (".tmp", ".deleted", ".cleaned", ".swap")  # .swap only after finish_swaps ran


@dataclass
class RecoveryReport:
    """What opening the log found and did; kept as ``PartitionLog.recovery_report``."""

    clean_shutdown: bool = False
    full_verification: bool = False
    recovery_point: int = 0
    segments: int = 0
    segments_trusted: int = 0
    segments_scanned: int = 0
    bytes_scanned: int = 0
    batches_scanned: int = 0
    indexes_rebuilt: int = 0
    truncated_bytes: int = 0
    truncated_at_offset: int | None = None
    truncate_reason: str = ""
    deleted_segments: list[int] = field(default_factory=list)
    swaps_finished: int = 0
    corrupt: list[CorruptBatch] = field(default_factory=list)
    duration_s: float = 0.0


# -- small checkpoint files -------------------------------------------------------

def write_checkpoint(path: str, value: int, *, durable: bool) -> None:
    """Replace a one-number checkpoint atomically (temp file + rename).

    ``durable=False`` skips the fsyncs: used for the recovery point after each
    flush, where a stale value after a power loss only means a longer rescan.
    """
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", opener=private_opener) as f:
            f.write(f"{value}\n")
            if durable:
                f.flush()
                fsync_fd(f.fileno(), tmp)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)  # a full disk must not leave half-written temp files behind
        except OSError:
            pass
        raise
    if durable:
        fsync_dir(os.path.dirname(path) or ".")


def read_checkpoint(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read()
    except FileNotFoundError:
        return None
    text = text.strip()
    if not text.isdigit():
        log.warning("ignoring unreadable checkpoint %s: %r", path, text[:40])
        return None
    return int(text)


# -- loading ------------------------------------------------------------------

def list_segment_bases(directory: str) -> list[int]:
    """Base offsets of the ``.log`` files; removes leftovers that are not data."""
    return [base for base, _ in list_segment_files(directory)]


def list_segment_files(directory: str) -> list[tuple[int, int]]:
    """``(base offset, generation)`` of the live ``.log`` files, in offset order.

    Finishes committed cleaner swaps, then removes leftovers that are not data.
    Two files for one base offset cannot come from logan-ray itself (a swap's
    manifest outlives the files it replaced); the older generation is set
    aside as ``.orphaned`` for an operator rather than deleted or served.
    """
    finish_swaps(directory)
    names = os.listdir(directory)
    live: dict[int, int] = {}
    for name in names:
        parsed = parse_segment_file(name)
        if parsed is None:
            continue
        base, generation = parsed
        other = live.get(base)
        if other is not None:
            loser = min(other, generation)
            stem = segment_stem(base, loser)
            log.error("two segment files start at offset %d in %s; setting generation %d aside", base, directory, loser)
            os.replace(os.path.join(directory, stem + LOG_SUFFIX), os.path.join(directory, stem + LOG_SUFFIX + ".orphaned"))
            generation = max(other, generation)
        live[base] = generation
    stems = {segment_stem(b, g) for b, g in live.items()}
    for name in names:
        path = os.path.join(directory, name)
        if name.endswith(_STRAY_SUFFIXES):
            _remove(path)
            continue
        for suffix in (INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX):
            if parse_segment_file(name, suffix) is not None and name[: -len(suffix)] not in stems:
                _remove(path)  # an index whose log is gone
    return sorted(live.items())


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def load_segments(
    directory: str,
    *,
    index_bytes: int,
    index_interval: int,
    clean: bool,
    recovery_point: int,
    log_start: int,
    full: bool,
    now_ms: int,
) -> tuple[list[Segment], RecoveryReport]:
    """Open every segment of a partition folder and make the set consistent."""
    started = time.perf_counter()
    report = RecoveryReport(clean_shutdown=clean, full_verification=full, recovery_point=recovery_point)
    report.swaps_finished = len(finish_swaps(directory))
    files = list_segment_files(directory)
    generations = dict(files)
    bases = [b for b, _ in files]

    def make(base: int) -> Segment:
        return Segment(directory, base, index_bytes=index_bytes, index_interval=index_interval,
                       generation=generations.get(base, 0))

    # Segments wholly below the log start offset were deleted logically
    # (retention, DeleteRecords) but their files may have outlived a crash.
    while len(bases) > 1 and bases[1] <= log_start:
        seg = make(bases.pop(0))
        seg.delete_files()
        report.deleted_segments.append(seg.base_offset)
    if not bases:
        segments = [Segment.create(directory, log_start, index_bytes=index_bytes, index_interval=index_interval)]
        report.segments = 1
        report.duration_s = time.perf_counter() - started
        return segments, report

    # Index of the first segment to rescan: the one holding the recovery point.
    if clean:
        first_scan = len(bases)
    else:
        first_scan = max(0, sum(1 for b in bases if b <= recovery_point) - 1)

    segments: list[Segment] = []
    for i, base in enumerate(bases):
        seg = make(base)
        is_last = i == len(bases) - 1
        next_base = bases[i + 1] if not is_last else None
        if i < first_scan and not full:
            if seg.load_trusted():
                report.segments_trusted += 1
                seg.durable = not is_last or clean
                seg.txnindex.load(seg.next_offset)
                segments.append(seg)
                continue
            report.indexes_rebuilt += 1
            log.warning("rebuilding indexes of %s: missing or inconsistent", seg.path)
            outcome = scan(seg, check_crc=False, is_last=is_last)
        else:
            acked = recovery_point if i >= first_scan else 1 << 63
            outcome = scan(seg, check_crc=True, acked_before=acked, is_last=is_last)
            report.segments_scanned += 1
            report.bytes_scanned += outcome.valid_end
            report.indexes_rebuilt += 1
        report.batches_scanned += outcome.batches
        if next_base is not None:
            outcome.holes = {p: (r[0], next_base if r[1] < 0 else r[1]) for p, r in outcome.holes.items()}
            if any(r[0] >= seg.file_size() for r in outcome.holes.values()):
                outcome.next_offset = next_base  # unreadable to the end: the next segment says where it stops
        cut = apply_scan(seg, outcome)
        report.corrupt.extend(outcome.corrupt)
        seg.durable = (i < first_scan) and not is_last
        if i >= first_scan and (outcome.control_batches or outcome.corrupt or outcome.holes):
            seg.txnindex.reset()  # may describe cut records: the log replays the segment into it again
        elif i >= first_scan:
            # The scan read every batch header and met no transaction marker: no abort is indexed in
            # this segment, so its index is empty and whole. Marking it stale instead would make the
            # log replay producer state from before this segment, passing over the roll snapshots.
            seg.txnindex.replace(())
        else:
            seg.txnindex.load(seg.next_offset)
        segments.append(seg)
        if cut or outcome.truncate_at is not None:
            report.truncated_bytes += cut
            report.truncated_at_offset = seg.next_offset
            report.truncate_reason = outcome.truncate_reason
            log.warning(
                "truncated %d bytes of %s at position %d (offset %d): %s",
                cut, seg.path, seg.size, seg.next_offset, outcome.truncate_reason,
            )
            # Everything after a truncation point is unacknowledged data too.
            for later in bases[i + 1:]:
                make(later).delete_files()
                report.deleted_segments.append(later)
            break

    # An empty segment that is not the last one holds nothing; drop it so
    # lookups never land in it. A cleaned segment may be empty on purpose: it
    # keeps the log start offset where it was when all its records went.
    kept = []
    for j, seg in enumerate(segments):
        if seg.size == 0 and j < len(segments) - 1 and not seg.compacted:
            seg.delete_files()
            report.deleted_segments.append(seg.base_offset)
        else:
            kept.append(seg)
    segments = kept
    for seg, nxt in zip(segments, segments[1:]):
        if seg.next_offset > nxt.base_offset or (seg.next_offset < nxt.base_offset and not seg.compacted):
            log.warning(
                "segment %s ends at offset %d but the next one starts at %d",
                seg.path, seg.next_offset, nxt.base_offset,
            )
    active = segments[-1]
    active.read_rolling_base(now_ms)
    report.segments = len(segments)
    report.duration_s = time.perf_counter() - started
    return segments, report


__all__ = [
    "RecoveryReport",
    "load_segments",
    "read_checkpoint",
    "write_checkpoint",
    "RECOVERY_POINT_FILE",
    "LOG_START_FILE",
    "CLEAN_SHUTDOWN_FILE",
]
