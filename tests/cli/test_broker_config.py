"""Broker settings by Kafka's names: properties files, validation, listeners."""
from __future__ import annotations

import subprocess
import sys

import pytest

from logan_ray.broker_config import BrokerConfigError, parse_properties, resolve
from logan_ray.security.listeners import ListenerConfigError, resolve_listeners


def test_properties_file_format_like_java():
    text = "# comment\n! also\n\nnum.partitions = 3\nlisteners:PLAINTEXT://:9092,\\\n    SSL://:9093\n" \
           "log.retention.hours 48\nsuper.users=User:a\\;b\n"
    assert parse_properties(text) == {"num.partitions": "3", "listeners": "PLAINTEXT://:9092,SSL://:9093",
                                      "log.retention.hours": "48", "super.users": "User:a;b"}


def test_unknown_names_are_refused_by_name():
    with pytest.raises(BrokerConfigError, match="num.partition, ssl.keystore.locaton"):
        resolve({"num.partition": "3", "ssl.keystore.locaton": "/x"})
    with pytest.raises(BrokerConfigError, match="listener.name.ssl.bogus"):
        resolve({"listener.name.ssl.bogus": "1"})


def test_values_are_typed_and_topic_synonyms_become_topic_defaults():
    s = resolve({"num.partitions": "4", "auto.create.topics.enable": "false", "log.retention.hours": "2",
                 "log.segment.bytes": "1048576", "listener.name.ssl.ssl.client.auth": "required"})
    assert s.get("num.partitions") == 4 and s.get("auto.create.topics.enable") is False
    assert s.get("replica.lag.time.max.ms") == 30000  # Kafka's default
    assert resolve({"replica.lag.time.max.ms": "5000"}).get("replica.lag.time.max.ms") == 5000
    assert s.get("offsets.topic.replication.factor") == 3  # Kafka's default (capped at the alive nodes)
    assert resolve({"offsets.topic.replication.factor": "2"}).get("offsets.topic.replication.factor") == 2
    assert s.topic_defaults == {"retention.ms": "7200000", "segment.bytes": "1048576"}
    assert s.for_listener("SSL", "ssl.client.auth") == "required"
    assert s.for_listener("SASL_SSL", "ssl.client.auth") == "none"
    for bad in ({"num.partitions": "many"}, {"ssl.client.auth": "maybe"}, {"ssl.enabled.protocols": "TLSv1"},
                {"sasl.enabled.mechanisms": "GSSAPI"}, {"log.segment.bytes": "1"}, {"ssl.keystore.type": "JKS"},
                {"replica.lag.time.max.ms": "0"}, {"offsets.topic.replication.factor": "0"}):
        with pytest.raises(BrokerConfigError):
            resolve(bad)


def test_listeners_with_protocols_and_advertised_addresses():
    ls = resolve_listeners("PLAINTEXT://127.0.0.1:9092,SSL://:9093,INTERNAL://[::1]:9094",
                           "SSL://broker.example:19093",
                           "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SASL_SSL")
    assert [(x.name, x.protocol, x.host, x.port, x.advertised_host, x.advertised_port) for x in ls] == [
        ("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092, None, None),
        ("SSL", "SSL", "0.0.0.0", 9093, "broker.example", 19093),
        ("INTERNAL", "SASL_SSL", "::1", 9094, None, None)]
    assert ls[2].tls and ls[2].sasl and not ls[0].tls
    for listeners, advertised in (("PLAINTEXT://:9092,SSL://:9092", None), ("FOO://:1", None),
                                  ("PLAINTEXT://:9092", "SSL://h:1"), ("PLAINTEXT//:9092", None)):
        with pytest.raises(ListenerConfigError):
            resolve_listeners(listeners, advertised, "PLAINTEXT:PLAINTEXT,SSL:SSL")


def test_describe_entries_name_sources_and_hide_passwords_as_kafka_does():
    from logan_ray.broker import BrokerOptions, _described

    rows = {e["name"]: e for e in _described(BrokerOptions(), BrokerOptions().resolve())}
    assert (rows["listeners"]["value"], rows["listeners"]["config_source"]) == ("PLAINTEXT://127.0.0.1:9092", 5)
    assert rows["ssl.key.password"]["is_sensitive"] and rows["ssl.key.password"]["value"] is None
    assert "super.users" not in rows and "log.dir" not in rows  # the authorizer's own: listed only when given
    flags = BrokerOptions(host="0.0.0.0", port=19092, advertised_host="broker1")
    rows = {e["name"]: e for e in _described(flags, flags.resolve())}
    assert (rows["listeners"]["value"], rows["listeners"]["config_source"]) == ("PLAINTEXT://0.0.0.0:19092", 4)
    assert rows["advertised.listeners"]["value"] == "PLAINTEXT://broker1:19092"
    secret = BrokerOptions(config={"listeners": "SSL://:9093", "ssl.key.password": "s3"})
    rows = {e["name"]: e for e in _described(secret, secret.resolve())}
    assert (rows["listeners"]["value"], rows["listeners"]["config_source"]) == ("SSL://:9093", 4)
    assert rows["ssl.key.password"] == {**rows["ssl.key.password"], "value": None, "is_sensitive": True,
                                        "config_source": 4, "config_type": 9}
    assert "s3" not in repr(rows)


def test_cli_start_refuses_unknown_settings_in_one_line(tmp_path):
    props = tmp_path / "server.properties"
    props.write_text("num.partitions=2\nlog.retention.hourz=5\n")
    r = subprocess.run([sys.executable, "-m", "logan_ray.cli", "--data-dir", str(tmp_path / "d"), "start",
                        "--foreground", "--config-file", str(props), "--config", "bogus.name=1"],
                       capture_output=True, timeout=60)
    assert r.returncode == 1
    err = r.stderr.decode().strip()
    assert err.count("\n") == 0 and "bogus.name" in err and "log.retention.hourz" in err
