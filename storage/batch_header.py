"""The fixed 61-byte header of a Kafka v2 record batch (magic 2).

The broker's hot paths (append, recovery, index building, serving) only ever
need this header: they move whole batches and never decode records. Keeping
the header in its own module makes that boundary visible.

Layout (big-endian)::

    0  baseOffset            int64
    8  batchLength           int32   bytes after this field
    12 partitionLeaderEpoch  int32
    16 magic                 int8    == 2
    17 crc                   uint32  CRC32C of bytes [21, end)
    21 attributes            int16
    23 lastOffsetDelta       int32
    27 baseTimestamp         int64
    35 maxTimestamp          int64
    43 producerId            int64
    51 producerEpoch         int16
    53 baseSequence          int32
    57 recordCount           int32
    61 records...
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterator, Union

import crc32c as _crc32c

from .errors import CorruptRecordError, InvalidRecordError

Buffer = Union[bytes, bytearray, memoryview]

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
CRC_START = 21
MAGIC = 2

# attribute bits
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_TIMESTAMP = -1

_OFFSET = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")


@dataclass(frozen=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes this batch occupies in a log, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def crc32c(data: Buffer) -> int:
    return _crc32c.crc32c(data)


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos``; raises CorruptRecordError if too short."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch truncated: {len(buf) - pos} bytes, header needs {HEADER_SIZE}"
        )
    return BatchHeader(*HEADER.unpack_from(buf, pos))


def peek_size(buf: Buffer, pos: int = 0) -> int:
    """Total size of the batch at ``pos`` from its length field (no validation)."""
    return _I32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    return _crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def validate_batch(buf: Buffer, pos: int = 0, *, end: int | None = None) -> BatchHeader:
    """Check framing, magic, CRC32C and counts of the batch at ``pos``.

    Why here and not in the record codec: validation must be cheap enough to run
    on every produced batch and every recovered batch, so it touches only the
    header and one CRC over the bytes, never the records.
    """
    end = len(buf) if end is None else end
    avail = end - pos
    if avail < HEADER_SIZE:
        raise CorruptRecordError(f"record batch truncated: {avail} bytes, header needs {HEADER_SIZE}")
    h = BatchHeader(*HEADER.unpack_from(buf, pos))
    if h.magic != MAGIC:
        raise InvalidRecordError(f"unsupported record batch magic {h.magic}; only magic 2 (Kafka >= 0.11) is accepted")
    if h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {h.batch_length} is smaller than the header")
    if h.size > avail:
        raise CorruptRecordError(f"record batch truncated: length field says {h.size} bytes, only {avail} present")
    actual = compute_crc(buf, pos, h.size)
    if actual != h.crc:
        raise CorruptRecordError(f"record batch CRC32C mismatch: stored {h.crc:#010x}, computed {actual:#010x}")
    if h.record_count < 0 or h.last_offset_delta < 0:
        raise InvalidRecordError(
            f"record batch has negative record count ({h.record_count}) or last offset delta ({h.last_offset_delta})"
        )
    if h.record_count == 0 and not h.is_control and h.last_offset_delta == 0:
        raise InvalidRecordError("record batch has no records")
    if h.record_count > h.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record batch claims {h.record_count} records but last offset delta is {h.last_offset_delta}"
        )
    return h


def iter_headers(buf: Buffer, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for consecutive batches without CRC checks."""
    end = len(buf) if end is None else end
    while end - pos >= HEADER_SIZE:
        h = BatchHeader(*HEADER.unpack_from(buf, pos))
        if h.size > end - pos or h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            return
        yield pos, h
        pos += h.size


def set_base_offset(buf: bytearray | memoryview, base_offset: int, pos: int = 0) -> None:
    """Patch the broker-assigned base offset; it lies outside the CRC, so no re-checksum."""
    _I64.pack_into(buf, pos, base_offset)


def set_log_append_time(buf: bytearray | memoryview, timestamp_ms: int, pos: int = 0) -> None:
    """Mark the batch LogAppendTime with ``timestamp_ms`` as max timestamp and re-checksum.

    Kafka does the same: the timestamp-type bit and maxTimestamp are inside the
    CRC range, so the CRC must be recomputed, but records are never rewritten.
    """
    size = peek_size(buf, pos)
    attrs = _I16.unpack_from(buf, pos + 21)[0]
    _I16.pack_into(buf, pos + 21, attrs | TIMESTAMP_TYPE_BIT)
    _I64.pack_into(buf, pos + 35, timestamp_ms)
    _U32.pack_into(buf, pos + 17, compute_crc(buf, pos, size))


def set_partition_leader_epoch(buf: bytearray | memoryview, epoch: int, pos: int = 0) -> None:
    """Partition leader epoch lies outside the CRC, like the base offset."""
    _I32.pack_into(buf, pos + 12, epoch)
