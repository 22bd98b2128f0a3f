"""Kafka's listeners: ``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map``.

A listener is a name (PLAINTEXT, SSL, INTERNAL...), the security protocol the map
gives that name, and where it binds and what clients are told. Several listeners
serve the same broker on different ports; a client learns, in Metadata, the
brokers' addresses on the listener it connected to (as Kafka does).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_ENDPOINT = re.compile(r"([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:\[\]]*):(\d+)")  # fullmatch, never "$"


class ListenerConfigError(ValueError):
    """listeners / advertised.listeners / listener.security.protocol.map do not fit together."""


@dataclass(frozen=True)
class Listener:
    name: str  # upper case, as Kafka normalises it
    protocol: str
    host: str  # bind address; "0.0.0.0" for all interfaces
    port: int
    advertised_host: str | None = None  # None: the bound address (or the node's address for 0.0.0.0)
    advertised_port: int | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "protocol": self.protocol, "host": self.host, "port": self.port,
                "advertised_host": self.advertised_host, "advertised_port": self.advertised_port}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Listener":
        return cls(**d)


def parse_endpoints(value: str, setting: str) -> list[tuple[str, str, int]]:
    """"NAME://HOST:PORT,..." -> [(NAME, host, port)]; an empty host means every interface."""
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        m = _ENDPOINT.fullmatch(item)
        if not m:
            raise ListenerConfigError(f"{setting}: {item!r} is not NAME://HOST:PORT")
        host = m.group(2)
        if host.startswith("["):
            host = host[1:-1]
        port = int(m.group(3))
        if port > 65535:
            raise ListenerConfigError(f"{setting}: port {port} of {item!r} is out of range")
        out.append((m.group(1).upper(), host, port))
    names = [n for n, _, _ in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ListenerConfigError(f"{setting}: listener name {dup[0]} appears more than once")
    return out


def parse_protocol_map(value: str) -> dict[str, str]:
    out = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name, sep, proto = item.partition(":")
        proto = proto.strip().upper()
        if not sep or proto not in PROTOCOLS:
            raise ListenerConfigError(f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL with PROTOCOL "
                                      f"one of {', '.join(PROTOCOLS)}")
        out[name.strip().upper()] = proto
    return out


def resolve_listeners(listeners: str, advertised: str | None, protocol_map: str) -> list[Listener]:
    """The listeners a gateway serves, validated as Kafka validates them."""
    protocols = parse_protocol_map(protocol_map)
    bound = parse_endpoints(listeners, "listeners")
    if not bound:
        raise ListenerConfigError("listeners: at least one listener is needed")
    ports = [p for _, _, p in bound if p != 0]
    if len(ports) != len(set(ports)):
        raise ListenerConfigError(f"listeners: two listeners on the same port in {listeners!r}")
    told = {n: (h, p) for n, h, p in parse_endpoints(advertised, "advertised.listeners")} if advertised else {}
    extra = sorted(set(told) - {n for n, _, _ in bound})
    if extra:
        raise ListenerConfigError(f"advertised.listeners: {extra[0]} is not one of the listeners")
    out = []
    for name, host, port in bound:
        proto = protocols.get(name)
        if proto is None:
            raise ListenerConfigError(f"listener {name} has no security protocol in listener.security.protocol.map")
        adv_host, adv_port = told.get(name, (None, None))
        if adv_port == 0:
            raise ListenerConfigError(f"advertised.listeners: {name} advertises port 0")
        out.append(Listener(name, proto, host or "0.0.0.0", port, adv_host or None, adv_port))
    return out


def default_listener(listeners: list[Listener]) -> Listener:
    """The listener the Python API and the runtime file's "kafka" entry name: the first one."""
    return listeners[0]
