"""Kafka's murmur2 over a whole column of keys at once (numpy), for writers.

``logan_ray.common.partitioner.murmur2`` is the reference (one key at a time); this
computes the same 32-bit hash for every key of an Arrow binary column with one
numpy pass per 4-byte word of the longest key, so partitioning a block of keys
costs no Python per record. Tests pin it to the reference.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from .values import _parts

_SEED = np.uint32(0x9747B28C)
_M = np.uint32(0x5BD1E995)


def murmur2_column(keys: pa.Array) -> np.ndarray:
    """uint32 murmur2 of every non-null key (nulls hash as empty keys; callers mask them)."""
    offsets, data, valid = _parts(keys)
    n = len(valid)
    lens = (offsets[1:] - offsets[:-1]).astype(np.int64)
    lens[~valid] = 0
    starts = offsets[:-1]
    padded = np.concatenate([data, np.zeros(8, dtype=np.uint8)])
    with np.errstate(over="ignore"):
        h = _SEED ^ lens.astype(np.uint32)
        words = lens // 4
        for w in range(int(words.max()) if n else 0):
            live = np.flatnonzero(words > w)
            p = starts[live] + 4 * w
            k = (padded[p].astype(np.uint32) | (padded[p + 1].astype(np.uint32) << 8)
                 | (padded[p + 2].astype(np.uint32) << 16) | (padded[p + 3].astype(np.uint32) << 24))
            k = k * _M
            k ^= k >> np.uint32(24)
            k = k * _M
            h[live] = (h[live] * _M) ^ k
        extra = lens & 3
        tail = np.minimum(starts + 4 * words, len(data))  # empty/null keys may sit past the data
        b0 = padded[tail].astype(np.uint32)
        b1 = padded[tail + 1].astype(np.uint32)
        b2 = padded[tail + 2].astype(np.uint32)
        h = np.where(extra == 3, h ^ (b2 << 16), h)
        h = np.where(extra >= 2, h ^ (b1 << 8), h)
        h = np.where(extra >= 1, (h ^ b0) * _M, h)
        h ^= h >> np.uint32(13)
        h = h * _M
        h ^= h >> np.uint32(15)
    return h


def partitions_for_keys(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """``toPositive(murmur2(key)) % n`` per key, as the producer's partition_for_key."""
    return ((murmur2_column(keys) & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int32)
