"""HTTP API benchmark: logan-ray's Ray Serve HTTP API side by side with its Kafka gateway, same run.

    python bench/http_api.py [--records N] [--body-records B] [--singles S] [--rounds R] [--auth]

One broker (``logan-ray start --foreground`` as a child process: embedded
single-node Ray, data on disk in a temporary folder, Kafka gateway and HTTP API
on free loopback ports). Every measurement alternates HTTP and Kafka each round;
the median of the rounds is printed. Records are 100 B values, one partition.

1. batched publish: ``--records`` records as JSON bodies of ``--body-records``
   records each (``POST /publish``, acks=all), one httpx client sending them one
   after another; Kafka: confluent-kafka, acks=1, ``linger.ms=5``, 1 MiB batches;
2. single-record publish: ``--singles`` requests of one record each, one at a
   time (acks=all), latency p50/p99; Kafka: one ``produce`` + ``flush`` per record;
   and, as the floor under it, ``GET /console/console.js`` (a static file: Serve's proxy
   and the replica, no logan-ray call);
3. streaming read of the ``--records`` from offset 0: ``GET /stream/{topic}/0``
   (chunked NDJSON) read with httpx, records counted by line; Kafka: confluent-kafka
   consumer from the beginning.

``--auth``: the same with security on, to see what it costs per request: the broker's
one listener is SASL_PLAINTEXT (SCRAM-SHA-512) with the ACL authorizer, the HTTP API
then takes HTTP Basic credentials of the same SCRAM user (``bench``, a super user, so
every ACL check runs and passes) and Kafka clients log in with SCRAM. Also printed: what
one uncached password check costs (the PBKDF2 the HTTP API's cache saves per request).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
# A script's folder comes first on sys.path, and bench/ holds modules named like libraries (kafka.py is
# kafka-python's package name): drop it, and import bench's modules as bench.*.
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != HERE]
sys.path.insert(0, os.path.dirname(HERE))

from bench.machine import describe  # noqa: E402
from bench.needs import need  # noqa: E402

if __name__ == "__main__":
    need("logan_ray", "confluent_kafka", "httpx")

VALUE = "x" * 60 + "%040d"  # 100 B


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


USER, PASSWORD = "bench", "bench-password"


class Broker:
    def __init__(self, workdir: str, auth: bool = False) -> None:
        self.kafka_port, self.http_port = free_port(), free_port()
        self.kafka = {"bootstrap.servers": f"127.0.0.1:{self.kafka_port}"}  # client settings
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.auth = (USER, PASSWORD) if auth else None
        data_dir = os.path.join(workdir, "data")
        env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="token")
        self.log = open(os.path.join(workdir, "broker.log"), "wb")
        where = ["--port", str(self.kafka_port)]
        if auth:
            where = ["--config", f"listeners=SASL_PLAINTEXT://127.0.0.1:{self.kafka_port}",
                     "--config", "sasl.enabled.mechanisms=SCRAM-SHA-512",
                     "--config", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
                     "--config", f"super.users=User:{USER}"]
            self.kafka.update({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
                               "sasl.username": USER, "sasl.password": PASSWORD})
        cli = [sys.executable, "-m", "logan_ray.cli", "--data-dir", data_dir]
        self.proc = subprocess.Popen(
            [*cli, "start", "--foreground", *where, "--http", f"127.0.0.1:{self.http_port}"],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        import httpx

        deadline = time.monotonic() + 240
        user_set = not auth
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the broker exited early; see {self.log.name}")
            try:
                status = httpx.get(f"{self.url}/topic", auth=self.auth, timeout=5).status_code
                if status == 200:
                    return
                if status == 401 and not user_set:
                    subprocess.run([*cli, "users", "set", USER, "--password-stdin"], input=PASSWORD.encode(),
                                   env=env, check=True, capture_output=True)
                    user_set = True
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"the HTTP API did not come up; see {self.log.name}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def values(n: int) -> list[str]:
    return [VALUE % i for i in range(n)]


# ------------------------------------------------------------------- HTTP
def http_batched_publish(http, topic: str, n: int, per_body: int) -> float:
    vals = values(per_body)
    bodies = []
    for start in range(0, n, per_body):
        k = min(per_body, n - start)
        bodies.append(json.dumps({"topic": topic, "records": [{"value": v} for v in vals[:k]]}).encode())
    started = time.perf_counter()
    for body in bodies:
        r = http.post("/publish", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 200, r.text
    return n / (time.perf_counter() - started)


def http_single_publish(http, topic: str, n: int) -> tuple[float, float, float]:
    lat = []
    started = time.perf_counter()
    for i in range(n):
        body = b'{"topic":"%s","records":[{"value":"%s"}]}' % (topic.encode(), (VALUE % i).encode())
        t = time.perf_counter()
        r = http.post("/publish", content=body, headers={"content-type": "application/json"})
        lat.append(time.perf_counter() - t)
        assert r.status_code == 200, r.text
    elapsed = time.perf_counter() - started
    q = statistics.quantiles(lat, n=100)
    return n / elapsed, q[49] * 1e3, q[98] * 1e3


def http_round_trip(http, n: int) -> tuple[float, float, float]:
    """A static file from the app: what Serve's proxy and the replica cost before any logan-ray work."""
    lat = []
    started = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        assert http.get("/console/console.js").status_code == 200
        lat.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - started
    q = statistics.quantiles(lat, n=100)
    return n / elapsed, q[49] * 1e3, q[98] * 1e3


def http_stream(http, topic: str, n: int) -> float:
    got = 0
    started = time.perf_counter()
    with http.stream("GET", f"/stream/{topic}/0", params={"offset": 0, "max_records": n}) as r:
        assert r.status_code == 200
        for chunk in r.iter_raw():
            got += chunk.count(b"\n")
    elapsed = time.perf_counter() - started
    assert got == n, (got, n)
    return n / elapsed


# ------------------------------------------------------------------ Kafka
def kafka_publish(kafka: dict, topic: str, n: int) -> float:
    from confluent_kafka import Producer

    p = Producer({**kafka, "acks": 1, "linger.ms": 5, "batch.size": 1048576,
                  "queue.buffering.max.messages": 2_000_000, "queue.buffering.max.kbytes": 2_000_000})
    vals = [v.encode() for v in values(1000)]
    started = time.perf_counter()
    for i in range(n):
        p.produce(topic, vals[i % 1000], partition=0)
        if i % 10000 == 0:
            p.poll(0)
    assert p.flush(120) == 0
    return n / (time.perf_counter() - started)


def kafka_single_publish(kafka: dict, topic: str, n: int) -> tuple[float, float, float]:
    from confluent_kafka import Producer

    p = Producer({**kafka, "acks": 1, "linger.ms": 0})
    p.produce(topic, b"warm-up", partition=0)
    p.flush(30)
    lat = []
    started = time.perf_counter()
    for i in range(n):
        t = time.perf_counter()
        p.produce(topic, (VALUE % i).encode(), partition=0)
        assert p.flush(30) == 0
        lat.append(time.perf_counter() - t)
    elapsed = time.perf_counter() - started
    q = statistics.quantiles(lat, n=100)
    return n / elapsed, q[49] * 1e3, q[98] * 1e3


def kafka_consume(kafka: dict, topic: str, n: int) -> float:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({**kafka, "group.id": "bench-" + uuid.uuid4().hex, "enable.auto.commit": False,
                  "fetch.queue.backoff.ms": 1})
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got = 0
    started = time.perf_counter()
    while got < n:
        got += len(c.consume(10000, 1.0))
    elapsed = time.perf_counter() - started
    c.close()
    return n / elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--body-records", type=int, default=10_000)
    ap.add_argument("--singles", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--auth", action="store_true", help="SASL/SCRAM + ACLs on Kafka, HTTP Basic + ACLs on HTTP")
    args = ap.parse_args()
    import httpx

    print(describe())
    print(f"records of 100 B; {args.records} per throughput run, bodies of {args.body_records}, "
          f"{args.singles} single-record requests; median of {args.rounds} rounds\n", flush=True)
    workdir = tempfile.mkdtemp(prefix="bench-http-")
    broker = Broker(workdir, args.auth)
    if args.auth:
        print("security on: Kafka SASL_PLAINTEXT SCRAM-SHA-512, HTTP Basic (same user), ACL authorizer\n")
    results: dict[str, list] = {}
    try:
        with httpx.Client(base_url=broker.url, timeout=120, auth=broker.auth) as http:
            for rnd in range(args.rounds):
                ht, kt = f"http-{rnd}-{uuid.uuid4().hex[:6]}", f"kafka-{rnd}-{uuid.uuid4().hex[:6]}"
                for t in (ht, kt):
                    assert http.post("/topic", json={"name": t}).status_code == 201
                results.setdefault("http batched publish", []).append(
                    http_batched_publish(http, ht, args.records, args.body_records))
                results.setdefault("kafka publish", []).append(kafka_publish(broker.kafka, kt, args.records))
                results.setdefault("http stream read", []).append(http_stream(http, ht, args.records))
                results.setdefault("kafka consume", []).append(kafka_consume(broker.kafka, kt, args.records))
                results.setdefault("http single publish", []).append(http_single_publish(http, ht, args.singles))
                results.setdefault("http GET static file", []).append(http_round_trip(http, args.singles))
                results.setdefault("kafka single publish", []).append(
                    kafka_single_publish(broker.kafka, kt, args.singles))
                for t in (ht, kt):
                    http.delete(f"/topic/{t}")
                print(f"round {rnd + 1}: " + ", ".join(
                    f"{k} {v[-1] if isinstance(v[-1], float) else v[-1][0]:,.0f}" for k, v in results.items()), flush=True)
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print()
    for name in ("http batched publish", "kafka publish", "http stream read", "kafka consume"):
        print(f"{name:24s} {statistics.median(results[name]):>12,.0f} records/s")
    for name in ("http single publish", "http GET static file", "kafka single publish"):
        runs = results[name]
        print(f"{name:24s} {statistics.median(r[0] for r in runs):>12,.0f} records/s   "
              f"p50 {statistics.median(r[1] for r in runs):.2f} ms   p99 {statistics.median(r[2] for r in runs):.2f} ms")
    if args.auth:
        print(f"{'uncached password check':24s} {uncached_check_ms():>12.2f} ms  (PBKDF2, SCRAM-SHA-512, 4096 iterations; "
              "paid once per user and password until a credential changes)")
        print(f"{'cached password check':24s} {cached_check_us():>12.1f} us  (what every other request pays, "
              "in the replica)")


def cached_check_us(n: int = 20000) -> float:
    """A request's password check once verified: the cache's lookup (logan_ray.security.passwords)."""
    import asyncio

    from logan_ray.security import scram
    from logan_ray.security.passwords import PasswordCache

    cred = scram.new_credential("SCRAM-SHA-512", PASSWORD)

    async def lookup(user: str, mechanism: str):
        return cred if mechanism == "SCRAM-SHA-512" else None

    async def version() -> int:
        return 1

    async def run() -> float:
        cache = PasswordCache(lookup, version)
        assert await cache.verify(USER, PASSWORD)
        started = time.perf_counter()
        for _ in range(n):
            await cache.verify(USER, PASSWORD)
        return (time.perf_counter() - started) / n * 1e6
    return asyncio.run(run())


def uncached_check_ms(n: int = 50) -> float:
    """What the HTTP API's password cache saves on each request: one check against a stored SCRAM credential."""
    from logan_ray.security import scram

    cred = scram.new_credential("SCRAM-SHA-512", PASSWORD)
    started = time.perf_counter()
    for _ in range(n):
        assert scram.check_password("SCRAM-SHA-512", cred, PASSWORD)
    return (time.perf_counter() - started) / n * 1e3


if __name__ == "__main__":
    main()
