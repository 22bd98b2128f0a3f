"""One log segment: a ``.log`` file of whole v2 batches plus two derived indexes.

A segment never decodes records. Everything here works on the 61-byte batch
headers and one CRC32C per batch, reading the file in large chunks so that
recovery and verification cost about one ``memcpy`` plus one hardware CRC
pass per byte, with Python overhead per batch rather than per record.

Files are named by the 20-digit zero-padded base offset, as in Kafka:
``00000000000000000000.log``, ``.index``, ``.timeindex``. A segment written by
the log cleaner adds a generation, ``00000000000000000000-c3.log``: unlike
Kafka, a cleaned segment never reuses the name of a file it replaces, so a
reader that was handed ``(path, position, length)`` before a swap still reads
the old bytes at that path until the delayed deletion, never the new layout.
Cleaned segments have offset gaps (removed records), so their offset checks
only require base offsets to increase.
"""
from __future__ import annotations

import logging
import os
from bisect import bisect_right
from typing import Iterator, NamedTuple

import crc32c as _crc32c

from .batch_header import CONTROL_BIT, HEADER, HEADER_SIZE, LOG_OVERHEAD, MAGIC, validate_batch
from .errors import CorruptRecordError, InvalidRecordError
from .index import MAX_RELATIVE_OFFSET, OffsetIndex, TimeIndex
from .sync import fsync_path

log = logging.getLogger(__name__)

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"

SCAN_CHUNK = 8 << 20  # recovery / verification read size
HEADER_WINDOW = 16 << 10  # header-only walks (lookups) read this much at a time
_MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
_UNACKED = 1 << 63  # "every offset is acknowledged"


GENERATION_MARK = "-c"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def segment_stem(base_offset: int, generation: int = 0) -> str:
    """File name without suffix: the base offset, plus ``-c<generation>`` for cleaned segments."""
    name = segment_name(base_offset)
    return name if generation == 0 else f"{name}{GENERATION_MARK}{generation}"


def parse_segment_name(filename: str, suffix: str = LOG_SUFFIX) -> int | None:
    """Base offset encoded in a (never cleaned) segment file name, or None if it is not one."""
    parsed = parse_segment_file(filename, suffix)
    return parsed[0] if parsed is not None and parsed[1] == 0 else None


def parse_segment_file(filename: str, suffix: str = LOG_SUFFIX) -> tuple[int, int] | None:
    """``(base offset, generation)`` of a segment file name, or None if it is not one."""
    if not filename.endswith(suffix):
        return None
    stem = filename[: -len(suffix)]
    base, mark, generation = stem.partition(GENERATION_MARK)
    if len(base) != 20 or not (base.isascii() and base.isdigit()):
        return None
    if not mark:
        return int(base), 0
    if not (generation.isascii() and generation.isdigit()) or generation.startswith("0"):
        return None
    return int(base), int(generation)


class FileSlice(NamedTuple):
    """A batch-aligned byte range of a segment file, ready for ``os.sendfile``."""

    path: str
    position: int
    length: int


class CorruptBatch(NamedTuple):
    """A batch that failed validation in data that is kept (acknowledged)."""

    path: str
    position: int
    offset: int  # the offset the batch should start at
    reason: str


class BatchRef(NamedTuple):
    """Header facts of one batch in a segment, as a walk yields them."""

    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int
    attributes: int


class ScanOutcome:
    """What a full scan of a segment found; applied by :meth:`Segment.apply_scan`."""

    __slots__ = (
        "index", "timeindex", "valid_end", "next_offset", "max_timestamp", "offset_of_max",
        "corrupt", "holes", "truncate_at", "truncate_reason", "batches", "verified", "checked_crc",
    )

    def __init__(self) -> None:
        self.valid_end = 0
        self.next_offset = 0
        self.max_timestamp = -1
        self.offset_of_max = -1
        self.corrupt: list[CorruptBatch] = []
        self.holes: dict[int, tuple[int, int]] = {}
        self.truncate_at: int | None = None
        self.truncate_reason = ""
        self.batches = 0
        self.verified: list[tuple[int, int]] = []
        self.checked_crc = False


class _Ranges:
    """Disjoint sorted byte ranges: the parts of a file already CRC-checked."""

    __slots__ = ("_starts", "_ends")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def add(self, start: int, end: int) -> None:
        if end <= start:
            return
        i = bisect_right(self._ends, start - 1)  # first range ending at/after start
        j = i
        while j < len(self._starts) and self._starts[j] <= end:
            start = min(start, self._starts[j])
            end = max(end, self._ends[j])
            j += 1
        self._starts[i:j] = [start]
        self._ends[i:j] = [end]

    def missing(self, start: int, end: int) -> list[tuple[int, int]]:
        gaps = []
        i = bisect_right(self._ends, start)
        cur = start
        while cur < end and i < len(self._starts):
            s, e = self._starts[i], self._ends[i]
            if s >= end:
                break
            if s > cur:
                gaps.append((cur, s))
            cur = max(cur, e)
            i += 1
        if cur < end:
            gaps.append((cur, end))
        return gaps

    def truncate(self, end: int) -> None:
        while self._starts and self._starts[-1] >= end:
            self._starts.pop()
            self._ends.pop()
        if self._ends and self._ends[-1] > end:
            self._ends[-1] = end

    def covered(self) -> int:
        return sum(e - s for s, e in zip(self._starts, self._ends))


def _batch_problem(buf: bytearray | memoryview, rel: int, size: int) -> str:
    """Human-readable reason a batch failed the fast checks (slow path only)."""
    try:
        validate_batch(buf, rel, end=rel + size)
    except (CorruptRecordError, InvalidRecordError) as e:
        return str(e)
    return "record batch failed validation"


class Segment:
    """A ``.log`` file plus indexes; the log serialises all calls that mutate it."""

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_bytes: int,
        index_interval: int,
        generation: int = 0,
        pending_suffix: str = "",
    ):
        self.directory = directory
        self.base_offset = base_offset
        self.generation = generation
        self.compacted = generation > 0  # written by the cleaner: offset gaps are normal
        self.stem = segment_stem(base_offset, generation)
        self.path = os.path.join(directory, self.stem + LOG_SUFFIX + pending_suffix)
        self.index_path = os.path.join(directory, self.stem + INDEX_SUFFIX + pending_suffix)
        self.timeindex_path = os.path.join(directory, self.stem + TIMEINDEX_SUFFIX + pending_suffix)
        self.index_bytes = index_bytes
        self.index_interval = index_interval
        self.index = OffsetIndex(self.index_path, base_offset, index_bytes)
        self.timeindex = TimeIndex(self.timeindex_path, base_offset, index_bytes)
        self.size = 0
        self.next_offset = base_offset
        self.max_timestamp = -1
        self.offset_of_max = -1  # base offset of the first batch holding max_timestamp
        self.rolling_base_ms: int | None = None  # clock time of the first batch, for segment.ms
        self.durable = False  # closed segment whose files are fsynced
        self.torn = False  # a failed append could not be cut back off the file
        self.corrupt: dict[int, CorruptBatch] = {}
        self.holes: dict[int, tuple[int, int]] = {}  # position -> (resume position, resume offset)
        self.verified = _Ranges()
        self._bytes_since_index = 0
        self._fd: int | None = None

    # -- file handling ------------------------------------------------------
    @property
    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        return self._fd

    def final_paths(self) -> tuple[str, str, str]:
        """Paths of the log and index files without any pending suffix (``.cleaned``)."""
        return tuple(os.path.join(self.directory, self.stem + s) for s in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX))  # type: ignore[return-value]

    def finalize(self) -> None:
        """Rename pending (``.cleaned``) files to their final names; open descriptors stay valid."""
        log_path, index_path, timeindex_path = self.final_paths()
        for old, new in ((self.index_path, index_path), (self.timeindex_path, timeindex_path), (self.path, log_path)):
            if old != new and os.path.exists(old):
                os.replace(old, new)
        self.path, self.index_path, self.timeindex_path = log_path, index_path, timeindex_path
        self.index.path, self.timeindex.path = index_path, timeindex_path

    @classmethod
    def create(cls, directory: str, base_offset: int, *, index_bytes: int, index_interval: int) -> "Segment":
        seg = cls(directory, base_offset, index_bytes=index_bytes, index_interval=index_interval)
        for p in (seg.path, seg.index_path, seg.timeindex_path):
            if os.path.exists(p):
                os.remove(p)  # stale leftovers of a segment truncated away
        seg.fd  # noqa: B018 - create the file now
        return seg

    def file_size(self) -> int:
        return os.fstat(self.fd).st_size

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete_files(self) -> None:
        self.close()
        for p in (self.path, self.index_path, self.timeindex_path):
            try:
                os.remove(p)
            except FileNotFoundError:
                pass

    def dup_fd(self) -> int:
        """A private fd for fsync outside the log lock; survives a concurrent close()."""
        return os.dup(self.fd)

    def pread(self, position: int, length: int) -> bytes:
        chunks = []
        fd = self.fd
        while length > 0:
            chunk = os.pread(fd, length, position)
            if not chunk:
                raise CorruptRecordError(f"segment ends early: wanted {length} more bytes", path=self.path, position=position)
            chunks.append(chunk)
            position += len(chunk)
            length -= len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    # -- appending ------------------------------------------------------------
    def append(self, buf: bytearray, batches: list[tuple[int, int, int, int, int]], now_ms: int) -> None:
        """Write already-validated batches with one ``pwrite`` and index them.

        ``batches`` holds ``(position in buf, base offset, last offset, max timestamp, size)``.
        On a failed write (a full disk) the file is cut back so no partial
        append remains; if even that fails, :attr:`torn` is set.
        """
        position = self.size
        fd = self.fd
        total = len(buf)
        try:
            written = os.pwrite(fd, buf, position)
            while written < total:  # regular files only return short on ENOSPC-like trouble
                n = os.pwrite(fd, memoryview(buf)[written:], position + written)
                if n <= 0:
                    raise OSError("short write to segment")
                written += n
        except BaseException:
            try:
                os.ftruncate(fd, position)  # no torn batch stays behind to shift later offsets
            except OSError:
                self.torn = True  # the file may end in a partial batch: only recovery can cut it
            raise
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms
        interval = self.index_interval
        for bpos, base, last, max_ts, size in batches:
            if max_ts > self.max_timestamp:
                self.max_timestamp = max_ts
                self.offset_of_max = base
            if self._bytes_since_index > interval:
                self.index.append(base, position + bpos)
                self.timeindex.maybe_append(self.max_timestamp, self.offset_of_max)
                self._bytes_since_index = 0
            self._bytes_since_index += size
            self.next_offset = last + 1
        self.size = position + total
        self.verified.add(position, self.size)  # validated before the write

    def seal(self) -> None:
        """Becoming inactive: record the final max timestamp and persist the indexes."""
        if self.max_timestamp >= 0:
            self.timeindex.maybe_append(self.max_timestamp, self.offset_of_max)
        self.write_indexes()

    def write_indexes(self, *, rewrite: bool = False) -> None:
        self.index.write(rewrite=rewrite)
        self.timeindex.write(rewrite=rewrite)

    def sync_indexes(self) -> None:
        for p in (self.index_path, self.timeindex_path):
            if os.path.exists(p):
                fsync_path(p)

    # -- walking headers ----------------------------------------------------
    def walk(
        self,
        start: int,
        end: int | None = None,
        *,
        expected: int | None = None,
        check_crc: bool = False,
        window: int = HEADER_WINDOW,
    ) -> Iterator[tuple[BatchRef, str | None, str | None]]:
        """Yield ``(batch, problem kind, reason)`` for consecutive batches from ``start``.

        Problem kinds: ``"framing"`` (length/magic/truncation: the walk stops
        because the next position is unknown), ``"crc"`` (content fails CRC or
        counts; framing is usable so the walk goes on), ``"offset"`` (the base
        offset, which lies outside the CRC, breaks the offset sequence) and
        ``"hole"`` (a known unreadable region, skipped). ``expected`` is the base
        offset the first batch must have; continuity is checked from there.
        """
        end = self.size if end is None else end
        fd = self.fd
        buf = bytearray(max(window, HEADER_SIZE))
        mv = memoryview(buf)
        cstart = start
        clen = 0
        pos = start
        unpack = HEADER.unpack_from
        crc = _crc32c.crc32c
        holes = self.holes
        while pos < end:
            hole = holes.get(pos)
            if hole is not None:
                resume_pos, resume_offset = hole
                yield BatchRef(pos, expected if expected is not None else -1, resume_offset - 1, -1, resume_pos - pos, 0), "hole", "unreadable region"
                pos, expected = resume_pos, resume_offset
                continue
            rel = pos - cstart
            if rel < 0 or rel + HEADER_SIZE > clen:
                clen = os.preadv(fd, [mv[: min(len(buf), end - pos)]], pos)
                cstart, rel = pos, 0
                if clen < HEADER_SIZE:
                    ref = BatchRef(pos, expected if expected is not None else -1, -1, -1, end - pos, 0)
                    yield ref, "framing", f"torn batch: {end - pos} bytes at the end, a header needs {HEADER_SIZE}"
                    return
            base, blen, _epoch, magic, stored_crc, attrs, lod, _bts, max_ts, _pid, _pep, _seq, count = unpack(buf, rel)
            size = blen + LOG_OVERHEAD
            if magic != MAGIC or blen < _MIN_BATCH_LENGTH or size > end - pos:
                if magic != MAGIC:
                    reason = f"bad magic {magic}"
                elif blen < _MIN_BATCH_LENGTH:
                    reason = f"batch length {blen} is smaller than a header"
                else:
                    reason = f"torn batch: length field says {size} bytes, only {end - pos} present"
                ref = BatchRef(pos, expected if expected is not None else base, -1, -1, end - pos, attrs)
                yield ref, "framing", reason
                return
            kind = reason = None
            if check_crc:
                if rel + size > clen:
                    if size > len(buf):
                        buf = bytearray(size)
                        mv = memoryview(buf)
                    clen = os.preadv(fd, [mv[: min(len(buf), end - pos)]], pos)
                    cstart, rel = pos, 0
                    if clen < size:
                        ref = BatchRef(pos, expected if expected is not None else base, -1, -1, end - pos, attrs)
                        yield ref, "framing", f"file ends inside a batch of {size} bytes"
                        return
                if (
                    crc(mv[rel + 21 : rel + size]) != stored_crc
                    or count < 0
                    or lod < 0
                    or count > lod + 1
                    or (count == 0 and lod == 0 and not attrs & CONTROL_BIT)
                ):
                    kind, reason = "crc", _batch_problem(mv, rel, size)
            if kind is None and expected is not None and (base < expected if self.compacted else base != expected):
                kind, reason = "offset", f"batch base offset {base} where {expected} was expected"
            if kind is None:
                yield BatchRef(pos, base, base + lod, max_ts, size, attrs), None, None
                expected = base + lod + 1
            elif kind == "offset":
                yield BatchRef(pos, expected, expected + lod, max_ts, size, attrs), kind, reason
                expected = expected + lod + 1  # lod is CRC-protected, the stored base is not
            else:
                start_offset = expected if expected is not None else base
                yield BatchRef(pos, start_offset, start_offset + max(lod, 0), max_ts, size, attrs), kind, reason
                expected = None  # lod may be damaged too: accept the next batch's base
            pos += size

    def find(self, offset: int) -> tuple[int, int]:
        """(position, base offset) of the batch holding ``offset``: index lookup, then a short header walk.

        Raises CorruptRecordError if the walk meets broken framing first.
        """
        start_offset, start_pos = self.index.lookup(offset)
        for ref, kind, reason in self.walk(start_pos, expected=start_offset):
            if kind in ("framing", "offset", "hole"):
                if ref.last_offset >= offset or kind == "framing":
                    raise CorruptRecordError(f"corrupt batch while looking up offset {offset}: {reason}", path=self.path, position=ref.position)
                continue
            if ref.last_offset >= offset:
                return ref.position, ref.base_offset
        return self.size, self.next_offset

    def batches_from(self, offset: int, end: int | None = None) -> Iterator[tuple[BatchRef, str | None, str | None]]:
        """Walk from the batch holding ``offset`` (header facts only)."""
        position, base = self.find(offset)
        return self.walk(position, end, expected=base)

    # -- CRC verification of served ranges ------------------------------------
    def ensure_verified(self, start: int, end: int) -> tuple[int, CorruptBatch | None]:
        """CRC-check the not yet verified parts of ``[start, end)`` (batch aligned).

        Returns ``(good_end, problem)``: ``good_end == end`` when everything is
        sound, otherwise the position of the first bad batch and its report.
        """
        for gap_start, gap_end in self.verified.missing(start, end):
            known = self._known_corrupt(gap_start, gap_end)
            scan_end = known.position if known is not None else gap_end
            good = gap_start
            for ref, kind, reason in self.walk(gap_start, scan_end, check_crc=True, window=SCAN_CHUNK):
                if kind in ("crc", "framing", "hole"):
                    bad = CorruptBatch(self.path, ref.position, ref.base_offset, reason or kind)
                    self.corrupt.setdefault(ref.position, bad)
                    self.verified.add(gap_start, ref.position)
                    log.error("corrupt batch in %s at position %d: %s", self.path, ref.position, reason)
                    return ref.position, bad
                good = ref.position + ref.size
            self.verified.add(gap_start, good)
            if known is not None:
                return known.position, known
        return end, None

    def _known_corrupt(self, start: int, end: int) -> CorruptBatch | None:
        hits = [p for p in self.corrupt if start <= p < end]
        return self.corrupt[min(hits)] if hits else None

    # -- loading and recovery -------------------------------------------------
    def load_trusted(self) -> bool:
        """Adopt on-disk indexes after checking them; False means "scan me instead".

        Used for segments below the recovery point (flushed) or after a clean
        shutdown. The indexes must be whole, sorted and point at real batch
        headers; the tail after the last index entry is walked to find the
        next offset, which also proves the file ends on a batch boundary.
        """
        self.size = self.file_size()
        index = OffsetIndex.load(self.index_path, self.base_offset, self.index_bytes, max(self.size, 1))
        timeindex = TimeIndex.load(self.timeindex_path, self.base_offset, self.index_bytes)
        if index is None or timeindex is None:
            return False
        if self.size and not timeindex.last_entry:
            return False  # a sealed, non-empty segment always has a final time entry
        start_offset, start_pos = index.lookup(1 << 62)
        last_ref = None
        for ref, kind, _ in self.walk(start_pos, expected=start_offset):
            if kind is not None:
                return False
            last_ref = ref
        if last_ref is not None:
            if last_ref.position + last_ref.size != self.size:
                return False
            self.next_offset = last_ref.last_offset + 1
        elif self.size:
            return False
        entry = timeindex.last_entry
        if entry is not None and entry[1] >= self.next_offset:
            return False
        self.index, self.timeindex = index, timeindex
        if entry is not None:
            self.max_timestamp, self.offset_of_max = entry
        self._bytes_since_index = self.size - start_pos if index.last_entry else self.size
        return True

    def scan(self, *, check_crc: bool, acked_before: int = _UNACKED, is_last: bool = True) -> ScanOutcome:
        """Walk the whole file, rebuilding indexes, and decide what to keep.

        A bad batch at an offset >= ``acked_before`` (not flushed, so never
        acknowledged as durable) ends the valid data: everything from it on is
        a torn or corrupt tail to truncate. A bad batch below it is reported and
        kept; if its framing is broken the walk resynchronises on the next
        CRC-valid batch so later acknowledged data stays readable.
        """
        out = ScanOutcome()
        out.checked_crc = check_crc
        out.index = OffsetIndex(self.index_path, self.base_offset, self.index_bytes)
        out.timeindex = TimeIndex(self.timeindex_path, self.base_offset, self.index_bytes)
        end = self.file_size()
        out.next_offset = self.base_offset
        state = [0, -1, -1]  # bytes since the last index entry, max timestamp, its batch offset
        position = 0
        expected = self.base_offset  # -1: accept any base offset (after a damaged batch)
        run_start: int | None = 0  # start of the current run of CRC-checked good batches

        def close_run(upto: int) -> None:
            if check_crc and run_start is not None and upto > run_start:
                out.verified.append((run_start, upto))

        saved_holes = self.holes
        self.holes = {}  # rediscover holes instead of trusting old ones
        try:
            while True:
                position, expected = self._good_run(out, state, position, end, expected, check_crc)
                if position >= end:
                    break
                # The fast loop stopped on something: classify it with the careful walker.
                ref, kind, reason = next(
                    self.walk(position, end, expected=None if expected < 0 else expected, check_crc=check_crc)
                )
                if kind is None:  # nothing wrong after all (defensive; the fast loop is stricter)
                    self._account(out, state, ref)
                    position, expected = ref.position + ref.size, ref.last_offset + 1
                    continue
                close_run(ref.position)
                run_start = None
                bad_offset = out.next_offset  # the first offset not yet accounted for
                if bad_offset >= acked_before:
                    out.truncate_at = ref.position
                    out.truncate_reason = reason or kind
                    break
                bad = CorruptBatch(self.path, ref.position, bad_offset, reason or kind)
                out.corrupt.append(bad)
                log.error("corrupt batch in %s at position %d (offset %d): %s", self.path, ref.position, bad_offset, bad.reason)
                if kind == "framing":
                    resume = self._resync(ref.position, end, bad_offset)
                    if resume is None:
                        if is_last:
                            out.truncate_at = ref.position
                            out.truncate_reason = f"{reason}; no valid batch follows, so the tail is unreadable"
                        else:
                            out.holes[ref.position] = (end, -1)  # the log sets the resume offset
                        break
                    out.holes[ref.position] = resume
                    position, expected = resume
                else:  # damaged content or offset, usable framing: keep going after it
                    out.next_offset = max(out.next_offset, ref.last_offset + 1)
                    position = ref.position + ref.size
                    expected = ref.last_offset + 1 if kind == "offset" else -1
                run_start = position
                out.valid_end = position
            close_run(out.valid_end)
        finally:
            self.holes = saved_holes
        max_ts, off_max = state[1], state[2]
        if max_ts >= 0:
            out.timeindex.maybe_append(max_ts, off_max)
        out.max_timestamp, out.offset_of_max = max_ts, off_max
        return out

    def _account(self, out: ScanOutcome, state: list[int], ref: BatchRef) -> None:
        if ref.max_timestamp > state[1]:
            state[1], state[2] = ref.max_timestamp, ref.base_offset
        if state[0] > self.index_interval:
            out.index.append(ref.base_offset, ref.position)
            out.timeindex.maybe_append(state[1], state[2])
            state[0] = 0
        state[0] += ref.size
        out.next_offset = ref.last_offset + 1
        out.valid_end = ref.position + ref.size
        out.batches += 1

    def _good_run(
        self, out: ScanOutcome, state: list[int], position: int, end: int, expected: int, check_crc: bool
    ) -> tuple[int, int]:
        """Consume consecutive sound batches from ``position`` as fast as Python allows.

        This is recovery's hot loop: one ``preadv`` per 8 MiB, then per batch one
        header unpack and one C-speed CRC over a memoryview, no allocations
        beyond that. It stops at the first batch it does not like and returns
        ``(position, expected offset)`` there; :meth:`scan` then lets the
        careful walker say what is wrong.
        """
        fd = self.fd
        buf = bytearray(SCAN_CHUNK)
        mv = memoryview(buf)
        unpack = HEADER.unpack_from
        crc = _crc32c.crc32c
        index_append = out.index.append
        time_append = out.timeindex.maybe_append
        interval = self.index_interval
        since, max_ts, off_max = state
        gaps_ok = self.compacted  # cleaned segments: base offsets only have to increase
        batches = 0
        cstart, clen = position, 0
        try:
            while position < end:
                rel = position - cstart
                if rel + HEADER_SIZE > clen:
                    clen = os.preadv(fd, [mv[: min(len(buf), end - position)]], position)
                    cstart, rel = position, 0
                    if clen < HEADER_SIZE:
                        break
                base, blen, _e, magic, stored_crc, attrs, lod, _b, max_ts_b, _p, _pe, _s, count = unpack(buf, rel)
                size = blen + LOG_OVERHEAD
                if (
                    magic != MAGIC
                    or blen < _MIN_BATCH_LENGTH
                    or size > end - position
                    or (expected >= 0 and (base < expected if gaps_ok else base != expected))
                ):
                    break
                if check_crc:
                    if rel + size > clen:
                        if size > len(buf):
                            buf = bytearray(size)
                            mv = memoryview(buf)
                        clen = os.preadv(fd, [mv[: min(len(buf), end - position)]], position)
                        cstart, rel = position, 0
                        if clen < size:
                            break
                    if crc(mv[rel + 21 : rel + size]) != stored_crc:
                        break
                    if count < 0 or lod < 0 or count > lod + 1 or (count == 0 and lod == 0 and not attrs & CONTROL_BIT):
                        break
                if max_ts_b > max_ts:
                    max_ts, off_max = max_ts_b, base
                if since > interval:
                    index_append(base, position)
                    time_append(max_ts, off_max)
                    since = 0
                since += size
                expected = base + lod + 1
                position += size
                batches += 1
        finally:
            mv.release()
        state[:] = [since, max_ts, off_max]
        if batches:
            out.batches += batches
            out.next_offset = expected
            out.valid_end = position
        return position, expected

    def _resync(self, bad_position: int, end: int, min_offset: int) -> tuple[int, int] | None:
        """Find the next position after ``bad_position`` holding a CRC-valid batch.

        Only used for broken framing in acknowledged data: the magic byte sits
        16 bytes into a header, so candidates are found with ``find`` and then
        confirmed by length, offset plausibility and a full CRC.
        """
        fd = self.fd
        window = SCAN_CHUNK
        pos = bad_position + 1
        crc = _crc32c.crc32c
        magic_byte = bytes([MAGIC])
        while pos < end - HEADER_SIZE + 1:
            chunk = os.pread(fd, min(window + HEADER_SIZE, end - pos), pos)
            if len(chunk) < HEADER_SIZE:
                return None
            i = chunk.find(magic_byte, 16)
            while i != -1 and i - 16 + HEADER_SIZE <= len(chunk):
                cand = pos + i - 16
                base, blen, _e, _m, stored_crc, attrs, lod, *_rest, count = HEADER.unpack_from(chunk, i - 16)
                size = blen + LOG_OVERHEAD
                if (
                    blen >= _MIN_BATCH_LENGTH
                    and cand + size <= end
                    and min_offset <= base < min_offset + MAX_RELATIVE_OFFSET
                    and 0 <= lod
                    and 0 <= count <= lod + 1
                ):
                    data = os.pread(fd, size, cand)
                    if len(data) == size and crc(memoryview(data)[21:]) == stored_crc:
                        return cand, base
                i = chunk.find(magic_byte, i + 1)
            pos += window
        return None

    def apply_scan(self, out: ScanOutcome) -> int:
        """Adopt a scan: truncate a bad tail, install rebuilt indexes. Returns bytes cut."""
        cut = 0
        if out.truncate_at is not None:
            cut = self.file_size() - out.truncate_at
            os.ftruncate(self.fd, out.truncate_at)
            self.size = out.truncate_at
            out.holes = {p: r for p, r in out.holes.items() if p < out.truncate_at}
        else:
            self.size = self.file_size()
        self.index, self.timeindex = out.index, out.timeindex
        self.next_offset = out.next_offset
        self.max_timestamp, self.offset_of_max = out.max_timestamp, out.offset_of_max
        self.holes = dict(out.holes)
        self.corrupt = {c.position: c for c in out.corrupt if c.position < self.size}
        self.verified = _Ranges()
        for s, e in out.verified:
            self.verified.add(s, min(e, self.size))
        last = self.index.last_entry
        self._bytes_since_index = self.size - last[1] if last else self.size
        self.write_indexes(rewrite=True)
        return cut

    def read_rolling_base(self, now_ms: int) -> None:
        """After a restart, time segment.ms from the first batch's timestamp (as Kafka does)."""
        if self.size < HEADER_SIZE:
            self.rolling_base_ms = None
            return
        first_max_ts = HEADER.unpack_from(self.pread(0, HEADER_SIZE), 0)[8]
        self.rolling_base_ms = first_max_ts if 0 <= first_max_ts <= now_ms else now_ms
