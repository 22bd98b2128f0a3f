"""The gateway on the wire: framing, ordering, versions, error codes, long-poll and byte limits.

Raw sockets speak to the real gateway actor; requests are built with logan-ray's
codec so each test controls the exact bytes.
"""
from __future__ import annotations

import socket
import struct
import threading
import time

import pytest

from logan_ray.protocol import errors as codes
from logan_ray.storage.batch_header import HEADER
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_records
from wire_client import (
    Wire,
    create_topics_body,
    fetch_body,
    list_offsets_body,
    metadata_body,
    produce_body,
)

PRODUCE, FETCH, LIST_OFFSETS, METADATA, API_VERSIONS = 0, 1, 2, 3, 18
CREATE_TOPICS, DELETE_TOPICS, INIT_PRODUCER_ID, FIND_COORDINATOR, DESCRIBE_CLUSTER = 19, 20, 22, 10, 60


def still_serving(gateway: str) -> None:
    with Wire(gateway) as w:
        assert w.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})[
            "error_code"] == 0


def partition_of(body: dict) -> dict:
    return body["responses"][0]["partitions"][0]


# ------------------------------------------------------------------ framing
@pytest.mark.parametrize("payload", [
    pytest.param(struct.pack(">i", 12) + b"\xff" * 12, id="garbage-body"),
    pytest.param(struct.pack(">i", 0x7FFFFFFF) + b"\0" * 8, id="oversized"),
    pytest.param(struct.pack(">i", -5), id="negative-size"),
    pytest.param(struct.pack(">ihhi", 10, 999, 0, 1) + b"\0\0", id="unknown-api-key"),
    pytest.param(struct.pack(">ihhih", 10, 3, 0, 7, 50), id="truncated-client-id"),
])
def test_bad_frames_close_only_that_connection(gateway, payload):
    with Wire(gateway) as bystander, Wire(gateway) as bad:
        bystander.call(API_VERSIONS, 0, {})
        bad.send_raw(payload)
        assert bad.is_closed_by_peer()
        assert bystander.call(METADATA, 12, metadata_body([]))["brokers"]
    still_serving(gateway)


def test_truncated_frame_then_hangup_is_harmless(gateway):
    w = Wire(gateway)
    w.send_raw(struct.pack(">i", 1000) + b"\0" * 100)
    w.close()
    still_serving(gateway)


def test_api_versions_lists_exactly_what_is_served(gateway):
    with Wire(gateway) as w:
        body = w.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
    assert ranges[PRODUCE] == (0, 13) and ranges[FETCH] == (4, 18) and ranges[METADATA] == (0, 13)
    assert ranges[API_VERSIONS] == (0, 4) and ranges[LIST_OFFSETS] == (1, 11)
    assert {19, 20, 21, 22, 32, 33, 37, 44, 60, 10} <= set(ranges)
    assert {8, 9, 11, 12, 13, 14, 15, 16, 42, 47} <= set(ranges)  # consumer groups (tests/gateway/test_gw_groups.py)
    assert ranges[8] == (0, 9) and ranges[9] == (0, 9)  # v10 names topics by id only


def test_api_versions_of_an_unknown_version_falls_back_to_v0(gateway):
    with Wire(gateway) as w:
        # header v2 (flexible): client id, empty tagged fields; a body from the future
        w.send_raw(struct.pack(">ihhih", 2 + 2 + 4 + 2 + 1 + 1 + 3, API_VERSIONS, 99, 42, 1) + b"x\0" + b"\x02z\0")
        frame = w.read_frame()
        corr, error, count = struct.unpack_from(">ihi", frame, 0)
        assert (corr, error) == (42, codes.UNSUPPORTED_VERSION) and count > 5
        assert w.call(API_VERSIONS, 0, {})["error_code"] == 0  # the connection stays usable


def test_unserved_version_closes_the_connection(gateway, topic_name):
    with Wire(gateway) as w:  # Fetch v3 (old message formats) is known to the codec but not served
        w.send(FETCH, 3, fetch_body(topic_name, [(0, 0, 1 << 20)]))
        assert w.is_closed_by_peer()


# ---------------------------------------------------------------- pipelining
def test_pipelined_requests_are_answered_in_order(client, gateway, topic_name):
    client.create_topic(topic_name, 2)
    with Wire(gateway) as w:
        frames, order, sent = [], [], {0: [], 1: []}
        for i in range(60):
            kind = i % 4
            if kind == 0:
                part = (i // 4) % 2
                sent[part].append(b"v%d" % i)
                corr, f = w.encode(PRODUCE, 9, produce_body(topic_name, part, build_batch([b"v%d" % i])))
            elif kind == 1:
                corr, f = w.encode(METADATA, 12, metadata_body([topic_name]))
            elif kind == 2:
                corr, f = w.encode(LIST_OFFSETS, 7, list_offsets_body(topic_name, 0, -1))
            else:
                corr, f = w.encode(API_VERSIONS, 2, {})
            frames.append(f)
            order.append(corr)
        w.send_raw(b"".join(frames))
        got = [w.recv()[0] for _ in order]
    assert got == order
    for part in (0, 1):
        assert [r.value for r in decode_records(_fetch_bytes(client, topic_name, part))] == sent[part]


def _fetch_bytes(client, topic: str, partition: int) -> bytes:
    from logan_ray._ray import get

    return get(client.partition_actor(topic, partition).fetch.remote(0, 1 << 20))[0]


def test_pipelined_produce_keeps_order_per_partition(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:
        frames = []
        for i in range(200):
            batch = build_batch([b"%d" % (i * 10 + j) for j in range(10)])
            frames.append(w.encode(PRODUCE, 9, produce_body(topic_name, 0, batch))[1])
        w.send_raw(b"".join(frames))
        offsets = [w.recv()[1]["responses"][0]["partition_responses"][0]["base_offset"] for _ in frames]
    assert offsets == [i * 10 for i in range(200)]
    values = [int(r.value) for r in decode_records(_fetch_bytes(client, topic_name, 0))]
    assert values == list(range(len(values))) and len(values) >= 10


def test_many_concurrent_connections(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    errors = []

    def worker(i: int) -> None:
        try:
            with Wire(gateway) as w:
                w.call(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
                r = w.call(PRODUCE, 9, produce_body(topic_name, 0, build_batch([b"c%d" % i])))
                assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
                assert w.call(METADATA, 12, metadata_body([topic_name]))["topics"][0]["error_code"] == 0
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert client.partition_offsets(topic_name)[0] == (0, 60)


# ---------------------------------------------------------------- fetch
def test_fetch_long_poll_wakes_on_append(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:
        started = time.monotonic()
        w.send(FETCH, 12, fetch_body(topic_name, [(0, 0, 1 << 20)], max_wait_ms=10_000))
        time.sleep(0.4)
        with Wire(gateway) as producer:
            producer.call(PRODUCE, 9, produce_body(topic_name, 0, build_batch([b"wake"])))
        produced_at = time.monotonic()
        _, body = w.recv()
        answered_at = time.monotonic()
    p = partition_of(body)
    assert p["error_code"] == 0 and p["high_watermark"] == 1
    assert [r.value for r in decode_records(p["records"])] == [b"wake"]
    assert answered_at - produced_at < 1.0 and answered_at - started < 5.0


def test_fetch_waits_max_wait_when_nothing_arrives(client, gateway, topic_name):
    client.create_topic(topic_name, 2)
    with Wire(gateway) as w:
        for parts in ([(0, 0, 1 << 20)], [(0, 0, 1 << 20), (1, 0, 1 << 20)]):
            started = time.monotonic()
            body = w.call(FETCH, 12, fetch_body(topic_name, parts, max_wait_ms=300))
            took = time.monotonic() - started
            assert 0.25 <= took < 3.0
            assert all(p["error_code"] == 0 and not p["records"] for p in body["responses"][0]["partitions"])


def test_multi_partition_fetch_wakes_on_any_append(client, gateway, topic_name):
    client.create_topic(topic_name, 3)
    with Wire(gateway) as w:
        w.send(FETCH, 11, fetch_body(topic_name, [(p, 0, 1 << 20) for p in range(3)], max_wait_ms=10_000))
        time.sleep(0.3)
        with Wire(gateway) as producer:
            producer.call(PRODUCE, 9, produce_body(topic_name, 2, build_batch([b"p2"])))
        produced_at = time.monotonic()
        _, body = w.recv()
        assert time.monotonic() - produced_at < 1.5
    parts = {p["partition_index"]: p for p in body["responses"][0]["partitions"]}
    assert [r.value for r in decode_records(parts[2]["records"])] == [b"p2"]
    assert not parts[0]["records"] and not parts[1]["records"]


def test_fetch_inside_a_batch_returns_the_whole_batch(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:
        w.call(PRODUCE, 9, produce_body(topic_name, 0, build_batch([b"%d" % i for i in range(10)])))
        body = w.call(FETCH, 12, fetch_body(topic_name, [(0, 5, 1 << 20)]))
    p = partition_of(body)
    assert p["error_code"] == 0
    base = HEADER.unpack_from(bytes(p["records"]), 0)[0]
    assert base == 0 and [r.offset for r in decode_records(p["records"])] == list(range(10))


def test_fetch_byte_limits(client, gateway, topic_name):
    client.create_topic(topic_name, 2)
    big = b"x" * 3000
    with Wire(gateway) as w:
        for p in range(2):
            for i in range(5):
                w.call(PRODUCE, 9, produce_body(topic_name, p, build_batch([big, b"%d" % i])))
        # partition_max_bytes smaller than one batch: exactly one whole batch
        one = partition_of(w.call(FETCH, 12, fetch_body(topic_name, [(0, 0, 1)])))
        assert [r.offset for r in decode_records(one["records"])] == [0, 1]
        # partition limit that fits two batches
        size = len(one["records"])
        two = partition_of(w.call(FETCH, 12, fetch_body(topic_name, [(0, 0, 2 * size + 10)])))
        assert len(two["records"]) == 2 * size
        # response max_bytes: the first partition gets one batch even if larger, the second nothing
        body = w.call(FETCH, 12, fetch_body(topic_name, [(0, 0, 1 << 20), (1, 0, 1 << 20)], max_bytes=size + 10))
        parts = {p["partition_index"]: p for p in body["responses"][0]["partitions"]}
        assert len(parts[0]["records"]) == size and not parts[1]["records"]
        body = w.call(FETCH, 12, fetch_body(topic_name, [(0, 0, 1 << 20), (1, 0, 1 << 20)], max_bytes=1))
        parts = {p["partition_index"]: p for p in body["responses"][0]["partitions"]}
        assert len(parts[0]["records"]) == size and not parts[1]["records"]


def test_fetch_errors(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:
        w.call(PRODUCE, 9, produce_body(topic_name, 0, build_batch([b"a", b"b"])))
        p = partition_of(w.call(FETCH, 12, fetch_body(topic_name, [(0, 99, 1 << 20)])))
        assert (p["error_code"], p["high_watermark"], p["log_start_offset"]) == (codes.OFFSET_OUT_OF_RANGE, 2, 0)
        p = partition_of(w.call(FETCH, 12, fetch_body(topic_name, [(7, 0, 1 << 20)])))
        assert p["error_code"] == codes.UNKNOWN_TOPIC_OR_PARTITION
        p = partition_of(w.call(FETCH, 12, fetch_body("no-such-topic-x", [(0, 0, 1 << 20)])))
        assert p["error_code"] == codes.UNKNOWN_TOPIC_OR_PARTITION
        body = fetch_body(topic_name, [(0, 0, 1 << 20)])
        body["session_id"] = 1234
        assert w.call(FETCH, 12, body)["error_code"] == codes.FETCH_SESSION_ID_NOT_FOUND


def test_fetch_by_topic_id(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:
        w.call(PRODUCE, 9, produce_body(topic_name, 0, build_batch([b"by-id"])))
        meta = w.call(METADATA, 12, metadata_body([topic_name]))
        tid = meta["topics"][0]["topic_id"]
        body = fetch_body(topic_name, [(0, 0, 1 << 20)])
        body["topics"][0]["topic_id"] = tid
        out = w.call(FETCH, 17, body)
        assert out["responses"][0]["topic_id"] == tid
        assert [r.value for r in decode_records(partition_of(out)["records"])] == [b"by-id"]


def test_a_recreated_topic_gets_a_new_id(client, gateway, topic_name):
    """Topic ids are random per creation and durable, as in Kafka: a client holding the id of
    a deleted topic gets UNKNOWN_TOPIC_ID, not the records of its namesake."""
    import uuid

    with Wire(gateway) as w:
        created = w.call(CREATE_TOPICS, 7, create_topics_body(topic_name))["topics"][0]
        first = created["topic_id"]
        assert created["error_code"] == 0 and first != uuid.UUID(int=0)
        assert w.call(METADATA, 12, metadata_body([topic_name]))["topics"][0]["topic_id"] == first
        w.call(PRODUCE, 9, produce_body(topic_name, 0, build_batch([b"old"])))
        deleted = w.call(DELETE_TOPICS, 6, {"topics": [{"name": None, "topic_id": first}], "timeout_ms": 30000})
        assert deleted["responses"][0]["error_code"] == 0 and deleted["responses"][0]["name"] == topic_name
        second = w.call(CREATE_TOPICS, 7, create_topics_body(topic_name))["topics"][0]["topic_id"]
        assert second not in (first, uuid.UUID(int=0))
        meta = w.call(METADATA, 12, metadata_body([topic_name]))["topics"][0]
        assert meta["topic_id"] == second
        w.call(PRODUCE, 9, produce_body(topic_name, 0, build_batch([b"new"])))
        for tid, code, values in ((first, codes.UNKNOWN_TOPIC_ID, []), (second, codes.NONE, [b"new"])):
            body = fetch_body(topic_name, [(0, 0, 1 << 20)])
            body["topics"][0]["topic_id"] = tid
            part = partition_of(w.call(FETCH, 17, body))
            assert part["error_code"] == code
            assert [r.value for r in decode_records(part["records"] or b"")] == values
    assert client.describe_topic(topic_name)["topic_id"] == str(second)


def test_consumer_offsets_is_internal_in_metadata(client, gateway, topic_name):
    import ray

    from logan_ray._ray import get
    from logan_ray.actors.group_coordinator import OFFSETS_TOPIC_CONFIG
    from logan_ray.errors import TopicExistsError
    from logan_ray.groups import OFFSETS_TOPIC

    try:
        get(client.router.create_topic.remote(OFFSETS_TOPIC, 8, OFFSETS_TOPIC_CONFIG))
    except (TopicExistsError, ray.exceptions.RayTaskError) as e:  # made earlier by the coordinator
        assert "already exists" in str(e)
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:
        topics = w.call(METADATA, 12, metadata_body([OFFSETS_TOPIC, topic_name]))["topics"]
    assert {t["name"]: t["is_internal"] for t in topics} == {OFFSETS_TOPIC: True, topic_name: False}


# ---------------------------------------------------------------- produce
def test_produce_errors(client, gateway, topic_name):
    client.create_topic(topic_name, 1, {"max.message.bytes": "2000"})
    client.create_topic(topic_name + "-min2", 1, {"min.insync.replicas": "2"})

    def code(w: Wire, topic: str, partition: int, records: bytes | None, acks: int = 1) -> int:
        body = w.call(PRODUCE, 9, produce_body(topic, partition, records, acks))
        return body["responses"][0]["partition_responses"][0]["error_code"]

    good = build_batch([b"ok"])
    corrupt = bytearray(good)
    corrupt[-1] ^= 0xFF
    with Wire(gateway) as w:
        assert code(w, topic_name, 0, good) == 0
        assert code(w, "no-such-topic-y", 0, good) == codes.UNKNOWN_TOPIC_OR_PARTITION
        assert code(w, topic_name, 3, good) == codes.UNKNOWN_TOPIC_OR_PARTITION
        assert code(w, topic_name, 0, bytes(corrupt)) == codes.CORRUPT_MESSAGE
        assert code(w, topic_name, 0, build_batch([b"z" * 5000])) == codes.MESSAGE_TOO_LARGE
        assert code(w, topic_name, 0, b"") == codes.INVALID_RECORD
        assert code(w, topic_name, 0, good, acks=2) == codes.INVALID_REQUIRED_ACKS
        # One in-sync replica, min.insync.replicas=2: acks=all is refused before the append, acks=1 is not.
        assert code(w, topic_name + "-min2", 0, good, acks=-1) == codes.NOT_ENOUGH_REPLICAS
        assert code(w, topic_name + "-min2", 0, good, acks=1) == 0
        assert code(w, topic_name, 0, good, acks=-1) == 0
    assert client.partition_offsets(topic_name)[0] == (0, 2)
    assert client.partition_offsets(topic_name + "-min2")[0] == (0, 1)


def test_produce_acks_zero_sends_no_response(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:
        w.send(PRODUCE, 9, produce_body(topic_name, 0, build_batch([b"quiet"]), acks=0))
        corr = w.send(API_VERSIONS, 2, {})
        assert w.recv()[0] == corr  # the next answer is for ApiVersions: acks=0 got none
        w.sent.clear()
        deadline = time.monotonic() + 5
        while client.partition_offsets(topic_name)[0][1] < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
    assert client.partition_offsets(topic_name)[0] == (0, 1)


def test_log_append_time(client, gateway, topic_name):
    client.create_topic(topic_name, 1, {"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    with Wire(gateway) as w:
        r = w.call(PRODUCE, 9, produce_body(topic_name, 0, build_batch([b"t"], timestamps=1000)))
        part = r["responses"][0]["partition_responses"][0]
        assert part["error_code"] == 0 and part["log_append_time_ms"] >= before
        fetched = decode_records(partition_of(w.call(FETCH, 12, fetch_body(topic_name, [(0, 0, 1 << 20)])))[
            "records"])
    assert fetched[0].timestamp == part["log_append_time_ms"]


# ---------------------------------------------------------------- metadata & admin
def test_metadata_names_auto_create_and_errors(client, gateway, topic_name):
    with Wire(gateway) as w:
        body = w.call(METADATA, 12, metadata_body([topic_name, "bad name!"], auto_create=False))
        errs = {t["name"]: t["error_code"] for t in body["topics"]}
        assert errs == {topic_name: codes.UNKNOWN_TOPIC_OR_PARTITION, "bad name!": codes.INVALID_TOPIC_EXCEPTION}
        assert topic_name not in client.list_topics()
        body = w.call(METADATA, 12, metadata_body([topic_name], auto_create=True))
        t = body["topics"][0]
        assert t["error_code"] == 0 and len(t["partitions"]) == 1
        leader = t["partitions"][0]["leader_id"]
        assert [b["node_id"] for b in body["brokers"]] == [leader] and body["controller_id"] == leader
        assert f"{body['brokers'][0]['host']}:{body['brokers'][0]['port']}" == gateway
        assert topic_name in [t["name"] for t in w.call(METADATA, 1, {"topics": None})["topics"]]
        cluster = w.call(DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 1})
        assert [b["broker_id"] for b in cluster["brokers"]] == [leader]


def test_create_topics_errors(client, gateway, topic_name):
    with Wire(gateway) as w:
        def code(**kw) -> int:
            return w.call(CREATE_TOPICS, 7, create_topics_body(**kw))["topics"][0]["error_code"]

        assert code(name=topic_name, validate_only=True) == 0 and topic_name not in client.list_topics()
        assert code(name=topic_name, partitions=2, configs={"retention.ms": "60000"}) == 0
        assert code(name=topic_name) == codes.TOPIC_ALREADY_EXISTS
        assert code(name="bad/name") == codes.INVALID_TOPIC_EXCEPTION
        assert code(name=topic_name + "-x", partitions=0) == codes.INVALID_PARTITIONS
        assert code(name=topic_name + "-x", replication=3) == codes.INVALID_REPLICATION_FACTOR
        refused = w.call(CREATE_TOPICS, 7, create_topics_body(name=topic_name + "-x", replication=2))["topics"][0]
        assert refused["error_message"] == "Replication factor: 2 larger than available brokers: 1."
        assert code(name=topic_name + "-x", replication=0) == codes.INVALID_REPLICATION_FACTOR
        assert code(name=topic_name + "-x", configs={"no.such.config": "1"}) == codes.INVALID_CONFIG
        assert code(name=topic_name + "-x", configs={"retention.ms": "soon"}) == codes.INVALID_CONFIG
    assert len(client.partitions(topic_name)) == 2
    assert topic_name + "-x" not in client.list_topics()


def test_list_offsets_modes(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:
        for ts in (5000, 9000, 7000):
            w.call(PRODUCE, 9, produce_body(topic_name, 0, build_batch([b"a", b"b"], timestamps=[ts, ts + 1])))

        def lookup(ts: int) -> tuple[int, int]:
            p = w.call(LIST_OFFSETS, 7, list_offsets_body(topic_name, 0, ts))["topics"][0]["partitions"][0]
            assert p["error_code"] == 0
            return p["offset"], p["timestamp"]

        assert lookup(-2)[0] == 0 and lookup(-1)[0] == 6
        assert lookup(-3) == (3, 9001)  # max timestamp
        assert lookup(6000) == (2, 9000)
        assert lookup(9001) == (3, 9001)
        assert lookup(99999) == (-1, -1)


def test_producer_ids_and_coordinator(gateway):
    with Wire(gateway) as w:
        a = w.call(INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                         "producer_id": -1, "producer_epoch": -1})
        b = w.call(INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                         "producer_id": -1, "producer_epoch": -1})
        assert a["error_code"] == b["error_code"] == 0 and a["producer_id"] != b["producer_id"]
        bumped = w.call(INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                              "producer_id": a["producer_id"], "producer_epoch": 0})
        assert (bumped["producer_id"], bumped["producer_epoch"]) == (a["producer_id"], 1)
        fc = w.call(FIND_COORDINATOR, 4, {"key_type": 0, "coordinator_keys": ["g1", "g2"]})
        assert [c["error_code"] for c in fc["coordinators"]] == [codes.NONE] * 2  # the group coordinator
        # transactions: the coordinator of "t" is this gateway; InitProducerId gives its id an epoch
        assert w.call(FIND_COORDINATOR, 2, {"key": "t", "key_type": 1})["error_code"] == codes.NONE
        tx = w.call(INIT_PRODUCER_ID, 4, {"transactional_id": "t", "transaction_timeout_ms": 60000,
                                          "producer_id": -1, "producer_epoch": -1})
        assert tx["error_code"] == codes.NONE and tx["producer_id"] >= 0


def test_idempotent_sequences(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:
        pid = w.call(INIT_PRODUCER_ID, 4, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                           "producer_id": -1, "producer_epoch": -1})["producer_id"]

        def send(seq: int, n: int = 2) -> dict:
            batch = build_batch([b"s%d" % (seq + i) for i in range(n)], producer_id=pid, producer_epoch=0,
                                base_sequence=seq)
            return w.call(PRODUCE, 9, produce_body(topic_name, 0, batch, acks=-1))[
                "responses"][0]["partition_responses"][0]

        assert send(0)["base_offset"] == 0
        assert send(2)["base_offset"] == 2
        dup = send(2)
        assert (dup["error_code"], dup["base_offset"]) == (0, 2)  # acknowledged, not appended again
        assert send(2**30 + 9)["error_code"] == codes.OUT_OF_ORDER_SEQUENCE_NUMBER  # a gap, not a late batch
    assert client.partition_offsets(topic_name)[0] == (0, 4)


def test_idempotent_confluent_producer_through_a_lossy_link(client, gateway, topic_name):
    """Connections cut after requests reach the gateway but before answers return force
    librdkafka to retry; the partition de-duplicates, so nothing is written twice."""
    from confluent_kafka import Producer

    from lossy_proxy import LossyProxy

    client.create_topic(topic_name, 1)
    with LossyProxy(gateway, drop_every=7) as proxy:
        p = Producer({"bootstrap.servers": proxy.address, "enable.idempotence": True, "linger.ms": 2,
                      "batch.num.messages": 20, "retry.backoff.ms": 20, "message.timeout.ms": 60000,
                      "socket.connection.setup.timeout.ms": 5000})
        errors = []
        n = 2000
        for i in range(n):
            p.produce(topic_name, b"%d" % i, on_delivery=lambda e, m: e and errors.append(e))
            if i % 100 == 0:
                p.poll(0)
                time.sleep(0.005)
        assert p.flush(90) == 0
        assert errors == []
        assert proxy.dropped >= 3
    values = [int(r.value) for r in decode_records(_fetch_bytes(client, topic_name, 0))]
    while len(values) < n:
        more = _fetch_from(client, topic_name, len(values))
        if not more:
            break
        values += more
    assert values == list(range(n))


def _fetch_from(client, topic: str, offset: int) -> list[int]:
    from logan_ray._ray import get

    data = get(client.partition_actor(topic, 0).fetch.remote(offset, 1 << 20))[0]
    return [int(r.value) for r in decode_records(data) if r.offset >= offset]


def test_gateway_socket_accepts_after_many_bad_clients(gateway):
    for _ in range(20):
        host, port = gateway.rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
        s.sendall(b"\x00\x00\x00\x05\x00")
        s.close()
    still_serving(gateway)


def test_coalesced_appends_attribute_errors_to_the_bad_request(client, gateway, topic_name):
    """Pipelined requests are merged into one append; one corrupt request fails alone."""
    client.create_topic(topic_name, 1)
    with Wire(gateway) as w:
        frames = []
        for i in range(40):
            batch = bytearray(build_batch([b"%d-%d" % (i, j) for j in range(3)]))
            if i == 17:
                batch[-1] ^= 0xFF
            frames.append(w.encode(PRODUCE, 9, produce_body(topic_name, 0, bytes(batch)))[1])
        w.send_raw(b"".join(frames))
        parts = [w.recv()[1]["responses"][0]["partition_responses"][0] for _ in frames]
    assert [p["error_code"] for p in parts] == [0] * 17 + [codes.CORRUPT_MESSAGE] + [0] * 22
    good = [p["base_offset"] for p in parts if p["error_code"] == 0]
    assert good == [3 * i for i in range(39)]
    values = [r.value for r in decode_records(_fetch_bytes(client, topic_name, 0))]
    assert values == [b"%d-%d" % (i, j) for i in range(40) if i != 17 for j in range(3)]


def test_gateway_comes_back_after_sigkill(client, gateway, topic_name):
    """Ray restarts a killed gateway actor, which listens again on the same address by itself."""
    import os
    import signal

    import ray

    from logan_ray._ray import get
    from logan_ray.gateway import gateway_name

    client.create_topic(topic_name, 1)
    actor = ray.get_actor(gateway_name(ray.get_runtime_context().get_node_id()), namespace="logan_ray")
    pid = get(actor.stats.remote())["pid"]
    os.kill(pid, signal.SIGKILL)
    _produce_once(gateway, topic_name, 60)
    assert get(actor.stats.remote())["pid"] != pid


def _produce_once(gateway: str, topic: str, within_s: float) -> None:
    """Produce one batch to partition 0 of ``topic`` through ``gateway``, retrying refused connections."""
    deadline = time.monotonic() + within_s
    while True:
        try:
            with Wire(gateway, timeout=5) as w:
                r = w.call(PRODUCE, 9, produce_body(topic, 0, build_batch([b"after restart"])))
                assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
                return
        except (ConnectionError, OSError):
            assert time.monotonic() < deadline, f"no gateway on {gateway} within {within_s} s"
            time.sleep(0.5)


def test_gateway_on_a_free_port_comes_back_on_it_after_its_broker_session_expired(client, gateway, topic_name):
    """A gateway started on port 0, frozen past the broker session timeout (its lease over) and then
    SIGKILLed, listens again on the port it had: clients only know that one."""
    import os
    import signal

    import ray

    from logan_ray._ray import get
    from logan_ray.actors.broker_lease import DEFAULT_BROKER_SESSION_TIMEOUT_MS
    from logan_ray.gateway import gateway_name, start_gateways, stop_gateways

    here = ray.get_runtime_context().get_node_id()
    fixed_port = int(gateway.rsplit(":", 1)[1])
    client.create_topic(topic_name, 1)
    stop_gateways([here])
    try:
        endpoint = start_gateways("127.0.0.1", 0, nodes=[here])[here]
        _produce_once(endpoint, topic_name, 30)
        actor = ray.get_actor(gateway_name(here), namespace="logan_ray")
        pid = get(actor.stats.remote())["pid"]
        os.kill(pid, signal.SIGSTOP)
        time.sleep(DEFAULT_BROKER_SESSION_TIMEOUT_MS / 1000 * 2)  # no heartbeat: its lease runs out
        os.kill(pid, signal.SIGKILL)
        _produce_once(endpoint, topic_name, 60)
        assert get(actor.stats.remote())["endpoint"] == endpoint
    finally:
        stop_gateways([here])
        assert start_gateways("127.0.0.1", fixed_port, nodes=[here])[here] == gateway
