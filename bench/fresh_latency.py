"""End-to-end latency on a FRESH broker with a consumer group (issue 12, item 8).

    python bench/fresh_latency.py [--seconds 10] [--rounds 3]

Each round starts a new ``logan-ray start --foreground`` on an empty data dir
(as bench/kafka.py does), and as soon as it answers: creates a topic, subscribes
a confluent-kafka consumer in a new group (default settings: auto-commit every
5 s, so offsets are written to ``__consumer_offsets`` during the run), waits for
its assignment, then produces one 100-byte record per millisecond for
``--seconds`` (``linger.ms=0``). Latency is consume time minus the timestamp the
producer put in the value. Prints p50, p99, max and the share over 20 ms per
round; the broker is stopped after each round.

Before the fix, the first group made the coordinator create ``__consumer_offsets``
(8 partition actors) while traffic flowed: p99 424-855 ms. The target is p99 <= 25 ms.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.kafka import DelayReader, LoganRay, create_topic, paced_stamps  # noqa: E402
from bench.machine import describe  # noqa: E402
from bench.needs import need  # noqa: E402


def fresh_group_latency(bootstrap: str, seconds: float) -> dict[str, float]:
    from confluent_kafka import Consumer, Producer

    topic = f"fresh-{uuid.uuid4().hex[:6]}"
    t0 = time.perf_counter()
    create_topic(bootstrap, topic)
    # Traffic flows before the group comes: one untimed record starts the topic's partition (an
    # inactive partition starts on its first append; bench/partitions.py measures that), so what
    # this measures is the first consumer group's effect on traffic, as item 8 of issue 12 asks.
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    p.produce(topic, b"warm-up")
    if p.flush(60) != 0:
        raise RuntimeError("the warm-up record was not acknowledged within 60 s")
    assigned = threading.Event()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"fresh-{uuid.uuid4().hex[:6]}",
                  "auto.offset.reset": "earliest"})  # the reader skips the warm-up record
    c.subscribe([topic], on_assign=lambda consumer, parts: assigned.set())
    reader = DelayReader(c, 0.05)
    if not assigned.wait(60):
        reader.stop()
        raise RuntimeError("the consumer got no assignment within 60 s")
    joined = time.perf_counter() - t0
    # The timed window starts once the consumer fetches (it has read the warm-up record): after an
    # assignment with no committed offset, librdkafka itself waits 100 ms before its offset query
    # ("backoff: (re)starting offset query timer", seen with debug=fetch), against any broker.
    if not reader.reading.wait(30):
        reader.stop()
        raise RuntimeError("the consumer read nothing within 30 s of its assignment")
    i = paced_stamps(p, topic, seconds)
    delays = reader.wait_for(i, 15)
    c.close()
    if len(delays) < i * 0.99:
        raise RuntimeError(f"only {len(delays)} of {i} records arrived")
    return {"p50": delays[len(delays) // 2], "p99": delays[int(len(delays) * 0.99)], "max": delays[-1],
            "over20": sum(d > 20 for d in delays) / len(delays), "samples": len(delays), "join_s": joined}


def main() -> int:
    need("logan_ray", "confluent_kafka")
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    print(describe(), flush=True)
    p99s = []
    for r in range(args.rounds):
        workdir = tempfile.mkdtemp(prefix="bench-fresh-", dir=args.dir)
        broker = None
        try:
            started = time.perf_counter()
            broker = LoganRay(workdir)
            up = time.perf_counter() - started
            res = fresh_group_latency(broker.bootstrap, args.seconds)
        finally:
            if broker is not None:
                broker.stop()
            shutil.rmtree(workdir, ignore_errors=True)
        p99s.append(res["p99"])
        print(f"round {r}: broker up in {up:.1f} s, group joined in {res['join_s']:.1f} s; "
              f"p50 {res['p50']:.2f} ms  p99 {res['p99']:.2f} ms  max {res['max']:.1f} ms  "
              f"> 20 ms: {res['over20']:.2%}  ({res['samples']} records)", flush=True)
    print(f"median p99 over {args.rounds} fresh brokers: {sorted(p99s)[len(p99s) // 2]:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
