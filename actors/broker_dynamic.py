"""Dynamic broker and group configs: Kafka's (Incremental)AlterConfigs on BROKER and GROUP resources.

Kafka keeps dynamic broker configs at two levels: per broker (resource name = the
broker id) and the cluster-wide default (resource name ""). A broker runs with the
per-broker value, else the cluster default, else its static setting (``--config`` /
``server.properties``), else Kafka's default. Each dynamic name has an update mode:
"per-broker" names may be set only with a broker id, "cluster-wide" names at either
level. Names that are not dynamic are refused (INVALID_REQUEST "Cannot update these
configs dynamically", checked by the gateway, which knows the static names).

The values live in the router's metadata file (written atomically, like topics), so
they survive restarts, and the router applies them: ``producer.id.expiration.ms``
goes to every partition actor (now and at each start, see ``open_partition``), the
cluster-default ``log.*`` topic defaults become the topic defaults of every topic
without an override. Names logan-ray has no feature for (Kerberos, Kafka's thread
pools) are stored and reported as Kafka does, with no effect.

Group configs (KIP-848's GROUP resource) are stored per group the same way; they
shape only consumer-protocol groups in Kafka, which logan-ray does not serve, so
they are stored and reported.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, NamedTuple

from logan_ray.common.errors import InvalidRequestError
from logan_ray.storage.config import BROKER_TOPIC_SYNONYMS, INT_MAX, LONG_MAX, TopicConfig
from logan_ray.storage.errors import InvalidConfigError

from .names import broker_id

log = logging.getLogger("logan_ray.router")

PER_BROKER, CLUSTER_WIDE = "per-broker", "cluster-wide"
#: IncrementalAlterConfigs operations.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
#: DescribeConfigs config_type ids.
INT, LONG, LIST = 3, 5, 7
PRODUCER_ID_EXPIRATION = "producer.id.expiration.ms"
DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000
DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_MS = 600_000


def _whole(low: int, high: int) -> Callable[[str, str], str]:
    def parse(name: str, value: str) -> str:
        try:
            n = int(str(value).strip())
        except ValueError:
            raise InvalidRequestError(f"Invalid value {value} for configuration {name}: Not a number") from None
        if not low <= n <= high:
            raise InvalidRequestError(f"Invalid value {value} for configuration {name}: must be in [{low}, {high}]")
        return str(n)
    return parse


def _topic_default(name: str, value: str) -> str:
    topic_name = BROKER_TOPIC_SYNONYMS[name]
    try:
        return TopicConfig.from_dict({topic_name: value}).to_dict()[topic_name]
    except InvalidConfigError as e:
        raise InvalidRequestError(f"Invalid value {value} for configuration {name}: {e}") from None


class Dynamic(NamedTuple):
    mode: str
    kafka_type: int  # DescribeConfigs config_type (0: as the topic config's)
    default: str | None
    parse: Callable[[str, str], str]  # canonical value, or InvalidRequestError as Kafka answers
    doc: str


#: The broker configs that can change while logan-ray runs, with Kafka's update modes.
DYNAMIC: dict[str, Dynamic] = {
    PRODUCER_ID_EXPIRATION: Dynamic(CLUSTER_WIDE, INT, str(DEFAULT_PRODUCER_ID_EXPIRATION_MS), _whole(1, INT_MAX),
                                    "an idempotent producer idle this long is forgotten by each partition"),
    "background.threads": Dynamic(CLUSTER_WIDE, INT, "10", _whole(1, INT_MAX),
                                  "stored and reported; logan-ray has no such thread pool"),
    "sasl.kerberos.min.time.before.relogin": Dynamic(PER_BROKER, LONG, "60000", _whole(-(LONG_MAX + 1), LONG_MAX),
                                                     "stored and reported; logan-ray offers no Kerberos"),
    **{name: Dynamic(CLUSTER_WIDE, LIST if topic_name == "cleanup.policy" else 0, None, _topic_default,
                     f"default of the topic config {topic_name}")
       for name, topic_name in BROKER_TOPIC_SYNONYMS.items()},
}

#: Kafka's group configs (GroupConfig) with their defaults and the broker's bounds.
GROUP_CONFIGS: dict[str, tuple[str, Callable[[str, str], str]]] = {
    "consumer.session.timeout.ms": ("45000", _whole(45000, 60000)),
    "consumer.heartbeat.interval.ms": ("5000", _whole(5000, 15000)),
}


def apply_ops(current: dict[str, str], ops: list[tuple[int, str, str | None]], incremental: bool,
              base: Callable[[str], str | None]) -> dict[str, str]:
    """The configs of one resource after (Incremental)AlterConfigs' operations: non-incremental
    replaces them all; APPEND/SUBTRACT work on the list value in force (``base``)."""
    out = dict(current) if incremental else {}
    for op, name, value in ops:
        if not incremental or op == SET:
            if value is None:
                out.pop(name, None)
            else:
                out[name] = value
        elif op == DELETE:
            out.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            now = out.get(name, base(name)) or ""
            items = [x.strip() for x in now.split(",") if x.strip()]
            given = [x.strip() for x in (value or "").split(",") if x.strip()]
            items = items + [x for x in given if x not in items] if op == APPEND else \
                [x for x in items if x not in given]
            out[name] = ",".join(items)
        else:
            raise InvalidRequestError(f"unknown config operation {op}")
    return out


class DynamicConfigs:
    """Mixed into RouterActor: uses its ``_meta``, ``_save``, ``_lock``, ``_handles``, ``topic_defaults``
    and ``_push_configs``."""

    _meta: dict[str, Any]
    topic_defaults: dict[str, str]

    def _init_dynamic(self, static: dict[str, int | None]) -> None:
        """After the metadata is loaded: remember the static settings and apply the saved dynamic ones."""
        self._static_broker = {k: str(v) for k, v in static.items() if v is not None}
        self._static_topic_defaults = dict(self.topic_defaults)
        self._apply_topic_defaults()

    def _levels(self) -> dict[str, dict[str, str]]:
        return self._meta.setdefault("broker_configs", {})

    def _broker_value(self, name: str, broker: str) -> str | None:
        levels = self._levels()
        for value in (levels.get(broker, {}).get(name), levels.get("", {}).get(name), self._static_broker.get(name)):
            if value is not None:
                return value
        spec = DYNAMIC.get(name)
        return spec.default if spec else None

    def _in_force(self, name: str, broker: str) -> str | None:
        """The value ``name`` has now at ``broker``'s level (what APPEND and SUBTRACT start from)."""
        if name in BROKER_TOPIC_SYNONYMS:
            return self._levels().get("", {}).get(name) or self.topic_defaults.get(BROKER_TOPIC_SYNONYMS[name])
        return self._broker_value(name, broker)

    def _apply_topic_defaults(self) -> bool:
        """Topic defaults = static ones + the cluster-default ``log.*`` names; True when they changed."""
        dynamic = {BROKER_TOPIC_SYNONYMS[k]: v for k, v in self._levels().get("", {}).items() if k in BROKER_TOPIC_SYNONYMS}
        new = TopicConfig.from_dict({**self._static_topic_defaults, **dynamic}).to_dict()
        changed, self.topic_defaults = new != self.topic_defaults, new
        return changed

    def _producer_settings(self, node_id: str) -> dict[str, int]:
        """``producer.id.expiration.*`` for a partition on ``node_id`` (given to it at every start)."""
        return {"producer_id_expiration_ms": int(self._broker_value(PRODUCER_ID_EXPIRATION, str(broker_id(node_id)))),
                "producer_id_expiration_check_interval_ms": int(self._static_broker.get(
                    "producer.id.expiration.check.interval.ms", DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_MS))}

    async def broker_configs(self, broker: str) -> dict[str, dict[str, str]]:
        """The dynamic configs that concern ``broker`` ("" = the cluster default level only)."""
        levels = self._levels()
        return {"broker": dict(levels.get(broker, {})) if broker else {}, "default": dict(levels.get("", {}))}

    async def alter_broker_configs(self, broker: str, ops: list[tuple[int, str, str | None]], incremental: bool = True,
                                   validate_only: bool = False) -> dict[str, str]:
        """Apply (Incremental)AlterConfigs to one level ("" or a broker id); saved before it takes effect."""
        if broker and not broker.isdigit():
            raise InvalidRequestError(f"broker id must be a number or empty, got {broker!r}")
        unknown = sorted({name for _op, name, _v in ops if name not in DYNAMIC})
        if unknown:
            raise InvalidRequestError(f"Cannot update these configs dynamically: {', '.join(unknown)} "
                                      "(not a dynamic broker config logan-ray knows)")
        if not broker:
            per_broker = sorted({name for _op, name, _v in ops if DYNAMIC[name].mode == PER_BROKER})
            if per_broker:
                raise InvalidRequestError("Cannot update these configs at default cluster level, broker id must be "
                                          f"specified: {', '.join(per_broker)}")
        elif any(name in BROKER_TOPIC_SYNONYMS for _op, name, _v in ops):
            raise InvalidRequestError("logan-ray keeps one set of topic defaults for the cluster: set log.* and the "
                                      "other topic defaults at the cluster default level (empty broker name)")
        async with self._lock:
            current = self._levels().get(broker, {})
            wanted = apply_ops(current, ops, incremental, lambda n: self._in_force(n, broker))
            wanted = {name: DYNAMIC[name].parse(name, value) for name, value in wanted.items()}
            if not broker:  # the topic defaults that result must hold together
                dynamic = {BROKER_TOPIC_SYNONYMS[k]: v for k, v in wanted.items() if k in BROKER_TOPIC_SYNONYMS}
                try:
                    TopicConfig.from_dict({**self._static_topic_defaults, **dynamic})
                except InvalidConfigError as e:
                    raise InvalidRequestError(str(e)) from None
            if validate_only:
                return wanted
            if wanted:
                self._levels()[broker] = wanted
            else:
                self._levels().pop(broker, None)
            self._save()
            log.info("dynamic broker configs of %s: %s", broker or "the cluster default", wanted)
        if self._apply_topic_defaults():
            self._push_configs()
        await self._push_producer_settings()
        return wanted

    async def set_producer_expiration_check_interval_ms(self, interval_ms: int) -> int:
        """Change ``producer.id.expiration.check.interval.ms`` while the broker runs (read-only in Kafka;
        tests shorten it). Not saved: the broker setting wins at the next start. Returns the previous value."""
        key = "producer.id.expiration.check.interval.ms"
        previous = int(self._static_broker.get(key, DEFAULT_PRODUCER_ID_EXPIRATION_CHECK_MS))
        self._static_broker[key] = str(int(interval_ms))
        await self._push_producer_settings()
        return previous

    async def _push_producer_settings(self) -> None:
        calls = []
        for (topic, p), handle in list(self._handles.items()):
            node = self._meta["topics"].get(topic, {}).get("placement", {}).get(str(p), {}).get("node_id")
            if node:
                calls.append(handle.set_producer_expiration.remote(**self._producer_settings(node)))
        await asyncio.gather(*calls, return_exceptions=True)

    # ------------------------------------------------------------------ groups
    async def group_configs(self, group: str) -> dict[str, str]:
        return dict(self._meta.get("group_configs", {}).get(group, {}))

    async def alter_group_configs(self, group: str, ops: list[tuple[int, str, str | None]], incremental: bool = True,
                                  validate_only: bool = False) -> dict[str, str]:
        unknown = sorted({name for _op, name, _v in ops if name not in GROUP_CONFIGS})
        if unknown:
            raise InvalidConfigError(f"Unknown group config name: {', '.join(unknown)}")
        async with self._lock:
            store = self._meta.setdefault("group_configs", {})
            wanted = apply_ops(store.get(group, {}), ops, incremental, lambda n: GROUP_CONFIGS[n][0])
            try:
                wanted = {name: GROUP_CONFIGS[name][1](name, value) for name, value in wanted.items()}
            except InvalidRequestError as e:
                raise InvalidConfigError(str(e)) from None
            if validate_only:
                return wanted
            if wanted:
                store[group] = wanted
            else:
                store.pop(group, None)
            self._save()
        return wanted
