import dataclasses

import pytest

from logan_ray.storage.config import CONFIG_NAMES, DEFAULTS, TopicConfig
from logan_ray.storage.errors import InvalidConfigError

KAFKA_DEFAULTS = {
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
    "retention.ms": "604800000",
    "retention.bytes": "-1",
    "index.interval.bytes": "4096",
    "segment.index.bytes": "10485760",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "cleanup.policy": "delete",
    "flush.messages": "9223372036854775807",
    "flush.ms": "9223372036854775807",
    "min.insync.replicas": "1",
    "delete.retention.ms": "86400000",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "file.delete.delay.ms": "60000",
    # the rest of Kafka's topic-level list (LogConfig), with Kafka's defaults
    "segment.jitter.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "unclean.leader.election.enable": "false",
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "preallocate": "false",
    "message.format.version": "3.0-IV1",
    "message.timestamp.difference.max.ms": "9223372036854775807",
    "message.timestamp.before.max.ms": "9223372036854775807",
    "message.timestamp.after.max.ms": "9223372036854775807",
    "message.downconversion.enable": "true",
    "leader.replication.throttled.replicas": "",
    "follower.replication.throttled.replicas": "",
    "remote.storage.enable": "false",
    "local.retention.ms": "-2",
    "local.retention.bytes": "-2",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
}


def test_defaults_are_kafkas():
    assert TopicConfig().to_dict() == KAFKA_DEFAULTS
    assert dict(DEFAULTS) == KAFKA_DEFAULTS
    assert set(CONFIG_NAMES) == set(KAFKA_DEFAULTS)
    c = TopicConfig()
    assert c.segment_bytes == 1 << 30 and c.retention_bytes == -1 and c.flush_messages == 2**63 - 1
    assert c.min_cleanable_dirty_ratio == 0.5 and not c.log_append_time and c.deletes and not c.compacts


def test_parses_strings_as_clients_send_them():
    c = TopicConfig.from_dict(
        {
            "segment.bytes": "1024",
            "retention.ms": " -1 ",
            "retention.bytes": 5000,
            "message.timestamp.type": "LogAppendTime",
            "min.cleanable.dirty.ratio": "0.25",
            "flush.messages": "1",
        }
    )
    assert c.segment_bytes == 1024 and isinstance(c.segment_bytes, int)
    assert c.retention_ms == -1 and c.retention_bytes == 5000
    assert c.log_append_time and c.flush_messages == 1
    assert c.min_cleanable_dirty_ratio == 0.25
    assert c.get("segment.bytes") == 1024


@pytest.mark.parametrize(
    "raw,canonical,deletes,compacts",
    [
        ("delete", "delete", True, False),
        ("compact", "compact", False, True),
        ("compact,delete", "compact,delete", True, True),
        ("delete, compact", "compact,delete", True, True),
        (["delete", "compact"], "compact,delete", True, True),
    ],
)
def test_cleanup_policy(raw, canonical, deletes, compacts):
    c = TopicConfig.from_dict({"cleanup.policy": raw})
    assert c.cleanup_policy == canonical and c.deletes == deletes and c.compacts == compacts
    assert c.to_dict()["cleanup.policy"] == canonical


def test_immutable_and_overrides_make_copies():
    base = TopicConfig()
    changed = base.with_overrides({"retention.ms": "1000"})
    assert base.retention_ms == 604800000 and changed.retention_ms == 1000
    assert changed.with_overrides({}) is changed
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.retention_ms = 5  # type: ignore[misc]
    assert hash(base) == hash(TopicConfig())
    assert base == TopicConfig.from_dict({}) == TopicConfig.from_dict(None)


def test_describe_marks_defaults():
    c = TopicConfig.from_dict({"retention.ms": "1000", "cleanup.policy": "compact"})
    rows = {r.name: r for r in c.describe()}
    assert [r.name for r in c.describe()] == list(KAFKA_DEFAULTS)
    assert rows["retention.ms"] == ("retention.ms", "1000", False)
    assert rows["cleanup.policy"] == ("cleanup.policy", "compact", False)
    assert rows["segment.bytes"] == ("segment.bytes", "1073741824", True)
    assert all(isinstance(r.value, str) for r in rows.values())
    assert c.overrides() == {"retention.ms": "1000", "cleanup.policy": "compact"}
    assert c.describe(["segment.ms"]) == [("segment.ms", "604800000", True)]
    # Setting a value equal to the default still counts as the default.
    assert TopicConfig.from_dict({"segment.bytes": "1073741824"}).describe(["segment.bytes"])[0].is_default
    with pytest.raises(InvalidConfigError, match="nope"):
        c.describe(["nope"])


def test_round_trip_through_strings():
    c = TopicConfig.from_dict({"min.cleanable.dirty.ratio": 1, "retention.bytes": "123", "cleanup.policy": "delete,compact"})
    assert TopicConfig.from_dict(c.to_dict()) == c
    assert c.to_dict()["min.cleanable.dirty.ratio"] == "1.0"


@pytest.mark.parametrize(
    "name,value,fragment",
    [
        ("no.such.config", "1", "unknown topic config 'no.such.config'"),
        ("segment.bytes", "abc", "expected an integer"),
        ("segment.bytes", "1.5", "expected an integer"),
        ("segment.bytes", "13", "at least 14"),
        ("segment.bytes", str(2**31), "at most 2147483647"),
        ("segment.bytes", True, "boolean"),
        ("segment.bytes", 3.0, "expected an integer or a string"),
        ("segment.bytes", None, "a value is required"),
        ("segment.ms", "0", "at least 1"),
        ("retention.ms", "-2", "at least -1"),
        ("retention.bytes", "-5", "at least -1"),
        ("index.interval.bytes", "-1", "at least 0"),
        ("segment.index.bytes", "3", "at least 4"),
        ("max.message.bytes", "-1", "at least 0"),
        ("message.timestamp.type", "createtime", "CreateTime"),
        ("message.timestamp.type", 1, "CreateTime"),
        ("cleanup.policy", "delete,nope", "'delete', 'compact'"),
        ("cleanup.policy", "", "'delete', 'compact'"),
        ("flush.messages", "0", "at least 1"),
        ("flush.ms", "-1", "at least 0"),
        ("flush.ms", str(2**63), "at most 9223372036854775807"),
        ("min.insync.replicas", "0", "at least 1"),
        ("delete.retention.ms", "-1", "at least 0"),
        ("min.cleanable.dirty.ratio", "1.5", "at most 1.0"),
        ("min.cleanable.dirty.ratio", "-0.1", "at least 0.0"),
        ("min.cleanable.dirty.ratio", "nan", "finite"),
        ("min.cleanable.dirty.ratio", "half", "expected a number"),
        ("min.compaction.lag.ms", "-1", "at least 0"),
        ("file.delete.delay.ms", "-1", "at least 0"),
    ],
)
def test_bad_values_name_key_and_value(name, value, fragment):
    with pytest.raises(InvalidConfigError) as err:
        TopicConfig.from_dict({name: value})
    message = str(err.value)
    assert fragment in message
    assert name in message
    assert err.value.code == 40  # INVALID_CONFIG


def test_non_mapping_and_direct_construction_are_validated():
    with pytest.raises(InvalidConfigError, match="mapping"):
        TopicConfig.from_dict([("segment.bytes", "1")])  # type: ignore[arg-type]
    with pytest.raises(InvalidConfigError, match="segment.bytes"):
        TopicConfig(segment_bytes=1)
    with pytest.raises(InvalidConfigError, match="unknown"):
        TopicConfig().get("segment_bytes")


def test_kafka_topic_configs_clients_pass_routinely_are_accepted_and_reported():
    given = {"compression.type": "ZSTD", "max.compaction.lag.ms": "3600000", "message.timestamp.type": "LogAppendTime",
             "message.timestamp.before.max.ms": "86400000", "message.timestamp.after.max.ms": "3600000",
             "message.timestamp.difference.max.ms": "1000", "unclean.leader.election.enable": "TRUE",
             "preallocate": "true", "compression.gzip.level": "-1", "compression.zstd.level": "-5",
             "message.downconversion.enable": "false", "segment.jitter.ms": "10",
             "leader.replication.throttled.replicas": "*", "local.retention.ms": "-2",
             "remote.storage.enable": "false", "message.format.version": "3.0-IV1"}
    c = TopicConfig.from_dict(given)
    assert c.compression_type == "zstd" and c.max_compaction_lag_ms == 3_600_000 and c.log_append_time
    assert c.unclean_leader_election_enable is True and c.compression_zstd_level == -5
    shown = c.to_dict()
    assert shown["compression.type"] == "zstd" and shown["preallocate"] == "true"
    assert shown["message.downconversion.enable"] == "false"
    changed = {e.name for e in c.describe() if not e.is_default}
    assert changed == set(given) - {"compression.gzip.level", "local.retention.ms", "remote.storage.enable",
                                    "message.format.version"}


@pytest.mark.parametrize("name, value, fragment", [
    ("compression.type", "brotli", "must be one of"),
    ("compression.gzip.level", "0", "at least 1"),
    ("compression.lz4.level", "18", "at most 17"),
    ("max.compaction.lag.ms", "0", "at least 1"),
    ("preallocate", "yes", "'true' or 'false'"),
    ("remote.storage.enable", "true", "no tiered storage"),
    ("local.retention.bytes", "-3", "at least -2"),
])
def test_bad_values_of_the_stored_configs_are_invalid_config(name, value, fragment):
    with pytest.raises(InvalidConfigError, match=name) as err:
        TopicConfig.from_dict({name: value})
    assert fragment in str(err.value) and err.value.code == 40


def test_unknown_name_is_invalid_config_naming_it():
    with pytest.raises(InvalidConfigError, match="'retention.millis'") as err:
        TopicConfig.from_dict({"retention.millis": "1"})
    assert err.value.code == 40
