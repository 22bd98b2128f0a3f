"""Hostile inputs shared by the storage, group and gateway tests: decompression bombs.

A zstd frame made of RLE blocks regenerates 128 KiB from 4 bytes, so 1 MiB of
frame claims 32 GiB of records; built by hand (compressing 32 GiB would take
minutes). The frame declares no content size, as Java's streaming writer does,
so a decoder cannot refuse it up front and must stop while decoding.
"""
from __future__ import annotations

import struct

from logan_ray.storage.batch_header import CRC_START, HEADER_SIZE, compute_crc
from logan_ray.storage.compression import ZSTD
from logan_ray.storage.record_builder import build_batch

ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
RLE_BLOCK = 128 * 1024


def zstd_bomb(frame_bytes: int = 1 << 20) -> tuple[bytes, int]:
    """A zstd frame of about ``frame_bytes``; returns (frame, bytes it expands to)."""
    blocks = max(1, (frame_bytes - 6) // 4)
    # descriptor 0: no content size, not single-segment; window 2^(10+7) = 128 KiB
    head = ZSTD_MAGIC + b"\x00\x70"
    body = bytearray()
    block = struct.pack("<I", (RLE_BLOCK << 3) | (1 << 1))[:3] + b"\x00"
    body += block * (blocks - 1)
    body += struct.pack("<I", (RLE_BLOCK << 3) | (1 << 1) | 1)[:3] + b"\x00"
    return head + bytes(body), blocks * RLE_BLOCK


def batch_with_blob(blob: bytes, codec: int = ZSTD, records: int = 1, *, key: bytes | None = b"k",
                    timestamp: int | None = None) -> bytes:
    """A well-framed, correctly checksummed v2 batch whose records are ``blob`` as compressed by ``codec``."""
    template = bytearray(build_batch([b"v"] * records, [key] * records, compression=codec, timestamps=timestamp))
    batch = bytearray(template[:HEADER_SIZE]) + blob
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, CRC_START - 4, compute_crc(batch, 0, len(batch)))
    return bytes(batch)


def zstd_bomb_batch(frame_bytes: int = 1 << 20, records: int = 1000, timestamp: int | None = None) -> bytes:
    return batch_with_blob(zstd_bomb(frame_bytes)[0], ZSTD, records, timestamp=timestamp)
