"""kafka-python against a real gateway over TCP."""
from __future__ import annotations

import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic

from kafka_checks import CODEC_IDS, codecs_stored, PARTITIONS, Got, check_all_back, check_timestamps, expected_offsets_for_time, records_for

# kafka-python's codecs with the libraries this project installs (snappy would need python-snappy)
CODECS = [None, "gzip", "lz4", "zstd"]


def consume(bootstrap: str, topic: str, starts: dict[int, int | None], expected: int,
            timeout: float = 30) -> list[Got]:
    c = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                      fetch_max_wait_ms=100)
    try:
        parts = [TopicPartition(topic, p) for p in starts]
        c.assign(parts)
        for tp in parts:
            if starts[tp.partition] is None:
                c.seek_to_beginning(tp)
            else:
                c.seek(tp, starts[tp.partition])
        out: list[Got] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            for tp, msgs in c.poll(timeout_ms=500).items():
                out += [Got(m.partition, m.offset, m.key, m.value, m.timestamp) for m in msgs]
        return out
    finally:
        c.close()


def test_kafka_python_full_cycle(client, gateway, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=gateway)
    try:
        admin.create_topics([NewTopic(topic_name, PARTITIONS, 1, topic_configs={"retention.ms": "3600000"})])
        assert topic_name in admin.list_topics()

        produced = []
        base = int(time.time() * 1000) - 100_000
        for i, codec in enumerate(CODECS):
            recs = records_for(str(codec), base + i * 1000)
            p = KafkaProducer(bootstrap_servers=gateway, compression_type=codec, linger_ms=5)
            futures = [p.send(topic_name, value=r.value, key=r.key, timestamp_ms=r.timestamp) for r in recs]
            p.flush(30)
            for f in futures:
                assert f.get(10).offset >= 0
            p.close()
            produced += recs

        got = consume(gateway, topic_name, {p: None for p in range(PARTITIONS)}, len(produced))
        check_all_back(produced, got)
        check_timestamps(produced, got)
        assert codecs_stored(client, topic_name) == {CODEC_IDS[str(c)] for c in CODECS}

        probe = KafkaConsumer(bootstrap_servers=gateway, group_id=None)
        try:
            tps = [TopicPartition(topic_name, p) for p in range(PARTITIONS)]
            assert set(probe.beginning_offsets(tps).values()) == {0}
            assert sum(probe.end_offsets(tps).values()) == len(produced)
            target = base + 2 * 1000 + 5
            found = probe.offsets_for_times({tp: target for tp in tps})
            want = expected_offsets_for_time(got, target)
            assert {tp.partition: (o.offset if o is not None else -1) for tp, o in found.items()} == want
        finally:
            probe.close()
        later = consume(gateway, topic_name, {p: o for p, o in want.items() if o >= 0},
                        sum(1 for g in got if g.timestamp >= target))
        assert sorted(g.value for g in later) == sorted(g.value for g in got if g.timestamp >= target)

        result = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic_name)], config_filter="all")
        text = repr(result)
        assert "retention.ms" in text and "3600000" in text and "cleanup.policy" in text

        admin.delete_topics([topic_name])
        deadline = time.monotonic() + 10
        while topic_name in admin.list_topics() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert topic_name not in admin.list_topics()
    finally:
        admin.close()
