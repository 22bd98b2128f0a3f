"""Client quota configuration (KIP-13, KIP-55, KIP-546): entities, keys, validation and matching.

A quota entity is a user, a client id, or a user and a client id; either name may be
Kafka's default (``None`` here, ``<default>`` in Kafka's ZooKeeper paths). A client's
quota of each type comes from the most specific entity that sets that type, in
Kafka's order (docs "Quotas", KIP-55):

    /config/users/<user>/clients/<client-id>
    /config/users/<user>/clients/<default>
    /config/users/<user>
    /config/users/<default>/clients/<client-id>
    /config/users/<default>/clients/<default>
    /config/users/<default>
    /config/clients/<client-id>
    /config/clients/<default>

The bytes are counted per *bucket*: the entity's parts that are set, with the
client's own names in place of defaults (Kafka's DefaultQuotaCallback metric tags),
so ``users/<default>`` gives every user its own rate, never one shared by all.
Pure data and rules: no I/O; the router stores the entries, the gateway enforces them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Optional

USER, CLIENT_ID, IP = "user", "client-id", "ip"
PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
#: the keys Kafka accepts for user and client-id entities, with their types (QuotaConfig)
KEYS = {PRODUCER_BYTE_RATE: int, CONSUMER_BYTE_RATE: int, REQUEST_PERCENTAGE: float,
        CONTROLLER_MUTATION_RATE: float}
#: DescribeClientQuotas match types
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

#: an entity as stored: ((entity type, name or None for the default), ...) sorted by type
Entity = tuple[tuple[str, Optional[str]], ...]


class QuotaError(ValueError):
    """An entity, key or value Kafka refuses (answered INVALID_REQUEST on the wire)."""


def entity(parts: Iterable[tuple[str, Optional[str]]]) -> Entity:
    """A checked, canonical entity from (type, name) pairs, as AlterClientQuotas sends them."""
    pairs = list(parts)
    if not pairs:
        raise QuotaError("Invalid empty client quota entity")
    seen: set[str] = set()
    for etype, name in pairs:
        if etype in seen:
            raise QuotaError(f"Duplicate {etype} entity in client quota entity")
        seen.add(etype)
        if etype == IP:
            raise QuotaError("ip quotas (connection_creation_rate, KIP-612) are not supported by logan-ray")
        if etype not in (USER, CLIENT_ID):
            raise QuotaError(f"Unknown client quota entity type: {etype}")
        if name is not None and not name and etype == USER:
            raise QuotaError("Invalid empty user name in client quota entity")
    return tuple(sorted((t, n) for t, n in pairs))


def check_value(key: str, value: float) -> float | int:
    """A quota value as Kafka types it (byte rates are whole numbers), or QuotaError."""
    kind = KEYS.get(key)
    if kind is None:
        raise QuotaError(f"Unknown client quota key: {key}")
    if value != value or value <= 0:  # NaN or not positive
        raise QuotaError(f"Invalid value {value} for {key}: it must be positive")
    if kind is int:
        if abs(round(value) - value) > 1e-6:
            raise QuotaError(f"Configuration {key} must be a Long value")
        return int(round(value))
    return float(value)


def describe_entity(e: Entity) -> str:
    """Kafka's path spelling, e.g. ``users/alice/clients/<default>`` (CLI and messages)."""
    names = dict(e)
    out = []
    if USER in names:
        out.append(f"users/{names[USER] if names[USER] is not None else '<default>'}")
    if CLIENT_ID in names:
        out.append(f"clients/{names[CLIENT_ID] if names[CLIENT_ID] is not None else '<default>'}")
    return "/".join(out)


#: Kafka's precedence as (user part, client part): "name" the client's own, "default", or absent (None)
_PRECEDENCE = (("name", "name"), ("name", "default"), ("name", None), ("default", "name"),
               ("default", "default"), ("default", None), (None, "name"), (None, "default"))


@dataclass(frozen=True)
class Limit:
    """A quota that applies: its bound and the bucket its bytes are counted in."""
    bound: float
    bucket: tuple[str, str]
    entity: Entity


class QuotaTable:
    """Every configured entity's values; answers which limit of a type applies to (user, client id)."""

    def __init__(self, entries: Iterable[tuple[Entity, dict[str, Any]]] = ()) -> None:
        self.entries: dict[Entity, dict[str, Any]] = {tuple(sorted(map(tuple, e))): dict(v) for e, v in entries if v}

    def __bool__(self) -> bool:
        return bool(self.entries)

    def limit(self, key: str, user: str, client_id: str) -> Limit | None:
        for user_part, client_part in _PRECEDENCE:
            parts = []
            if user_part is not None:
                parts.append((USER, user if user_part == "name" else None))
            if client_part is not None:
                parts.append((CLIENT_ID, client_id if client_part == "name" else None))
            e: Entity = tuple(sorted(parts))
            values = self.entries.get(e)
            if values and key in values:
                bucket = (user if user_part else "", client_id if client_part else "")
                return Limit(float(values[key]), bucket, e)
        return None

    def matching(self, components: list[tuple[str, int, Optional[str]]], strict: bool) -> list[tuple[Entity, dict]]:
        """DescribeClientQuotas: the entries matching every filter component (and no other type when strict)."""
        checked: dict[str, tuple[int, Optional[str]]] = {}
        for etype, match_type, match in components:
            if etype in checked:
                raise QuotaError(f"Duplicate {etype} filter component entity type")
            if match_type == MATCH_EXACT and match is None:
                raise QuotaError(f"Filter component for {etype} has exact match type but no match name")
            if match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
                raise QuotaError(f"Unknown match type {match_type}")
            checked[etype] = (match_type, match)
        out = []
        for e, values in sorted(self.entries.items(), key=lambda kv: describe_entity(kv[0])):
            names = dict(e)
            if strict and set(names) != set(checked):
                continue
            ok = True
            for etype, (match_type, match) in checked.items():
                if etype not in names:
                    ok = False
                elif match_type == MATCH_EXACT:
                    ok = names[etype] == match
                elif match_type == MATCH_DEFAULT:
                    ok = names[etype] is None
                else:
                    ok = names[etype] is not None
                if not ok:
                    break
            if ok:
                out.append((e, dict(values)))
        return out
