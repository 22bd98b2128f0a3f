"""Keys and values of ``__transaction_state`` in Kafka's byte layout.

Kafka's ``TransactionLogKey`` (version 0: the transactional id) and
``TransactionLogValue`` (version 0, and version 1, its first flexible version with
the tagged previous/next producer ids and client transaction version), each after
an int16 version prefix (``MessageUtil.toVersionPrefixedBytes``). Keeping Kafka's
layout means Kafka's tools could read the topic, and a value version this code
does not know is refused rather than misread. The layouts are declared with the
wire codec's schema language and compiled by its compiler, like any message.

A ``None`` value is the tombstone of an expired transactional id (state Dead).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from logan_ray.protocol.compiler import Out, compile_struct
from logan_ray.protocol.exceptions import ProtocolDecodeError
from logan_ray.protocol.schema import INT8, INT16, INT32, INT64, STRING, A, F, S

from .state import NO_PRODUCER_EPOCH, TxnMetadata, TxnState

TOPIC = "__transaction_state"

_VERSION = struct.Struct(">h")

KEY_FIELDS = [F("transactional_id", STRING, "0")]

VALUE_FIELDS = [
    F("producer_id", INT64),
    F("previous_producer_id", INT64, "1+", tag=0, default=-1),
    F("next_producer_id", INT64, "1+", tag=1, default=-1),
    F("producer_epoch", INT16),
    F("transaction_timeout_ms", INT32),
    F("transaction_status", INT8),
    F("transaction_partitions", A(S(
        F("topic", STRING),
        F("partition_ids", A(INT32)),
    )), nullable="0+"),
    F("transaction_last_update_timestamp_ms", INT64),
    F("transaction_start_timestamp_ms", INT64),
    F("client_transaction_version", INT16, "1+", tag=2, default=0),
]

KEY_VERSION = 0
#: Version 1 is written (flexible, carries the KIP-890 fields); 0 is read too.
VALUE_VERSIONS = (0, 1)
_KEY_PLAN = compile_struct(KEY_FIELDS, 0, False)
_VALUE_PLANS = {v: compile_struct(VALUE_FIELDS, v, v >= 1) for v in VALUE_VERSIONS}


class TransactionLogError(ValueError):
    """A ``__transaction_state`` record this code cannot read (unknown version, bad bytes)."""


def _prefixed(version: int, encode, body: dict) -> bytes:
    out = Out(_VERSION.pack(version))
    encode(out, body)
    return b"".join(bytes(c) for c in out.finish())


def _read(data: bytes, plans: dict, what: str) -> tuple[int, dict]:
    if len(data) < 2:
        raise TransactionLogError(f"{what} of {len(data)} bytes has no version")
    (version,) = _VERSION.unpack_from(data, 0)
    plan = plans.get(version)
    if plan is None:
        raise TransactionLogError(f"{what} version {version} is not one of {sorted(plans)}")
    view = memoryview(data)
    try:
        body, end = plan[0](view, 2)
    except (ProtocolDecodeError, struct.error, IndexError, ValueError, TypeError, UnicodeDecodeError) as exc:
        raise TransactionLogError(f"bad {what} v{version}: {exc}") from None
    if end != len(view):
        raise TransactionLogError(f"{what} v{version} has {len(view) - end} trailing bytes")
    return version, body


def encode_key(transactional_id: str) -> bytes:
    return _prefixed(KEY_VERSION, _KEY_PLAN[1], {"transactional_id": transactional_id})


def decode_key(data: bytes) -> str:
    return _read(data, {KEY_VERSION: _KEY_PLAN}, "TransactionLogKey")[1]["transactional_id"]


def encode_value(meta: TxnMetadata, version: int = 1) -> bytes:
    """Kafka's value of ``meta``; Empty keeps no partitions (null), as Kafka writes it."""
    if meta.state is TxnState.EMPTY and meta.partitions:
        raise ValueError(f"{meta.transactional_id}: an Empty transaction has no partitions")
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(meta.partitions):
        by_topic.setdefault(topic, []).append(partition)
    body = {
        "producer_id": meta.producer_id,
        "previous_producer_id": meta.previous_producer_id,
        "next_producer_id": meta.next_producer_id,
        "producer_epoch": meta.producer_epoch,
        "transaction_timeout_ms": meta.timeout_ms,
        "transaction_status": meta.state.value,
        "transaction_partitions": None if meta.state is TxnState.EMPTY else [
            {"topic": t, "partition_ids": ps} for t, ps in by_topic.items()],
        "transaction_last_update_timestamp_ms": meta.last_update_ms,
        "transaction_start_timestamp_ms": meta.start_ms,
        "client_transaction_version": meta.transaction_version,
    }
    return _prefixed(version, _VALUE_PLANS[version][1], body)


def decode_value(transactional_id: str, data: bytes) -> TxnMetadata:
    """The entry a value describes; fields version 0 lacks take Kafka's defaults."""
    _, body = _read(data, _VALUE_PLANS, "TransactionLogValue")
    try:
        state = TxnState(body["transaction_status"])
    except ValueError:
        raise TransactionLogError(f"unknown transaction status {body['transaction_status']}") from None
    partitions = frozenset(
        (entry["topic"], p) for entry in body["transaction_partitions"] or () for p in entry["partition_ids"])
    return TxnMetadata(
        transactional_id=transactional_id,
        producer_id=body["producer_id"],
        producer_epoch=body["producer_epoch"],
        last_producer_epoch=NO_PRODUCER_EPOCH,
        previous_producer_id=body.get("previous_producer_id", -1),
        next_producer_id=body.get("next_producer_id", -1),
        timeout_ms=body["transaction_timeout_ms"],
        state=state,
        partitions=partitions,
        start_ms=body["transaction_start_timestamp_ms"],
        last_update_ms=body["transaction_last_update_timestamp_ms"],
        transaction_version=body.get("client_transaction_version", 0),
    )


@dataclass(frozen=True)
class TxnLogRecord:
    """One record for ``__transaction_state``: key bytes, value bytes (None: tombstone)."""

    transactional_id: str
    key: bytes
    value: bytes | None

    @classmethod
    def of(cls, meta: TxnMetadata) -> "TxnLogRecord":
        value = None if meta.state is TxnState.DEAD else encode_value(meta)
        return cls(meta.transactional_id, encode_key(meta.transactional_id), value)
