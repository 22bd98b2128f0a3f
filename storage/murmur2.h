/* Kafka's murmur2 (Utils.murmur2, seed 0x9747b28c) as an unsigned 32-bit value: the one C
 * implementation, shared by the record codec (storage/_codec.c) and the producer's compiled
 * send path (logan_ray/_send_path.c). Its Python twin is logan_ray/common/partitioner.py's
 * murmur2_py; both are pinned to Kafka's own UtilsTest vectors. */
#ifndef LOGAN_RAY_MURMUR2_H
#define LOGAN_RAY_MURMUR2_H
#include <stddef.h>
#include <stdint.h>

static inline uint32_t kafka_murmur2(const uint8_t *d, ptrdiff_t len) {
    const uint32_t m = 0x5bd1e995u;
    uint32_t h = 0x9747b28cu ^ (uint32_t)len;
    ptrdiff_t n4 = len & ~(ptrdiff_t)3;
    for (ptrdiff_t i = 0; i < n4; i += 4) {
        uint32_t k = (uint32_t)d[i] | ((uint32_t)d[i + 1] << 8) | ((uint32_t)d[i + 2] << 16) | ((uint32_t)d[i + 3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h = (h * m) ^ k;
    }
    switch (len & 3) {
    case 3: h ^= (uint32_t)d[n4 + 2] << 16; /* fall through */
    case 2: h ^= (uint32_t)d[n4 + 1] << 8;  /* fall through */
    case 1: h ^= d[n4]; h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return h;
}

#endif
