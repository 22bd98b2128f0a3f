"""Per-topic configuration with Kafka's names, types, ranges and defaults.

Kafka clients send topic configs as strings (CreateTopics, AlterConfigs) and
expect them back as strings (DescribeConfigs), so parsing, validation and
rendering live together here and every broker path shares one definition.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Iterable, Mapping, NamedTuple

from .errors import InvalidConfigError

LONG_MAX = 9223372036854775807
LONG_MIN = -9223372036854775808
INT_MAX = 2147483647
INT_MIN = -2147483648

CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"


#: Kafka's broker-level defaults for topic configs (ServerTopicConfigSynonyms): broker name -> topic name.
BROKER_TOPIC_SYNONYMS: dict[str, str] = {
    "log.segment.bytes": "segment.bytes",
    "log.roll.ms": "segment.ms",
    "log.roll.jitter.ms": "segment.jitter.ms",
    "log.index.size.max.bytes": "segment.index.bytes",
    "log.flush.interval.messages": "flush.messages",
    "log.flush.interval.ms": "flush.ms",
    "log.retention.bytes": "retention.bytes",
    "log.retention.ms": "retention.ms",
    "message.max.bytes": "max.message.bytes",
    "log.index.interval.bytes": "index.interval.bytes",
    "log.cleaner.delete.retention.ms": "delete.retention.ms",
    "log.cleaner.min.compaction.lag.ms": "min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms": "max.compaction.lag.ms",
    "log.segment.delete.delay.ms": "file.delete.delay.ms",
    "log.cleaner.min.cleanable.ratio": "min.cleanable.dirty.ratio",
    "log.cleanup.policy": "cleanup.policy",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "min.insync.replicas": "min.insync.replicas",
    "compression.type": "compression.type",
    "log.preallocate": "preallocate",
    "log.message.timestamp.type": "message.timestamp.type",
}


class _Spec(NamedTuple):
    attr: str
    kind: str  # "int", "long", "double", "bool", "choice", "string", "timestamp_type", "cleanup_policy"
    default: Any
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[Any, ...] = ()  # "choice": the legal strings; "int": extra legal values outside the range


_COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


# Ranges follow Kafka's TopicConfig/LogConfig validators.
_SPECS: dict[str, _Spec] = {
    "segment.bytes": _Spec("segment_bytes", "int", 1073741824, 14, INT_MAX),
    "segment.ms": _Spec("segment_ms", "long", 604800000, 1, LONG_MAX),
    "retention.ms": _Spec("retention_ms", "long", 604800000, -1, LONG_MAX),
    "retention.bytes": _Spec("retention_bytes", "long", -1, -1, LONG_MAX),
    "index.interval.bytes": _Spec("index_interval_bytes", "int", 4096, 0, INT_MAX),
    "segment.index.bytes": _Spec("segment_index_bytes", "int", 10485760, 4, INT_MAX),
    "max.message.bytes": _Spec("max_message_bytes", "int", 1048588, 0, INT_MAX),
    "message.timestamp.type": _Spec("message_timestamp_type", "timestamp_type", CREATE_TIME),
    "cleanup.policy": _Spec("cleanup_policy", "cleanup_policy", "delete"),
    "flush.messages": _Spec("flush_messages", "long", LONG_MAX, 1, LONG_MAX),
    "flush.ms": _Spec("flush_ms", "long", LONG_MAX, 0, LONG_MAX),
    "min.insync.replicas": _Spec("min_insync_replicas", "int", 1, 1, INT_MAX),
    "delete.retention.ms": _Spec("delete_retention_ms", "long", 86400000, 0, LONG_MAX),
    "min.cleanable.dirty.ratio": _Spec("min_cleanable_dirty_ratio", "double", 0.5, 0.0, 1.0),
    "min.compaction.lag.ms": _Spec("min_compaction_lag_ms", "long", 0, 0, LONG_MAX),
    "file.delete.delay.ms": _Spec("file_delete_delay_ms", "long", 60000, 0, LONG_MAX),
    # Kafka's other topic-level configs (TopicConfig / LogConfig). Accepted, validated, stored
    # and reported with Kafka's defaults; logan-ray does not act on these yet (one replica,
    # no tiered storage, batches stored as the producer compressed them).
    "segment.jitter.ms": _Spec("segment_jitter_ms", "long", 0, 0, LONG_MAX),
    "max.compaction.lag.ms": _Spec("max_compaction_lag_ms", "long", LONG_MAX, 1, LONG_MAX),
    "unclean.leader.election.enable": _Spec("unclean_leader_election_enable", "bool", False),
    "compression.type": _Spec("compression_type", "choice", "producer", choices=_COMPRESSION_TYPES),
    "compression.gzip.level": _Spec("compression_gzip_level", "int", -1, 1, 9, choices=(-1,)),
    "compression.lz4.level": _Spec("compression_lz4_level", "int", 9, 1, 17),
    "compression.zstd.level": _Spec("compression_zstd_level", "int", 3, -131072, 22),
    "preallocate": _Spec("preallocate", "bool", False),
    "message.format.version": _Spec("message_format_version", "string", "3.0-IV1"),
    "message.timestamp.difference.max.ms": _Spec("message_timestamp_difference_max_ms", "long", LONG_MAX, 0,
                                                 LONG_MAX),
    "message.timestamp.before.max.ms": _Spec("message_timestamp_before_max_ms", "long", LONG_MAX, 0, LONG_MAX),
    "message.timestamp.after.max.ms": _Spec("message_timestamp_after_max_ms", "long", LONG_MAX, 0, LONG_MAX),
    "message.downconversion.enable": _Spec("message_downconversion_enable", "bool", True),
    "leader.replication.throttled.replicas": _Spec("leader_replication_throttled_replicas", "string", ""),
    "follower.replication.throttled.replicas": _Spec("follower_replication_throttled_replicas", "string", ""),
    # Tiered storage is not offered: only the "off" values are accepted, as a Kafka broker
    # without remote storage answers INVALID_CONFIG to remote.storage.enable=true.
    "remote.storage.enable": _Spec("remote_storage_enable", "bool", False, choices=(False,)),
    "local.retention.ms": _Spec("local_retention_ms", "long", -2, -2, LONG_MAX),
    "local.retention.bytes": _Spec("local_retention_bytes", "long", -2, -2, LONG_MAX),
    "remote.log.copy.disable": _Spec("remote_log_copy_disable", "bool", False),
    "remote.log.delete.on.disable": _Spec("remote_log_delete_on_disable", "bool", False),
}

CONFIG_NAMES: tuple[str, ...] = tuple(_SPECS)
_ATTR_TO_NAME = {spec.attr: name for name, spec in _SPECS.items()}


class ConfigEntry(NamedTuple):
    """One DescribeConfigs row."""

    name: str
    value: str
    is_default: bool


def _bad(name: str, value: Any, why: str) -> InvalidConfigError:
    return InvalidConfigError(f"invalid value {value!r} for topic config {name!r}: {why}")


def _parse_integer(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise _bad(name, value, "expected an integer, got a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        digits = text[1:] if text[:1] in "+-" else text
        if digits.isascii() and digits.isdigit():
            return int(text)
        raise _bad(name, value, "expected an integer")
    raise _bad(name, value, f"expected an integer or a string, got {type(value).__name__}")


def _parse_double(name: str, value: Any) -> float:
    if isinstance(value, bool):
        raise _bad(name, value, "expected a number, got a boolean")
    if isinstance(value, (int, float)):
        result = float(value)
    elif isinstance(value, str):
        try:
            result = float(value.strip())
        except ValueError:
            raise _bad(name, value, "expected a number") from None
    else:
        raise _bad(name, value, f"expected a number or a string, got {type(value).__name__}")
    if not math.isfinite(result):
        raise _bad(name, value, "expected a finite number")
    return result


def _parse_timestamp_type(name: str, value: Any) -> str:
    if isinstance(value, str):
        for choice in (CREATE_TIME, LOG_APPEND_TIME):
            if value.strip() == choice:
                return choice
    raise _bad(name, value, f"must be {CREATE_TIME!r} or {LOG_APPEND_TIME!r}")


def _parse_cleanup_policy(name: str, value: Any) -> str:
    if isinstance(value, (list, tuple, set, frozenset)):
        parts = [str(p).strip() for p in value]
    elif isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
    else:
        raise _bad(name, value, "must be 'delete', 'compact' or 'compact,delete'")
    if not parts or any(p not in ("delete", "compact") for p in parts):
        raise _bad(name, value, "must be 'delete', 'compact' or 'compact,delete'")
    # One canonical spelling, so equality and DescribeConfigs are stable.
    return ",".join(sorted(set(parts)))


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise _bad(name, value, "expected 'true' or 'false'")


def _parse_string(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _bad(name, value, f"expected a string, got {type(value).__name__}")
    return value.strip()


def _parse(name: str, value: Any) -> Any:
    spec = _SPECS[name]
    if spec.kind == "bool":
        parsed_bool = _parse_bool(name, value)
        if spec.choices and parsed_bool not in spec.choices:
            raise _bad(name, value, f"must be {_render(spec.choices[0])} on logan-ray (no tiered storage)")
        return parsed_bool
    if spec.kind == "string":
        return _parse_string(name, value)
    if spec.kind == "choice":
        text = _parse_string(name, value).lower()
        if text not in spec.choices:
            raise _bad(name, value, f"must be one of {', '.join(spec.choices)}")
        return text
    if spec.kind in ("int", "long"):
        parsed: Any = _parse_integer(name, value)
        if parsed in spec.choices:
            return parsed
    elif spec.kind == "double":
        parsed = _parse_double(name, value)
    elif spec.kind == "timestamp_type":
        return _parse_timestamp_type(name, value)
    else:
        return _parse_cleanup_policy(name, value)
    if spec.minimum is not None and parsed < spec.minimum:
        raise _bad(name, value, f"must be at least {_render(spec.minimum)}")
    if spec.maximum is not None and parsed > spec.maximum:
        raise _bad(name, value, f"must be at most {_render(spec.maximum)}")
    return parsed


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        # Kafka renders doubles like Java: 0.5, 1.0
        return repr(value)
    return str(value)


@dataclass(frozen=True)
class TopicConfig:
    """Immutable, validated topic config; attributes use snake_case Kafka names.

    Build it from client input with :meth:`from_dict` (or ``TopicConfig()`` for
    all defaults); derive a changed copy with :meth:`with_overrides`. Direct
    keyword construction is validated too, so an instance is always legal.
    """

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    retention_ms: int = 604800000
    retention_bytes: int = -1
    index_interval_bytes: int = 4096
    segment_index_bytes: int = 10485760
    max_message_bytes: int = 1048588
    message_timestamp_type: str = CREATE_TIME
    cleanup_policy: str = "delete"
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    file_delete_delay_ms: int = 60000
    segment_jitter_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    unclean_leader_election_enable: bool = False
    compression_type: str = "producer"
    compression_gzip_level: int = -1
    compression_lz4_level: int = 9
    compression_zstd_level: int = 3
    preallocate: bool = False
    message_format_version: str = "3.0-IV1"
    message_timestamp_difference_max_ms: int = LONG_MAX
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    message_downconversion_enable: bool = True
    leader_replication_throttled_replicas: str = ""
    follower_replication_throttled_replicas: str = ""
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    remote_log_copy_disable: bool = False
    remote_log_delete_on_disable: bool = False

    def __post_init__(self) -> None:
        for name, spec in _SPECS.items():
            raw = getattr(self, spec.attr)
            object.__setattr__(self, spec.attr, _parse(name, raw))

    # -- construction -----------------------------------------------------
    @classmethod
    def from_dict(cls, values: Mapping[str, Any] | None = None) -> "TopicConfig":
        """Parse Kafka-named settings (``{"retention.ms": "1000"}``); unknown names fail."""
        return cls().with_overrides(values or {})

    def with_overrides(self, values: Mapping[str, Any]) -> "TopicConfig":
        """A copy with the given Kafka-named settings changed (AlterConfigs)."""
        if not isinstance(values, Mapping):
            raise InvalidConfigError(f"topic config must be a mapping of names to values, got {type(values).__name__}")
        changes: dict[str, Any] = {}
        for name, value in values.items():
            spec = _SPECS.get(name) if isinstance(name, str) else None
            if spec is None:
                raise InvalidConfigError(f"unknown topic config {name!r} (value {value!r})")
            if value is None:
                raise _bad(name, value, "a value is required")
            changes[spec.attr] = _parse(name, value)
        if not changes:
            return self
        current = {spec.attr: getattr(self, spec.attr) for spec in _SPECS.values()}
        current.update(changes)
        return TopicConfig(**current)

    # -- reading ------------------------------------------------------------
    def get(self, name: str) -> Any:
        """Typed value by Kafka name."""
        spec = _SPECS.get(name)
        if spec is None:
            raise InvalidConfigError(f"unknown topic config {name!r}")
        return getattr(self, spec.attr)

    def to_dict(self) -> dict[str, str]:
        """Every setting as Kafka name -> string, the form DescribeConfigs sends."""
        return {name: _render(getattr(self, spec.attr)) for name, spec in _SPECS.items()}

    def overrides(self) -> dict[str, str]:
        """Only the settings that differ from Kafka's defaults (for persisting a topic)."""
        return {entry.name: entry.value for entry in self.describe() if not entry.is_default}

    def describe(self, names: Iterable[str] | None = None) -> list[ConfigEntry]:
        """(name, value, is_default) rows; ``names`` restricts and orders them."""
        selected = list(_SPECS) if names is None else list(names)
        rows = []
        for name in selected:
            spec = _SPECS.get(name)
            if spec is None:
                raise InvalidConfigError(f"unknown topic config {name!r}")
            value = getattr(self, spec.attr)
            rows.append(ConfigEntry(name, _render(value), value == spec.default))
        return rows

    # -- derived helpers used by the log -----------------------------------
    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    def timestamp_window(self, now_ms: int) -> tuple[int, int] | None:
        """The CreateTime range a client's record must fall in at ``now_ms``, or None when unlimited.

        As Kafka's LogConfig: ``message.timestamp.before.max.ms`` / ``after.max.ms`` when set,
        else the deprecated ``message.timestamp.difference.max.ms`` for both; LogAppendTime
        topics overwrite timestamps, so nothing is checked there.
        """
        if self.log_append_time:
            return None
        before = self.message_timestamp_before_max_ms
        after = self.message_timestamp_after_max_ms
        if before == LONG_MAX:
            before = self.message_timestamp_difference_max_ms
        if after == LONG_MAX:
            after = self.message_timestamp_difference_max_ms
        if before == LONG_MAX and after == LONG_MAX:
            return None
        return (now_ms - before if before != LONG_MAX else -LONG_MAX - 1,
                now_ms + after if after != LONG_MAX else LONG_MAX)

    @property
    def deletes(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @property
    def compacts(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")


DEFAULTS: Mapping[str, str] = MappingProxyType(TopicConfig().to_dict())


__all__ = [
    "TopicConfig",
    "ConfigEntry",
    "CONFIG_NAMES",
    "DEFAULTS",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "LONG_MAX",
]
