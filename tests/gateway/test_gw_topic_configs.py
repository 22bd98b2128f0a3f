"""Kafka topic configs through a real client: accepted, stored and described with Kafka's defaults."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic


def test_routine_kafka_topic_configs_are_accepted_and_described(gateway, client, topic_name):
    admin = AdminClient({"bootstrap.servers": gateway})
    given = {"compression.type": "zstd", "max.compaction.lag.ms": "3600000",
             "message.timestamp.before.max.ms": "86400000", "message.timestamp.after.max.ms": "3600000",
             "unclean.leader.election.enable": "false", "cleanup.policy": "compact"}
    admin.create_topics([NewTopic(topic_name, 1, 1, config=given)])[topic_name].result(timeout=30)
    [described] = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic_name)]).values()
    entries = described.result(timeout=30)
    for name, value in given.items():
        assert entries[name].value == value
    assert not entries["compression.type"].is_default
    assert not entries["unclean.leader.election.enable"].is_default  # set explicitly: a topic override, as in Kafka
    for name, default in {"preallocate": "false", "segment.jitter.ms": "0", "compression.zstd.level": "3",
                          "message.timestamp.difference.max.ms": "9223372036854775807",
                          "message.downconversion.enable": "true", "remote.storage.enable": "false"}.items():
        assert entries[name].value == default and entries[name].is_default


def test_unknown_topic_config_is_invalid_config_naming_it(gateway, client, topic_name):
    admin = AdminClient({"bootstrap.servers": gateway})
    future = admin.create_topics([NewTopic(topic_name, 1, 1, config={"retention.millis": "1000"})])[topic_name]
    with pytest.raises(KafkaException) as e:
        future.result(timeout=30)
    err = e.value.args[0]
    assert err.code() == KafkaError.INVALID_CONFIG and "retention.millis" in err.str()
    assert topic_name not in client.list_topics()


def test_message_timestamp_window_is_enforced_with_invalid_timestamp(gateway, client, topic_name):
    client.create_topic(topic_name, 1, {"message.timestamp.after.max.ms": "3600000"})
    producer = Producer({"bootstrap.servers": gateway, "retries": 0})
    results: list = []
    now = int(time.time() * 1000)
    producer.produce(topic_name, b"in two hours", timestamp=now + 2 * 3600_000,
                     on_delivery=lambda err, msg: results.append(err))
    producer.flush(15)  # a batch with one record out of the window is refused whole, as in Kafka
    producer.produce(topic_name, b"now", timestamp=now, on_delivery=lambda err, msg: results.append(err))
    producer.flush(15)
    assert results[0] is not None and results[0].code() == KafkaError.INVALID_TIMESTAMP, results
    assert results[1] is None, results
    assert client.partition_offsets(topic_name)[0] == (0, 1)  # only the record inside the window was written
