"""The CLI's ``--bootstrap-server`` path: the same admin calls as ``logan_ray.Client``, over Kafka.

``logan-ray topic|produce|consume|groups|status --bootstrap-server HOST:PORT``
works through the Kafka protocol with confluent-kafka (librdkafka), against any
logan-ray gateway or Kafka broker, from a machine outside the Ray cluster. This
class answers the calls the CLI makes on a ``Client`` (and ``Client.groups``)
with the same shapes, so the CLI prints the same output either way; only what
Kafka does not expose differs (Ray node ids become broker ids; segment counts,
sizes and group generations show as ``-``). No Ray is imported here.
"""
from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Iterable

from .actors.topic_names import is_internal
from .line_records import split_line, write_line
from .errors import (GroupError, GroupIdNotFoundError, InvalidConfigError, LoganError, NonEmptyGroupError,
                     NotRunningError, UnknownTopicError)

TIMEOUT_S = 10.0  # per admin request; a broker that does not answer is reported, never waited on forever
PROBE_TIMEOUT_S = 5.0  # the first request: nothing answering there is said within seconds

_STATES = {"UNKNOWN": "Unknown", "PREPARING_REBALANCING": "PreparingRebalance",
           "COMPLETING_REBALANCING": "CompletingRebalance", "STABLE": "Stable", "DEAD": "Dead", "EMPTY": "Empty"}


def _quiet_logger() -> logging.Logger:
    """librdkafka logs every failed connection to stderr; the CLI reports failures itself, in one line."""
    logger = logging.getLogger("logan_ray.kafka_backend.librdkafka")
    logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


def _error(e: BaseException, what: str) -> LoganError:
    """A typed logan-ray error for a confluent-kafka failure, with Kafka's error name."""
    from confluent_kafka import KafkaError, KafkaException

    err = e.args[0] if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError) else None
    if err is None:
        return LoganError(f"{what}: {e}")
    code = err.code()
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART or code == KafkaError._UNKNOWN_TOPIC:
        return UnknownTopicError(f"{what}: topic does not exist")
    if code == KafkaError.GROUP_ID_NOT_FOUND:
        return GroupIdNotFoundError(f"{what}: consumer group does not exist")
    if code == KafkaError.NON_EMPTY_GROUP:
        return NonEmptyGroupError(f"{what}: consumer group still has members; stop them first")
    if code == KafkaError.INVALID_CONFIG:
        return InvalidConfigError(f"{what}: {err.str()}")
    if code == KafkaError.CLUSTER_AUTHORIZATION_FAILED:
        out = LoganError(f"{what}: CLUSTER_AUTHORIZATION_FAILED: this login may not do that on the cluster; "
                         f"connect as a user in the broker's super.users, or have one grant it "
                         f"(logan-ray acls add --cluster --operation alter|describe --principal User:NAME)")
        out.code = code
        return out
    out = LoganError(f"{what}: {err.name()}: {err.str()}")
    if code > 0:
        out.code = code
    return out


def _uuid(topic_id: Any) -> str:
    """confluent-kafka prints topic ids in Kafka's base64 form; the CLI shows the UUID form."""
    msb = topic_id.get_most_significant_bits() & (1 << 64) - 1
    lsb = topic_id.get_least_significant_bits() & (1 << 64) - 1
    return str(uuid.UUID(int=msb << 64 | lsb))


class KafkaBackend:
    """Admin, produce and consume through the Kafka protocol for the CLI."""

    def __init__(self, bootstrap: str, conf: dict[str, str] | None = None) -> None:
        """``conf``: librdkafka settings of the connection (security: logan_ray.client_config)."""
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient

        self.bootstrap = bootstrap
        self.login_errors: list[Any] = []  # SASL failures, which librdkafka reports only to error_cb

        def on_error(err: Any) -> None:
            if err.code() == KafkaError._AUTHENTICATION:
                self.login_errors.append(err)
        self.conf = {"bootstrap.servers": bootstrap, "logger": _quiet_logger(), "client.id": "logan-ray-cli",
                     "error_cb": on_error, **(conf or {})}
        try:
            self.admin = AdminClient(dict(self.conf))
        except KafkaException as e:  # e.g. a setting librdkafka does not know
            raise InvalidConfigError(f"client settings: {e.args[0].str() if e.args else e}") from None
        self._metadata(None, PROBE_TIMEOUT_S)  # fail now, in seconds and in one line, if nothing answers there

    # ---------------------------------------------------------------- helpers
    def _metadata(self, topic: str | None, timeout: float = TIMEOUT_S):
        from confluent_kafka import KafkaError, KafkaException

        from .client_config import PASSWORD_ENV

        try:
            return self.admin.list_topics(topic, timeout=timeout)
        except KafkaException as e:
            self.admin.poll(0)  # serve error_cb
            err = e.args[0] if e.args else None
            if err is not None and err.code() == KafkaError._AUTHENTICATION or self.login_errors:
                why = (self.login_errors or [err])[-1].str()
                raise LoganError(f"login to {self.bootstrap} failed: {why}; check the SASL user and password "
                                 f"(--sasl-username, ${PASSWORD_ENV} or --command-config)") from None
            raise NotRunningError(f"no Kafka broker answered at {self.bootstrap} within {timeout:.0f} s "
                                  f"({e.args[0].str() if e.args else e}); check --bootstrap-server") from None

    def _wait(self, future: Any, what: str) -> Any:
        try:
            return future.result(timeout=TIMEOUT_S + 5)
        except LoganError:
            raise
        except Exception as e:  # KafkaException, or a timeout of the future itself
            raise _error(e, what) from None

    def _topic(self, name: str):
        """The topic's metadata; asks for all topics, since a Metadata request naming one may auto-create it."""
        md = self._metadata(None).topics.get(name)
        if md is None or md.error is not None and md.error.code() in (3, -188):  # UNKNOWN_TOPIC_OR_PART
            raise UnknownTopicError(f"topic {name!r} does not exist")
        if md.error is not None:
            raise LoganError(f"topic {name!r}: {md.error.name()}: {md.error.str()}")
        return md

    def _configs(self, name: str) -> list[Any]:
        from confluent_kafka.admin import ConfigResource, ResourceType

        self._topic(name)
        res = ConfigResource(ResourceType.TOPIC, name)
        return list(self._wait(self.admin.describe_configs([res])[res], f"describe configs of {name!r}").values())

    # ------------------------------------------------------------------ admin
    def create_topic(self, name: str, partitions: int = 1, config: dict[str, Any] | None = None, *,
                     activate: bool = False, replication_factor: int = -1) -> dict[str, Any]:
        """Kafka's CreateTopics; its partitions start on first use (``activate`` is the Python
        client's option and has no Kafka equivalent, so it is accepted and ignored)."""
        from confluent_kafka.admin import NewTopic

        new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                       config={k: str(v) for k, v in (config or {}).items()})
        self._wait(self.admin.create_topics([new], request_timeout=TIMEOUT_S)[name], f"create topic {name!r}")
        return {"name": name, "partitions": [{"partition": p} for p in range(partitions)],
                "replication_factor": max(replication_factor, 1)}

    def delete_topic(self, name: str) -> None:
        self._topic(name)
        self._wait(self.admin.delete_topics([name], request_timeout=TIMEOUT_S)[name], f"delete topic {name!r}")

    def list_topics(self, internal: bool = False) -> list[str]:
        names = sorted(self._metadata(None).topics)
        return names if internal else [n for n in names if not is_internal(n)]

    def describe_topic(self, name: str) -> dict[str, Any]:
        from confluent_kafka import TopicCollection
        from confluent_kafka.admin import ConfigSource

        self._topic(name)
        desc = self._wait(self.admin.describe_topics(TopicCollection([name]), request_timeout=TIMEOUT_S)[name],
                          f"describe topic {name!r}")
        overrides = {c.name: c.value for c in self._configs(name)
                     if c.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
        return {"name": name, "topic_id": _uuid(desc.topic_id), "config": overrides,
                "partitions": [{"partition": p.id, "node_id": "-" if p.leader is None else str(p.leader.id),
                                "replicas": [str(r.id) for r in p.replicas], "isr": [str(r.id) for r in p.isr]}
                               for p in sorted(desc.partitions, key=lambda p: p.id)]}

    def topic_config(self, name: str) -> dict[str, str]:
        return {c.name: c.value for c in self._configs(name)}

    def alter_topic(self, name: str, config: dict[str, Any], incremental: bool = True) -> dict[str, str]:
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

        self._topic(name)
        entries = [ConfigEntry(k, None if v is None else str(v), incremental_operation=(
            AlterConfigOpType.DELETE if v is None else AlterConfigOpType.SET)) for k, v in config.items()]
        res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        self._wait(self.admin.incremental_alter_configs([res])[res], f"alter topic {name!r}")
        return self.describe_topic(name)["config"]

    def partition_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """{partition: (log start offset, log end offset)} from ListOffsets."""
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import OffsetSpec

        parts = sorted(self._topic(topic).partitions)
        out: dict[int, list[int]] = {p: [0, 0] for p in parts}
        for i, spec in enumerate((OffsetSpec.earliest(), OffsetSpec.latest())):
            futures = self.admin.list_offsets({TopicPartition(topic, p): spec for p in parts},
                                              request_timeout=TIMEOUT_S)
            for tp, fut in futures.items():
                out[tp.partition][i] = self._wait(fut, f"list offsets of {topic}-{tp.partition}").offset
        return {p: (start, end) for p, (start, end) in out.items()}

    def status(self) -> list[dict[str, Any]]:
        rows = []
        for name in self.list_topics():
            leaders = {p["partition"]: p["node_id"] for p in self.describe_topic(name)["partitions"]}
            for p, (start, end) in sorted(self.partition_offsets(name).items()):
                rows.append({"topic": name, "partition": p, "node_id": leaders.get(p, "-"), "log_start_offset": start,
                             "log_end_offset": end, "size_bytes": None, "segment_count": None})
        return rows

    def partitions(self, topic: str) -> list[int]:
        return sorted(self._topic(topic).partitions)

    @property
    def groups(self) -> "KafkaGroups":
        return KafkaGroups(self)

    @property
    def security(self) -> "KafkaSecurity":
        return KafkaSecurity(self)

    # ------------------------------------------------------- produce/consume
    def produce_lines(self, topic: str, lines: Iterable[bytes], key_separator: bytes | None, partition: int | None,
                      acks: int | str, compression: str, linger_ms: float) -> int:
        """Produce one record per line (``KEY<sep>VALUE`` with a separator); returns how many were acknowledged."""
        from confluent_kafka import KafkaException, Producer

        self._topic(topic)
        producer = Producer({**self.conf, "acks": str(acks), "compression.type": compression,
                             "linger.ms": linger_ms, "partitioner": "murmur2_random",
                             "message.timeout.ms": 30000})
        failures: list[Any] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failures.append(err)

        n = 0
        extra = {} if partition is None else {"partition": partition}
        for raw in lines:
            key, line = split_line(raw, key_separator, n + 1)
            while True:
                try:
                    producer.produce(topic, line, key, on_delivery=delivered, **extra)
                    break
                except BufferError:  # local queue full: let deliveries drain
                    producer.poll(0.1)
                except KafkaException as e:
                    raise _error(e, f"produce to {topic!r}") from None
            producer.poll(0)
            n += 1
        if producer.flush(60) > 0:
            raise LoganError(f"produce to {topic!r}: records not acknowledged within 60 s")
        if failures:
            raise LoganError(f"produce to {topic!r}: {len(failures)} records failed: {failures[0].name()}: "
                             f"{failures[0].str()}")
        return n

    def consume_lines(self, topic: str, out: Any, from_beginning: bool, partition: int | None, offset: int | None,
                      max_messages: int | None, timeout_ms: int | None, key_separator: bytes | None) -> int:
        """Write each record as a line (``KEY<sep>VALUE`` with a separator); returns how many were written."""
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, TopicPartition

        parts = [partition] if partition is not None else self.partitions(topic)
        start = offset if offset is not None else OFFSET_BEGINNING if from_beginning else OFFSET_END
        consumer = Consumer({**self.conf, "group.id": "logan-ray-cli", "enable.auto.commit": False,
                             "enable.auto.offset.store": False, "fetch.wait.max.ms": 100})
        n = 0
        try:
            consumer.assign([TopicPartition(topic, p, start) for p in parts])
            idle_deadline = time.monotonic() + timeout_ms / 1000.0 if timeout_ms else None
            while max_messages is None or n < max_messages:
                want = min(max_messages - n, 10000) if max_messages else 10000
                msgs = consumer.consume(want, timeout=0.5)
                if not msgs:
                    if idle_deadline is not None and time.monotonic() >= idle_deadline:
                        break
                    continue
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            continue
                        raise LoganError(f"consume from {topic!r}: {err.name()}: {err.str()}")
                    write_line(out, m.key(), m.value(), key_separator)
                    n += 1
                out.flush()
                if timeout_ms:
                    idle_deadline = time.monotonic() + timeout_ms / 1000.0
        finally:
            consumer.close()
        return n


class KafkaGroups:
    """``Client.groups`` over the Kafka protocol: list, describe, delete, reset offsets."""

    def __init__(self, backend: KafkaBackend) -> None:
        self._b = backend

    def list(self) -> list[dict[str, Any]]:
        res = self._b._wait(self._b.admin.list_consumer_groups(request_timeout=TIMEOUT_S), "list consumer groups")
        return sorted(({"group_id": g.group_id, "group_state": _STATES.get(g.state.name, g.state.name),
                        "protocol_type": "" if g.is_simple_consumer_group else "consumer"} for g in res.valid),
                      key=lambda g: g["group_id"])

    def _offsets(self, group_id: str, partitions: list[Any] | None = None) -> list[Any]:
        from confluent_kafka import ConsumerGroupTopicPartitions

        req = ConsumerGroupTopicPartitions(group_id, partitions)
        fut = self._b.admin.list_consumer_group_offsets([req], request_timeout=TIMEOUT_S)[group_id]
        return self._b._wait(fut, f"committed offsets of {group_id!r}").topic_partitions or []

    def describe(self, group_id: str) -> dict[str, Any]:
        fut = self._b.admin.describe_consumer_groups([group_id], request_timeout=TIMEOUT_S)[group_id]
        d = self._b._wait(fut, f"describe consumer group {group_id!r}")
        state = _STATES.get(d.state.name, d.state.name)
        if state == "Dead":
            raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
        members = [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.host,
                    "assignment": [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or [])]}
                   for m in d.members]
        offsets = [{"topic": tp.topic, "partition": tp.partition, "committed": tp.offset}
                   for tp in self._offsets(group_id) if tp.offset >= 0]
        return {"group_id": group_id, "group_state": state, "generation": "-",
                "protocol_type": "" if d.is_simple_consumer_group else "consumer",
                "protocol_data": d.partition_assignor, "members": members, "offsets": offsets}

    def delete(self, group_id: str) -> None:
        fut = self._b.admin.delete_consumer_groups([group_id], request_timeout=TIMEOUT_S)[group_id]
        try:
            self._b._wait(fut, f"deleting group {group_id!r}")
        except GroupIdNotFoundError:
            raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist") from None
        except NonEmptyGroupError:
            raise NonEmptyGroupError(f"consumer group {group_id!r} still has members; stop them first") from None

    def reset_offsets(self, group_id: str, topic: str, to: str | int = "earliest",
                      partitions: Iterable[int] | None = None, dry_run: bool = False) -> dict[int, tuple[int | None, int]]:
        """Move an inactive group's committed offsets, as ``GroupAdmin.reset_offsets`` (clamped to the log)."""
        from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

        offsets = self._b.partition_offsets(topic)
        parts = sorted(offsets) if partitions is None else sorted(partitions)
        target: dict[int, int] = {}
        for p in parts:
            if p not in offsets:
                raise GroupError(f"topic {topic!r} has no partition {p}", 3)
            start, end = offsets[p]
            target[p] = start if to == "earliest" else end if to == "latest" else min(max(int(to), start), end)
        state = next((g["group_state"] for g in self.list() if g["group_id"] == group_id), None)
        if state not in (None, "Empty"):
            raise NonEmptyGroupError(f"consumer group {group_id!r} is {state}; offsets can only be reset while it "
                                     f"has no members")
        before = {tp.partition: (tp.offset if tp.offset >= 0 else None)
                  for tp in self._offsets(group_id, [TopicPartition(topic, p) for p in parts])}
        if not dry_run:
            req = ConsumerGroupTopicPartitions(group_id, [TopicPartition(topic, p, o) for p, o in target.items()])
            fut = self._b.admin.alter_consumer_group_offsets([req], request_timeout=TIMEOUT_S)[group_id]
            res = self._b._wait(fut, f"resetting offsets of {group_id!r}")
            failed = [tp for tp in res.topic_partitions or [] if tp.error is not None]
            if failed:
                raise GroupError(f"resetting offsets of {group_id!r} failed: {failed[0].error.name()}",
                                 failed[0].error.code())
        return {p: (before.get(p), target[p]) for p in parts}



def _mechanism_name(m: Any) -> str:
    return m.name.replace("_", "-")  # ScramMechanism.SCRAM_SHA_256 -> SCRAM-SHA-256


class KafkaSecurity:
    """``logan-ray users`` and ``acls`` over Kafka's admin APIs (Describe/AlterUserScramCredentials,
    Describe/Create/DeleteAcls), with the shapes of ``security_cli.RaySecurity``. librdkafka sends a
    new password salted and hashed (Kafka's SaltedPassword), never in clear."""

    def __init__(self, backend: KafkaBackend) -> None:
        self._b = backend

    def users(self, names: list[str] | None = None) -> list[tuple[str, list[tuple[str, int]]]]:
        admin = self._b.admin
        if names is None:
            found = self._b._wait(admin.describe_user_scram_credentials(None, request_timeout=TIMEOUT_S),
                                  "list users")
        else:
            futures = admin.describe_user_scram_credentials(names, request_timeout=TIMEOUT_S)
            found = {n: self._b._wait(f, f"describe user {n!r}") for n, f in futures.items()}
        return sorted((user, [(_mechanism_name(c.mechanism), c.iterations) for c in d.scram_credential_infos])
                      for user, d in found.items())

    def _alter(self, alterations: list[Any], what: str) -> None:
        futures = self._b.admin.alter_user_scram_credentials(alterations, request_timeout=TIMEOUT_S)
        for f in futures.values():
            self._b._wait(f, what)

    def set_user(self, name: str, mechanisms: list[str], iterations: int, password: str) -> None:
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        self._alter([UserScramCredentialUpsertion(
            name, ScramCredentialInfo(ScramMechanism[m.replace("-", "_")], iterations), password.encode())
            for m in mechanisms], f"set user {name!r}")

    def delete_user(self, name: str, mechanisms: list[str]) -> None:
        from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

        self._alter([UserScramCredentialDeletion(name, ScramMechanism[m.replace("-", "_")]) for m in mechanisms],
                    f"delete user {name!r}")

    @staticmethod
    def _filter(b: list[Any] | None = None, principal: str | None = None) -> Any:
        from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                           ResourceType)

        if b is None:
            return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, principal, None,
                                    AclOperation.ANY, AclPermissionType.ANY)
        return AclBindingFilter(ResourceType(b[0]), b[1], ResourcePatternType(b[2]), b[3], b[4],
                                AclOperation(b[5]), AclPermissionType(b[6]))

    @staticmethod
    def _binding(a: Any) -> list[Any]:
        return [a.restype.value, a.name, a.resource_pattern_type.value, a.principal, a.host, a.operation.value,
                a.permission_type.value]

    def acls(self, principal: str | None = None) -> list[list[Any]]:
        found = self._b._wait(self._b.admin.describe_acls(self._filter(None, principal), request_timeout=TIMEOUT_S),
                              "list ACLs")
        return [self._binding(a) for a in found]

    def add_acls(self, bindings: list[list[Any]]) -> None:
        from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ResourcePatternType,
                                           ResourceType)

        new = [AclBinding(ResourceType(b[0]), b[1], ResourcePatternType(b[2]), b[3], b[4], AclOperation(b[5]),
                          AclPermissionType(b[6])) for b in bindings]
        for f in self._b.admin.create_acls(new, request_timeout=TIMEOUT_S).values():
            self._b._wait(f, "add ACLs")

    def remove_acls(self, bindings: list[list[Any]]) -> list[list[Any]]:
        filters = [self._filter(b) for b in bindings]  # every field given: matches exactly that binding
        removed = []
        for f in self._b.admin.delete_acls(filters, request_timeout=TIMEOUT_S).values():
            removed += [self._binding(a) for a in self._b._wait(f, "remove ACLs")]
        return removed
