"""Record codec throughput: records/s for build_batch and decode_batch.

Usage: python bench/codec.py [--records 10000] [--value-size 100] [--seconds 1.0]
       LOGAN_RAY_PURE_CODEC=1 python bench/codec.py    # the pure-Python fallback
Reports the best of several timed rounds so a shared machine's noise shows
up as little as possible. Alongside logan-ray's codec (compiled or pure, as
printed) it measures aiokafka's compiled (Cython) v2 batch builder and reader
on the same records: the alternative that was weighed against our own extension.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "aiokafka")

from logan_ray.storage.raw_records import scan_batch_raw
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import compiled, decode_batch, decode_columns


def best_rate(fn, records_per_call: int, seconds: float) -> float:
    best = 0.0
    deadline = time.perf_counter() + seconds
    while True:
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        best = max(best, records_per_call / dt)
        if time.perf_counter() > deadline:
            return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=10_000)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--seconds", type=float, default=1.0)
    args = ap.parse_args()
    n, size = args.records, args.value_size
    print(f"python {platform.python_version()} on {platform.platform()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cpus; {n} records/batch, {size}-byte values; "
          f"codec: {'compiled' if compiled() else 'pure Python'}")
    values = [(b"%08d" % i) + os.urandom(size // 2).hex().encode()[: size - 8] for i in range(n)]
    keys = [b"key-%d" % (i % 1000) for i in range(n)]
    ts = 1_700_000_000_000
    for codec in ("none", "lz4", "zstd", "snappy", "gzip"):
        rate = best_rate(lambda: build_batch(values, timestamps=ts, compression=codec), n, args.seconds)
        batch = build_batch(values, timestamps=ts, compression=codec)
        drate = best_rate(lambda: decode_batch(batch), n, args.seconds)
        print(f"  {codec:6s} build {rate:>12,.0f} rec/s   decode {drate:>10,.0f} rec/s   ({len(batch):,} bytes)")
    rate = best_rate(lambda: build_batch(values, keys, timestamps=ts), n, args.seconds)
    batch = build_batch(values, keys, timestamps=ts)
    drate = best_rate(lambda: decode_batch(batch), n, args.seconds)
    srate = best_rate(lambda: scan_batch_raw(batch), n, args.seconds)
    print(f"  keyed  build {rate:>12,.0f} rec/s   decode {drate:>10,.0f} rec/s   raw scan {srate:,.0f} rec/s")
    plain = build_batch(values, timestamps=ts)
    crate = best_rate(lambda: decode_columns(plain), n, args.seconds)
    print(f"  columns (decode_columns, uncompressed)          {crate:>10,.0f} rec/s")
    aiokafka_rates(values, ts, plain, n, args.seconds)


def aiokafka_rates(values, ts, plain: bytes, n: int, seconds: float) -> None:
    """aiokafka's Cython DefaultRecordBatchBuilder / DefaultRecordBatch on the same records."""
    from aiokafka.record._crecords import DefaultRecordBatch, DefaultRecordBatchBuilder

    def build() -> bytes:
        b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1 << 30)
        for v in values:
            b.append(0, timestamp=ts, key=None, value=v, headers=[])
        return bytes(b.build())

    def decode() -> list:
        batch = DefaultRecordBatch(plain)
        batch.validate_crc()
        return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch]

    print(f"  aiokafka (Cython) none build {best_rate(build, n, seconds):>12,.0f} rec/s   "
          f"decode {best_rate(decode, n, seconds):>10,.0f} rec/s (to tuples)")


if __name__ == "__main__":
    main()
