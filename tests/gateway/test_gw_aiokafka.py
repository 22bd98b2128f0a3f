"""aiokafka against a real gateway over TCP."""
from __future__ import annotations

import asyncio
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from kafka_checks import CODEC_IDS, codecs_stored, PARTITIONS, Got, check_all_back, check_timestamps, expected_offsets_for_time, records_for

CODECS = [None, "gzip", "snappy", "lz4", "zstd"]


async def consume(bootstrap: str, topic: str, starts: dict[int, int | None], expected: int,
                  timeout: float = 30) -> list[Got]:
    c = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                         fetch_max_wait_ms=100)
    await c.start()
    try:
        parts = [TopicPartition(topic, p) for p in starts]
        c.assign(parts)
        for tp in parts:
            if starts[tp.partition] is None:
                await c.seek_to_beginning(tp)
            else:
                c.seek(tp, starts[tp.partition])
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for tp, msgs in (await c.getmany(timeout_ms=500)).items():
                out += [Got(m.partition, m.offset, m.key, m.value, m.timestamp) for m in msgs]
        return out
    finally:
        await c.stop()


async def full_cycle(client, gateway: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=gateway)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, PARTITIONS, 1, topic_configs={"retention.ms": "3600000"})])
        assert topic in await admin.list_topics()

        produced = []
        base = int(time.time() * 1000) - 100_000
        for i, codec in enumerate(CODECS):
            recs = records_for(str(codec), base + i * 1000)
            p = AIOKafkaProducer(bootstrap_servers=gateway, compression_type=codec, linger_ms=5)
            await p.start()
            try:
                futures = [await p.send(topic, value=r.value, key=r.key, timestamp_ms=r.timestamp) for r in recs]
                for meta in await asyncio.gather(*futures):
                    assert meta.offset >= 0
            finally:
                await p.stop()
            produced += recs

        got = await consume(gateway, topic, {p: None for p in range(PARTITIONS)}, len(produced))
        check_all_back(produced, got)
        check_timestamps(produced, got)
        assert codecs_stored(client, topic) == {CODEC_IDS[str(c)] for c in CODECS}

        probe = AIOKafkaConsumer(bootstrap_servers=gateway, group_id=None)
        await probe.start()
        try:
            tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
            assert set((await probe.beginning_offsets(tps)).values()) == {0}
            assert sum((await probe.end_offsets(tps)).values()) == len(produced)
            target = base + 4 * 1000 + 2
            found = await probe.offsets_for_times({tp: target for tp in tps})
            want = expected_offsets_for_time(got, target)
            assert {tp.partition: (o.offset if o is not None else -1) for tp, o in found.items()} == want
        finally:
            await probe.stop()
        later = await consume(gateway, topic, {p: o for p, o in want.items() if o >= 0},
                              sum(1 for g in got if g.timestamp >= target))
        assert sorted(g.value for g in later) == sorted(g.value for g in got if g.timestamp >= target)

        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        rows = {}
        for r in responses:
            for res in r.resources:
                for entry in res[4]:
                    rows[entry[0]] = entry[1]
        assert rows["retention.ms"] == "3600000" and rows["cleanup.policy"] == "delete"

        await admin.delete_topics([topic])
        assert topic not in await admin.list_topics()
    finally:
        await admin.close()


def test_aiokafka_full_cycle(client, gateway, topic_name):
    asyncio.run(full_cycle(client, gateway, topic_name))
