"""Transactions benchmark (issue 35): what a transaction costs a confluent-kafka producer.

    python bench/transactions.py [--records N] [--records-100 N] [--rounds R] [--dir D]

One logan-ray node (``logan-ray start --foreground``, embedded single-node Ray, data
on disk in a temporary folder, gateway on a free loopback port), confluent-kafka over
TCP, 100 B records into one partition, acks=all, ``linger.ms=5``, ``batch.size=1 MiB``
in every run, so only the transactions differ:

1. reference: an idempotent, non-transactional producer, ``--records`` records;
2. transactional, a commit every 1,000 records (``--records`` records) and every 100
   records (``--records-100``, fewer: each commit is a round trip); throughput and its
   ratio to the reference of the same run (goal: >= 0.8 at 1,000);
3. per transaction, timed from the client: ``flush()`` (the last batch, with the
   AddPartitionsToTxn the first send of a transaction triggers) then
   ``commit_transaction()`` (EndTxn: the coordinator writes PREPARE_COMMIT, the
   markers into the partitions and COMPLETE_COMMIT); p50/p99 of each
   (goal: commit p99 <= 20 ms on one node);
4. where a transaction's time goes, after the timed runs: ``--phase-transactions``
   transactions of 100 records with librdkafka's protocol debug log, whose "rtt" of
   each AddPartitionsToTxn, Produce and EndTxn response is printed (p50/p99).

The runs alternate over ``--rounds`` (reference, 1,000, 100, reference, ...) and the
median of the rounds is printed with the ratios.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import uuid

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "confluent_kafka")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench.kafka import LoganRay, create_topic  # noqa: E402
from bench.machine import describe  # noqa: E402

RECORD = 100
COMMON = {"acks": "all", "linger.ms": 5, "batch.size": 1048576, "queue.buffering.max.messages": 2_000_000,
          "queue.buffering.max.kbytes": 2_000_000}


def _values() -> list[bytes]:
    prefix = os.urandom(RECORD - 40)
    return [prefix + b"%040d" % i for i in range(1000)]


def _send(p, topic: str, values: list[bytes], start: int, n: int) -> None:
    for i in range(start, start + n):
        try:
            p.produce(topic, values[i % 1000], partition=0)
        except BufferError:
            p.poll(0.01)
            p.produce(topic, values[i % 1000], partition=0)


def idempotent(bootstrap: str, topic: str, n: int) -> float:
    """Records/s of the non-transactional idempotent reference."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **COMMON})
    values = _values()
    _send(p, topic, values, 0, 1000)  # warm-up: the partition started, the producer id assigned
    if p.flush(60):
        raise RuntimeError("warm-up not acknowledged")
    started = time.perf_counter()
    _send(p, topic, values, 0, n)
    left = p.flush(300)
    took = time.perf_counter() - started
    if left:
        raise RuntimeError(f"{left} records not acknowledged")
    return n / took


def transactional(bootstrap: str, topic: str, n: int, every: int) -> tuple[float, list[float], list[float]]:
    """(records/s, flush ms per transaction, commit_transaction() ms per transaction), committing every ``every``."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-tx-{uuid.uuid4().hex[:8]}",
                  **COMMON})
    p.init_transactions(60)
    values = _values()
    p.begin_transaction()  # warm-up transaction, untimed
    _send(p, topic, values, 0, every)
    p.commit_transaction(60)
    flushes: list[float] = []
    commits: list[float] = []
    started = time.perf_counter()
    for start in range(0, n, every):
        p.begin_transaction()
        _send(p, topic, values, start, min(every, n - start))
        t0 = time.perf_counter()
        if p.flush(60):
            raise RuntimeError("records of a transaction not acknowledged")
        t1 = time.perf_counter()
        p.commit_transaction(60)
        t2 = time.perf_counter()
        flushes.append((t1 - t0) * 1000)
        commits.append((t2 - t1) * 1000)
    took = time.perf_counter() - started
    return n / took, flushes, commits


def phases(bootstrap: str, topic: str, transactions: int) -> dict[str, list[float]]:
    """Round-trip ms of each request type librdkafka sent, from its protocol debug log."""
    from confluent_kafka import Producer

    rtts: dict[str, list[float]] = {}
    pattern = re.compile(r"Received (\w+)Response \(v\d+, \d+ bytes, CorrId \d+, rtt ([\d.]+)ms\)")

    class Rtt(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            m = pattern.search(record.getMessage())
            if m:
                rtts.setdefault(m.group(1), []).append(float(m.group(2)))

    log = logging.getLogger("bench.transactions.rdkafka")
    log.setLevel(logging.DEBUG)
    log.propagate = False
    log.addHandler(Rtt())
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"bench-tx-{uuid.uuid4().hex[:8]}",
                  "debug": "protocol", **COMMON}, logger=log)
    p.init_transactions(60)
    values = _values()
    for k in range(transactions + 3):
        if k == 3:
            rtts.clear()  # the first three warm up
        p.begin_transaction()
        _send(p, topic, values, 0, 100)
        p.commit_transaction(60)
        p.poll(0)
    p.poll(0.5)
    return {k: v for k, v in rtts.items() if k in ("AddPartitionsToTxn", "Produce", "EndTxn")}


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * q))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000, help="reference and commit-every-1,000 runs")
    ap.add_argument("--records-100", type=int, default=20_000, help="commit-every-100 run")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--phase-transactions", type=int, default=100, help="0: no phase breakdown")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    import confluent_kafka

    print(describe())
    print(f"confluent-kafka {confluent_kafka.version()[0]} (librdkafka {confluent_kafka.libversion()[0]}), "
          f"{RECORD} B records, acks=all, linger.ms=5, records={args.records:,} "
          f"(commit every 100: {args.records_100:,}), rounds={args.rounds}", flush=True)
    workdir = tempfile.mkdtemp(prefix="bench-txn-", dir=args.dir)
    broker = None
    rates: dict[str, list[float]] = {"idempotent": [], "txn 1000": [], "txn 100": []}
    times: dict[str, list[float]] = {}
    try:
        broker = LoganRay(workdir)
        print(f"logan-ray up on {broker.bootstrap}", flush=True)
        for r in range(args.rounds):
            topic = f"bench-txn-{uuid.uuid4().hex[:6]}"
            create_topic(broker.bootstrap, topic)
            rate = idempotent(broker.bootstrap, topic, args.records)
            rates["idempotent"].append(rate)
            print(f"  round {r}: idempotent          {rate:10,.0f} rec/s", flush=True)
            for every, n in ((1000, args.records), (100, args.records_100)):
                rate, flushes, commits = transactional(broker.bootstrap, topic, n, every)
                rates[f"txn {every}"].append(rate)
                times.setdefault(f"flush ms, every {every}", []).extend(flushes)
                times.setdefault(f"commit ms, every {every}", []).extend(commits)
                print(f"  round {r}: commit every {every:<5} {rate:10,.0f} rec/s  "
                      f"commit p50 {pct(commits, 0.5):.1f} ms p99 {pct(commits, 0.99):.1f} ms  "
                      f"flush p50 {pct(flushes, 0.5):.1f} ms p99 {pct(flushes, 0.99):.1f} ms", flush=True)
        report(rates, times)
        if args.phase_transactions:
            rtts = phases(broker.bootstrap, topic, args.phase_transactions)
            print()
            print(f"| request round trip, {args.phase_transactions} transactions of 100 | p50 ms | p99 ms | mean ms |")
            print("|---|---|---|---|")
            for name, xs in sorted(rtts.items()):
                print(f"| {name} | {pct(xs, 0.5):.2f} | {pct(xs, 0.99):.2f} | {statistics.mean(xs):.2f} |")
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def report(rates: dict[str, list[float]], times: dict[str, list[float]]) -> None:
    ref = statistics.median(rates["idempotent"])
    print()
    print("| produce, 100 B, acks=all | records/s (median of rounds) | / idempotent |")
    print("|---|---|---|")
    print(f"| idempotent, no transaction | {ref:,.0f} | 1.00 |")
    for every in (1000, 100):
        v = statistics.median(rates[f"txn {every}"])
        goal = "  (goal >= 0.80)" if every == 1000 else ""
        print(f"| transactional, commit every {every:,} | {v:,.0f} | {v / ref:.2f}{goal} |")
    print()
    print("| per transaction (all rounds) | p50 ms | p99 ms | samples |")
    print("|---|---|---|---|")
    for name, xs in times.items():
        goal = " (goal p99 <= 20)" if name.startswith("commit") else ""
        print(f"| {name}{goal} | {pct(xs, 0.5):.2f} | {pct(xs, 0.99):.2f} | {len(xs)} |")


if __name__ == "__main__":
    sys.exit(main())
