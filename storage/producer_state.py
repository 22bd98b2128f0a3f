"""Idempotent-producer bookkeeping for one partition.

Kafka deduplicates retried batches per (producer id, partition) by sequence
number; we keep the same rule so a producer retrying after a lost reply, or a
partition actor re-executing an append after a crash, never writes a batch twice.
Only batch headers are consulted, never records. The table survives restarts
through snapshot files (see :mod:`.producer_snapshot`) and forgets producers
idle for ``producer.id.expiration.ms`` (:meth:`ProducerStateTable.expire`).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable, Iterator, NamedTuple

from .batch_header import BatchHeader
from .errors import LoganError

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


@dataclass
class _Producer:
    epoch: int
    last_timestamp: int = -1
    # ProducerBatch of recent batches, oldest first
    batches: deque = field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))

    @property
    def last_seq(self) -> int:
        return self.batches[-1][1] if self.batches else -1


class ProducerStateTable:
    """Per-producer sequence state; ``check`` before append, ``record`` after."""

    def __init__(self) -> None:
        self._producers: dict[int, _Producer] = {}

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
        return None

    def record(self, h: BatchHeader, base_offset: int, log_append_time: int = -1, now_ms: int | None = None) -> None:
        """Remember an appended batch; ``now_ms`` (the append's wall clock) starts its expiration time."""
        if h.producer_id < 0 or h.base_sequence < 0:
            return
        p = self._producers.get(h.producer_id)
        if p is None or h.producer_epoch > p.epoch:
            p = self._producers[h.producer_id] = _Producer(h.producer_epoch)
        p.batches.append(ProducerBatch(h.base_sequence, h.last_sequence, base_offset, log_append_time))
        stamp = now_ms if now_ms is not None else (log_append_time if log_append_time >= 0 else h.max_timestamp)
        p.last_timestamp = max(p.last_timestamp, stamp)

    def replay(self, h: BatchHeader, now_ms: int | None = None) -> None:
        """Apply a batch read back from the log (its header carries the broker-assigned fields).

        The log does not keep append times, so expiration counts from ``now_ms``
        (the load) when given: a replay never makes a producer expire early.
        """
        self.record(h, h.base_offset, h.max_timestamp if h.is_log_append_time else -1, now_ms)

    def forget(self, producer_ids: Iterable[int]) -> None:
        for pid in producer_ids:
            self._producers.pop(pid, None)

    def expire(self, now_ms: int, expiration_ms: int = DEFAULT_EXPIRATION_MS) -> list[int]:
        """Drop producers idle for ``expiration_ms`` (Kafka's ``producer.id.expiration.ms``); their ids.

        A batch from an expired producer is then treated as coming from an unknown one.
        """
        gone = [pid for pid, p in self._producers.items() if now_ms - p.last_timestamp >= expiration_ms]
        self.forget(gone)
        return gone

    def entries(self) -> Iterator[ProducerEntry]:
        for pid, p in self._producers.items():
            yield ProducerEntry(pid, p.epoch, p.last_timestamp, tuple(p.batches))

    def load(self, entries: Iterable[ProducerEntry]) -> None:
        """Install entries (from a snapshot), replacing what the table held for those ids."""
        for e in entries:
            p = self._producers[e.producer_id] = _Producer(e.epoch, e.last_timestamp)
            p.batches.extend(e.batches)

    @classmethod
    def rebuild(cls, headers: Iterable[BatchHeader]) -> "ProducerStateTable":
        """Rebuild from the headers of the log's tail, oldest first (after a restart)."""
        table = cls()
        for h in headers:
            table.replay(h)
        return table
