"""The transaction coordinator's core: Kafka's ``TransactionCoordinator`` without I/O.

It owns the entries of the transactional ids that map to one ``__transaction_state``
partition and answers the coordinator's requests with Kafka's error codes. It does
nothing itself: every answer (an ``Outcome``) lists the records to append to
``__transaction_state`` and the transaction markers to write, and the caller (an
actor, later) performs them. It is pure so every rule can be tested alone and so a
replay of the log (``load``) rebuilds exactly what the live calls built.

The caller's contract: append an outcome's records before it answers the client; if
that append fails, drop this object and ``load`` the partition again (Kafka keeps a
pending state instead; a new coordinator epoch does the same job here). After the
markers of a PrepareCommit / PrepareAbort are all written, call ``markers_written``,
whose record completes the transaction.

Transaction version 2 (KIP-890) is the client's choice per EndTxn (v5+): every end
then bumps the producer epoch, markers carry the bumped epoch (so a late batch of
the ended transaction is fenced by the partition and cannot join the next one), and
a retried EndTxn is recognised by its epoch being one below the stored one.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Iterable

from logan_ray.protocol import errors

from .log_codec import TxnLogRecord, decode_key, decode_value
from .state import (
    MAX_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PENDING,
    TxnMetadata,
    TxnState,
    is_epoch_exhausted,
)

OFFSETS_TOPIC = "__consumer_offsets"
#: Kafka's defaults: transaction.max.timeout.ms, transactional.id.expiration.ms.
MAX_TIMEOUT_MS = 900_000
ID_EXPIRATION_MS = 7 * 24 * 3600 * 1000

Partition = tuple[str, int]


@dataclass(frozen=True)
class MarkerWrite:
    """One transaction marker the caller must append to a partition (WriteTxnMarkers' entry)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    commit: bool
    coordinator_epoch: int
    transactional_id: str


@dataclass(frozen=True)
class Outcome:
    """The answer to one call: Kafka's error code, the producer id/epoch to return, the work to do."""

    error: int = errors.NONE
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH
    records: tuple[TxnLogRecord, ...] = ()
    markers: tuple[MarkerWrite, ...] = ()

    def __add__(self, other: "Outcome") -> "Outcome":
        return replace(self, records=self.records + other.records, markers=self.markers + other.markers)


def _fail(error: int) -> Outcome:
    return Outcome(error=error)


@dataclass
class TransactionCoordinator:
    """Entries by transactional id and the rules of Kafka's coordinator over them.

    ``new_producer_id`` hands out producer ids (Kafka's ProducerIdManager); ``clock``
    gives milliseconds, injected so timeouts are testable; ``transaction_version``
    is the server's level, used for the aborts the coordinator starts itself;
    ``offsets_partition`` maps a group id to its ``__consumer_offsets`` partition.
    """

    new_producer_id: Callable[[], int]
    clock: Callable[[], int]
    coordinator_epoch: int = 0
    max_timeout_ms: int = MAX_TIMEOUT_MS
    id_expiration_ms: int = ID_EXPIRATION_MS
    transaction_version: int = 2
    offsets_partition: Callable[[str], int] = lambda group_id: 0
    txns: dict[str, TxnMetadata] = field(default_factory=dict)

    # ------------------------------------------------------------ writing
    def _write(self, meta: TxnMetadata) -> TxnLogRecord:
        if meta.state is TxnState.DEAD:
            self.txns.pop(meta.transactional_id, None)
        else:
            self.txns[meta.transactional_id] = meta
        return TxnLogRecord.of(meta)

    def _markers(self, meta: TxnMetadata) -> tuple[MarkerWrite, ...]:
        commit = meta.state is TxnState.PREPARE_COMMIT
        return tuple(
            MarkerWrite(topic, partition, meta.producer_id, meta.producer_epoch, commit,
                        self.coordinator_epoch, meta.transactional_id)
            for topic, partition in sorted(meta.partitions))

    # ------------------------------------------------------------ InitProducerId
    def init_producer_id(self, transactional_id: str | None, timeout_ms: int,
                         producer_id: int = NO_PRODUCER_ID, producer_epoch: int = NO_PRODUCER_EPOCH) -> Outcome:
        """InitProducerId: a new id, or the next epoch of a transactional id (fencing older producers).

        ``producer_id``/``producer_epoch`` other than -1 are the client's current ones
        (KIP-360: a producer recovering from an error keeps its id if nobody fenced it).
        An ongoing transaction is aborted first and the client told to retry
        (CONCURRENT_TRANSACTIONS), as Kafka does.
        """
        if transactional_id is None:
            return Outcome(producer_id=self.new_producer_id(), producer_epoch=0)
        if transactional_id == "":
            return _fail(errors.INVALID_REQUEST)
        if not 0 < timeout_ms <= self.max_timeout_ms:
            return _fail(errors.INVALID_TRANSACTION_TIMEOUT)
        expected = None if producer_id == NO_PRODUCER_ID and producer_epoch == NO_PRODUCER_EPOCH \
            else (producer_id, producer_epoch)
        now = self.clock()
        meta = self.txns.get(transactional_id)
        if meta is None:
            meta = TxnMetadata(transactional_id, self.new_producer_id(), timeout_ms=timeout_ms,
                               last_update_ms=now)
        if expected is not None and not (
                meta.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == meta.producer_id
                or (expected[0] == meta.previous_producer_id and is_epoch_exhausted(expected[1]))):
            return _fail(errors.PRODUCER_FENCED)
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return _fail(errors.CONCURRENT_TRANSACTIONS)
        if meta.state is TxnState.ONGOING:
            return replace(self._fence_and_abort(meta, now), error=errors.CONCURRENT_TRANSACTIONS)
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            new = meta.moved(TxnState.EMPTY, producer_id=self.new_producer_id(), producer_epoch=0,
                             previous_producer_id=meta.producer_id,
                             last_producer_epoch=meta.producer_epoch if expected else NO_PRODUCER_EPOCH,
                             timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, last_update_ms=now)
        else:
            bumped = meta.producer_epoch + 1
            if expected is None:
                epochs = (bumped, NO_PRODUCER_EPOCH)
            elif meta.producer_epoch == NO_PRODUCER_EPOCH or expected[1] == meta.producer_epoch:
                epochs = (bumped, meta.producer_epoch)
            elif expected[1] == meta.last_producer_epoch:
                epochs = (meta.producer_epoch, meta.last_producer_epoch)  # a retry of a call that succeeded
            else:
                return _fail(errors.PRODUCER_FENCED)
            new = meta.moved(TxnState.EMPTY, producer_epoch=epochs[0], last_producer_epoch=epochs[1],
                             timeout_ms=timeout_ms, partitions=frozenset(), start_ms=-1, last_update_ms=now)
        record = self._write(new)
        return Outcome(producer_id=new.producer_id, producer_epoch=new.producer_epoch, records=(record,))

    def _fence_and_abort(self, meta: TxnMetadata, now: int) -> Outcome:
        """Abort ``meta``'s ongoing transaction under a bumped epoch, so its producer is fenced.

        As Kafka: PrepareEpochFence (never written) bumps the epoch, then the abort,
        run at the server's transaction version, bumps it again under version 2. The
        fenced producer's epoch is then at least two below, so none of its requests
        passes for a retry of an end (PRODUCER_FENCED); the markers carry the last
        epoch. Epochs stop at MAX_EPOCH, which only the coordinator uses.
        """
        fenced = min(meta.producer_epoch + 1, MAX_EPOCH)
        fencing = meta.moved(TxnState.PREPARE_EPOCH_FENCE, producer_epoch=fenced,
                             last_producer_epoch=NO_PRODUCER_EPOCH)
        v2 = self.transaction_version >= 2
        new = fencing.moved(TxnState.PREPARE_ABORT, producer_epoch=min(fenced + 1, MAX_EPOCH) if v2 else fenced,
                            last_producer_epoch=fenced if v2 else NO_PRODUCER_EPOCH,
                            transaction_version=self.transaction_version, last_update_ms=now)
        record = self._write(new)
        return Outcome(producer_id=new.producer_id, producer_epoch=new.producer_epoch, records=(record,),
                       markers=self._markers(new))

    # ------------------------------------------------------------ partitions and offsets
    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> TxnMetadata | int:
        if not transactional_id:
            return errors.INVALID_REQUEST
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return errors.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return errors.PRODUCER_FENCED
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return errors.CONCURRENT_TRANSACTIONS
        return meta

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[Partition]) -> Outcome:
        """AddPartitionsToTxn: the partitions join the transaction, which starts if none is open."""
        checked = self._check_producer(transactional_id, producer_id, producer_epoch)
        if isinstance(checked, int):
            return _fail(checked)
        wanted = frozenset(partitions)
        if checked.state is TxnState.ONGOING and wanted <= checked.partitions:
            return Outcome(producer_id=producer_id, producer_epoch=producer_epoch)  # nothing to record
        now = self.clock()
        start = checked.start_ms if checked.state is TxnState.ONGOING else now
        new = checked.moved(TxnState.ONGOING, partitions=checked.partitions | wanted, start_ms=start,
                            last_update_ms=now)
        return Outcome(producer_id=producer_id, producer_epoch=producer_epoch, records=(self._write(new),))

    def verify_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                          partitions: Iterable[Partition]) -> dict[Partition, int]:
        """AddPartitionsToTxn v4+ ``verify_only`` (KIP-890 part 1): is each partition in the transaction?

        A partition leader asks before it accepts a transaction's first batch; one not
        added gets TRANSACTION_ABORTABLE, so a batch arriving after its transaction
        ended (a late write) cannot start a transaction of its own.
        """
        wanted = list(partitions)
        if not transactional_id:
            return {p: errors.INVALID_REQUEST for p in wanted}
        meta = self.txns.get(transactional_id)
        error = (errors.INVALID_PRODUCER_ID_MAPPING if meta is None or meta.producer_id != producer_id
                 else errors.PRODUCER_FENCED if meta.producer_epoch != producer_epoch
                 else errors.CONCURRENT_TRANSACTIONS if meta.state in (TxnState.PREPARE_COMMIT,
                                                                       TxnState.PREPARE_ABORT)
                 else None)
        if error is not None:
            return {p: error for p in wanted}
        return {p: errors.NONE if p in meta.partitions else errors.TRANSACTION_ABORTABLE for p in wanted}

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> Outcome:
        """AddOffsetsToTxn: the group's ``__consumer_offsets`` partition joins the transaction."""
        if not group_id:
            return _fail(errors.INVALID_REQUEST)
        partition = (OFFSETS_TOPIC, self.offsets_partition(group_id))
        return self.add_partitions(transactional_id, producer_id, producer_epoch, [partition])

    # ------------------------------------------------------------ EndTxn
    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool,
                transaction_version: int = 0) -> Outcome:
        """EndTxn: prepare the commit or abort and hand out its markers.

        ``transaction_version`` 2 (EndTxn v5+, KIP-890) bumps the epoch at this end and
        returns it; a retry (the old epoch, once the stored one moved past it) gets the
        same answer while the markers are pending (CONCURRENT_TRANSACTIONS) and NONE once
        the transaction completed, without writing anything again.
        """
        if not transactional_id:
            return _fail(errors.INVALID_REQUEST)
        meta = self.txns.get(transactional_id)
        if meta is None:
            return _fail(errors.INVALID_PRODUCER_ID_MAPPING)
        v2 = meta.transaction_version >= 2
        retry_on_overflow = (v2 and meta.previous_producer_id == producer_id
                             and producer_epoch == MAX_EPOCH - 1 and meta.producer_epoch == 0)
        retry_on_bump = v2 and meta.producer_epoch == producer_epoch + 1
        if not v2:
            valid_epoch = producer_epoch == meta.producer_epoch
        elif meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            valid_epoch = retry_on_bump
        elif meta.state in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            valid_epoch = retry_on_bump or retry_on_overflow
        else:
            valid_epoch = producer_epoch == meta.producer_epoch
        if meta.producer_id != producer_id and not retry_on_overflow:
            return _fail(errors.INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            return _fail(errors.PRODUCER_FENCED)
        same = (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT) if commit else \
            (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT)
        if meta.state is same[0]:
            return _fail(errors.CONCURRENT_TRANSACTIONS)
        if meta.state is same[1]:
            return Outcome(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch)
        if meta.state is not TxnState.ONGOING:
            return _fail(errors.INVALID_TXN_STATE)  # Empty, or the opposite ending of the last one
        bump = transaction_version >= 2
        next_id = self.new_producer_id() if bump and meta.epoch_exhausted else NO_PRODUCER_ID
        new = meta.moved(TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                         producer_epoch=meta.producer_epoch + 1 if bump else meta.producer_epoch,
                         last_producer_epoch=meta.producer_epoch if bump else meta.last_producer_epoch,
                         next_producer_id=next_id, transaction_version=transaction_version,
                         last_update_ms=self.clock())
        record = self._write(new)
        answer = (next_id, 0) if next_id != NO_PRODUCER_ID else (new.producer_id, new.producer_epoch)
        return Outcome(producer_id=answer[0], producer_epoch=answer[1], records=(record,),
                       markers=self._markers(new))

    def markers_written(self, transactional_id: str, producer_id: int, producer_epoch: int) -> Outcome:
        """Every marker of the prepared transaction is in its partition: complete it.

        A late acknowledgement (another producer id or epoch, or no transaction being
        prepared) is refused and changes nothing, so it can never complete a later
        transaction of the same transactional id.
        """
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return _fail(errors.INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != producer_epoch:
            return _fail(errors.PRODUCER_FENCED)
        if meta.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return _fail(errors.INVALID_TXN_STATE)
        done = TxnState.COMPLETE_COMMIT if meta.state is TxnState.PREPARE_COMMIT else TxnState.COMPLETE_ABORT
        changes: dict = {}
        if meta.transaction_version >= 2 and meta.next_producer_id != NO_PRODUCER_ID:
            changes = {"producer_id": meta.next_producer_id, "producer_epoch": 0,
                       "previous_producer_id": meta.producer_id}
        new = meta.moved(done, next_producer_id=NO_PRODUCER_ID, last_producer_epoch=meta.producer_epoch,
                         partitions=frozenset(), last_update_ms=self.clock(), **changes)
        return Outcome(producer_id=new.producer_id, producer_epoch=new.producer_epoch, records=(self._write(new),))

    # ------------------------------------------------------------ timers
    def abort_expired(self) -> Outcome:
        """Abort (and fence) every ongoing transaction older than its transaction.timeout.ms."""
        now = self.clock()
        outcome = Outcome()
        for meta in sorted(self.txns.values(), key=lambda m: m.transactional_id):
            if meta.state is TxnState.ONGOING and meta.start_ms + meta.timeout_ms < now:
                outcome += self._fence_and_abort(meta, now)
        return outcome

    def expire_transactional_ids(self) -> Outcome:
        """Forget ids idle for transactional.id.expiration.ms: state Dead, a tombstone each."""
        now = self.clock()
        outcome = Outcome()
        for meta in sorted(self.txns.values(), key=lambda m: m.transactional_id):
            if meta.state not in PENDING and meta.last_update_ms + self.id_expiration_ms <= now:
                outcome += Outcome(records=(self._write(meta.moved(TxnState.DEAD, partitions=frozenset())),))
        return outcome

    # ------------------------------------------------------------ replay
    def load(self, records: Iterable[tuple[bytes, bytes | None]], coordinator_epoch: int | None = None) -> Outcome:
        """Rebuild the entries from ``__transaction_state`` records, oldest first (newest wins).

        Returns the markers of the transactions caught between prepare and complete:
        the new coordinator writes them again (markers are idempotent in a partition).
        """
        if coordinator_epoch is not None:
            self.coordinator_epoch = coordinator_epoch
        for key, value in records:
            transactional_id = decode_key(key)
            if value is None:
                self.txns.pop(transactional_id, None)
            else:
                self.txns[transactional_id] = decode_value(transactional_id, value)
        markers: tuple[MarkerWrite, ...] = ()
        for transactional_id in sorted(self.txns):
            meta = self.txns[transactional_id]
            if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                markers += self._markers(meta)
        return Outcome(markers=markers)

    # ------------------------------------------------------------ admin views
    def describe(self, transactional_id: str) -> dict:
        """One ``transaction_states`` entry of a DescribeTransactions response."""
        entry = {"error_code": errors.NONE, "transactional_id": transactional_id, "transaction_state": "",
                 "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": NO_PRODUCER_ID,
                 "producer_epoch": NO_PRODUCER_EPOCH, "topics": []}
        if not transactional_id:
            return {**entry, "error_code": errors.INVALID_REQUEST}
        meta = self.txns.get(transactional_id)
        if meta is None:
            return {**entry, "error_code": errors.TRANSACTIONAL_ID_NOT_FOUND}
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(meta.partitions):
            by_topic.setdefault(topic, []).append(partition)
        return {**entry, "transaction_state": meta.state.kafka_name, "transaction_timeout_ms": meta.timeout_ms,
                "transaction_start_time_ms": meta.start_ms, "producer_id": meta.producer_id,
                "producer_epoch": meta.producer_epoch,
                "topics": [{"topic": t, "partitions": ps} for t, ps in by_topic.items()]}

    def list_transactions(self, state_filters: Iterable[str] = (), producer_id_filters: Iterable[int] = (),
                          duration_filter_ms: int = -1) -> dict:
        """A ListTransactions response body (without throttle time), filtered as Kafka filters."""
        names = list(state_filters)
        states = {TxnState.from_kafka_name(n) for n in names} - {None}
        unknown = [n for n in names if TxnState.from_kafka_name(n) is None]
        pids = set(producer_id_filters)
        now = self.clock()
        listed = [
            {"transactional_id": m.transactional_id, "producer_id": m.producer_id,
             "transaction_state": m.state.kafka_name}
            for m in sorted(self.txns.values(), key=lambda m: m.transactional_id)
            if (not pids or m.producer_id in pids) and (not names or m.state in states)
            and not (duration_filter_ms >= 0 and now - m.start_ms <= duration_filter_ms)
        ]
        return {"error_code": errors.NONE, "unknown_state_filters": unknown, "transaction_states": listed}


#: (api key, first version that knows PRODUCER_FENCED): older clients get INVALID_PRODUCER_EPOCH.
_KNOWS_PRODUCER_FENCED = {22: 4, 24: 2, 25: 2, 26: 2}


def error_for_version(api_key: int, version: int, error: int) -> int:
    """The code a client of ``version`` understands, as Kafka's KafkaApis translates it."""
    first = _KNOWS_PRODUCER_FENCED.get(api_key)
    if error == errors.PRODUCER_FENCED and first is not None and version < first:
        return errors.INVALID_PRODUCER_EPOCH
    return error
