"""A mutation fuzz of real clients' requests: the gateway survives 3,000 broken frames.

The corpus is recorded, not invented: confluent-kafka and kafka-python produce to and
consume (in a group) from a topic through a recording proxy, so every API and version
those clients really use is in it. Each fuzzed frame is one of those requests with
one mutation (bit flips, an integer field set to an extreme, truncation, garbage
appended, a lying length prefix, a slice duplicated). The frames go to the gateway
one at a time, each waiting for its verdict (an answer, or the connection closed,
after which the next frame opens a new one).

What must hold: the gateway actor is the same process afterwards (it never crashed
or restarted), its RSS grew by less than the stated bound, a healthy client is
served throughout, and every record acknowledged before, during and after the fuzz
is read back at its acknowledged offset.
"""
from __future__ import annotations

import random
import select
import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer

from lossy_proxy import LossyProxy
from test_gw_untrusted import RSS_GROWTH_BOUND, gateway_rss, gateway_stats, produce_ok
from wire_client import Wire, parse

FRAMES = 3_000
SEED = 20261123
#: Request kinds a mutation may not turn a frame into: they delete or reconfigure what the
#: test checks, which is an authorized admin's right (issue: security), not untrusted input.
ADMIN_KEYS = {19, 20, 21, 33, 37, 42, 44, 47, 45, 46, 30, 31, 51}
EXTREMES = [0, -1, 0x7FFFFFFF, -0x80000000, 1 << 30, 0xFFFF, 0x8000]


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One mutation of a recorded frame (4-byte size prefix + request); size prefix kept true unless lied about."""
    body = bytearray(frame[4:])
    kind = rng.randrange(7)
    if kind == 0:  # flip a few bits anywhere, header included
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(len(body))
            body[i] ^= 1 << rng.randrange(8)
    elif kind == 1 and len(body) >= 4:  # an int32 or int16 field set to an extreme
        i = rng.randrange(len(body) - 3)
        value = rng.choice(EXTREMES)
        if rng.random() < 0.5:
            struct.pack_into(">i", body, i, value if -0x80000000 <= value <= 0x7FFFFFFF else -1)
        else:
            struct.pack_into(">H", body, i, value & 0xFFFF)
    elif kind == 2:  # truncated
        body = body[: rng.randrange(len(body))]
    elif kind == 3:  # garbage appended
        body += rng.randbytes(rng.randint(1, 512))
    elif kind == 4:  # the size prefix lies (more or fewer bytes than follow)
        claimed = rng.choice([len(body) + rng.randint(1, 1 << 20), max(0, len(body) - rng.randint(1, 64)),
                              0x7FFFFFFF, -1, 0])
        return struct.pack(">i", claimed) + bytes(body)
    elif kind == 5 and len(body) > 8:  # a slice duplicated in place
        i = rng.randrange(len(body) - 1)
        j = rng.randint(i + 1, min(len(body), i + 64))
        body[j:j] = body[i:j]
    else:  # one random byte
        body[rng.randrange(len(body))] = rng.randrange(256)
    if len(body) >= 2 and struct.unpack_from(">h", body, 0)[0] in ADMIN_KEYS:
        body[0:2] = frame[4:6]
    return struct.pack(">i", len(body)) + bytes(body)


def record_corpus(gateway: str, topic: str) -> tuple[list[bytes], dict[tuple[int, int], bytes]]:
    """Real clients' frames, and what their producer had acknowledged: {(partition, offset): value}."""
    acked: dict[tuple[int, int], bytes] = {}

    def delivered(err, msg):
        assert err is None, err
        acked[(msg.partition(), msg.offset())] = msg.value()

    with LossyProxy(gateway, drop_every=0) as proxy:
        producer = Producer({"bootstrap.servers": proxy.address, "acks": "all", "linger.ms": 5,
                             "enable.idempotence": True})
        for burst in range(6):
            for i in range(50):
                producer.produce(topic, key=b"k%d" % i, value=b"before-%d-%d" % (burst, i), on_delivery=delivered)
            producer.flush(15)
        consumer = Consumer({"bootstrap.servers": proxy.address, "group.id": f"{topic}-fuzz",
                             "auto.offset.reset": "earliest", "enable.auto.commit": False})
        consumer.subscribe([topic])
        seen, deadline = 0, time.monotonic() + 60
        while seen < len(acked) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen += 1
        consumer.commit(asynchronous=False)
        consumer.close()
        legacy = KafkaConsumer(topic, bootstrap_servers=proxy.address, group_id=f"{topic}-legacy",
                               auto_offset_reset="earliest", consumer_timeout_ms=3000)
        sum(1 for _ in legacy)
        legacy.close()
        assert seen == len(acked) == 300, (seen, len(acked))
        return list(proxy.recorded), acked


class Fuzzer:
    """Sends frames one at a time and waits for the gateway's verdict on each: an answer, a closed
    connection (then the next frame gets a fresh one) or silence (a lying size prefix, a long poll)."""

    def __init__(self, gateway: str) -> None:
        self.address = parse(gateway)
        self.sock: socket.socket | None = None
        self.answered = self.closed = self.silent = 0

    def send(self, frame: bytes, patience: float = 0.15) -> None:
        if self.sock is None:
            self.sock = socket.create_connection(self.address, timeout=5)
        try:
            self.sock.sendall(frame)
            ready, _, _ = select.select([self.sock], [], [], patience)
            if not ready:
                self.silent += 1
                self._drop()
                return
            data = self.sock.recv(1 << 16)
        except OSError:
            data = b""
        if data:
            self.answered += 1
        else:
            self.closed += 1
            self._drop()

    def _drop(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def read_partitions(gateway: str, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    consumer = Consumer({"bootstrap.servers": gateway, "group.id": f"{topic}-check", "enable.auto.commit": False})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: dict[tuple[int, int], bytes] = {}
        deadline = time.monotonic() + 60
        while any(ends[p] > 0 and max((o for q, o in out if q == p), default=-1) < ends[p] - 1
                  for p in range(partitions)) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                out[(msg.partition(), msg.offset())] = msg.value()
        return out
    finally:
        consumer.close()


@pytest.mark.slow
def test_three_thousand_mutated_real_requests_leave_the_gateway_up_and_every_ack_readable(gateway, client,
                                                                                           topic_name):
    client.create_topic(topic_name, 3)
    topics_before = set(client.list_topics(internal=True))
    try:
        corpus, acked = record_corpus(gateway, topic_name)
        kinds = {struct.unpack_from(">h", f, 4)[0] for f in corpus}
        assert {0, 1, 3, 10, 11, 12, 14, 8, 9, 18} <= kinds, f"the recorded corpus lacks APIs: {sorted(kinds)}"

        pid = gateway_stats()["pid"]
        rss_before = peak = gateway_rss()
        rng = random.Random(SEED)
        fuzz = Fuzzer(gateway)
        with Wire(gateway) as healthy:
            during = []
            for n in range(FRAMES):
                fuzz.send(mutate(rng.choice(corpus), rng))
                if n % 500 == 0:  # a well-behaved client is served all along
                    during.append(produce_ok(healthy, topic_name, [b"during-%d" % n]))
                    peak = max(peak, gateway_rss())
        fuzz._drop()
        assert gateway_stats()["pid"] == pid, "the gateway actor died and was restarted during the fuzz"
        deadline = time.monotonic() + 10  # every fuzzed request's bytes go back to the pool
        while gateway_stats()["queued_request_bytes"] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gateway_stats()["queued_request_bytes"] == 0, "request bytes leaked from queued.max.request.bytes"
        peak = max(peak, gateway_rss())
        assert peak - rss_before < RSS_GROWTH_BOUND, f"gateway RSS grew by {(peak - rss_before) >> 20} MiB"
        print(f"fuzz: {FRAMES} frames from a corpus of {len(corpus)} ({sorted(kinds)}), {fuzz.answered} answered, "
              f"{fuzz.closed} closed, {fuzz.silent} silent; "
              f"gateway RSS {rss_before >> 20} -> peak {peak >> 20} MiB")
        assert fuzz.answered > FRAMES // 4, "few mutated requests got an answer: the fuzz did not reach the handlers"

        producer = Producer({"bootstrap.servers": gateway, "acks": "all"})
        after: dict[tuple[int, int], bytes] = {}
        for i in range(20):
            producer.produce(topic_name, key=b"a%d" % i, value=b"after-%d" % i,
                             on_delivery=lambda err, msg: after.__setitem__((msg.partition(), msg.offset()), msg.value()))
        assert producer.flush(15) == 0

        stored = read_partitions(gateway, topic_name, 3)
        for (p, o), value in {**acked, **after}.items():
            assert stored.get((p, o)) == value, f"acknowledged record at {p}/{o} is {stored.get((p, o))!r}, not {value!r}"
        for n, offset in enumerate(during):
            assert stored.get((0, offset)) == b"during-%d" % (n * 500), (offset, stored.get((0, offset)))

    finally:
        for extra in set(client.list_topics(internal=True)) - topics_before - {topic_name}:
            client.delete_topic(extra)  # topics a mutated Metadata request auto-created
