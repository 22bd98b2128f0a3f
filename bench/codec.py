"""Record codec throughput: records/s for build_batch and decode_batch.

Usage: python bench/codec.py [--records 10000] [--value-size 100] [--seconds 1.0]
Reports the best of several timed rounds so a shared machine's noise shows
up as little as possible.
"""
from __future__ import annotations

import argparse
import os
import platform
import time

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray")

from logan_ray.storage.records import build_batch, decode_batch, scan_batch_raw


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
          f"{os.cpu_count()} cpus; {n} records/batch, {size}-byte values")
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


if __name__ == "__main__":
    main()
