"""The client's address as ACLs and per-address limits see it.

A dual-stack listener (``::``) reports an IPv4 client as an IPv4-mapped IPv6 address,
``::ffff:10.0.0.5``. ACL hosts and ``max.connections.per.ip.overrides`` name
``10.0.0.5``, so without this the rule would silently not apply to that client (a DENY
by host would let it in). Kafka compares ``InetAddress.getHostAddress()``, which Java
already gives in the plain IPv4 form.
"""
from __future__ import annotations

import ipaddress


def client_host(address: object) -> str:
    """``address`` as text, an IPv4-mapped IPv6 address in its plain IPv4 form."""
    text = str(address)
    if ":" not in text:
        return text  # IPv4 or a name: the common case costs no parsing
    try:
        mapped = ipaddress.IPv6Address(text).ipv4_mapped
    except ValueError:
        return text
    return str(mapped) if mapped is not None else text
