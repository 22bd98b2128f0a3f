"""Batches of a file range, read in large chunks: the file counterpart of :func:`.batch_header.iter_headers`.

Kafka has ``FileRecords`` beside ``MemoryRecords``; this is its batch walk.
Everything that walks a segment file by batch headers (lookups, recovery,
verification, the cleaner, producer-state replay, the gateway's read-ahead)
reads through one :class:`FileBatches`, so the chunked ``preadv`` into one
reused buffer, the framing checks and the CRC over a memoryview exist once.
Python cost is per batch (one ``struct`` unpack), never per record or byte.
"""
from __future__ import annotations

import os
from typing import Iterable, Iterator

import crc32c as _crc32c

from .batch_header import (
    CONTROL_BIT,
    CRC_START,
    HEADER,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
    BatchHeader,
    content_error,
    counts_ok,
    framing_error,
    named,
)
from .errors import CorruptRecordError, InvalidRecordError

SCAN_CHUNK = 8 << 20  # recovery / verification / cleaning read size
HEADER_WINDOW = 16 << 10  # header-only walks (lookups) read this much at a time

_unpack = HEADER.unpack_from
_new = tuple.__new__
_crc = _crc32c.crc32c


class FileBatches:
    """Reads batches of ``fd`` below ``end`` through one reused buffer of ``window`` bytes.

    Views returned by :meth:`batch` stay valid only until the next read.
    After :meth:`walk` ends, :attr:`stop_position` is where it stopped and
    :attr:`problem` why (None when it reached the end or a stop position).
    """

    __slots__ = ("fd", "end", "bytes_read", "problem", "bad", "stop_position", "_buf", "_mv", "_start", "_len", "_fills")

    def __init__(self, fd: int, end: int, window: int = HEADER_WINDOW):
        self.fd = fd
        self.end = end
        self.bytes_read = 0
        self.problem: CorruptRecordError | InvalidRecordError | None = None
        self.bad: BatchHeader | None = None  # the header whose framing failed (None: torn header)
        self.stop_position = 0
        self._buf = bytearray(max(window, HEADER_SIZE))
        self._mv = memoryview(self._buf)
        self._start = 0
        self._len = 0
        self._fills = 0  # reads so far: a walk reloads its window only when a caller read meanwhile

    def _fill(self, pos: int) -> int:
        n = os.preadv(self.fd, [self._mv[: min(len(self._buf), self.end - pos)]], pos)
        self._start, self._len = pos, n
        self.bytes_read += n
        self._fills += 1
        return n

    def batch(self, pos: int, size: int) -> tuple[bytearray, memoryview, int] | None:
        """``(buffer, its view, start in it)`` of the ``size`` bytes at ``pos``; None if the file ends first."""
        rel = pos - self._start
        if rel < 0 or rel + size > self._len:
            if size > len(self._buf):
                self._mv.release()
                self._buf = bytearray(size)
                self._mv = memoryview(self._buf)
            if self._fill(pos) < size:
                return None
            rel = 0
        return self._buf, self._mv, rel

    def crc_ok(self, pos: int, h: BatchHeader) -> bool:
        """The CRC32C of the well-framed batch ``h`` at ``pos`` matches (False also if the file ends early)."""
        size = h.batch_length + LOG_OVERHEAD
        rel = pos - self._start
        if rel < 0 or rel + size > self._len:
            if self.batch(pos, size) is None:
                return False
            rel = 0
        return _crc(self._mv[rel + CRC_START : rel + size]) == h.crc

    def sound(self, pos: int, h: BatchHeader) -> bool:
        """CRC32C and counts of the well-framed batch ``h`` at ``pos`` hold (False also if the file ends early)."""
        return self.crc_ok(pos, h) and counts_ok(h)

    def damage(self, pos: int, h: BatchHeader) -> CorruptRecordError | InvalidRecordError | None:
        """Why :meth:`sound` said no (slow path: builds the message)."""
        size = h.batch_length + LOG_OVERHEAD
        got = self.batch(pos, size)
        if got is None:
            return CorruptRecordError(f"file ends inside a batch of {size} bytes")
        return content_error(got[1], got[2], h)

    def walk(
        self, pos: int, end: int | None = None, stops: dict | None = None, *, check_crc: bool = False
    ) -> Iterator[tuple[int, tuple]]:
        """Yield ``(position, header fields)`` of consecutive well-framed batches from ``pos``.

        The fields are the plain tuple ``struct`` gives, in :class:`.BatchHeader`
        order: callers unpack it, or name it with :func:`.batch_header.named`
        (a named tuple costs a third of the walk, so only those who keep it pay).

        Stops at ``end``, at a position in ``stops`` (known holes), or at the
        first batch whose framing fails; with ``check_crc`` also at the first
        whose CRC32C or counts fail (recovery's hot loop: the check is written
        out here, as every Python call per batch costs as much as the CRC of a
        small batch). :attr:`problem` says why it stopped early, :attr:`bad`
        holds that batch's header and :attr:`stop_position` where it is.
        """
        end = self.end if end is None else end
        self.problem = self.bad = None
        unpack, crc32c = _unpack, _crc
        buf, view, start, have, fills = self._buf, self._mv, self._start, self._len, self._fills
        while pos < end:
            if stops and pos in stops:
                break
            rel = pos - start
            if rel < 0 or rel + HEADER_SIZE > have:
                if self._fill(pos) < HEADER_SIZE:
                    self.stop_position = pos
                    self.problem = CorruptRecordError(
                        f"torn batch: {end - pos} bytes at the end, a header needs {HEADER_SIZE}")
                    return
                buf, view, start, have, rel, fills = self._buf, self._mv, pos, self._len, 0, self._fills
            h = unpack(buf, rel)
            _base, length, _epoch, magic, crc, attributes, delta, _bts, _mts, _pid, _pep, _seq, count = h
            size = length + LOG_OVERHEAD
            if magic != MAGIC or length < MIN_BATCH_LENGTH or size > end - pos:
                self.stop_position = pos
                self.bad = _new(BatchHeader, h)
                self.problem = framing_error(self.bad, end - pos)
                return
            if check_crc:
                if rel + size > have:
                    if self.batch(pos, size) is None:
                        self.stop_position = pos
                        self.problem = CorruptRecordError(f"file ends inside a batch of {size} bytes")
                        self.bad = _new(BatchHeader, h)
                        return
                    buf, view, start, have, rel, fills = self._buf, self._mv, pos, self._len, 0, self._fills
                if (
                    crc32c(view[rel + CRC_START : rel + size]) != crc
                    or delta < 0
                    or not 0 <= count <= delta + 1
                    or not (count > 0 or delta > 0 or attributes & CONTROL_BIT)
                ):
                    self.stop_position = pos
                    self.bad = _new(BatchHeader, h)
                    self.problem = self.damage(pos, self.bad)
                    return
            yield pos, h
            if self._fills != fills:  # the caller read meanwhile (one compare instead of four reloads per batch)
                buf, view, start, have, fills = self._buf, self._mv, self._start, self._len, self._fills
            pos += size
        self.stop_position = pos

    def close(self) -> None:
        self._mv.release()


def next_offset_after(ranges: Iterable[tuple[int, int, int]], max_batches: int) -> int | None:
    """Offset after the last batch of batch-aligned ``(fd, position, length)`` ranges, reading headers only.

    None when they hold more than ``max_batches`` batches, none at all, or
    do not end on a batch boundary.
    """
    last = None
    count = 0
    for fd, position, length in ranges:
        reader = FileBatches(fd, position + length, min(length, 4 << 10))
        for _, fields in reader.walk(position):
            count += 1
            if count > max_batches:
                return None
            last = fields
        if reader.problem is not None:
            return None
    return None if last is None else named(last).next_offset


__all__ = ["FileBatches", "SCAN_CHUNK", "HEADER_WINDOW", "next_offset_after"]
