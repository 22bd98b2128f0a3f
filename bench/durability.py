"""acks=all (fsynced, group commit) against acks=1 (page cache), through the Kafka gateway.

    python bench/durability.py [--seconds S] [--producers 1,8,64] [--records-per-request N] [--dir PATH]

Starts ``logan-ray start --foreground`` as a child process (data in a temporary
folder under ``--dir``, which must be on a real disk: on tmpfs fsync is free),
then for each number of concurrent producers runs acks=1 and acks=all back to
back in the same run, each on a fresh one-partition topic so every producer
appends to the same partition log (where group commit matters). A producer is
one TCP connection with one Produce request in flight: send, wait for the
answer, repeat, for ``--seconds``. Each request carries one uncompressed batch
of ``--records-per-request`` records of 100 bytes. Latency is the request's
round trip as the producer sees it.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench.kafka import LoganRay  # noqa: E402
from bench.machine import describe  # noqa: E402
from bench.needs import need  # noqa: E402
from logan_ray.protocol import decode_response, encode_request  # noqa: E402
from logan_ray.storage.record_builder import build_batch  # noqa: E402

PRODUCE, CREATE_TOPICS = 0, 19
RECORD = 100


async def _call(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, frame: bytes) -> bytes:
    writer.write(frame)
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return await reader.readexactly(size)


async def _create_topic(port: int, name: str) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1, "assignments": [],
                        "configs": []}], "timeout_ms": 30000, "validate_only": False}
    frame = await _call(reader, writer, encode_request(CREATE_TOPICS, 5, 1, "bench", body))
    _, resp = decode_response(CREATE_TOPICS, 5, frame)
    code = resp["topics"][0]["error_code"]
    writer.close()
    if code not in (0, 36):
        raise RuntimeError(f"CreateTopics {name}: error {code}")


async def _producer(port: int, topic: str, acks: int, records: int, stop_at: float, lat: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    batch = build_batch([os.urandom(RECORD // 2).hex().encode() for _ in range(records)])
    body = {"transactional_id": None, "acks": acks, "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    frame = encode_request(PRODUCE, 9, 1, "bench", body)
    checked = False
    try:
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            answer = await _call(reader, writer, frame)
            lat.append(time.perf_counter() - t0)
            if not checked:  # decoding every answer would cost more than the broker's work
                _, resp = decode_response(PRODUCE, 9, answer)
                code = resp["responses"][0]["partition_responses"][0]["error_code"]
                if code:
                    raise RuntimeError(f"produce to {topic} failed with error {code}")
                checked = True
    finally:
        writer.close()


async def _run(port: int, acks: int, producers: int, seconds: float, records: int) -> dict:
    topic = f"durability-{'all' if acks == -1 else acks}-{producers}-{uuid.uuid4().hex[:6]}"
    await _create_topic(port, topic)
    warm: list[float] = []
    await _producer(port, topic, acks, records, time.perf_counter() + 0.5, warm)  # routes, channel, first segment
    lats: list[list[float]] = [[] for _ in range(producers)]
    started = time.perf_counter()
    stop_at = started + seconds
    await asyncio.gather(*(_producer(port, topic, acks, records, stop_at, lats[i]) for i in range(producers)))
    elapsed = time.perf_counter() - started
    every = sorted(x for lat in lats for x in lat)
    n = len(every)
    return {"requests": n, "req_s": n / elapsed, "records_s": n * records / elapsed,
            "mb_s": n * records * RECORD / elapsed / 1e6,
            "p50_ms": every[n // 2] * 1e3, "p99_ms": every[min(n - 1, int(n * 0.99))] * 1e3,
            "mean_ms": statistics.fmean(every) * 1e3}


def main() -> None:
    need("logan_ray")
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0, help="per measurement")
    ap.add_argument("--producers", default="1,8,64", help="comma-separated concurrent producer counts")
    ap.add_argument("--records-per-request", type=int, default=10)
    ap.add_argument("--dir", default=None, help="parent folder of the broker's data (a real disk)")
    args = ap.parse_args()
    counts = [int(x) for x in args.producers.split(",")]
    print(describe())
    workdir = tempfile.mkdtemp(prefix="bench-durability-", dir=args.dir)
    fs = os.statvfs(workdir)
    print(f"data in {workdir} ({fs.f_bavail * fs.f_frsize / 2**30:.0f} GiB free); "
          f"{args.seconds:g} s per measurement, {args.records_per_request} x {RECORD} B records per request")
    broker = LoganRay(workdir)
    try:
        rows = []
        for count in counts:
            for acks in (1, -1):
                r = asyncio.run(_run(broker.port, acks, count, args.seconds, args.records_per_request))
                rows.append((count, acks, r))
                print(f"  producers={count:3d} acks={'all' if acks == -1 else acks:>3}: {r['req_s']:8.0f} req/s "
                      f"{r['records_s']:9.0f} records/s  p50 {r['p50_ms']:7.2f} ms  p99 {r['p99_ms']:7.2f} ms",
                      flush=True)
        print()
        print("| producers | acks | requests/s | records/s | MB/s | p50 ms | p99 ms |")
        print("| ---: | :---: | ---: | ---: | ---: | ---: | ---: |")
        for count, acks, r in rows:
            print(f"| {count} | {'all' if acks == -1 else acks} | {r['req_s']:.0f} | {r['records_s']:.0f} | "
                  f"{r['mb_s']:.2f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} |")
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
