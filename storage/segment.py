"""One log segment: a ``.log`` file of whole v2 batches plus derived indexes.

A segment never decodes records. Everything here works on the 61-byte batch
headers and one CRC32C per batch, read through :class:`.file_batches.FileBatches`,
with Python overhead per batch rather than per record: appending, walking
headers to find an offset, and CRC-checking ranges before they are served.
Its rooms: header walks and offset lookup (:mod:`.segment_walk`), CRC checks
of ranges before serving (:mod:`.segment_verify`), adopting trusted indexes at
open (:mod:`.segment_load`), what it hands out (:mod:`.segment_refs`).
Rebuilding a segment after a crash is :mod:`.segment_recovery`; file names are
:mod:`.segment_files`; its aborted transactions are :mod:`.txn_index`. Cleaned segments have offset gaps (removed records), so
their offset checks only require base offsets to increase.
"""
from __future__ import annotations

import os

from .errors import CorruptRecordError
from .file_modes import FILE_MODE
from .index import OffsetIndex, TimeIndex
from .segment_files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX, segment_stem
from .segment_load import TrustedLoad
from .segment_refs import BatchRef, CorruptBatch, FileSlice
from .segment_verify import ServedRangeChecks
from .segment_walk import HeaderWalk
from .sync import fsync_path
from .txn_index import TxnIndex
from .verified_ranges import VerifiedRanges


class Segment(HeaderWalk, ServedRangeChecks, TrustedLoad):
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
        # Aborted transactions whose marker is in this segment; loaded (or rebuilt) by the log at open.
        self.txnindex = TxnIndex(os.path.join(directory, self.stem + TXNINDEX_SUFFIX + pending_suffix), base_offset)
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
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
        return self._fd

    def final_paths(self) -> tuple[str, str, str]:
        """Paths of the log and index files without any pending suffix (``.cleaned``)."""
        return tuple(os.path.join(self.directory, self.stem + s) for s in (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX))  # type: ignore[return-value]

    def finalize(self) -> None:
        """Rename pending (``.cleaned``) files to their final names; open descriptors stay valid."""
        log_path, index_path, timeindex_path = self.final_paths()
        txnindex_path = os.path.join(self.directory, self.stem + TXNINDEX_SUFFIX)
        for old, new in ((self.index_path, index_path), (self.timeindex_path, timeindex_path),
                         (self.txnindex.path, txnindex_path), (self.path, log_path)):
            if old != new and os.path.exists(old):
                os.replace(old, new)
        self.txnindex.path = txnindex_path
        self.path, self.index_path, self.timeindex_path = log_path, index_path, timeindex_path
        self.index.path, self.timeindex.path = index_path, timeindex_path

    @classmethod
    def create(cls, directory: str, base_offset: int, *, index_bytes: int, index_interval: int) -> "Segment":
        seg = cls(directory, base_offset, index_bytes=index_bytes, index_interval=index_interval)
        for p in (seg.path, seg.index_path, seg.timeindex_path):
            if os.path.exists(p):
                os.remove(p)  # stale leftovers of a segment truncated away
        seg.txnindex.replace(())  # an empty file: "no aborted transaction", unlike a missing one (rebuilt)
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
        for p in (self.path, self.index_path, self.timeindex_path, self.txnindex.path):
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
        for p in (self.index_path, self.timeindex_path, self.txnindex.path):
            if os.path.exists(p):
                fsync_path(p)


__all__ = ["Segment", "FileSlice", "CorruptBatch", "BatchRef"]
