"""TransactionalProducer: Kafka transactions for the Python API, over Ray actor calls (no Kafka wire).

``client.producer(transactional_id="...")`` returns one. It follows the state machine
of Kafka's ``TransactionManager`` and talks to the very actors the gateway's
transaction APIs use (``logan_ray/gateway/txn.py``), so a transaction is one thing
whichever way a client comes:

- InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn are calls of the
  transaction coordinator actor of the node leading the id's ``__transaction_state``
  partition (``actors/txn_coordinator.py``), which writes the markers;
- TxnOffsetCommit is the group coordinator's ``txn_offset_commit``
  (``actors/group_txn_offsets.py``): the offsets apply only if the transaction commits;
- records go to the partition actors as transactional batches (producer id, the
  coordinator's epoch, sequences). A partition is added to the transaction before its
  first batch is sent, as Kafka's producer does, so the gateway's KIP-890 verification
  of produce requests has nothing to check here.

A newer producer with the same ``transactional_id`` bumps the epoch: every later call of
the older one raises :class:`~logan_ray.errors.ProducerFencedError`. A call in the wrong
state raises :class:`~logan_ray.errors.InvalidTxnStateError` (Kafka's INVALID_TXN_STATE).
After a failed send or commit the transaction can only be aborted (ABORTABLE_ERROR).
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

import ray

from logan_ray.groups import ownership
from logan_ray.protocol import errors as E

from ._ray import get
from .errors import (
    CommitFailedError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    LoganError,
    ProducerFencedError,
    TransactionError,
)
from .producer import Producer, _Batch, _PartitionState

log = logging.getLogger("logan_ray.producer")

UNINITIALIZED, READY, IN_TRANSACTION, ABORTABLE_ERROR, FATAL_ERROR = (
    "UNINITIALIZED", "READY", "IN_TRANSACTION", "ABORTABLE_ERROR", "FATAL_ERROR")
#: coordinator answers worth asking again (Kafka's producer retries them until its timeout)
_RETRY = {E.CONCURRENT_TRANSACTIONS, E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
          E.NOT_COORDINATOR, E.NOT_ENOUGH_REPLICAS}
_FENCED = {E.PRODUCER_FENCED, E.INVALID_PRODUCER_EPOCH}
RETRY_BACKOFF_S = 0.05


def transaction_coordinator(transactional_id: str) -> Any:
    """The transaction coordinator actor of ``transactional_id``: the one on the node leading its
    ``__transaction_state`` partition (None while that partition has no leader)."""
    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME
    from logan_ray.actors.txn_coordinator import TXN_TOPIC, partition_for_txn, txn_coordinator_on

    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    route = get(router.route_with_ids.remote([TXN_TOPIC]))[TXN_TOPIC]
    node = ownership.leadership(route, partition_for_txn(transactional_id, len(route["partitions"]))).node_id
    return None if node is None else txn_coordinator_on(node)


def call_coordinator(transactional_id: str, method: str, args: tuple, timeout_s: float,
                     coordinator: Any = None) -> tuple[Any, Any]:
    """One transaction coordinator call, asked again while the answer or the actor is transient
    (CONCURRENT_TRANSACTIONS while an abort's markers are written, a coordinator moving);
    returns (the answer, the coordinator to ask next time). The one retry rule of the Python
    transactional producer and of the exactly-once sink (prepared_txn.py)."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            coordinator = coordinator or transaction_coordinator(transactional_id)
            if coordinator is None:
                raise TransactionError(f"{transactional_id!r}: its coordinator has no leader", E.NOT_COORDINATOR)
            out = get(getattr(coordinator, method).remote(transactional_id, *args))
        except (ray.exceptions.RayActorError, LoganError) as e:
            if time.monotonic() >= deadline:
                raise
            log.info("transaction coordinator %s of %r failed, retrying: %s", method, transactional_id, e)
            coordinator = None
            time.sleep(RETRY_BACKOFF_S)
            continue
        code = out[0] if isinstance(out, tuple) else out
        if code in _RETRY and time.monotonic() < deadline:
            if code == E.NOT_COORDINATOR:
                coordinator = None
            time.sleep(RETRY_BACKOFF_S)
            continue
        return out, coordinator


def error_for_code(code: int, what: str) -> LoganError:
    """The typed error of a coordinator's answer."""
    name = E.ERROR_NAMES.get(code, str(code))
    if code in _FENCED:
        err: LoganError = ProducerFencedError(f"{what}: fenced by a newer producer with the same transactional id "
                                              f"({name})")
        err.code = code
        return err
    if code == E.INVALID_TXN_STATE:
        return InvalidTxnStateError(f"{what}: {name}")
    return TransactionError(f"{what}: {name}", code)


class TransactionalProducer(Producer):
    """A :class:`~logan_ray.producer.Producer` whose records are written in transactions.

    ``init_transactions()`` (implicit on the first ``begin_transaction()``) fences older producers
    of the id; then ``begin_transaction()``, ``send``/``send_batch``, optionally
    ``send_offsets_to_transaction``, and ``commit_transaction()`` or ``abort_transaction()``.
    Always acks=all and idempotent, as Kafka requires.
    """

    _transactional = True

    def __init__(self, client, transactional_id: str, *, transaction_timeout_ms: int = 60_000,
                 **kwargs: Any) -> None:
        if not transactional_id:
            raise ValueError("transactional_id must be a non-empty string")
        if kwargs.get("acks", "all") not in ("all", -1):
            raise ValueError("a transactional producer needs acks='all'")
        if not kwargs.get("idempotent", True):
            raise ValueError("a transactional producer is idempotent")
        self.transactional_id = transactional_id
        self._txn_timeout_ms = transaction_timeout_ms
        self._txn_state = UNINITIALIZED
        self._txn_error: BaseException | None = None  # why the transaction can only be aborted (or is dead)
        self._added: set[tuple[str, int]] = set()
        self._offsets_groups: set[str] = set()
        self._coordinator: Any = None
        super().__init__(client, **{**kwargs, "acks": "all", "idempotent": True})
        fast = self.send  # the compiled send path when built: checked here, then as fast as ever

        def send(topic: str, value: Any = None, key: Any = None, **kw: Any):
            self._require(IN_TRANSACTION, "send")
            return fast(topic, value, key, **kw)

        self.send = send  # type: ignore[method-assign]

    def _first_producer_id(self) -> int:
        return -1  # the coordinator's, from init_transactions()

    @property
    def transaction_state(self) -> str:
        return self._txn_state

    # ------------------------------------------------------------- coordinator
    def _call(self, method: str, *args: Any) -> Any:
        """A transaction coordinator call, retried while the answer (or the actor) is transient."""
        out, self._coordinator = call_coordinator(self.transactional_id, method, args, self._timeout_s,
                                                  self._coordinator)
        return out

    def _check(self, code: int, what: str) -> None:
        if code == E.NONE:
            return
        err = error_for_code(code, f"{what} of transactional id {self.transactional_id!r}")
        self._fail(err)
        raise err

    def _fail(self, err: BaseException) -> None:
        """Fencing is fatal; any other failure inside a transaction leaves it only to be aborted."""
        if isinstance(err, InvalidProducerEpochError):
            self._txn_state, self._txn_error = FATAL_ERROR, err
        elif self._txn_state == IN_TRANSACTION:
            self._txn_state, self._txn_error = ABORTABLE_ERROR, err

    def _require(self, state: str, what: str) -> None:
        if self._txn_state == state:
            return
        if self._txn_state == FATAL_ERROR and self._txn_error is not None:
            raise self._txn_error
        if self._txn_state == ABORTABLE_ERROR and state == IN_TRANSACTION:
            raise InvalidTxnStateError(f"cannot {what}: the transaction failed ({self._txn_error!r}); abort it")
        raise InvalidTxnStateError(f"cannot {what} in transaction state {self._txn_state}")

    # ------------------------------------------------------------------- API
    def init_transactions(self) -> None:
        """Get the id's producer id and a new epoch (fencing every older producer of the id);
        an open transaction of an older one is aborted first."""
        self._require(UNINITIALIZED, "init_transactions")
        self._init_producer_id(-1, -1)

    def _init_producer_id(self, producer_id: int, epoch: int) -> None:
        code, pid, new_epoch = self._call("init_producer_id", self._txn_timeout_ms, producer_id, epoch)
        self._check(code, "InitProducerId")
        with self._lock:
            self._producer_id, self._epoch = pid, new_epoch
            self._partitions.clear()  # new epoch: every partition's sequence starts at 0
        self._txn_state, self._txn_error = READY, None

    def begin_transaction(self) -> None:
        if self._txn_state == UNINITIALIZED:
            self.init_transactions()
        self._require(READY, "begin_transaction")
        self._added.clear()
        self._offsets_groups.clear()
        self._txn_state = IN_TRANSACTION

    def send_batch(self, topic: str, values: Any, keys: Any = None, **kw: Any):
        self._require(IN_TRANSACTION, "send_batch")
        return super().send_batch(topic, values, keys, **kw)

    def send_offsets_to_transaction(self, offsets: dict, group: Any) -> None:
        """Commit a consumer group's offsets with this transaction: they apply only if it commits.

        ``offsets``: {(topic, partition): next offset to read (int, OffsetAndMetadata or (offset,
        metadata))}. ``group``: a group id, a consumer's ``group_metadata()`` (its generation and
        member id are then checked, as Kafka does) or the consumer itself.
        """
        self._require(IN_TRANSACTION, "send_offsets_to_transaction")
        meta = _group_metadata(group)
        gid = meta["group_id"]
        if gid not in self._offsets_groups:
            self._check(self._call("add_offsets", self._producer_id, self._epoch, gid), "AddOffsetsToTxn")
            self._offsets_groups.add(gid)
        topics: dict[str, list[dict]] = {}
        for (t, p), v in offsets.items():
            off, md = (v, "") if isinstance(v, int) else (v[0], v[1])
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": off,
                                             "committed_leader_epoch": -1, "committed_metadata": md})
        body = {"transactional_id": self.transactional_id, "group_id": gid, "producer_id": self._producer_id,
                "producer_epoch": self._epoch, "generation_id": meta.get("generation", -1),
                "member_id": meta.get("member_id") or "", "group_instance_id": meta.get("group_instance_id"),
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        from logan_ray.actors.group_coordinator import group_coordinator

        resp = get(group_coordinator(gid).txn_offset_commit.remote(body, 3))
        failed = {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"]
                  for p in t["partitions"] if p["error_code"] != E.NONE}
        if failed:
            codes = set(failed.values())
            names = ", ".join(sorted(E.ERROR_NAMES.get(c, str(c)) for c in codes))
            if codes & {E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.FENCED_INSTANCE_ID}:
                err: LoganError = CommitFailedError(f"group {gid}: transactional commit refused ({names})", min(codes))
            else:
                err = error_for_code(min(codes), f"TxnOffsetCommit of group {gid} for {sorted(failed)}")
            self._fail(err)
            raise err

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit: every record of the transaction becomes visible to read_committed
        consumers, and its offsets apply. A failure leaves the transaction only to be aborted."""
        self._require(IN_TRANSACTION, "commit_transaction")
        try:
            self.flush(timeout)
        except LoganError as e:
            err = self._as_fenced(e)
            self._fail(err)
            raise err from e
        self._end(True)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: the records sent (flushed first, their errors dropped) stay hidden from read_committed
        consumers and the offsets sent with it are dropped."""
        if self._txn_state not in (IN_TRANSACTION, ABORTABLE_ERROR):
            self._require(IN_TRANSACTION, "abort_transaction")
        failed = self._txn_state == ABORTABLE_ERROR
        try:
            self.flush(timeout)
        except LoganError as e:
            if isinstance(e, InvalidProducerEpochError):
                err = self._as_fenced(e)
                self._fail(err)
                raise err from e
            failed = True
        self._end(False)
        if failed:  # KIP-360: a new epoch, so the partitions' sequences start afresh
            self._init_producer_id(self._producer_id, self._epoch)

    def _end(self, commit: bool) -> None:
        if self._added or self._offsets_groups:
            code, _pid, _epoch = self._call("end_txn", self._producer_id, self._epoch, commit, 0)
            self._check(code, "EndTxn")
        self._added.clear()
        self._offsets_groups.clear()
        self._txn_state, self._txn_error = READY, None

    @staticmethod
    def _as_fenced(e: LoganError) -> LoganError:
        if isinstance(e, InvalidProducerEpochError) and not isinstance(e, ProducerFencedError):
            fenced = ProducerFencedError(f"fenced by a newer producer with the same transactional id: {e}")
            fenced.code = e.code
            return fenced
        return e

    def close(self, timeout: float | None = None) -> None:
        """Close; an open transaction is aborted first (as Kafka's coordinator would on its timeout)."""
        if self._closed:
            return
        if self._txn_state in (IN_TRANSACTION, ABORTABLE_ERROR):
            try:
                self.abort_transaction(timeout)
            except LoganError as e:
                log.warning("closing %r: abort failed: %s", self.transactional_id, e)
        try:
            super().close(timeout)
        except LoganError as e:
            if self._txn_state != FATAL_ERROR:
                raise
            log.info("closing fenced %r: %s", self.transactional_id, e)

    # ----------------------------------------------------------- partitions
    def _send(self, b: _Batch, state: _PartitionState, limit: int) -> None:
        """Add the batch's partition to the transaction before its first batch goes out; a refusal
        fails the batch (and the transaction) instead of sending it."""
        tp = (b.topic, b.partition)
        if tp not in self._added:
            err = None
            if self._txn_state != IN_TRANSACTION:
                err = InvalidTxnStateError(f"cannot add {tp} to the transaction in state {self._txn_state}")
            else:
                try:
                    self._check(self._call("add_partitions", self._producer_id, self._epoch, [tp]),
                                "AddPartitionsToTxn")
                except LoganError as e:
                    err = e
            if err is not None:
                self._fail(err)
                b.error, b.done = err, True
                self._note_error(err)
                return
            self._added.add(tp)
        super()._send(b, state, limit)

    def _recover_sequence(self, state: _PartitionState, failed: _Batch) -> None:
        """No local epoch bump (the coordinator owns the epoch): the failure makes the transaction
        abortable, and abort_transaction() asks the coordinator for a new epoch (KIP-360)."""
        self._fail(self._as_fenced(failed.error) if isinstance(failed.error, LoganError) else
                   TransactionError(str(failed.error)))


def _group_metadata(group: Any) -> dict:
    if isinstance(group, str):
        return {"group_id": group}
    if isinstance(group, dict):
        return group
    getter: Callable[[], Any] | None = getattr(group, "group_metadata", None)
    meta = getter() if getter is not None else None
    if not meta:
        raise ValueError(f"not a group id, group metadata or consumer with a group: {group!r}")
    return meta
