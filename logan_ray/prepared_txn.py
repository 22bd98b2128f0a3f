"""Transactions opened in one process and committed in another: the two phases of an exactly-once sink.

A :class:`~logan_ray.txn_producer.TransactionalProducer` begins and ends its own
transactions. An exactly-once pipeline (``logan_ray.data.write_topic(...,
exactly_once=True)``, as Flink's Kafka sink) splits them: each write task opens a
transaction under a deterministic transactional id, writes its records and stops
there (pre-commit); the driver commits every task's transaction once all tasks
have returned. These are the coordinator calls for that, the same ones the
producer makes (``actors/txn_coordinator.py``):

- :func:`open_transaction` is InitProducerId: it fences every earlier holder of the
  id (an earlier attempt of the same task) and aborts its open transaction, which
  is how a retried task never writes twice;
- :func:`add_partitions` is AddPartitionsToTxn, before the first batch of each partition;
- :func:`commit_prepared_transaction` is EndTxn for a (transactional id, producer id,
  epoch) some other process prepared. As in Kafka, a stale epoch (a newer attempt
  fenced it, or ``transaction.timeout.ms`` aborted it) raises
  :class:`~logan_ray.errors.ProducerFencedError`; committing twice is harmless.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import ray

from logan_ray.protocol import errors as E

from ._ray import get
from .txn_producer import call_coordinator, error_for_code

CALL_TIMEOUT_S = 30.0  # how long a coordinator call is retried while its answers are transient


@dataclass(frozen=True)
class PreparedTransaction:
    """What a write task hands the driver: the transaction it left open, to be committed."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[tuple[str, int], ...]


def _call(transactional_id: str, method: str, *args: Any, timeout_s: float = CALL_TIMEOUT_S) -> Any:
    return call_coordinator(transactional_id, method, args, timeout_s)[0]


def start_coordinators() -> int:
    """Start the transaction coordinator of every node that leads a ``__transaction_state`` partition,
    from this process (the driver), before write tasks look them up. Created first inside a Ray Data
    write task of a DataFrame that came from Spark (raydp), the coordinator's class could not be loaded
    by its worker ("Expected str or bytes, got None" from Ray's function manager) and it restarted
    without end; created by the driver it is found by name. Returns how many nodes have one."""
    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME
    from logan_ray.actors.txn_coordinator import TXN_TOPIC, txn_coordinator_on

    from logan_ray.groups import ownership

    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    route = get(router.route_with_ids.remote([TXN_TOPIC]))[TXN_TOPIC]
    nodes = {ownership.leadership(route, p).node_id for p in range(len(route["partitions"]))} - {None}
    for node in nodes:
        txn_coordinator_on(node)
    return len(nodes)


def _check(code: int, what: str, transactional_id: str) -> None:
    if code != E.NONE:
        raise error_for_code(code, f"{what} of transactional id {transactional_id!r}")


def open_transaction(transactional_id: str, timeout_ms: int) -> tuple[int, int]:
    """(producer id, epoch) of a new epoch of ``transactional_id``: every earlier holder is fenced
    and its open transaction aborted (its markers written) before this returns."""
    code, producer_id, epoch = _call(transactional_id, "init_producer_id", timeout_ms, -1, -1)
    _check(code, "InitProducerId", transactional_id)
    return producer_id, epoch


def add_partitions(transactional_id: str, producer_id: int, epoch: int,
                   partitions: list[tuple[str, int]]) -> None:
    """Add partitions to the open transaction, before any of its batches reach them."""
    _check(_call(transactional_id, "add_partitions", producer_id, epoch, partitions),
           "AddPartitionsToTxn", transactional_id)


def _end(txn: PreparedTransaction, commit: bool, timeout_s: float) -> None:
    code, _pid, _epoch = _call(txn.transactional_id, "end_txn", txn.producer_id, txn.producer_epoch, commit, 0,
                               timeout_s=timeout_s)
    _check(code, "EndTxn(commit)" if commit else "EndTxn(abort)", txn.transactional_id)


def commit_prepared_transaction(txn: PreparedTransaction, timeout_s: float = CALL_TIMEOUT_S) -> None:
    """Commit a transaction another process left open; returns once its markers are written.

    Raises ProducerFencedError if the epoch is no longer the id's (the transaction was aborted:
    a newer attempt took the id, or it outlived its timeout). A transaction with no partition
    has nothing to commit."""
    if txn.partitions:
        _end(txn, True, timeout_s)


def abort_prepared_transaction(txn: PreparedTransaction, timeout_s: float = CALL_TIMEOUT_S) -> None:
    """Abort a transaction another process left open (ProducerFencedError if already superseded)."""
    if txn.partitions:
        _end(txn, False, timeout_s)
