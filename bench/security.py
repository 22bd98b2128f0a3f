"""Produce and consume throughput over SASL_SSL next to PLAINTEXT, in one run on one broker.

Run: python bench/security.py [--records 500000] [--record-size 100]

One embedded broker with two listeners: PLAINTEXT and SASL_SSL (TLS with a
freshly generated certificate, SCRAM-SHA-512 login). confluent-kafka's producer
writes ``--records`` values to a fresh one-partition topic through each listener,
then its consumer reads them back from offset 0 through the same listener. Fetch
over TLS cannot use sendfile (no kernel TLS in Python's ssl here): the gateway
reads the file ranges and encrypts them, which is the cost this shows.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "ray", "confluent_kafka", "cryptography")

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "security"))  # certs.py: one CA helper
os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")

import machine  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.kafka import consume_confluent, produce_copies  # noqa: E402  (one confluent-kafka reference reader)

PASSWORD = "bench-pw"


def produce(conf: dict, topic: str, n: int, size: int) -> float:
    from confluent_kafka import Producer

    p = Producer({**conf, "linger.ms": 5, "batch.num.messages": 10000, "queue.buffering.max.messages": 1000000})
    value = b"x" * size
    t = time.perf_counter()
    produce_copies(p, topic, value, n)
    if p.flush(300):
        raise RuntimeError("producer did not flush")
    return n / (time.perf_counter() - t)


def consume(conf: dict, topic: str, n: int) -> float:
    """Records/s of one confluent-kafka consumer reading ``n`` records from offset 0 with ``conf``."""
    return n / consume_confluent(conf["bootstrap.servers"], topic, n, extra=conf)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--record-size", type=int, default=100)
    args = ap.parse_args()
    from certs import make_pki

    from logan_ray.broker import Broker, BrokerOptions

    with tempfile.TemporaryDirectory() as d:
        pki = make_pki(os.path.join(d, "pki"))
        config = {"listeners": "PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
                  "ssl.keystore.location": pki.server, "sasl.enabled.mechanisms": "SCRAM-SHA-512"}
        broker = Broker(BrokerOptions(data_dir=os.path.join(d, "data"), http="off", config=config))
        ep = broker.start()
        try:
            from logan_ray._ray import get
            from logan_ray.security import scram

            get(broker.router.alter_scram.remote([], [{
                "name": "bench", "mechanism": 2, "iterations": 4096,
                "credential": scram.new_credential("SCRAM-SHA-512", PASSWORD)}]))
            listeners = ep["listeners"]
            confs = {
                "PLAINTEXT": {"bootstrap.servers": listeners["PLAINTEXT"]},
                "SASL_SSL": {"bootstrap.servers": listeners["SASL_SSL"], "security.protocol": "SASL_SSL",
                             "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bench",
                             "sasl.password": PASSWORD, "ssl.ca.location": pki.ca},
            }
            print(machine.describe())
            print(f"{args.records:,} records of {args.record_size} B, one partition, confluent-kafka "
                  f"{__import__('confluent_kafka').__version__}")
            rows = {}
            for name, conf in confs.items():
                topic = f"bench-{name.lower()}-{uuid.uuid4().hex[:6]}"
                rows[name] = (produce(conf, topic, args.records, args.record_size), consume(conf, topic, args.records))
            print("| listener | produce records/s | consume records/s | consume MB/s |")
            print("|---|---|---|---|")
            for name, (p, c) in rows.items():
                print(f"| {name} | {p:,.0f} | {c:,.0f} | {c * args.record_size / 1e6:,.1f} |")
            base_p, base_c = rows["PLAINTEXT"]
            sp, sc = rows["SASL_SSL"]
            print(f"SASL_SSL / PLAINTEXT: produce {sp / base_p:.2f}x, consume {sc / base_c:.2f}x")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
