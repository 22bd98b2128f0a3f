"""Dynamic broker and group configs through a real client: Kafka's levels, sources, errors, and durability."""
from __future__ import annotations

import json
import os

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource
from wire_client import Wire

BROKER, GROUP, TOPIC = ConfigResource.Type.BROKER, ConfigResource.Type.GROUP, ConfigResource.Type.TOPIC


def alter(admin: AdminClient, rtype, name: str, *ops: tuple[str, str | None, AlterConfigOpType],
          direct: bool = False) -> None:
    """``direct``: on the raw wire (confluent-kafka refuses an empty resource name, and sends a broker
    resource only to that broker)."""
    if direct or not name:
        [result] = raw(admin, 44, 0, {"resources": [{"resource_type": 4, "resource_name": name, "configs": [
            {"name": k, "config_operation": op.value, "value": v} for k, v, op in ops]}], "validate_only": False}
                       )["responses"]
        if result["error_code"]:
            raise KafkaException(KafkaError(result["error_code"], result["error_message"]))
        return
    resource = ConfigResource(rtype, name, incremental_configs=[
        ConfigEntry(k, v, incremental_operation=op) for k, v, op in ops])
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def raw(admin: AdminClient, api_key: int, version: int, body: dict) -> dict:
    with Wire(admin.bootstrap) as wire:
        return wire.call(api_key, version, body)


def describe(admin: AdminClient, rtype, name: str) -> dict:
    if not name:
        [result] = raw(admin, 32, 1, {"resources": [{"resource_type": 4, "resource_name": "", "configuration_keys": None}],
                                      "include_synonyms": False})["results"]
        return {e["name"]: e["value"] for e in result["configs"]}
    resource = ConfigResource(rtype, name)
    return admin.describe_configs([resource])[resource].result(timeout=30)


def refused(admin: AdminClient, rtype, name: str, *ops, direct: bool = False) -> KafkaError:
    with pytest.raises(KafkaException) as e:
        alter(admin, rtype, name, *ops, direct=direct)
    return e.value.args[0]


def test_dynamic_broker_configs_have_kafkas_levels_sources_and_errors_and_are_saved(gateway, client, broker_dir,
                                                                                     topic_name):
    admin = AdminClient({"bootstrap.servers": gateway})
    admin.bootstrap = gateway
    me = str(next(iter(admin.list_topics(timeout=20).brokers)))
    SET, DELETE, APPEND = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND
    client.create_topic(topic_name, 1)
    try:
        alter(admin, BROKER, "", ("producer.id.expiration.ms", "3600000", SET), ("log.retention.ms", "123456", SET))
        alter(admin, BROKER, me, ("sasl.kerberos.min.time.before.relogin", "58000", SET),
              ("producer.id.expiration.ms", "7200000", SET))
        got = describe(admin, BROKER, me)
        assert (got["producer.id.expiration.ms"].value, got["producer.id.expiration.ms"].source) == (
            "7200000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)  # per broker wins over the cluster default
        assert (got["log.retention.ms"].value, got["log.retention.ms"].source) == (
            "123456", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
        assert not got["producer.id.expiration.ms"].is_read_only and got["num.partitions"].is_read_only
        assert describe(admin, BROKER, "") == {
            "producer.id.expiration.ms": "3600000", "log.retention.ms": "123456"}
        # a cluster-default log.* setting is the default of every topic without an override
        assert describe(admin, TOPIC, topic_name)["retention.ms"].value == "123456"
        alter(admin, BROKER, "", ("log.cleanup.policy", "compact", APPEND))
        assert set(describe(admin, TOPIC, topic_name)["cleanup.policy"].value.split(",")) == {"delete", "compact"}
        # saved in the router's metadata before it took effect
        with open(os.path.join(broker_dir, "cluster-metadata.json")) as f:
            saved = json.load(f)["broker_configs"]
        assert saved[""]["log.retention.ms"] == "123456" and saved[me]["producer.id.expiration.ms"] == "7200000"
        # Kafka's errors: read-only names, per-broker names at the default level, bad values, another broker
        for err in (refused(admin, BROKER, me, ("num.partitions", "3", SET)),
                    refused(admin, BROKER, "", ("sasl.kerberos.min.time.before.relogin", "1", SET)),
                    refused(admin, BROKER, "", ("producer.id.expiration.ms", "0", SET)),
                    refused(admin, BROKER, str(int(me) + 1), ("background.threads", "9", SET), direct=True)):
            assert err.code() == KafkaError.INVALID_REQUEST, err
        assert "num.partitions" in refused(admin, BROKER, me, ("num.partitions", "3", SET)).str()
        # group configs (KIP-848's GROUP resource): stored, described, bounded as Kafka bounds them
        alter(admin, GROUP, "my-group", ("consumer.session.timeout.ms", "50000", SET))
        assert describe(admin, GROUP, "my-group")["consumer.session.timeout.ms"].value == "50000"
        assert refused(admin, GROUP, "my-group", ("consumer.session.timeout.ms", "1", SET)).code() == \
            KafkaError.INVALID_CONFIG
    finally:
        alter(admin, BROKER, "", ("producer.id.expiration.ms", None, DELETE), ("log.retention.ms", None, DELETE),
              ("log.cleanup.policy", None, DELETE))
        alter(admin, BROKER, me, ("sasl.kerberos.min.time.before.relogin", None, DELETE),
              ("producer.id.expiration.ms", None, DELETE))
    assert describe(admin, BROKER, "") == {}
    assert describe(admin, TOPIC, topic_name)["retention.ms"].value == "604800000"
