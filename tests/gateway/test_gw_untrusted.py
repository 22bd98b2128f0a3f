"""What a hostile or careless client can send the gateway actor, and what it gets back.

Every test checks three things: the answer is Kafka's error code (or the
connection is closed where the protocol allows nothing else), the gateway actor's
process stays within a stated memory bound (RSS measured with psutil), and
records acknowledged before and after are all read back.
"""
from __future__ import annotations

import resource
import socket
import struct
import time

import psutil
import pytest
import ray
from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions

from bombs import zstd_bomb_batch
from logan_ray.actors.group_coordinator import OFFSETS_PARTITIONS, OFFSETS_TOPIC_CONFIG
from logan_ray.actors.partition import NAMESPACE
from logan_ray.errors import TopicExistsError
from logan_ray.gateway import gateway_name
from logan_ray.groups import OFFSETS_TOPIC
from logan_ray.protocol import errors as codes
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_records
from wire_client import Wire, fetch_body, list_offsets_body, parse, produce_body

PRODUCE, FETCH, LIST_OFFSETS, API_VERSIONS = 0, 1, 2, 18
#: The gateway actor's RSS may grow by at most this much during a hostile test. The
#: per-batch decompression limit (64 MiB) does not apply here: the gateway never
#: decompresses; its bound is queued.max.request.bytes (128 MiB) plus per-connection state.
RSS_GROWTH_BOUND = 200 << 20


def gateway_stats() -> dict:
    here = ray.get_runtime_context().get_node_id()
    return ray.get(ray.get_actor(gateway_name(here), namespace=NAMESPACE).stats.remote())


def gateway_rss() -> int:
    return psutil.Process(gateway_stats()["pid"]).memory_info().rss


def produce_ok(w: Wire, topic: str, values: list[bytes], keyed: bool = True, timestamp: int | None = None) -> int:
    batch = build_batch(values, [b"k%d" % i for i in range(len(values))] if keyed else None, timestamps=timestamp)
    p = w.call(PRODUCE, 9, produce_body(topic, 0, batch))["responses"][0]["partition_responses"][0]
    assert p["error_code"] == codes.NONE, p
    return p["base_offset"]


def read_back(w: Wire, topic: str, offset: int, count: int) -> list[bytes]:
    got: list[bytes] = []
    while len(got) < count:
        body = w.call(FETCH, 12, fetch_body(topic, [(0, offset, 4 << 20)], max_wait_ms=100))
        part = body["responses"][0]["partitions"][0]
        assert part["error_code"] == codes.NONE, part
        records = [r for r in decode_records(part["records"] or b"") if r.offset >= offset]
        if not records:
            break
        got += [r.value for r in records]
        offset = records[-1].offset + 1
    return got


@pytest.fixture(scope="module")
def offsets_topic(client):
    try:  # as the group coordinator creates it
        client.create_topic(OFFSETS_TOPIC, OFFSETS_PARTITIONS, OFFSETS_TOPIC_CONFIG)
    except TopicExistsError:
        pass
    return OFFSETS_TOPIC


# ------------------------------------------------------------------ internal topics
def test_internal_topic_is_refused_to_kafka_clients_with_invalid_topic(gateway, offsets_topic):
    admin = AdminClient({"bootstrap.servers": gateway})

    def refused(futures: dict) -> None:
        for f in futures.values():
            with pytest.raises(KafkaException) as e:
                f.result(timeout=30)
            assert e.value.args[0].code() == KafkaError.TOPIC_EXCEPTION, e.value  # INVALID_TOPIC_EXCEPTION (17)

    refused(admin.delete_topics([offsets_topic], operation_timeout=10))
    refused(admin.create_partitions([NewPartitions(offsets_topic, OFFSETS_PARTITIONS + 2)]))
    refused(admin.alter_configs([ConfigResource(ConfigResource.Type.TOPIC, offsets_topic,
                                                set_config={"retention.ms": "1"})]))
    refused(admin.incremental_alter_configs([ConfigResource(
        ConfigResource.Type.TOPIC, offsets_topic,
        incremental_configs=[ConfigEntry("cleanup.policy", "delete",
                                         incremental_operation=AlterConfigOpType.SET)])]))
    refused(admin.delete_records([TopicPartition(offsets_topic, 0, 0)]))
    with Wire(gateway) as w:
        p = w.call(PRODUCE, 9, produce_body(offsets_topic, 0, build_batch([b"x"], [b"k"])))
        part = p["responses"][0]["partition_responses"][0]
        assert part["error_code"] == codes.INVALID_TOPIC_EXCEPTION
        assert "internal topic" in part["error_message"]
    delivered = []
    producer = Producer({"bootstrap.servers": gateway, "message.timeout.ms": 10000})
    producer.produce(offsets_topic, b"forged", b"key", partition=0, on_delivery=lambda err, m: delivered.append(err))
    producer.flush(30)
    assert delivered and delivered[0] is not None and delivered[0].code() == KafkaError.TOPIC_EXCEPTION
    described = admin.list_topics(timeout=10).topics[offsets_topic]
    assert len(described.partitions) == OFFSETS_PARTITIONS


def test_a_transactional_batch_outside_any_transaction_is_refused(gateway, client, topic_name):
    """A produce without transactional_id may carry no transactional batch (tests/gateway/test_gw_transactions.py
    covers the transactions themselves)."""
    client.create_topic(topic_name, 1)
    txn = build_batch([b"v"], [b"k"], is_transactional=True, producer_id=1, producer_epoch=0, base_sequence=0)
    with Wire(gateway) as w:
        p = w.call(PRODUCE, 9, produce_body(topic_name, 0, txn))["responses"][0]["partition_responses"][0]
        assert p["error_code"] == codes.INVALID_TXN_STATE, p


def test_control_and_transactional_batches_from_clients_are_refused(gateway, client, topic_name):
    client.create_topic(topic_name, 1)
    control = build_batch([b"\0" * 6], [b"\0" * 4], is_control=True, producer_id=1, producer_epoch=0)
    txn = build_batch([b"v"], [b"k"], is_transactional=True, producer_id=1, producer_epoch=0, base_sequence=0)
    with Wire(gateway) as w:
        for batch, code in ((control, codes.INVALID_RECORD), (txn, codes.INVALID_TXN_STATE)):
            p = w.call(PRODUCE, 9, produce_body(topic_name, 0, batch))["responses"][0]["partition_responses"][0]
            assert p["error_code"] == code, p
        assert produce_ok(w, topic_name, [b"fine"]) == 0


def test_keyless_record_on_a_compacted_topic_is_invalid_record_at_produce(gateway, client, topic_name):
    client.create_topic(topic_name, 1, {"cleanup.policy": "compact"})
    with Wire(gateway) as w:
        batch = build_batch([b"a", b"b", b"c", b"d"], [b"k", None, b"k", None])
        p = w.call(PRODUCE, 9, produce_body(topic_name, 0, batch))
        part = p["responses"][0]["partition_responses"][0]
        assert part["error_code"] == codes.INVALID_RECORD and "without a key" in part["error_message"]
        # each keyless record is named (KIP-467), so clients fail exactly those
        assert [e["batch_index"] for e in part["record_errors"]] == [1, 3], part
        assert produce_ok(w, topic_name, [b"kept"]) == 0


# ------------------------------------------------------------------ memory bounds
def test_zstd_bomb_through_the_gateway(gateway, client, topic_name):
    """1 MiB that claims 32 GiB: refused where the broker decompresses, stored as bytes where it does not."""
    compacted, plain = topic_name + "-c", topic_name + "-d"
    client.create_topic(compacted, 1, {"cleanup.policy": "compact", "max.message.bytes": str(2 << 20)})
    client.create_topic(plain, 1, {"max.message.bytes": str(2 << 20)})
    bomb = zstd_bomb_batch(timestamp=5_000)
    rss_before = gateway_rss()
    with Wire(gateway) as w:
        produce_ok(w, compacted, [b"before"], timestamp=1_000)
        produce_ok(w, plain, [b"before"], timestamp=1_000)
        # compacted: the keyless check decompresses, and stops at the limit
        started = time.monotonic()
        p = w.call(PRODUCE, 9, produce_body(compacted, 0, bomb))["responses"][0]["partition_responses"][0]
        assert p["error_code"] == codes.CORRUPT_MESSAGE and "decompress to more than" in p["error_message"]
        assert time.monotonic() - started < 20
        # delete policy: stored as it came (Kafka too hands compressed batches back untouched) ...
        p = w.call(PRODUCE, 9, produce_body(plain, 0, bomb))["responses"][0]["partition_responses"][0]
        assert p["error_code"] == codes.NONE and p["base_offset"] == 1
        # ... and a timestamp lookup that has to look inside it answers CORRUPT_MESSAGE
        part = w.call(LIST_OFFSETS, 7, list_offsets_body(plain, 0, 3_000))["topics"][0]["partitions"][0]
        assert part["error_code"] == codes.CORRUPT_MESSAGE, part
        part = w.call(LIST_OFFSETS, 7, list_offsets_body(plain, 0, 500))["topics"][0]["partitions"][0]
        assert part["error_code"] == codes.NONE and part["offset"] == 0
        produce_ok(w, compacted, [b"after"])
        after = produce_ok(w, plain, [b"after"])
        assert read_back(w, compacted, 0, 2) == [b"before", b"after"]
        assert read_back(w, plain, after, 1) == [b"after"]
    assert gateway_rss() - rss_before < RSS_GROWTH_BOUND


def test_frame_headers_claiming_huge_sizes_allocate_nothing(gateway, client, topic_name):
    client.create_topic(topic_name, 1)
    rss_before = gateway_rss()
    with Wire(gateway) as w:
        produce_ok(w, topic_name, [b"before"])
        too_big = Wire(gateway)
        too_big.send_raw(struct.pack(">i", 2**31 - 1))  # 2 GB: over socket.request.max.bytes, closed
        assert too_big.is_closed_by_peer()
        # 40 connections each claiming 99 MiB (allowed) and sending 4 bytes of it: no 4 GB of buffers
        stallers = []
        for _ in range(40):
            s = socket.create_connection(parse(gateway), timeout=10)
            s.sendall(struct.pack(">i", 99 << 20) + b"\x00\x12\x00\x03")
            stallers.append(s)
        time.sleep(1.0)
        stats = gateway_stats()
        assert gateway_rss() - rss_before < RSS_GROWTH_BOUND
        assert stats["queued_request_bytes"] <= max(stats["queued_max_request_bytes"], 99 << 20) + (1 << 20)
        # the claims are held; other clients are still served
        assert produce_ok(w, topic_name, [b"during"]) == 1
        for s in stallers:
            s.close()
        produce_ok(w, topic_name, [b"after"])
        assert read_back(w, topic_name, 0, 3) == [b"before", b"during", b"after"]
    deadline = time.monotonic() + 10
    while gateway_stats()["queued_request_bytes"] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gateway_stats()["queued_request_bytes"] == 0


def test_ten_thousand_idle_connections(gateway, client, topic_name):
    wanted = 10_000
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = wanted + 1024
    assert hard == resource.RLIM_INFINITY or hard >= need, f"hard open-files limit {hard} is below {need}"
    resource.setrlimit(resource.RLIMIT_NOFILE, (need if soft != resource.RLIM_INFINITY and soft < need else soft,
                                                hard))
    client.create_topic(topic_name, 1)
    rss_before = gateway_rss()
    base = gateway_stats()["connections"]
    socks = []
    try:
        with Wire(gateway) as w:
            produce_ok(w, topic_name, [b"before"])
            addr = parse(gateway)
            # In waves no bigger than a listen backlog: a burst of 10,000 SYNs overflows the accept
            # queue and the dropped ones come back only after TCP's retransmit back-off (up to a minute).
            deadline = time.monotonic() + 120
            while len(socks) < wanted:
                for _ in range(min(100, wanted - len(socks))):
                    s = socket.socket()
                    s.setblocking(False)
                    s.connect_ex(addr)
                    socks.append(s)
                while gateway_stats()["connections"] < base + len(socks) and time.monotonic() < deadline:
                    time.sleep(0.05)
            stats = gateway_stats()
            assert stats["connections"] >= base + wanted, stats
            grown = gateway_rss() - rss_before
            assert grown < RSS_GROWTH_BOUND, f"RSS grew by {grown >> 20} MiB for {wanted} idle connections"
            produce_ok(w, topic_name, [b"during"])
            with Wire(gateway) as fresh:  # a new client still gets in and is served
                assert read_back(fresh, topic_name, 0, 2) == [b"before", b"during"]
    finally:
        for s in socks:
            s.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
