"""Kafka varints: zigzag-signed (records) and unsigned (flexible protocol fields).

Records are the only place per-item encoding cost matters, so besides the
general functions this module exports precomputed tables: the record codec
indexes a tuple instead of calling a function for every small length and
offset delta, which is what lets a pure-Python producer build millions of
records per second.
"""
from __future__ import annotations

from typing import Union

from .errors import CorruptRecordError

Buffer = Union[bytes, bytearray, memoryview]

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1
INT64_MIN = -(1 << 63)
INT64_MAX = (1 << 63) - 1
UINT32_MAX = (1 << 32) - 1

# Longest legal encodings: ceil(32/7) and ceil(64/7).
MAX_VARINT_BYTES = 5
MAX_VARLONG_BYTES = 10


def _raw_uvarint(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def zigzag(n: int) -> int:
    """Map signed to unsigned so small magnitudes of either sign stay short."""
    return (n << 1) ^ (n >> 63)


def unzigzag(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def encode_varint(n: int) -> bytes:
    """Zigzag varint of an int32 (Kafka ``varint``: lengths, offset deltas, counts)."""
    if 0 <= n < TABLE_SIZE:
        return VARINT[n]
    if not INT32_MIN <= n <= INT32_MAX:
        raise ValueError(f"varint out of int32 range: {n}")
    return _raw_uvarint((n << 1) ^ (n >> 63))


def encode_varlong(n: int) -> bytes:
    """Zigzag varint of an int64 (Kafka ``varlong``: timestamp deltas)."""
    if 0 <= n < TABLE_SIZE:
        return VARINT[n]
    if not INT64_MIN <= n <= INT64_MAX:
        raise ValueError(f"varlong out of int64 range: {n}")
    return _raw_uvarint((n << 1) ^ (n >> 63))


def encode_uvarint(n: int) -> bytes:
    """Unsigned varint of a uint32 (Kafka ``unsigned varint``, compact lengths)."""
    if 0 <= n < TABLE_SIZE:
        return UVARINT[n]
    if not 0 <= n <= UINT32_MAX:
        raise ValueError(f"unsigned varint out of uint32 range: {n}")
    return _raw_uvarint(n)


def _decode_raw(buf: Buffer, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    start = pos
    while True:
        if pos >= end:
            raise CorruptRecordError(f"{what} truncated at byte {pos - start} (buffer ends at {end})")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if pos - start >= max_bytes:
            raise CorruptRecordError(f"{what} too long: more than {max_bytes} bytes at position {start}")


def decode_uvarint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Return ``(value, new_pos)``; the value must fit a uint32."""
    if 0 <= pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return b, pos + 1
    u, npos = _decode_raw(buf, pos, MAX_VARINT_BYTES, "unsigned varint")
    if u > UINT32_MAX:
        raise CorruptRecordError(f"unsigned varint at position {pos} exceeds 32 bits: {u}")
    return u, npos


def decode_varint(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Return ``(value, new_pos)`` of a zigzag int32 varint."""
    if 0 <= pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    u, npos = _decode_raw(buf, pos, MAX_VARINT_BYTES, "varint")
    if u > UINT32_MAX:
        raise CorruptRecordError(f"varint at position {pos} exceeds 32 bits")
    return (u >> 1) ^ -(u & 1), npos


def decode_varlong(buf: Buffer, pos: int = 0) -> tuple[int, int]:
    """Return ``(value, new_pos)`` of a zigzag int64 varint."""
    if 0 <= pos < len(buf):
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
    u, npos = _decode_raw(buf, pos, MAX_VARLONG_BYTES, "varlong")
    if u >> 64:
        raise CorruptRecordError(f"varlong at position {pos} exceeds 64 bits")
    return (u >> 1) ^ -(u & 1), npos


def varint_size(n: int) -> int:
    """Encoded size of a zigzag varint/varlong without building it."""
    u = (n << 1) ^ (n >> 63)
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


# ---- fast tables ---------------------------------------------------------
# 2**16 entries cover every offset delta of batches up to 65536 records and
# every length below 64 KiB; beyond that per-record work dwarfs one call.
TABLE_SIZE = 1 << 16



def _uvarints_below(limit: int) -> list[bytes]:
    """Unsigned varint encodings of 0 .. limit-1 (limit <= 2**21), built from byte pieces.

    Equal to ``[_raw_uvarint(n) for n in range(limit)]`` (the tests check it) in a third of the
    time: every process importing the record codec builds these tables, a partition actor's
    start included, so their cost is paid on every activation.
    """
    last = [bytes((i,)) for i in range(0x80)]  # the final byte (high bit clear)
    more = [bytes((i | 0x80,)) for i in range(0x80)]  # a byte with another after it
    two = [lo + hi for hi in last[1:] for lo in more]
    three = [lo + mid + hi for hi in last[1:(limit >> 14) + 1] for mid in more for lo in more]
    return (last + two + three)[:limit]


_UVARINTS = _uvarints_below(TABLE_SIZE << 1)
#: VARINT[n] == zigzag varint encoding of non-negative n < TABLE_SIZE (zigzag(n) == 2n)
VARINT: tuple[bytes, ...] = tuple(_UVARINTS[0::2])
#: UVARINT[n] == unsigned varint encoding of n < TABLE_SIZE
UVARINT: tuple[bytes, ...] = tuple(_UVARINTS[:TABLE_SIZE])
#: VARINT_LEN[n] == len(VARINT[n])
VARINT_LEN: tuple[int, ...] = tuple(map(len, VARINT))
del _UVARINTS
#: zigzag varint of -1, Kafka's "null" length
VARINT_NULL = b"\x01"
#: ZIGZAG1[b] == decoded value of the one-byte zigzag varint b (b < 0x80)
ZIGZAG1: tuple[int, ...] = tuple((b >> 1) ^ -(b & 1) for b in range(0x80))
