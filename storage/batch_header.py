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
from typing import Iterator, NamedTuple, Union

import crc32c as _crc32c

from .errors import CorruptRecordError, InvalidRecordError

Buffer = Union[bytes, bytearray, memoryview]

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted in batchLength
CRC_START = 21
MAGIC = 2
MAGIC_AT = 16  # where the magic byte sits, in a v2 batch and in a v0/v1 message alike

# attribute bits
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08  # 1 = LogAppendTime
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_TIMESTAMP = -1
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # a batch's length field counts at least the rest of the header

_OFFSET = struct.Struct(">q")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")


class BatchHeader(NamedTuple):
    """The header fields in wire order: ``BatchHeader._make(HEADER.unpack_from(buf, pos))``.

    A named tuple rather than a dataclass because recovery and cleaning build
    one per batch: a tuple from ``struct`` costs a fraction of an object.
    """

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


_unpack = HEADER.unpack_from
_new = tuple.__new__


def named(fields: tuple) -> BatchHeader:
    """Name a header tuple as ``HEADER.unpack_from`` returns it (hot loops unpack the plain tuple instead)."""
    return _new(BatchHeader, fields)


def header_at(buf: Buffer, pos: int = 0) -> BatchHeader:
    """The header at ``pos`` without any check (the caller made sure 61 bytes are there)."""
    return _new(BatchHeader, _unpack(buf, pos))


def crc32c(data: Buffer) -> int:
    return _crc32c.crc32c(data)


def parse_header(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Parse the header at ``pos``; raises CorruptRecordError if too short."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch truncated: {len(buf) - pos} bytes, header needs {HEADER_SIZE}"
        )
    return _new(BatchHeader, _unpack(buf, pos))


def peek_size(buf: Buffer, pos: int = 0) -> int:
    """Total size of the batch at ``pos`` from its length field (no validation)."""
    return _I32.unpack_from(buf, pos + 8)[0] + LOG_OVERHEAD


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    return _crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + size])


def framing_error(h: BatchHeader, available: int) -> CorruptRecordError | InvalidRecordError | None:
    """Why the batch whose header is ``h`` cannot be delimited in ``available`` bytes, or None.

    Framing (magic and length) says where the next batch starts; a batch
    failing it ends any walk, as nothing after it can be found by length.
    """
    if h.magic != MAGIC:
        return InvalidRecordError(f"unsupported record batch magic {h.magic}; only magic 2 (Kafka >= 0.11) is accepted")
    if h.batch_length < MIN_BATCH_LENGTH:
        return CorruptRecordError(f"record batch length {h.batch_length} is smaller than the header")
    if h.batch_length + LOG_OVERHEAD > available:
        return CorruptRecordError(
            f"record batch truncated: length field says {h.batch_length + LOG_OVERHEAD} bytes, only {available} present"
        )
    return None


def crc_matches(buf: Buffer, pos: int, h: BatchHeader) -> bool:
    """Does the CRC32C stored in ``h`` match the bytes of the (whole, present) batch at ``pos``?"""
    return _crc32c.crc32c(memoryview(buf)[pos + CRC_START : pos + h.batch_length + LOG_OVERHEAD]) == h.crc


def counts_error(h: BatchHeader) -> InvalidRecordError | None:
    """Why the record count and last offset delta cannot both be true, or None."""
    count, delta = h.record_count, h.last_offset_delta
    if count < 0 or delta < 0:
        return InvalidRecordError(f"record batch has negative record count ({count}) or last offset delta ({delta})")
    if count == 0 and delta == 0 and not h.attributes & CONTROL_BIT:
        return InvalidRecordError("record batch has no records")
    if count > delta + 1:
        return InvalidRecordError(f"record batch claims {count} records but last offset delta is {delta}")
    return None


def counts_ok(h: BatchHeader) -> bool:
    """:func:`counts_error` as a fast yes/no for hot loops."""
    count, delta = h.record_count, h.last_offset_delta
    return delta >= 0 and 0 <= count <= delta + 1 and (count > 0 or delta > 0 or bool(h.attributes & CONTROL_BIT))


def content_error(buf: Buffer, pos: int, h: BatchHeader) -> CorruptRecordError | InvalidRecordError | None:
    """Why the well-framed batch at ``pos`` is damaged (CRC32C, counts), or None."""
    if not crc_matches(buf, pos, h):
        actual = compute_crc(buf, pos, h.size)
        return CorruptRecordError(f"record batch CRC32C mismatch: stored {h.crc:#010x}, computed {actual:#010x}")
    return counts_error(h)


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
    h = header_at(buf, pos)
    err = framing_error(h, avail) or content_error(buf, pos, h)
    if err is not None:
        raise err
    return h


def framed(buf: Buffer, pos: int = 0, end: int | None = None) -> BatchHeader:
    """The header at ``pos`` once magic and length say the batch is whole in ``buf[pos:end]`` (no CRC check)."""
    end = len(buf) if end is None else end
    h = parse_header(buf, pos)
    err = framing_error(h, end - pos)
    if err is not None:
        raise err
    return h


def iter_headers(buf: Buffer, pos: int = 0, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
    """Yield ``(position, header)`` for consecutive batches without CRC checks."""
    end = len(buf) if end is None else end
    while end - pos >= HEADER_SIZE:
        h = _new(BatchHeader, _unpack(buf, pos))
        size = h.batch_length + LOG_OVERHEAD
        if size > end - pos or h.batch_length < MIN_BATCH_LENGTH:
            return
        yield pos, h
        pos += size


_PREFIX = struct.Struct(">qiibI")  # bytes [0, 21): outside the CRC
_TAIL = struct.Struct(">hiqqqhii")  # bytes [21, 61): attributes .. recordCount, inside the CRC


def encode_batch(
    records: Buffer,
    *,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    record_count: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A whole batch: the header for already encoded (and compressed) ``records``, CRC32C included."""
    tail = _TAIL.pack(attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                      base_sequence, record_count)
    crc = _crc32c.crc32c(records, _crc32c.crc32c(tail))
    prefix = _PREFIX.pack(base_offset, MIN_BATCH_LENGTH + len(records), partition_leader_epoch, MAGIC, crc)
    return b"".join((prefix, tail, records))


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
