"""Kafka transactions with unchanged Python clients over TCP: kafka-python 3 and aiokafka.

confluent-kafka (librdkafka) is covered by test_gw_transactions.py; these are the two
pure-Python implementations of the transactional producer (their own InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit and EndTxn code) and of the
read_committed consumer (their own handling of aborted-transaction lists and control
batches). Each library is checked with a consumer of its own: commit is seen, abort is
seen only by read_uncommitted, send_offsets_to_transaction commits the group's offset
iff the transaction commits, and a second producer with the same transactional id
fences the first.
"""
from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioTP
from aiokafka import errors as aio_errors
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTP
from kafka import errors as kp_errors
from kafka.structs import OffsetAndMetadata

QUIET_S = 1.5  # a reader stops once nothing new came for this long


# ---- kafka-python ----------------------------------------------------------------------------

def _kp_producer(gateway: str, tid: str) -> KafkaProducer:
    p = KafkaProducer(bootstrap_servers=gateway, transactional_id=tid, linger_ms=5)
    p.init_transactions()
    return p


def _kp_read(gateway: str, parts: list[tuple[str, int]], isolation: str) -> list[bytes]:
    """Every value of ``parts`` readable at ``isolation``, from the beginning, until quiet."""
    c = KafkaConsumer(bootstrap_servers=gateway, group_id=None, enable_auto_commit=False,
                      isolation_level=isolation, fetch_max_wait_ms=100)
    try:
        tps = [KpTP(t, p) for t, p in parts]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out: list[bytes] = []
        last = time.monotonic()
        while time.monotonic() - last < QUIET_S:
            for msgs in c.poll(timeout_ms=200).values():
                out += [m.value for m in msgs]
                last = time.monotonic() if msgs else last
        return sorted(out)
    finally:
        c.close()


def test_kafka_python_commit_and_abort_across_topics(client, gateway, topic_name):
    a, b = topic_name + "-a", topic_name + "-b"
    client.create_topic(a, 2)
    client.create_topic(b, 1)
    parts = [(a, 0), (a, 1), (b, 0)]
    p = _kp_producer(gateway, "kp-" + topic_name)
    try:
        p.begin_transaction()
        for t, part in parts:
            p.send(t, f"c-{t[-1]}{part}".encode(), partition=part)
        p.commit_transaction()
        p.begin_transaction()
        for t, part in parts:
            p.send(t, f"x-{t[-1]}{part}".encode(), partition=part)
        p.flush()
        p.abort_transaction()
    finally:
        p.close()
    committed = sorted([b"c-a0", b"c-a1", b"c-b0"])
    assert _kp_read(gateway, parts, "read_committed") == committed
    assert _kp_read(gateway, parts, "read_uncommitted") == sorted(committed + [b"x-a0", b"x-a1", b"x-b0"])


def test_kafka_python_consume_transform_produce(client, gateway, topic_name):
    source, sink, group = topic_name + "-in", topic_name + "-out", "kp-ctp-" + topic_name
    client.create_topic(source, 1)
    client.create_topic(sink, 1)
    feeder = KafkaProducer(bootstrap_servers=gateway)
    for i in range(6):
        feeder.send(source, f"m{i}".encode(), partition=0)
    feeder.flush()
    feeder.close()

    consumer = KafkaConsumer(source, bootstrap_servers=gateway, group_id=group, enable_auto_commit=False,
                             auto_offset_reset="earliest", isolation_level="read_committed",
                             max_poll_records=3, fetch_max_wait_ms=100)
    p = _kp_producer(gateway, "kp-" + topic_name)
    tp = KpTP(source, 0)
    try:
        got = []
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            for msgs in consumer.poll(timeout_ms=300, max_records=3 - len(got)).values():
                got += msgs
        assert [m.offset for m in got] == [0, 1, 2]

        def transform_and_end(commit: bool) -> None:
            p.begin_transaction()
            for m in got:
                p.send(sink, m.value.upper(), partition=0)
            p.send_offsets_to_transaction({tp: OffsetAndMetadata(got[-1].offset + 1, "", -1)},
                                          consumer.group_metadata())
            p.flush()  # an abort drops records not sent yet: these reach the log either way
            p.commit_transaction() if commit else p.abort_transaction()

        transform_and_end(False)
        assert consumer.committed(tp) is None  # the aborted transaction's offsets were dropped
        transform_and_end(True)
        assert consumer.committed(tp) == 3
    finally:
        p.close()
        consumer.close(autocommit=False)
    assert _kp_read(gateway, [(sink, 0)], "read_committed") == [b"M0", b"M1", b"M2"]
    assert _kp_read(gateway, [(sink, 0)], "read_uncommitted") == [b"M0", b"M0", b"M1", b"M1", b"M2", b"M2"]


def test_kafka_python_zombie_is_fenced(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    tid = "kp-" + topic_name
    first = _kp_producer(gateway, tid)
    second = None
    try:
        first.begin_transaction()
        first.send(topic_name, b"zombie", partition=0)
        first.flush()
        second = _kp_producer(gateway, tid)  # bumps the epoch and aborts the first one's transaction
        second.begin_transaction()
        second.send(topic_name, b"live", partition=0)
        second.commit_transaction()
        with pytest.raises((kp_errors.ProducerFencedError, kp_errors.InvalidProducerEpochError)):
            first.send(topic_name, b"zombie-2", partition=0)
            first.commit_transaction()
    finally:
        first.close(timeout=5)
        if second is not None:
            second.close()
    assert _kp_read(gateway, [(topic_name, 0)], "read_committed") == [b"live"]
    assert _kp_read(gateway, [(topic_name, 0)], "read_uncommitted") == [b"live", b"zombie"]


# ---- aiokafka --------------------------------------------------------------------------------

async def _aio_producer(gateway: str, tid: str) -> AIOKafkaProducer:
    p = AIOKafkaProducer(bootstrap_servers=gateway, transactional_id=tid, linger_ms=5)
    await p.start()  # InitProducerId with the transactional id
    return p


async def _aio_read(gateway: str, parts: list[tuple[str, int]], isolation: str) -> list[bytes]:
    c = AIOKafkaConsumer(bootstrap_servers=gateway, group_id=None, enable_auto_commit=False,
                         isolation_level=isolation, fetch_max_wait_ms=100)
    await c.start()
    try:
        tps = [AioTP(t, p) for t, p in parts]
        c.assign(tps)
        await c.seek_to_beginning(*tps)
        out: list[bytes] = []
        last = time.monotonic()
        while time.monotonic() - last < QUIET_S:
            for msgs in (await c.getmany(timeout_ms=200)).values():
                out += [m.value for m in msgs]
                last = time.monotonic() if msgs else last
        return sorted(out)
    finally:
        await c.stop()


def test_aiokafka_commit_and_abort_across_topics(client, gateway, topic_name):
    a, b = topic_name + "-a", topic_name + "-b"
    client.create_topic(a, 2)
    client.create_topic(b, 1)
    parts = [(a, 0), (a, 1), (b, 0)]

    async def run() -> None:
        p = await _aio_producer(gateway, "aio-" + topic_name)
        try:
            async with p.transaction():
                for t, part in parts:
                    await p.send(t, f"c-{t[-1]}{part}".encode(), partition=part)
            await p.begin_transaction()
            sent = [await p.send(t, f"x-{t[-1]}{part}".encode(), partition=part) for t, part in parts]
            await asyncio.gather(*sent)  # on the brokers before the abort
            await p.abort_transaction()
        finally:
            await p.stop()
        committed = sorted([b"c-a0", b"c-a1", b"c-b0"])
        assert await _aio_read(gateway, parts, "read_committed") == committed
        assert await _aio_read(gateway, parts, "read_uncommitted") == sorted(
            committed + [b"x-a0", b"x-a1", b"x-b0"])

    asyncio.run(run())


def test_aiokafka_consume_transform_produce(client, gateway, topic_name):
    source, sink, group = topic_name + "-in", topic_name + "-out", "aio-ctp-" + topic_name
    client.create_topic(source, 1)
    client.create_topic(sink, 1)

    async def run() -> None:
        feeder = AIOKafkaProducer(bootstrap_servers=gateway)
        await feeder.start()
        try:
            for i in range(6):
                await feeder.send_and_wait(source, f"m{i}".encode(), partition=0)
        finally:
            await feeder.stop()
        consumer = AIOKafkaConsumer(source, bootstrap_servers=gateway, group_id=group, enable_auto_commit=False,
                                    auto_offset_reset="earliest", isolation_level="read_committed",
                                    fetch_max_wait_ms=100)
        await consumer.start()
        p = await _aio_producer(gateway, "aio-" + topic_name)
        tp = AioTP(source, 0)
        try:
            got = []
            deadline = time.monotonic() + 30
            while len(got) < 3 and time.monotonic() < deadline:
                for msgs in (await consumer.getmany(timeout_ms=300, max_records=3 - len(got))).values():
                    got += msgs
            assert [m.offset for m in got] == [0, 1, 2]

            async def transform_and_end(commit: bool) -> None:
                await p.begin_transaction()
                for m in got:
                    await p.send(sink, m.value.upper(), partition=0)
                await p.send_offsets_to_transaction({tp: got[-1].offset + 1}, group)
                await (p.commit_transaction() if commit else p.abort_transaction())

            await transform_and_end(False)
            assert await consumer.committed(tp) is None  # the aborted transaction's offsets were dropped
            await transform_and_end(True)
            assert await consumer.committed(tp) == 3
        finally:
            await p.stop()
            await consumer.stop()
        assert await _aio_read(gateway, [(sink, 0)], "read_committed") == [b"M0", b"M1", b"M2"]
        assert await _aio_read(gateway, [(sink, 0)], "read_uncommitted") == [
            b"M0", b"M0", b"M1", b"M1", b"M2", b"M2"]

    asyncio.run(run())


def test_aiokafka_zombie_is_fenced(client, gateway, topic_name):
    client.create_topic(topic_name, 1)
    tid = "aio-" + topic_name

    async def run() -> None:
        first = await _aio_producer(gateway, tid)
        second = None
        try:
            await first.begin_transaction()
            await first.send_and_wait(topic_name, b"zombie", partition=0)
            second = await _aio_producer(gateway, tid)  # bumps the epoch, aborts the first one's transaction
            async with second.transaction():
                await second.send_and_wait(topic_name, b"live", partition=0)
            with pytest.raises((aio_errors.ProducerFenced, aio_errors.InvalidProducerEpoch)):
                await first.send_and_wait(topic_name, b"zombie-2", partition=0)
                await first.commit_transaction()
        finally:
            await first.stop()
            if second is not None:
                await second.stop()
        assert await _aio_read(gateway, [(topic_name, 0)], "read_committed") == [b"live"]
        assert await _aio_read(gateway, [(topic_name, 0)], "read_uncommitted") == [b"live", b"zombie"]

    asyncio.run(run())
