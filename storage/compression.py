"""Record-batch compression codecs, by Kafka codec id.

Kafka compresses the records of a batch as one blob and names the codec in
attribute bits 0-2. Producers differ in the exact container they use, so the
decoders here are deliberately liberal (gzip or zlib, raw or xerial-framed
snappy, zstd frames with or without a content size) while the encoders write
the form every client reads (gzip, raw snappy, independent-block LZ4 frames,
zstd frames).

Decompression is bounded: a client controls the compressed bytes, and a 1 MiB
zstd batch can claim many GiB of records. Every decoder stops as soon as its
output would pass ``limit`` (default :data:`MAX_DECOMPRESSED_BYTES`) and raises
``CorruptRecordError`` (CORRUPT_MESSAGE), so no broker path that looks inside a
batch (timestamp lookup, compaction, the keyless check, coordinator replay)
can be made to allocate more than that.
"""
from __future__ import annotations

import struct
import zlib
from typing import Union

import cramjam
import lz4.frame
import zstandard

from .errors import CorruptRecordError, UnsupportedCompressionError

Buffer = Union[bytes, bytearray, memoryview]

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4

CODECS: dict[str, int] = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}
CODEC_NAMES: dict[int, str] = {v: k for k, v in CODECS.items()}

# Java clients (snappy-java's SnappyOutputStream) wrap snappy in this framing:
# magic, int32 version, int32 min-compatible version, then [int32 len, block]*.
XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER_SIZE = 16
_I32 = struct.Struct(">i")

# wbits 32+15: zlib auto-detects a gzip or zlib header.
_ZLIB_AUTO = 47
_GZIP_WBITS = 31

DEFAULT_LEVELS = {GZIP: 6, LZ4: 0, ZSTD: 3}

#: Most bytes the records of one batch may decompress to. Kafka batches are at most
#: ``max.message.bytes`` compressed (1 MiB by default); 64 MiB leaves room for a 64x
#: ratio on such a batch, far beyond real data, while keeping the worst case of one
#: hostile batch to a bounded, transient allocation.
MAX_DECOMPRESSED_BYTES = 64 << 20


def codec_id(name_or_id: int | str | None) -> int:
    """Normalise a codec given as Kafka id or name (``compression.type`` values)."""
    if name_or_id is None:
        return NONE
    if isinstance(name_or_id, str):
        key = name_or_id.strip().lower()
        if key in CODECS:
            return CODECS[key]
        raise UnsupportedCompressionError(
            f"unknown compression codec {name_or_id!r}; expected one of {', '.join(CODECS)}"
        )
    if isinstance(name_or_id, int) and not isinstance(name_or_id, bool) and name_or_id in CODEC_NAMES:
        return name_or_id
    raise UnsupportedCompressionError(f"unknown compression codec id {name_or_id!r}; Kafka defines 0-4")


def codec_name(codec: int) -> str:
    return CODEC_NAMES[codec_id(codec)]


def compress(codec: int | str, data: Buffer, level: int | None = None) -> bytes:
    """Compress a whole records blob with ``codec``."""
    c = codec_id(codec)
    if c == NONE:
        return bytes(data)
    if c == GZIP:
        co = zlib.compressobj(DEFAULT_LEVELS[GZIP] if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
        return co.compress(data) + co.flush()
    if c == SNAPPY:
        # Raw snappy, as librdkafka writes it; every client (Java included)
        # detects the xerial magic and otherwise reads raw snappy.
        return bytes(cramjam.snappy.compress_raw(data))
    if c == LZ4:
        # Kafka requires independent blocks; no content size keeps old Java
        # readers happy.
        return lz4.frame.compress(
            data,
            compression_level=DEFAULT_LEVELS[LZ4] if level is None else level,
            block_linked=False,
            store_size=False,
        )
    # ZSTD
    return zstandard.ZstdCompressor(level=DEFAULT_LEVELS[ZSTD] if level is None else level).compress(data)


def decompress(codec: int | str, data: Buffer, limit: int | None = None) -> bytes:
    """Decompress a records blob; undecodable input, or output past ``limit`` bytes, raises CorruptRecordError."""
    c = codec_id(codec)
    if c == NONE:
        return bytes(data)
    cap = MAX_DECOMPRESSED_BYTES if limit is None else limit
    try:
        if c == GZIP:
            return _gunzip(data, cap)
        if c == SNAPPY:
            return _unsnappy(data, cap)
        if c == LZ4:
            return _unlz4(data, cap)
        return _unzstd(data, cap)
    except CorruptRecordError:
        raise
    except Exception as exc:  # each library raises its own error types
        raise CorruptRecordError(f"failed to decompress {CODEC_NAMES[c]} records: {exc}") from exc


def _too_big(codec: str, limit: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"{codec} records decompress to more than {limit} bytes (the broker's limit per batch); "
        "rejected as a possible decompression bomb"
    )


def _gunzip(data: Buffer, limit: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest: Buffer = data
    first = True
    # Some writers emit several gzip members; zlib stops after each one.
    while first or rest:
        first = False
        d = zlib.decompressobj(_ZLIB_AUTO)
        pending: Buffer = rest
        while True:
            out = d.decompress(pending, limit - total + 1)
            total += len(out)
            if total > limit:
                raise _too_big("gzip", limit)
            parts.append(out)
            pending = d.unconsumed_tail
            if d.eof or not pending:
                break
        if not d.eof:
            raise CorruptRecordError("failed to decompress gzip records: stream truncated")
        rest = d.unused_data
    return parts[0] if len(parts) == 1 else b"".join(parts)


def is_xerial(data: Buffer) -> bool:
    return len(data) >= XERIAL_HEADER_SIZE and bytes(data[:8]) == XERIAL_MAGIC


def _snappy_block(block: Buffer, limit: int) -> bytes:
    # A raw snappy block starts with its uncompressed length (a varint): check it first.
    size, shift, pos = 0, 0, 0
    while True:
        if pos >= len(block) or shift > 35:
            raise CorruptRecordError("failed to decompress snappy records: bad length preamble")
        b = block[pos]
        size |= (b & 0x7F) << shift
        pos += 1
        if b < 0x80:
            break
        shift += 7
    if size > limit:
        raise _too_big("snappy", limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _unsnappy(data: Buffer, limit: int) -> bytes:
    if not is_xerial(data):
        return _snappy_block(data, limit)
    mv = memoryview(data)
    pos = XERIAL_HEADER_SIZE
    end = len(mv)
    parts = []
    total = 0
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("failed to decompress snappy records: truncated xerial block length")
        n = _I32.unpack_from(mv, pos)[0]
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(
                f"failed to decompress snappy records: xerial block of {n} bytes overruns the data"
            )
        part = _snappy_block(mv[pos : pos + n], limit - total)
        total += len(part)
        parts.append(part)
        pos += n
    return b"".join(parts)


def compress_snappy_xerial(data: Buffer, block_size: int = 32 * 1024) -> bytes:
    """Snappy in the xerial framing Java producers write (for interop tests and tools)."""
    mv = memoryview(data)
    parts = [XERIAL_MAGIC, _I32.pack(1), _I32.pack(1)]
    for i in range(0, len(mv), block_size):
        block = bytes(cramjam.snappy.compress_raw(mv[i : i + block_size]))
        parts.append(_I32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _unlz4(data: Buffer, limit: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    parts = []
    total = 0
    pending = bytes(data)
    while True:
        out = d.decompress(pending, max_length=limit - total + 1)
        total += len(out)
        if total > limit:
            raise _too_big("lz4", limit)
        parts.append(out)
        pending = b""
        if d.eof or d.needs_input:
            break
    if not d.eof:
        raise CorruptRecordError("failed to decompress lz4 records: frame truncated")
    return parts[0] if len(parts) == 1 else b"".join(parts)


#: A zstd block header is 3 bytes and an RLE block regenerates up to 128 KiB from one
#: more byte, so n input bytes yield at most about n * 32768 output bytes.
_ZSTD_MAX_RATIO = 32768


def _unzstd(data: Buffer, limit: int) -> bytes:
    # decompressobj copes with frames that omit the content size (Java's streaming
    # writer), which ZstdDecompressor.decompress refuses.
    d = zstandard.ZstdDecompressor().decompressobj()
    try:
        known = zstandard.frame_content_size(data)
    except zstandard.ZstdError as exc:
        raise CorruptRecordError(f"failed to decompress zstd records: {exc}") from exc
    if known > limit:
        raise _too_big("zstd", limit)
    if known >= 0:
        # The decoder enforces a declared size block by block: the output stays within it.
        out = d.decompress(data)
        if not d.eof:
            raise CorruptRecordError("failed to decompress zstd records: frame truncated")
        return out
    # No declared size: feed the input in slices small enough that one slice cannot
    # expand far past what is left of the limit.
    mv = memoryview(data)
    parts = []
    total = 0
    pos = 0
    while pos < len(mv) and not d.eof:
        step = min(max(256, (limit - total) // _ZSTD_MAX_RATIO), 1 << 20)
        out = d.decompress(mv[pos : pos + step])
        pos += step
        total += len(out)
        if total > limit:
            raise _too_big("zstd", limit)
        parts.append(out)
    if not d.eof:
        raise CorruptRecordError("failed to decompress zstd records: frame truncated")
    return b"".join(parts)
