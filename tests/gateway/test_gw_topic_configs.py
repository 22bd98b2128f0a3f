"""Kafka topic configs through a real client: accepted, stored and described with Kafka's defaults."""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
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
