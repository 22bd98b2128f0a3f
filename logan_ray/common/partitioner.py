"""Key -> partition, exactly as Kafka's Java client and librdkafka's murmur2 partitioners.

Agreement matters: a key written by a Python app and by a Kafka client must land
in the same partition, or per-key ordering and compaction break.
"""
from __future__ import annotations

import struct

from logan_ray.storage.codec_choice import implementation

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``Utils.murmur2``) as an unsigned 32-bit value.

    The compiled record codec computes it when it serves (a keyed ``send`` hashes every
    key, about a microsecond each in Python); :func:`murmur2_py` is the pure-Python twin.
    """
    codec = implementation()
    if codec is not None:
        return codec.murmur2(data)
    return murmur2_py(data)


def murmur2_py(data: bytes) -> int:
    """Kafka's murmur2 in Python (the reference the compiled one is tested against)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length & ~3
    for (k,) in struct.iter_unpack("<I", data[:n4]):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    extra = length & 3
    if extra == 3:
        h ^= data[n4 + 2] << 16
    if extra >= 2:
        h ^= data[n4 + 1] << 8
    if extra >= 1:
        h ^= data[n4]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """``toPositive(murmur2(key)) % num_partitions``, Kafka's default for keyed records."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions
