"""Which listener brokers use to reach each other, and the TLS they speak there (Kafka's settings).

``inter.broker.listener.name`` names it; else ``security.inter.broker.protocol`` names
one by its security protocol (Kafka: the listener of that name); else, when neither
is set, the listener named PLAINTEXT if there is one, and the first listener otherwise
(a broker whose only listener is SASL_SSL replicates over it). Kafka refuses to start
without such a listener; so does the broker here, with a line that says which.

On a TLS listener the follower checks the leader's certificate against that listener's
``ssl.truststore.location`` (the system's CAs without one) and its host name unless
``ssl.endpoint.identification.algorithm`` is empty, as Kafka's inter-broker client does,
and presents the listener's own keystore when the listener asks clients for one. Who
the follower is, is proven by the LOGAN-RAY-BROKER login (``broker_auth``) on any
listener, SASL ones included: ``sasl.mechanism.inter.broker.protocol`` is accepted for
Kafka's properties files but brokers need no user of their own.
"""
from __future__ import annotations

import ssl
from typing import Any, Mapping

from .listeners import Listener
from .tls import TlsConfigError


class InterBrokerConfigError(ValueError):
    """The inter-broker settings name no listener of this broker."""


def inter_broker_listener(listeners: list[Listener], settings: Any) -> str:
    """The name of the listener brokers connect to each other on (``settings``: the broker's
    ``BrokerSettings``)."""
    names = [ln.name for ln in listeners]
    named = settings.get("inter.broker.listener.name")
    protocol = settings.get("security.inter.broker.protocol") if "security.inter.broker.protocol" in settings.given \
        else None  # Kafka's default (PLAINTEXT) decides only below, by name
    if named and protocol:
        raise InterBrokerConfigError("only one of inter.broker.listener.name and security.inter.broker.protocol "
                                     "may be set")
    if named:
        if named.upper() not in names:
            raise InterBrokerConfigError(f"inter.broker.listener.name={named} is not one of the listeners "
                                         f"({', '.join(names)})")
        return named.upper()
    if protocol:
        for ln in listeners:
            if ln.name == protocol or ln.protocol == protocol:
                return ln.name
        raise InterBrokerConfigError(f"security.inter.broker.protocol={protocol}: no listener uses it "
                                     f"({', '.join(names)})")
    return "PLAINTEXT" if "PLAINTEXT" in names else names[0]


def client_context(listener: str, view: Mapping[str, Any]) -> ssl.SSLContext:
    """The TLS context a broker connects to another broker's ``listener`` with."""
    truststore = view.get("ssl.truststore.location")
    try:
        ctx = ssl.create_default_context(cafile=truststore) if truststore else ssl.create_default_context()
    except (OSError, ssl.SSLError) as e:
        raise TlsConfigError(f"listener {listener}: cannot load ssl.truststore.location {truststore}: {e}") from None
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = bool(view.get("ssl.endpoint.identification.algorithm") or "")
    if (view.get("ssl.client.auth") or "none") != "none" and view.get("ssl.keystore.location"):
        try:
            ctx.load_cert_chain(view["ssl.keystore.location"], password=view.get("ssl.key.password") or None)
        except (OSError, ssl.SSLError) as e:
            raise TlsConfigError(f"listener {listener}: cannot load ssl.keystore.location as a client "
                                 f"certificate: {e}") from None
    return ctx
