"""Record-batch compression codecs, by Kafka codec id.

Kafka compresses the records of a batch as one blob and names the codec in
attribute bits 0-2. Producers differ in the exact container they use, so the
decoders here are deliberately liberal (gzip or zlib, raw or xerial-framed
snappy, zstd frames with or without a content size) while the encoders write
the form every client reads (gzip, raw snappy, independent-block LZ4 frames,
zstd frames).
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


def decompress(codec: int | str, data: Buffer) -> bytes:
    """Decompress a records blob; undecodable input raises CorruptRecordError."""
    c = codec_id(codec)
    if c == NONE:
        return bytes(data)
    try:
        if c == GZIP:
            return _gunzip(data)
        if c == SNAPPY:
            return _unsnappy(data)
        if c == LZ4:
            return _unlz4(data)
        return _unzstd(data)
    except CorruptRecordError:
        raise
    except Exception as exc:  # each library raises its own error types
        raise CorruptRecordError(f"failed to decompress {CODEC_NAMES[c]} records: {exc}") from exc


def _gunzip(data: Buffer) -> bytes:
    d = zlib.decompressobj(_ZLIB_AUTO)
    out = d.decompress(data)
    if not d.eof:
        raise CorruptRecordError("failed to decompress gzip records: stream truncated")
    # Some writers emit several gzip members; zlib stops after the first.
    parts = [out]
    rest = d.unused_data
    while rest:
        d = zlib.decompressobj(_ZLIB_AUTO)
        parts.append(d.decompress(rest))
        if not d.eof:
            raise CorruptRecordError("failed to decompress gzip records: trailing member truncated")
        rest = d.unused_data
    return b"".join(parts) if len(parts) > 1 else out


def is_xerial(data: Buffer) -> bool:
    return len(data) >= XERIAL_HEADER_SIZE and bytes(data[:8]) == XERIAL_MAGIC


def _unsnappy(data: Buffer) -> bytes:
    if not is_xerial(data):
        return bytes(cramjam.snappy.decompress_raw(data))
    mv = memoryview(data)
    pos = XERIAL_HEADER_SIZE
    end = len(mv)
    parts = []
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("failed to decompress snappy records: truncated xerial block length")
        n = _I32.unpack_from(mv, pos)[0]
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(
                f"failed to decompress snappy records: xerial block of {n} bytes overruns the data"
            )
        parts.append(bytes(cramjam.snappy.decompress_raw(mv[pos : pos + n])))
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


def _unlz4(data: Buffer) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    out = d.decompress(bytes(data))
    if not d.eof:
        raise CorruptRecordError("failed to decompress lz4 records: frame truncated")
    return out


def _unzstd(data: Buffer) -> bytes:
    # decompressobj copes with frames that omit the content size (Java's
    # streaming writer), which ZstdDecompressor.decompress refuses.
    d = zstandard.ZstdDecompressor().decompressobj()
    out = d.decompress(data)
    if not d.eof:
        raise CorruptRecordError("failed to decompress zstd records: frame truncated")
    return out
