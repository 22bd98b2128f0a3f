"""Compaction benchmark: cleaning throughput (MB/s of dirty log) and the cleaner's peak memory.

    python bench/compaction.py [--size-mib 1024] [--keys 100000] [--value-bytes 1000] [--batch 16]
                               [--compression none] [--segment-mib 128] [--map-mib 128]
                               [--repeat 1] [--dir D] [--keep]

A partition log of ``--size-mib`` of keyed updates is written (keys drawn
uniformly from ``--keys`` distinct keys, ``--batch`` records per producer
batch), its active segment rolled so everything is cleanable. One cleaning
pass then runs in a fresh child process, as the cleaner actor runs it: it
reads the closed segment files directly and writes only ``.cleaned`` files.
Reported: wall and CPU time of the pass, MB/s of dirty log, bytes before and
after, and the child's peak RSS next to its RSS before cleaning (interpreter
plus imports), so the cleaner's own memory is the difference. The parent then
installs the result (the swap the partition actor does, timed) and checks that
exactly the latest record of every key survived, at its original offset.

A second, incremental pass follows: 10% more updates are appended and
cleaned, which recopies the whole clean part as Kafka does.
"""
from __future__ import annotations

import argparse
import os
import pickle
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from machine import describe  # noqa: E402

from logan_ray.storage.config import TopicConfig  # noqa: E402
from logan_ray.storage.log import PartitionLog  # noqa: E402
from logan_ray.storage.record_builder import build_batch  # noqa: E402

MIB = 1 << 20

# Peak RSS comes from /proc/self/status VmHWM: ru_maxrss would include the
# parent's RSS, which a forked child carries until it execs.
CHILD = r"""
import pickle, sys, time
from logan_ray.storage.compaction import clean

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return -1

view_path, out_path, map_bytes = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(view_path, "rb") as f:
    view = pickle.load(f)
rss_before = status("VmHWM")
cpu = time.process_time()
wall = time.perf_counter()
result = clean(view, map_bytes=map_bytes, force=True)
wall = time.perf_counter() - wall
cpu = time.process_time() - cpu
peak = status("VmHWM")
with open(out_path, "wb") as f:
    pickle.dump((result, wall, cpu, rss_before, peak), f)
"""


def generate(lg: PartitionLog, target_bytes: int, keys: int, value_bytes: int, batch: int, compression: str,
             rnd: random.Random, latest: dict[bytes, tuple[int, bytes]], seq: int) -> tuple[int, int]:
    """Append keyed updates until ``target_bytes`` more are in the log; returns (bytes, next seq)."""
    pad = bytes(rnd.getrandbits(8) for _ in range(value_bytes))
    written = 0
    ts = 1_700_000_000_000 + seq
    while written < target_bytes:
        ks = [b"key-%07d" % rnd.randrange(keys) for _ in range(batch)]
        vs = [b"%012d" % (seq + i) + pad[: value_bytes - 12] for i in range(batch)]
        data = build_batch(vs, ks, timestamps=ts, compression=compression)
        info = lg.append(data)
        for i, (k, v) in enumerate(zip(ks, vs)):
            latest[k] = (info.base_offset + i, v)
        written += len(data)
        seq += batch
        ts += 1
    return written, seq


def run_pass(lg: PartitionLog, work: str, map_bytes: int) -> dict:
    view_path = os.path.join(work, "view.pickle")
    out_path = os.path.join(work, "result.pickle")
    with open(view_path, "wb") as f:
        pickle.dump(lg.cleaning_view(), f)
    subprocess.run([sys.executable, "-c", CHILD, view_path, out_path, str(map_bytes)], check=True)
    with open(out_path, "rb") as f:
        result, wall, cpu, rss_before, peak = pickle.load(f)
    t = time.perf_counter()
    report = lg.install_cleaned(result)
    swap_s = time.perf_counter() - t
    s = result.stats
    return {
        "wall": wall, "cpu": cpu, "dirty": s.dirty_bytes, "before": s.bytes_before, "after": s.bytes_after,
        "segments": (s.segments_before, s.segments_after), "records": (s.records_read, s.records_removed),
        "rss_before": rss_before, "peak": peak, "swap_s": swap_s, "installed": report.installed,
        "map": (s.map_entries, s.map_capacity, s.map_full), "map_s": s.map_seconds, "copy_s": s.copy_seconds,
    }


def verify(lg: PartitionLog, latest: dict[bytes, tuple[int, bytes]]) -> int:
    got = {}
    offset = lg.log_start_offset
    count = 0
    while offset < lg.log_end_offset:
        records = lg.read_records(offset, 16 * MIB)
        if not records:
            break
        for r in records:
            assert r.key not in got, f"key {r.key!r} twice after cleaning"
            got[r.key] = (r.offset, r.value)
        count += len(records)
        offset = records[-1].offset + 1
    assert got == latest, "the cleaned log is not exactly the latest record of every key"
    return count


def show(label: str, r: dict) -> None:
    mb = r["dirty"] / 1e6
    print(f"  {label}: {mb:.0f} MB dirty in {r['wall']:.2f} s wall ({r['cpu']:.2f} s CPU; map {r['map_s']:.2f} s, "
          f"copy {r['copy_s']:.2f} s) = {mb / r['wall']:.0f} MB/s of dirty log "
          f"({mb / r['cpu']:.0f} MB/s per CPU second)")
    print(f"    {r['before'] / MIB:.0f} MiB in {r['segments'][0]} segments -> {r['after'] / MIB:.1f} MiB in "
          f"{r['segments'][1]}; {r['records'][1]:,} of {r['records'][0]:,} records removed; "
          f"map {r['map'][0]:,}/{r['map'][1]:,} keys{' (full)' if r['map'][2] else ''}")
    print(f"    cleaner RSS {r['rss_before'] / MIB:.0f} MiB before, peak {r['peak'] / MIB:.0f} MiB "
          f"(+{(r['peak'] - r['rss_before']) / MIB:.0f} MiB); swap in the owner took {r['swap_s'] * 1e3:.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--value-bytes", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=16, help="records per producer batch")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--segment-mib", type=int, default=128)
    ap.add_argument("--map-mib", type=int, default=128, help="offset map memory budget")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()

    print(describe())
    print(f"log: {args.size_mib} MiB of updates to {args.keys:,} keys, {args.value_bytes}-byte values, "
          f"{args.batch} records per batch, compression {args.compression}, segment.bytes {args.segment_mib} MiB")
    root = tempfile.mkdtemp(prefix="bench-compaction-", dir=args.dir)
    firsts, seconds = [], []
    try:
        for run in range(args.repeat):
            d = os.path.join(root, f"t-{run}")
            # the default file.delete.delay.ms: replaced files go at close(), not inside the timed swap
            config = TopicConfig.from_dict({"cleanup.policy": "compact", "segment.bytes": str(args.segment_mib * MIB)})
            lg = PartitionLog(d, config)
            rnd = random.Random(run)
            latest: dict[bytes, tuple[int, bytes]] = {}
            t = time.perf_counter()
            _, seq = generate(lg, args.size_mib * MIB, args.keys, args.value_bytes, args.batch, args.compression,
                              rnd, latest, 0)
            lg.roll()
            lg.flush()
            print(f"run {run + 1}: wrote {lg.size_bytes / MIB:.0f} MiB ({lg.log_end_offset:,} records) in "
                  f"{time.perf_counter() - t:.1f} s")
            first = run_pass(lg, root, args.map_mib * MIB)
            show("first pass", first)
            kept = verify(lg, latest)
            print(f"    verified: {kept:,} records, one per key, latest values at their offsets")
            generate(lg, args.size_mib * MIB // 10, args.keys, args.value_bytes, args.batch, args.compression,
                     rnd, latest, seq)
            lg.roll()
            lg.flush()
            second = run_pass(lg, root, args.map_mib * MIB)
            show("incremental pass (+10%)", second)
            verify(lg, latest)
            lg.close()
            firsts.append(first)
            seconds.append(second)
            if not args.keep:
                shutil.rmtree(d, ignore_errors=True)
        if args.repeat > 1:
            rates = [r["dirty"] / 1e6 / r["wall"] for r in firsts]
            print(f"first pass MB/s over {args.repeat} runs: median {statistics.median(rates):.0f}, "
                  f"min {min(rates):.0f}, max {max(rates):.0f}; peak RSS max "
                  f"{max(r['peak'] for r in firsts) / MIB:.0f} MiB")
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
