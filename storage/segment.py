"""One log segment: a ``.log`` file of whole v2 batches plus two derived indexes.

A segment never decodes records. Everything here works on the 61-byte batch
headers and one CRC32C per batch, read through :class:`.file_batches.FileBatches`,
with Python overhead per batch rather than per record: appending, walking
headers to find an offset, and CRC-checking ranges before they are served.
Rebuilding a segment after a crash is :mod:`.segment_recovery`; file names are
:mod:`.segment_files`. Cleaned segments have offset gaps (removed records), so
their offset checks only require base offsets to increase.
"""
from __future__ import annotations

import logging
import os
from typing import Iterator, NamedTuple

from .batch_header import HEADER_SIZE, LOG_OVERHEAD, named, parse_header
from .errors import CorruptRecordError
from .file_batches import HEADER_WINDOW, SCAN_CHUNK, FileBatches
from .index import OffsetIndex, TimeIndex
from .segment_files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, segment_stem
from .sync import fsync_path
from .verified_ranges import VerifiedRanges

log = logging.getLogger(__name__)


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
    """Header facts of one batch in a segment, as a walk yields them.

    Offsets are where the batch belongs in the log (for a damaged batch: where
    it should start); ``fields`` are the batch's own header fields (name them
    with :func:`.batch_header.named`), None when unreadable.
    """

    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int
    attributes: int
    fields: tuple | None


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
        self.verified = VerifiedRanges()
        self.bytes_since_index = 0
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
            if self.bytes_since_index > interval:
                self.index.append(base, position + bpos)
                self.timeindex.maybe_append(self.max_timestamp, self.offset_of_max)
                self.bytes_since_index = 0
            self.bytes_since_index += size
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
        reader: FileBatches | None = None,
    ) -> Iterator[tuple[BatchRef, str | None, str | None]]:
        """Yield ``(batch, problem kind, reason)`` for consecutive batches from ``start``.

        Problem kinds: ``"framing"`` (length/magic/truncation: the walk stops
        because the next position is unknown), ``"crc"`` (content fails CRC or
        counts; framing is usable so the walk goes on), ``"offset"`` (the base
        offset, which lies outside the CRC, breaks the offset sequence) and
        ``"hole"`` (a known unreadable region, skipped). ``expected`` is the base
        offset the first batch must have; continuity is checked from there.
        ``reader`` reads the file (one is made with ``window`` if not given).
        """
        end = self.size if end is None else end
        reader = FileBatches(self.fd, end, window) if reader is None else reader
        holes = self.holes
        gaps_ok = self.compacted
        pos = start
        while pos < end:
            hole = holes.get(pos)
            if hole is not None:
                resume_pos, resume_offset = hole
                yield BatchRef(pos, expected if expected is not None else -1, resume_offset - 1, -1, resume_pos - pos, 0, None), "hole", "unreadable region"
                pos, expected = resume_pos, resume_offset
                continue
            for pos, fields in reader.walk(pos, end, holes):
                base, length, _epoch, _magic, _crc, attributes, lod, _bts, max_ts, _pid, _pep, _seq, _count = fields
                size = length + LOG_OVERHEAD
                kind = reason = None
                if check_crc:
                    h = named(fields)
                    if not reader.sound(pos, h):
                        if reader.batch(pos, size) is None:
                            ref = BatchRef(pos, expected if expected is not None else base, -1, -1, end - pos, attributes, None)
                            yield ref, "framing", f"file ends inside a batch of {size} bytes"
                            return
                        kind, reason = "crc", str(reader.damage(pos, h))
                if kind is None and expected is not None and (base < expected if gaps_ok else base != expected):
                    kind, reason = "offset", f"batch base offset {base} where {expected} was expected"
                if kind is None:
                    yield BatchRef(pos, base, base + lod, max_ts, size, attributes, fields), None, None
                    expected = base + lod + 1
                elif kind == "offset":
                    yield BatchRef(pos, expected, expected + lod, max_ts, size, attributes, fields), kind, reason
                    expected = expected + lod + 1  # lod is CRC-protected, the stored base is not
                else:
                    first = expected if expected is not None else base
                    yield BatchRef(pos, first, first + max(lod, 0), max_ts, size, attributes, fields), kind, reason
                    expected = None  # lod may be damaged too: accept the next batch's base
            pos = reader.stop_position
            if reader.problem is not None:
                bad = reader.bad
                base = bad.base_offset if bad is not None else -1
                ref = BatchRef(pos, expected if expected is not None else base, -1, -1, end - pos,
                               bad.attributes if bad is not None else 0, None)
                yield ref, "framing", str(reader.problem)
                return

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
        self.bytes_since_index = self.size - start_pos if index.last_entry else self.size
        return True

    def read_rolling_base(self, now_ms: int) -> None:
        """After a restart, time segment.ms from the first batch's timestamp (as Kafka does)."""
        if self.size < HEADER_SIZE:
            self.rolling_base_ms = None
            return
        first_max_ts = parse_header(self.pread(0, HEADER_SIZE)).max_timestamp
        self.rolling_base_ms = first_max_ts if 0 <= first_max_ts <= now_ms else now_ms
