"""The gateway reaches its node's partition actors over the node-local channel, and
survives their crashes: a real confluent-kafka producer and consumer, SIGKILL of the
partition actor's process, no acknowledged record lost or written twice."""
from __future__ import annotations

import os
import signal
import threading
import time

import ray

from logan_ray._ray import get
from logan_ray.gateway import gateway_name
from logan_ray.storage.records import decode_records


def _gateway_stats() -> dict:
    actor = ray.get_actor(gateway_name(ray.get_runtime_context().get_node_id()), namespace="logan_ray")
    return get(actor.stats.remote())


def _all_values(client, topic: str) -> list[bytes]:
    actor = client.partition_actor(topic, 0)
    start, end = get(actor.offsets.remote())
    values, offset = [], start
    while offset < end:
        data = get(actor.fetch.remote(offset, 8 << 20))[0]
        records = [r for r in decode_records(data) if r.offset >= offset]
        values += [r.value for r in records]
        offset = records[-1].offset + 1
    return values


def test_produce_and_fetch_go_over_the_channel(client, gateway, topic_name):
    from confluent_kafka import Consumer, Producer, TopicPartition

    client.create_topic(topic_name, 1)
    before = _gateway_stats()["channel_calls"]
    p = Producer({"bootstrap.servers": gateway, "linger.ms": 1})
    for i in range(500):
        p.produce(topic_name, b"v%d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": gateway, "group.id": topic_name, "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic_name, 0, 0)])
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 500 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    assert got == [b"v%d" % i for i in range(500)]
    stats = _gateway_stats()
    assert stats["channels"] >= 1
    assert stats["channel_calls"] > before  # appends and locates went over the socket, not Ray


def test_sigkilled_partition_actor_loses_no_acknowledged_record(client, gateway, topic_name):
    from confluent_kafka import Producer

    client.create_topic(topic_name, 1)
    actor = client.partition_actor(topic_name, 0)
    pid = get(actor.pid.remote())
    acked: list[bytes] = []
    errors: list = []
    stop = threading.Event()

    def on_delivery(err, msg):
        if err is None:
            acked.append(msg.value())
        else:
            errors.append(err)

    def produce():
        p = Producer({"bootstrap.servers": gateway, "enable.idempotence": True, "linger.ms": 2,
                      "message.timeout.ms": 60000, "retry.backoff.ms": 50})
        i = 0
        while not stop.is_set():
            p.produce(topic_name, b"rec-%08d" % i, on_delivery=on_delivery)
            i += 1
            if i % 200 == 0:
                p.poll(0)
                time.sleep(0.01)
        assert p.flush(90) == 0

    t = threading.Thread(target=produce)
    t.start()
    time.sleep(2.0)
    before_kill = _gateway_stats()
    os.kill(pid, signal.SIGKILL)
    time.sleep(4.0)
    stop.set()
    t.join(timeout=120)
    assert not t.is_alive()
    assert errors == []
    assert get(actor.pid.remote()) != pid  # Ray restarted it and it recovered from disk
    values = _all_values(client, topic_name)
    assert len(acked) > 1000
    assert len(values) == len(set(values)), "a record was written twice"
    assert not set(acked) - set(values), "an acknowledged record was lost"
    assert values == sorted(values)  # the producer's order kept across the crash
    stats = _gateway_stats()
    assert stats["channels"] >= 1 and stats["channel_calls"] > before_kill["channel_calls"]
    assert stats["channel_connects"] > before_kill["channel_connects"]  # reconnected to the restarted actor


def test_a_fetch_at_the_log_end_of_quiet_active_partitions_does_not_call_them(client, gateway, topic_name):
    """A consumer assigned many partitions names every one in each Fetch; those with nothing past its
    offset are answered from their actors' offsets boards (actors/offsets_board.py), not by a call
    that wakes each actor. A record appended afterwards is in the next Fetch."""
    from confluent_kafka import Producer
    from wire_client import Wire, fetch_body

    client.create_topic(topic_name, 3)
    p = Producer({"bootstrap.servers": gateway, "linger.ms": 0})
    for part in range(3):
        p.produce(topic_name, b"first", partition=part)
    assert p.flush(30) == 0  # three active partitions, each with a channel (and a board) to the gateway
    at_end = fetch_body(topic_name, [(part, 1, 1 << 20) for part in range(3)])
    with Wire(gateway) as w:
        w.call(1, 11, at_end)
        before = _gateway_stats()["channel_calls"]
        for _ in range(20):
            answer = w.call(1, 11, at_end)["responses"][0]["partitions"]
            assert [(a["error_code"], a["high_watermark"], a["log_start_offset"]) for a in answer] == [(0, 1, 0)] * 3
            assert all(not a["records"] for a in answer)
        assert _gateway_stats()["channel_calls"] == before  # 60 partition answers, no call to an actor
        p.produce(topic_name, b"second", partition=1)
        assert p.flush(30) == 0
        answer = w.call(1, 11, at_end)["responses"][0]["partitions"]
        assert [a["high_watermark"] for a in answer] == [1, 2, 1]
        assert [r.value for r in decode_records(bytes(answer[1]["records"]))] == [b"second"]
        assert not answer[0]["records"] and not answer[2]["records"]


def test_the_board_of_a_killed_partition_actor_is_not_trusted(client, gateway, topic_name):
    """SIGKILL leaves a board that still reads "usable" behind (nothing retired it). The gateway
    trusts a board only while the channel next to it is open, so records the restarted actor takes
    from a caller other than this gateway (a Python handle here) reach the next Fetch."""
    from confluent_kafka import Producer
    from wire_client import Wire, fetch_body

    from logan_ray.storage.record_builder import build_batch

    client.create_topic(topic_name, 2)
    p = Producer({"bootstrap.servers": gateway, "linger.ms": 0})
    for part in range(2):
        p.produce(topic_name, b"first", partition=part)
    assert p.flush(30) == 0
    at_end = fetch_body(topic_name, [(0, 1, 1 << 20), (1, 1, 1 << 20)])
    actor = client.partition_actor(topic_name, 0)
    pid = get(actor.pid.remote())
    with Wire(gateway) as w:
        assert [a["high_watermark"] for a in w.call(1, 11, at_end)["responses"][0]["partitions"]] == [1, 1]
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while True:  # Ray restarts it; the Python handle's append is not the gateway's call
            try:
                get(actor.append.remote(build_batch([b"after"])))
                break
            except Exception:
                assert time.monotonic() < deadline, "the killed partition actor did not come back"
                time.sleep(0.2)
        assert get(actor.pid.remote()) != pid
        deadline = time.monotonic() + 10
        while True:
            answer = w.call(1, 11, at_end)["responses"][0]["partitions"]
            if answer[0]["error_code"] == 0 and answer[0]["records"]:
                break
            assert time.monotonic() < deadline, f"the new record never reached a Fetch: {answer[0]}"
            time.sleep(0.1)
        assert answer[0]["high_watermark"] == 2
        assert [r.value for r in decode_records(bytes(answer[0]["records"]))] == [b"after"]


def test_a_wide_long_poll_over_quiet_active_partitions_waits_on_their_boards(client, gateway, topic_name):
    """A Fetch long-polling active partitions at their log end waits on their offsets boards
    (logan_ray/gateway/board_waits.py), not with a call to each actor; it ends when a record comes,
    whether through this gateway or through a Python handle."""
    from confluent_kafka import Producer
    from wire_client import Wire, fetch_body

    from logan_ray.storage.record_builder import build_batch

    client.create_topic(topic_name, 3)
    p = Producer({"bootstrap.servers": gateway, "linger.ms": 0})
    for part in range(3):
        p.produce(topic_name, b"first", partition=part)
    assert p.flush(30) == 0
    with Wire(gateway) as w:
        w.call(1, 11, fetch_body(topic_name, [(part, 1, 1 << 20) for part in range(3)]))
        before = _gateway_stats()["channel_calls"]
        started = time.monotonic()
        answer = w.call(1, 11, fetch_body(topic_name, [(part, 1, 1 << 20) for part in range(3)], max_wait_ms=300))
        assert time.monotonic() - started >= 0.25  # it did wait
        assert all(not a["records"] for a in answer["responses"][0]["partitions"])
        assert _gateway_stats()["channel_calls"] == before  # no actor was asked to wait

        offsets = {0: 1, 1: 1, 2: 1}
        for value, part in ((b"through the gateway", 2), (b"through a Python handle", 0)):
            w.send(1, 11, fetch_body(topic_name, [(q, offsets[q], 1 << 20) for q in range(3)], max_wait_ms=20_000))
            time.sleep(0.5)
            started = time.monotonic()
            if part == 2:
                p.produce(topic_name, value, partition=2)
                assert p.flush(30) == 0
            else:
                get(client.partition_actor(topic_name, 0).append.remote(build_batch([value])))
            answer = w.recv()[1]["responses"][0]["partitions"]
            assert time.monotonic() - started < 5  # far from the 20 s wait
            got = {a["partition_index"]: [r.value for r in decode_records(bytes(a["records"]))]
                   for a in answer if a["records"]}
            assert got == {part: [value]}
            offsets[part] += 1
