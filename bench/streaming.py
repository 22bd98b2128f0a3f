"""A continuous pipeline (``logan_ray.stream``): records/s and end-to-end latency, next to read_kafka.

    python bench/streaming.py [--records 2000000] [--partitions 4] [--workers 2] [--value-size 100]
                              [--latency-seconds 10] [--latency-rate 1000] [--kafka-rounds 2]

One embedded broker (a temporary data dir, Ray in this process), one run, in this order:

1. throughput: ``--records`` values of ``--value-size`` B are appended to an input topic of
   ``--partitions`` partitions (not timed), then a pipeline of ``--workers`` workers reads that
   backlog from the start. Two trivial functions, each its own pipeline and group:
   * ``identity -> output topic``: every record is written to an output topic, flushed
     (acks=1) and committed, i.e. read + write + commit;
   * ``filter, nothing kept``: the function returns no rows, so a batch is read and committed
     only (the same work ``read_kafka`` does, plus commits).
   The clock runs between the first sign of progress in the workers' counts (polled every 20 ms)
   and the moment the counts reach ``--records``; the records counted at the first sign are
   subtracted, so a worker's start and group join are not in the rate (they are printed apart).
   The identity pipeline stays up (idle) while the filter runs, for step 2.
2. latency: with the identity pipeline caught up and still running, one record per
   ``1/--latency-rate`` s for ``--latency-seconds``, each value carrying its send time (wall clock,
   ms, 8 bytes); a consumer of the output topic in this process takes the arrival time of each.
   So the delay is produce -> pipeline (poll, function, produce, flush, commit) -> output topic ->
   consumer. The same producer and reader timed on the input topic alone, before any pipeline
   runs, are the baseline: what the pipeline adds is the difference.
3. reference: ``ray.data.read_kafka`` over the same input topic through logan-ray's Kafka gateway,
   ``--kafka-rounds`` times (bounded: earliest to latest, materialised), after one untimed warm-up
   on a tiny topic.
4. Spark Structured Streaming (issue 39 item 3): not built yet, so printed as such.
"""
from __future__ import annotations

import argparse
import logging
import os
import statistics
import struct
import sys
import tempfile
import threading
import time
from typing import Any

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "ray", "pyarrow", "confluent_kafka")

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
os.environ.setdefault("RAY_AUTH_MODE", "token")  # before Ray reads its config (see client.init_ray)

import machine  # noqa: E402

IN, OUT, WARM = "bench-stream-in", "bench-stream-out", "bench-stream-warm"


def identity(batch):
    """The trivial pipeline function: every record goes to the output topic as it came."""
    import pyarrow as pa

    return pa.table({"value": batch.column("value")})


def drop_all(batch):
    """A filter that keeps nothing: the pipeline reads and commits, and writes nothing."""
    return None


def fill(client, topic: str, records: int, partitions: int, value_size: int) -> float:
    """Append ``records`` values evenly over the partitions; seconds it took (not part of any figure)."""
    value = b"x" * value_size
    chunk = 50_000
    t = time.perf_counter()
    with client.producer() as p:
        for part in range(partitions):
            left = records // partitions + (1 if part < records % partitions else 0)
            while left:
                n = min(chunk, left)
                p.send_batch(topic, [value] * n, partition=part)
                left -= n
    return time.perf_counter() - t


def processed(pipeline) -> tuple[int, int]:
    """(records, batches) the workers have committed, asked of the workers directly (cheaper than status())."""
    import ray

    stats = ray.get([w.stats.remote() for w in pipeline.workers()], timeout=10)
    return sum(s["records"] for s in stats), sum(s["batches"] for s in stats)


def catch_up(client, fn, group: str, output_topic: str | None, records: int, workers: int) -> dict[str, Any]:
    """Run a pipeline over the whole backlog; its start time, rate over the backlog, stop time."""
    from logan_ray import stream

    t = time.perf_counter()
    pipeline = stream.run(client, [IN], group=group, fn=fn, output_topic=output_topic, workers=workers,
                          start="earliest")
    started = time.perf_counter() - t
    try:
        first_t = first_n = first_b = None
        deadline = time.monotonic() + 300
        done = batches = 0
        while done < records and time.monotonic() < deadline:
            done, batches = processed(pipeline)
            now = time.perf_counter()
            if first_t is None and done:
                first_t, first_n, first_b = now, done, batches
            if done < records:
                time.sleep(0.02)
        end_t = time.perf_counter()
        if done < records:
            raise RuntimeError(f"{group}: {done} of {records} records processed after 300 s")
        first_seen = first_t - t - started
        rate = (done - first_n) / (end_t - first_t) if end_t > first_t else float("nan")
        result = {"pipeline": pipeline, "start_s": started, "first_batch_s": first_seen, "rate": rate,
                  "counted_from": first_n, "took_s": end_t - first_t, "batches": batches - first_b}
    except BaseException:
        pipeline.stop()
        raise
    return result


class ArrivalReader:
    """Reads the output topic from its end in a thread; the delay of every stamped value, in ms."""

    def __init__(self, client, topic: str, partitions: int) -> None:
        self.consumer = client.consumer(auto_offset_reset="latest", fetch_max_wait_ms=100)
        self.consumer.assign([(topic, p) for p in range(partitions)])
        for p in range(partitions):
            self.consumer.position((topic, p))  # resolve "latest" now, before the first stamp is sent
        self.delays: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for r in self.consumer.poll(100):
                if len(r.value) >= 8 and r.value[8:9] == b"s":
                    self.delays.append(time.time_ns() / 1e6 - struct.unpack(">d", r.value[:8])[0])

    def wait_for(self, n: int, timeout_s: float) -> list[float]:
        deadline = time.monotonic() + timeout_s
        while len(self.delays) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        self._stop.set()
        self._thread.join()
        self.consumer.close()
        return sorted(self.delays)


def latency(client, partitions: int, seconds: float, rate: float, read_from: str = OUT
            ) -> tuple[float, float, float, int, int]:
    """(p50, p99, max ms, samples, sent): stamped records paced at ``rate``/s into the input topic,
    their arrival timed in ``read_from`` (the output topic: through the pipeline; the input topic:
    the producer and consumer alone)."""
    reader = ArrivalReader(client, read_from, partitions)
    time.sleep(0.5)  # the reader fetches
    pad = b"s" * 92
    sent = 0
    with client.producer(linger_ms=0) as p:
        started = time.perf_counter()
        while True:
            now = time.perf_counter()
            if now - started >= seconds:
                break
            due = started + sent / rate
            if due > now:
                time.sleep(due - now)
            p.send(IN, struct.pack(">d", time.time_ns() / 1e6) + pad, partition=sent % partitions)
            sent += 1
        p.flush()
    delays = reader.wait_for(sent, 20)
    if len(delays) < sent * 0.99:
        raise RuntimeError(f"only {len(delays)} of {sent} stamped records reached the output topic")
    return delays[len(delays) // 2], delays[int(len(delays) * 0.99)], delays[-1], len(delays), sent


def read_kafka_rounds(bootstrap: str, records: int, rounds: int) -> list[float]:
    """records/s of ``ray.data.read_kafka`` reading the whole input topic, once per round."""
    import ray

    rates = []
    for i in range(rounds):
        t = time.perf_counter()
        ds = ray.data.read_kafka(IN, bootstrap_servers=bootstrap, start_offset="earliest",
                                 end_offset="latest").materialize()
        took = time.perf_counter() - t
        count = ds.count()
        if count < records:
            raise RuntimeError(f"read_kafka read {count} of {records} records")
        rates.append(count / took)
        print(f"  read_kafka round {i + 1}: {count:,} records in {took:.2f} s", flush=True)
        del ds
    return rates


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--value-size", type=int, default=100)
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--latency-rate", type=float, default=1000.0, help="stamped records per second")
    ap.add_argument("--kafka-rounds", type=int, default=2)
    args = ap.parse_args()
    if args.value_size < 9:
        ap.error("--value-size must be at least 9 (an 8-byte stamp and a marker)")

    import ray

    import logan_ray
    from bench.spark import gateway_endpoint

    print(machine.describe(), flush=True)
    n = args.records
    with tempfile.TemporaryDirectory() as d:
        client = logan_ray.connect(data_dir=os.path.join(d, "broker"))
        started_gateway = False
        pipelines: list[Any] = []
        try:
            ray.data.DataContext.get_current().enable_progress_bars = False
            logging.getLogger("ray.data").setLevel(logging.WARNING)
            client.create_topic(IN, partitions=args.partitions)
            client.create_topic(OUT, partitions=args.partitions)
            took = fill(client, IN, n, args.partitions, args.value_size)
            print(f"input topic: {n:,} records of {args.value_size} B in {args.partitions} partitions "
                  f"(appended in {took:.1f} s, not measured)", flush=True)

            base = latency(client, args.partitions, args.latency_seconds, args.latency_rate, read_from=IN)
            print(f"  baseline, no pipeline (produce -> input topic -> consumer): p50 {base[0]:.1f} ms, "
                  f"p99 {base[1]:.1f} ms", flush=True)
            backlog = sum(end - start for start, end in client.partition_offsets(IN).values())  # n + the stamps
            results = {}
            for label, fn, out in (("identity -> output topic", identity, OUT),
                                   ("filter, nothing kept", drop_all, None)):
                r = catch_up(client, fn, f"bench-{'identity' if out else 'filter'}", out, backlog, args.workers)
                pipelines.append(r["pipeline"])
                results[label] = r
                print(f"  {label}: workers up in {r['start_s']:.1f} s, first commit {r['first_batch_s']:.1f} s "
                      f"later; then {backlog - r['counted_from']:,} records in {r['took_s']:.2f} s, {r['batches']} batches "
                      f"({args.workers * r['took_s'] / max(1, r['batches']) * 1000:.1f} ms per batch per worker)",
                      flush=True)
                if out is None:  # the identity pipeline stays up for the latency run; this one is done
                    pipelines.pop().stop()

            p50, p99, worst, samples, sent = latency(client, args.partitions, args.latency_seconds,
                                                     args.latency_rate)
            stopped = time.perf_counter()
            final = pipelines.pop().stop()
            stop_s = time.perf_counter() - stopped

            bootstrap, started_gateway = gateway_endpoint(client, d)
            client.create_topic(WARM, partitions=1)
            with client.producer() as p:
                p.send_batch(WARM, [b"w"] * 10, partition=0)
            ray.data.read_kafka(WARM, bootstrap_servers=bootstrap).materialize()  # warm-up, not measured
            kafka = read_kafka_rounds(bootstrap, n, args.kafka_rounds)
        finally:
            for p in pipelines:
                p.stop()
            if started_gateway:
                from logan_ray.gateway import stop_gateways

                stop_gateways([ray.get_runtime_context().get_node_id()])
            client.close()

    print(f"\n{n:,} records of {args.value_size} B, {args.partitions} partitions, {args.workers} workers "
          f"(max_batch_records 10,000, acks=1)")
    print(f"{'':44}{'records/s':>14}   end-to-end latency")
    for label, r in results.items():
        lat = (f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, max {worst:.1f} ms ({samples:,} of {sent:,} at "
               f"{args.latency_rate:,.0f}/s)") if label.startswith("identity") else ""
        print(f"{'stream.run, ' + label:44}{r['rate']:>14,.0f}   {lat}")
    print(f"{'no pipeline: producer -> topic -> consumer':44}{'':>14}   p50 {base[0]:.1f} ms, p99 {base[1]:.1f} ms, "
          f"max {base[2]:.1f} ms ({base[3]:,} of {base[4]:,})")
    print(f"{'ray.data.read_kafka (gateway), median':44}{statistics.median(kafka):>14,.0f}   "
          f"n/a (bounded; rounds: {', '.join(f'{k:,.0f}' for k in kafka)})")
    print(f"{'Spark Structured Streaming':44}{'not built':>14}   not built (issue 39 item 3: no streaming source yet)")
    print(f"latency: produce (value = send time) -> pipeline -> output topic -> a consumer in this process; "
          f"identity pipeline stopped in {stop_s:.1f} s after {final.records_processed:,} records")
    goal_rate = results["identity -> output topic"]["rate"] >= 1_000_000
    print(f"goal (>= 1 M rec/s, p99 <= 50 ms, trivial function): rate {'met' if goal_rate else 'missed'}, "
          f"p99 {'met' if p99 <= 50 else 'missed'}")


if __name__ == "__main__":
    main()
