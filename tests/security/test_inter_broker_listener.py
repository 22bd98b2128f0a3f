"""Which listener brokers replicate over: Kafka's inter-broker settings (security/inter_broker.py)."""
from __future__ import annotations

import pytest

from logan_ray.broker_config import resolve
from logan_ray.security.inter_broker import InterBrokerConfigError, inter_broker_listener
from logan_ray.security.listeners import resolve_listeners


def chosen(**given: str) -> str:
    settings = resolve({k.replace("_", "."): v for k, v in given.items()})
    listeners = resolve_listeners(settings.get("listeners"), settings.get("advertised.listeners"),
                                  settings.get("listener.security.protocol.map"))
    return inter_broker_listener(listeners, settings)


def test_inter_broker_listener_name_picks_the_listener():
    assert chosen(listeners="PLAINTEXT://:9092,SASL_SSL://:9093", inter_broker_listener_name="sasl_ssl") == "SASL_SSL"


def test_security_inter_broker_protocol_picks_the_listener_of_that_protocol():
    assert chosen(listeners="PLAINTEXT://:9092,INTERNAL://:9093",
                  listener_security_protocol_map="PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
                  security_inter_broker_protocol="SSL") == "INTERNAL"


def test_by_default_the_plaintext_listener_else_the_first():
    assert chosen(listeners="SASL_SSL://:9093,PLAINTEXT://:9092") == "PLAINTEXT"
    assert chosen(listeners="SASL_SSL://:9093") == "SASL_SSL"


def test_a_name_or_protocol_no_listener_has_is_refused_with_what_there_is():
    with pytest.raises(InterBrokerConfigError, match="REPLICATION is not one of the listeners"):
        chosen(listeners="PLAINTEXT://:9092", inter_broker_listener_name="REPLICATION")
    with pytest.raises(InterBrokerConfigError, match="no listener uses it"):
        chosen(listeners="PLAINTEXT://:9092", security_inter_broker_protocol="SASL_SSL")
    with pytest.raises(InterBrokerConfigError, match="only one of"):
        chosen(listeners="PLAINTEXT://:9092", inter_broker_listener_name="PLAINTEXT",
               security_inter_broker_protocol="PLAINTEXT")
