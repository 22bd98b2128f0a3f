"""Idempotent-producer bookkeeping for one partition.

Kafka deduplicates retried batches per (producer id, partition) by sequence
number; we keep the same rule so a producer retrying after a lost reply, or a
partition actor re-executing an append after a crash, never writes a batch twice.
Only batch headers are consulted, never records.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Iterable

from .batch_header import BatchHeader
from .errors import LoganError

RETAINED_BATCHES = 5  # Kafka retains metadata of the last five batches per producer


class OutOfOrderSequenceError(LoganError):
    code = 45  # OUT_OF_ORDER_SEQUENCE_NUMBER

    def __init__(self, message: str, *, ahead: bool = False, unknown_producer: bool = False) -> None:
        super().__init__(message)
        self.ahead = ahead  # a later batch arrived before its predecessor (may still come)
        self.unknown_producer = unknown_producer  # no state for this producer: its start may be lost


class InvalidProducerEpochError(LoganError):
    code = 47  # INVALID_PRODUCER_EPOCH


@dataclass
class _Producer:
    epoch: int
    # (first_seq, last_seq, base_offset, log_append_time) of recent batches, oldest first
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
                raise OutOfOrderSequenceError(
                    f"producer {h.producer_id} new epoch {h.producer_epoch} must start at sequence 0, got {h.base_sequence}"
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

    def record(self, h: BatchHeader, base_offset: int, log_append_time: int = -1) -> None:
        if h.producer_id < 0 or h.base_sequence < 0:
            return
        p = self._producers.get(h.producer_id)
        if p is None or h.producer_epoch > p.epoch:
            p = self._producers[h.producer_id] = _Producer(h.producer_epoch)
        p.batches.append((h.base_sequence, h.last_sequence, base_offset, log_append_time))

    @classmethod
    def rebuild(cls, headers: Iterable[BatchHeader]) -> "ProducerStateTable":
        """Rebuild from the headers of the log's tail, oldest first (after a restart)."""
        table = cls()
        for h in headers:
            table.record(h, h.base_offset, h.max_timestamp if h.is_log_append_time else -1)
        return table
