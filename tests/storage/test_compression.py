import gzip
import os
import struct
import zlib

import cramjam
import lz4.frame
import pytest
import zstandard

from logan_ray.storage.compression import (
    CODECS,
    XERIAL_MAGIC,
    codec_id,
    codec_name,
    compress,
    compress_snappy_xerial,
    decompress,
    is_xerial,
)
from logan_ray.storage.errors import CorruptRecordError, UnsupportedCompressionError

PAYLOADS = [
    b"",
    b"x",
    b"hello kafka " * 1000,
    os.urandom(5000),  # incompressible
    bytes(range(256)) * 600,  # > 128 KiB, several xerial blocks
]


@pytest.mark.parametrize("codec", sorted(CODECS.values()))
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_round_trip(codec, payload):
    packed = compress(codec, payload)
    assert decompress(codec, packed) == payload
    assert decompress(codec, memoryview(packed)) == payload
    assert decompress(codec, bytearray(packed)) == payload


@pytest.mark.parametrize("name", list(CODECS))
def test_names_and_ids(name):
    assert codec_id(name) == CODECS[name]
    assert codec_id(name.upper()) == CODECS[name]
    assert codec_id(CODECS[name]) == CODECS[name]
    assert codec_name(CODECS[name]) == name
    assert decompress(name, compress(name, b"abc" * 50)) == b"abc" * 50


def test_compressible_data_shrinks():
    data = b"0123456789" * 10_000
    for codec in (1, 2, 3, 4):
        assert len(compress(codec, data)) < len(data) // 10


@pytest.mark.parametrize("bad", [5, 7, -1, "brotli", "", True, 2.0])
def test_unknown_codec(bad):
    with pytest.raises(UnsupportedCompressionError):
        codec_id(bad)
    with pytest.raises(UnsupportedCompressionError):
        compress(bad, b"abc")
    with pytest.raises(UnsupportedCompressionError):
        decompress(bad, b"abc")


def test_unsupported_compression_error_code():
    assert UnsupportedCompressionError.code == 76


def test_xerial_snappy_decode():
    data = b"some records " * 10_000  # 130 KB -> 4 blocks of 32 KiB
    framed = compress_snappy_xerial(data)
    assert framed.startswith(XERIAL_MAGIC) and is_xerial(framed)
    # header: magic, version 1, compat 1, then [len, block]*
    assert struct.unpack(">ii", framed[8:16]) == (1, 1)
    assert decompress(2, framed) == data


def test_xerial_snappy_hand_built():
    blocks = [b"abc" * 100, b"defg" * 50, b"z"]
    out = [XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
    for b in blocks:
        c = bytes(cramjam.snappy.compress_raw(b))
        out += [struct.pack(">i", len(c)), c]
    assert decompress("snappy", b"".join(out)) == b"".join(blocks)


def test_snappy_encoding_is_raw():
    packed = compress(2, b"abc" * 100)
    assert not is_xerial(packed)
    assert bytes(cramjam.snappy.decompress_raw(packed)) == b"abc" * 100


def test_foreign_encoders_decode():
    data = b"interop " * 2000
    assert decompress(1, gzip.compress(data)) == data
    assert decompress(1, zlib.compress(data)) == data  # zlib header also accepted
    assert decompress(1, gzip.compress(data[:100]) + gzip.compress(data[100:])) == data  # multi-member
    assert decompress(3, lz4.frame.compress(data)) == data  # linked blocks + content size
    # zstd streaming frame without a content size (what Java's ZstdOutputStream writes)
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    stream = cctx.compressobj()
    frame = stream.compress(data) + stream.flush()
    assert decompress(4, frame) == data


def test_lz4_frame_has_independent_blocks():
    packed = compress(3, b"q" * 1000)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg = packed[4]
    assert flg & 0x20, "block independence flag must be set for Kafka"


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_raises_corrupt(codec):
    with pytest.raises(CorruptRecordError, match=f"failed to decompress {codec_name(codec)}"):
        decompress(codec, b"\x01\x02garbage that is not compressed at all\xff" * 3)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_truncated_stream_raises_corrupt(codec):
    packed = compress(codec, os.urandom(3000))
    with pytest.raises(CorruptRecordError, match=codec_name(codec)):
        decompress(codec, packed[: len(packed) // 2])


def test_truncated_xerial_raises_corrupt():
    framed = compress_snappy_xerial(b"abc" * 50_000)
    with pytest.raises(CorruptRecordError, match="snappy"):
        decompress(2, framed[:-10])
    with pytest.raises(CorruptRecordError, match="snappy"):
        decompress(2, framed[:18])


def test_none_codec_is_identity():
    assert compress(0, memoryview(b"abc")) == b"abc"
    assert decompress("none", bytearray(b"abc")) == b"abc"


# ------------------------------------------------------------ bounded output
def test_zstd_bomb_of_32_gib_is_refused_within_the_limit():
    """A 1 MiB frame of RLE blocks claims 32 GiB; decoding stops just past the limit."""
    import tracemalloc

    from bombs import zstd_bomb
    from logan_ray.storage.compression import MAX_DECOMPRESSED_BYTES

    frame, claimed = zstd_bomb(1 << 20)
    assert claimed > 31 << 30
    tracemalloc.start()
    try:
        with pytest.raises(CorruptRecordError, match="decompress to more than"):
            decompress("zstd", frame)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MAX_DECOMPRESSED_BYTES + (40 << 20)


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd", "snappy"])
def test_output_past_the_limit_is_corrupt_and_within_it_is_fine(codec):
    payload = bytes(2 << 20)  # zeros: every codec shrinks them a lot
    packed = compress(codec, payload)
    assert decompress(codec, packed, limit=2 << 20) == payload
    with pytest.raises(CorruptRecordError, match="decompress to more than"):
        decompress(codec, packed, limit=(2 << 20) - 1)


def test_zstd_frame_declaring_a_huge_size_is_refused_before_decoding():
    frame = zstandard.ZstdCompressor().compress(bytes(1 << 20))  # declares 1 MiB
    with pytest.raises(CorruptRecordError, match="decompress to more than"):
        decompress("zstd", frame, limit=1000)


def test_xerial_snappy_blocks_count_towards_one_limit():
    payload = bytes(200 * 1024)
    packed = compress_snappy_xerial(payload, block_size=32 * 1024)
    assert decompress("snappy", packed, limit=len(payload)) == payload
    with pytest.raises(CorruptRecordError, match="decompress to more than"):
        decompress("snappy", packed, limit=len(payload) - 1)


def test_gzip_members_count_towards_one_limit():
    one = compress("gzip", bytes(100_000))
    assert decompress("gzip", one + one, limit=200_000) == bytes(200_000)
    with pytest.raises(CorruptRecordError, match="decompress to more than"):
        decompress("gzip", one + one, limit=150_000)


def test_zstd_without_content_size_round_trips_and_detects_truncation():
    payload = os.urandom(50_000) + bytes(500_000)
    packed = zstandard.ZstdCompressor(write_content_size=False).compress(payload)
    assert zstandard.frame_content_size(packed) == -1
    assert decompress("zstd", packed) == payload
    with pytest.raises(CorruptRecordError, match="truncated"):
        decompress("zstd", packed[:-20])
