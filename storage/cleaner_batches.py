"""The batches of a closed segment as the cleaner reads them, and the records inside one.

Both cleaner passes (:mod:`.cleaner_key_scan` and :mod:`.cleaner_rewrite`)
read segments through :func:`iter_batches`, which adds the cleaner's own
checks (offset order within the segment, CRC on request) to the one file
walk (:class:`.file_batches.FileBatches`).
"""
from __future__ import annotations

from typing import Iterator

from .batch_header import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, named
from .cleanable import SegmentView
from .compression import NONE, decompress
from .errors import CorruptRecordError
from .file_batches import SCAN_CHUNK, FileBatches


def iter_batches(fd: int, seg: SegmentView, *, check_crc: bool = True) -> Iterator[tuple[bytearray, memoryview, int, BatchHeader]]:
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


def batch_records(buf: bytearray, mv: memoryview, rel: int, size: int, attributes: int) -> tuple[bytes | bytearray, int, int]:
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


MALFORMED = (CorruptRecordError, IndexError, ValueError)  # what parsing bad record bytes raises


__all__ = ["iter_batches", "batch_records", "MALFORMED"]
