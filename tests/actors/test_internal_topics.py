"""Internal topics through the Python API: clients read them but cannot change them.

Kafka refuses a produce or DeleteRecords on an internal topic with
INVALID_TOPIC_EXCEPTION; logan-ray refuses deleting, repartitioning and
reconfiguring ``__consumer_offsets`` the same way (any of them loses or misroutes
every group's committed offsets).
"""
from __future__ import annotations

import pytest

from logan_ray.actors.group_coordinator import OFFSETS_PARTITIONS, OFFSETS_TOPIC_CONFIG
from logan_ray.errors import InvalidRecordError, InvalidTopicError, TopicExistsError
from logan_ray.groups import OFFSETS_TOPIC


@pytest.fixture(scope="module")
def offsets_topic(client):
    try:  # as the group coordinator creates it
        client.create_topic(OFFSETS_TOPIC, OFFSETS_PARTITIONS, OFFSETS_TOPIC_CONFIG)
    except TopicExistsError:
        pass
    return OFFSETS_TOPIC


def _shape(described: dict) -> dict:
    """What a refused change would alter; not leader epochs, which move whenever a partition
    (re)starts, e.g. waking from hibernation between the two looks."""
    return {**described, "partitions": [{k: v for k, v in p.items() if k != "leader_epoch"}
                                        for p in described["partitions"]]}


def test_internal_topic_cannot_be_deleted_repartitioned_reconfigured_or_truncated(client, offsets_topic):
    before = client.describe_topic(offsets_topic)
    config = client.topic_config(offsets_topic)
    for change in (lambda: client.delete_topic(offsets_topic),
                   lambda: client.add_partitions(offsets_topic, OFFSETS_PARTITIONS + 4),
                   lambda: client.alter_topic(offsets_topic, {"cleanup.policy": "delete"}),
                   lambda: client.alter_topic(offsets_topic, {}, incremental=False),
                   lambda: client.delete_records(offsets_topic, {0: 0})):
        with pytest.raises(InvalidTopicError, match="internal topic __consumer_offsets") as e:
            change()
        assert e.value.code == 17  # INVALID_TOPIC_EXCEPTION
    assert _shape(client.describe_topic(offsets_topic)) == _shape(before)
    assert client.topic_config(offsets_topic) == config
    assert offsets_topic in client.list_topics(internal=True)


def test_producer_cannot_write_to_an_internal_topic(client, offsets_topic):
    with client.producer() as p:
        future = p.send(offsets_topic, b"forged commit", key=b"forged key", partition=0)
        with pytest.raises(InvalidTopicError, match="Cannot append to internal topic"):
            future.result(timeout=30)


def test_keyless_records_to_a_compacted_topic_fail_at_send(client, topic_name):
    client.create_topic(topic_name, 1, {"cleanup.policy": "compact"})
    with client.producer() as p:
        assert p.send(topic_name, b"v", key=b"k").result(timeout=30).offset == 0
        keyless = p.send(topic_name, b"no key")
        with pytest.raises(InvalidRecordError, match="without a key") as e:
            keyless.result(timeout=30)
        assert e.value.code == 87  # INVALID_RECORD
    assert client.partition_offsets(topic_name)[0][1] == 1  # nothing of it was written
