"""Idempotent-producer bookkeeping for one partition.

Kafka deduplicates retried batches per (producer id, partition) by sequence
number; we keep the same rule so a producer retrying after a lost reply, or a
partition actor re-executing an append after a crash, never writes a batch twice.
Only batch headers are consulted, never records. The table survives restarts
through snapshot files (see :mod:`.producer_snapshot`) and forgets producers
idle for ``producer.id.expiration.ms`` (:meth:`ProducerStateTable.expire`).

Transactions are producer state too, as in Kafka: a producer's open
transaction starts at its first transactional batch and ends with the marker
the coordinator appends (:meth:`ProducerStateTable.complete_txn`); the
partition-wide view (open transactions in offset order, the last stable
offset) is the table's :class:`.txn_state.TxnTracker`. A producer with an open
transaction never expires, and its batches must stay transactional until the
marker (Kafka's INVALID_TXN_STATE otherwise); a marker from an older producer
epoch or coordinator epoch is fenced.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple

from .batch_header import BatchHeader
from .control_records import EndTxnMarker
from .errors import InvalidTxnStateError, LoganError
from .txn_state import CompletedTxn, TxnTracker

RETAINED_BATCHES = 5  # Kafka retains metadata of the last five batches per producer
DEFAULT_EXPIRATION_MS = 86400000  # Kafka's producer.id.expiration.ms default (one day)


class OutOfOrderSequenceError(LoganError):
    code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER

    def __init__(self, message: str, *, ahead: bool = False, unknown_producer: bool = False) -> None:
        super().__init__(message)
        self.ahead = ahead  # a later batch arrived before its predecessor (may still come)
        self.unknown_producer = unknown_producer  # no state for this producer: its start may be lost


class InvalidProducerEpochError(LoganError):
    code = 47  # INVALID_PRODUCER_EPOCH


class TransactionCoordinatorFencedError(LoganError):
    """A marker from a coordinator epoch older than one this partition already saw (a zombie coordinator)."""

    code = 52  # TRANSACTION_COORDINATOR_FENCED


class ProducerBatch(NamedTuple):
    """What the table keeps of one appended batch."""

    first_seq: int
    last_seq: int
    base_offset: int
    log_append_time: int  # -1 unless the batch got LogAppendTime


class ProducerEntry(NamedTuple):
    """One producer's state as snapshots store it: its epoch, last activity and recent batches."""

    producer_id: int
    epoch: int
    last_timestamp: int  # ms of its last append here; expiration counts from it
    batches: tuple[ProducerBatch, ...]  # oldest first
    current_txn_first_offset: int = -1  # first offset of its open transaction here, -1: none
    coordinator_epoch: int = -1  # of the last marker it got here


@dataclass
class _Producer:
    epoch: int
    last_timestamp: int = -1
    # ProducerBatch of recent batches, oldest first
    batches: deque = field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))
    txn_first_offset: int = -1
    coordinator_epoch: int = -1

    def bumped(self, epoch: int) -> "_Producer":
        """The producer under a newer epoch: batches start over, its transaction and coordinator carry on."""
        return _Producer(epoch, self.last_timestamp, txn_first_offset=self.txn_first_offset,
                         coordinator_epoch=self.coordinator_epoch)

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


class ProducerStateTable:
    """Per-producer sequence state; ``check`` before append, ``record`` after."""

    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}
        self.txns = TxnTracker()  # open transactions and the last stable offset

    def __len__(self) -> int:
        return len(self._producers)

    def check(self, h: BatchHeader) -> tuple[int, int] | None:
        """Return ``(base_offset, log_append_time)`` of an already appended duplicate, or None.

        Raises OutOfOrderSequenceError for a gap and InvalidProducerEpochError for a fenced epoch.
        """
        if h.producer_id < 0 or h.base_sequence < 0:
            return None
        p = self._producers.get(h.producer_id)
        if p is None:
            if h.base_sequence == 0:
                return None
            # Either a batch that overtook the producer's first one, or a producer whose
            # state aged out of the log; the caller decides how long to wait for the former.
            raise OutOfOrderSequenceError(
                f"producer {h.producer_id} is unknown here and sent sequence {h.base_sequence}, expected 0",
                ahead=True, unknown_producer=True,
            )
        if h.producer_epoch < p.epoch:
            raise InvalidProducerEpochError(
                f"producer {h.producer_id} epoch {h.producer_epoch} is older than current epoch {p.epoch}"
            )
        if h.producer_epoch > p.epoch:
            if h.base_sequence != 0:
                # The new epoch's first batch may still be on its way (pipelined calls can be
                # started out of order), so the caller may wait for it as for any gap.
                raise OutOfOrderSequenceError(
                    f"producer {h.producer_id} new epoch {h.producer_epoch} must start at sequence 0, got {h.base_sequence}",
                    ahead=h.base_sequence < (1 << 30),
                )
            _check_in_txn(p, h)
            return None
        for first, last, base_offset, append_time in p.batches:
            if first == h.base_sequence and last == h.last_sequence:
                return base_offset, append_time
        expected = (p.last_seq + 1) & 0x7FFFFFFF
        if h.base_sequence != expected:
            gap = (h.base_sequence - expected) & 0x7FFFFFFF
            raise OutOfOrderSequenceError(
                f"producer {h.producer_id} sent sequence {h.base_sequence}, expected {expected}",
                ahead=0 < gap < (1 << 30),
            )
        _check_in_txn(p, h)
        return None

    def check_marker(self, h: BatchHeader, marker: EndTxnMarker) -> None:
        """Raise the error Kafka answers for a marker that may not end this producer's transaction.

        An older producer epoch is fenced (INVALID_PRODUCER_EPOCH), an older
        coordinator epoch too (TRANSACTION_COORDINATOR_FENCED).
        """
        p = self._producers.get(h.producer_id)
        if p is None:
            return
        if h.producer_epoch < p.epoch:
            raise InvalidProducerEpochError(
                f"transaction marker of producer {h.producer_id} has epoch {h.producer_epoch}, older than {p.epoch}")
        if marker.coordinator_epoch < p.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"transaction marker of producer {h.producer_id} comes from coordinator epoch "
                f"{marker.coordinator_epoch}, older than {p.coordinator_epoch}")

    def record(self, h: BatchHeader, base_offset: int, log_append_time: int = -1, now_ms: int | None = None) -> None:
        """Remember an appended batch; ``now_ms`` (the append's wall clock) starts its expiration time."""
        if h.producer_id < 0 or h.base_sequence < 0:
            return
        p = self._producers.get(h.producer_id)
        if p is None:
            p = self._producers[h.producer_id] = _Producer(h.producer_epoch)
        elif h.producer_epoch > p.epoch:
            p = self._producers[h.producer_id] = p.bumped(h.producer_epoch)
        p.batches.append(ProducerBatch(h.base_sequence, h.last_sequence, base_offset, log_append_time))
        stamp = now_ms if now_ms is not None else (log_append_time if log_append_time >= 0 else h.max_timestamp)
        p.last_timestamp = max(p.last_timestamp, stamp)
        if h.is_transactional and p.txn_first_offset < 0:
            p.txn_first_offset = base_offset
            self.txns.begin(h.producer_id, base_offset)

    def complete_txn(self, h: BatchHeader, marker_offset: int, marker: EndTxnMarker,
                     now_ms: int | None = None) -> CompletedTxn:
        """Apply the marker batch ``h`` appended at ``marker_offset``: the producer's transaction ends.

        Kafka's ``appendEndTxnMarker``: the producer takes the marker's epoch
        and coordinator epoch; a marker with no open transaction still
        completes one, starting at the marker (an abort of a transaction that
        wrote nothing here).
        """
        p = self._producers.get(h.producer_id)
        if p is None:
            p = self._producers[h.producer_id] = _Producer(h.producer_epoch)
        elif h.producer_epoch > p.epoch:
            p = self._producers[h.producer_id] = p.bumped(h.producer_epoch)
        p.coordinator_epoch = marker.coordinator_epoch
        p.txn_first_offset = -1
        p.last_timestamp = max(p.last_timestamp, now_ms if now_ms is not None else h.max_timestamp)
        return self.txns.complete(h.producer_id, marker_offset, not marker.committed)

    def replay(self, h: BatchHeader, now_ms: int | None = None) -> None:
        """Apply a batch read back from the log (its header carries the broker-assigned fields).

        The log does not keep append times, so expiration counts from ``now_ms``
        (the load) when given: a replay never makes a producer expire early.
        """
        self.record(h, h.base_offset, h.max_timestamp if h.is_log_append_time else -1, now_ms)

    def forget(self, producer_ids: Iterable[int]) -> None:
        for pid in producer_ids:
            self._producers.pop(pid, None)
            self.txns.forget(pid)

    def expire(self, now_ms: int, expiration_ms: int = DEFAULT_EXPIRATION_MS) -> list[int]:
        """Drop producers idle for ``expiration_ms`` (Kafka's ``producer.id.expiration.ms``); their ids.

        A batch from an expired producer is then treated as coming from an unknown one.
        A producer with an open transaction stays (its transaction holds the LSO
        until the coordinator ends it), as in Kafka.
        """
        gone = [pid for pid, p in self._producers.items()
                if now_ms - p.last_timestamp >= expiration_ms and p.txn_first_offset < 0]
        self.forget(gone)
        return gone

    def entries(self) -> Iterator[ProducerEntry]:
        for pid, p in self._producers.items():
            yield ProducerEntry(pid, p.epoch, p.last_timestamp, tuple(p.batches), p.txn_first_offset,
                                p.coordinator_epoch)

    def load(self, entries: Iterable[ProducerEntry]) -> None:
        """Install entries (from a snapshot), replacing what the table held for those ids."""
        for e in entries:
            p = self._producers[e.producer_id] = _Producer(e.epoch, e.last_timestamp,
                                                           txn_first_offset=e.current_txn_first_offset,
                                                           coordinator_epoch=e.coordinator_epoch)
            p.batches.extend(e.batches)
            self.txns.forget(e.producer_id)
            if e.current_txn_first_offset >= 0:
                self.txns.begin(e.producer_id, e.current_txn_first_offset)

    @classmethod
    def rebuild(cls, headers: Iterable[BatchHeader]) -> "ProducerStateTable":
        """Rebuild from the headers of the log's tail, oldest first (after a restart)."""
        table = cls()
        for h in headers:
            table.replay(h)
        return table


def _check_in_txn(p: _Producer, h: BatchHeader) -> None:
    """A producer inside a transaction writes only transactional batches until its marker (Kafka's rule)."""
    if p.txn_first_offset >= 0 and not h.is_transactional:
        raise InvalidTxnStateError(
            f"producer {h.producer_id} has a transaction open since offset {p.txn_first_offset}: "
            "expected a transactional batch")
