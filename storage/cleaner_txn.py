"""What the cleaner does with transactions: drop aborted data, keep markers while they are needed.

Kafka's ``CleanedTransactionMetadata``, in logan-ray's terms:

* A transactional data batch of producer P at offset o belongs to an aborted
  transaction when P has an aborted-transaction entry (from the ``.txnindex``
  of the closed segments) with ``first_offset <= o < last_offset``: a producer
  has one transaction open at a time, so the ranges of one producer never
  overlap and the check needs no walk order. Such batches are removed by the
  copy pass and never enter the offset map (an aborted record must not
  supersede a committed one).
* A marker (control batch) is kept while this pass saw a batch of its
  transaction (kept, emptied or dropped as aborted): removing it while data of
  the transaction remains would reopen that transaction for anyone replaying
  the log. Once no batch of it is left, the marker goes when it lies below the
  delete horizon (first cleaned ``delete.retention.ms`` ago), like a tombstone,
  so a consumer reading from the start within that time still sees it.
* An ABORT's index entry goes into the cleaned segment only while the pass saw
  batches of its transaction (Kafka's rule): once its data is gone the entry
  cannot make a ``read_committed`` client drop anything, so dropping it is
  safe; while data remains, the entry is what makes the client drop it.

The copy pass walks every segment from the log start, so "saw a batch of the
transaction" is exact for every marker it copies: a transaction's batches
precede its marker.
"""
from __future__ import annotations

import bisect
from typing import Iterable

from .batch_header import BatchHeader, Buffer
from .control_records import read_marker
from .errors import CorruptRecordError, InvalidRecordError
from .txn_index import AbortedTxn


class TxnCleaning:
    """The transaction side of one cleaning pass (one instance per pass, fed in offset order)."""

    def __init__(self, aborted: Iterable[AbortedTxn], horizon: int) -> None:
        self.horizon = horizon  # markers below it, with no data left, may go
        self._ranges: dict[int, tuple[list[int], list[int]]] = {}  # pid -> (firsts, lasts), sorted
        self._aborts: dict[tuple[int, int], AbortedTxn] = {}  # (pid, marker offset) -> entry
        for e in sorted(aborted, key=lambda e: e.first_offset):
            firsts, lasts = self._ranges.setdefault(e.producer_id, ([], []))
            firsts.append(e.first_offset)
            lasts.append(e.last_offset)
            self._aborts[(e.producer_id, e.last_offset)] = e
        self._seen: set[int] = set()  # producers with a batch of their current transaction seen this pass
        self.entries: list[AbortedTxn] = []  # aborts to index in the cleaned segment being written
        self.markers_removed = 0
        self.aborted_batches = 0

    def is_aborted(self, h: BatchHeader) -> bool:
        """Is this data batch part of an aborted transaction?"""
        if not h.is_transactional or h.is_control:
            return False
        ranges = self._ranges.get(h.producer_id)
        if ranges is None:
            return False
        firsts, lasts = ranges
        i = bisect.bisect_right(firsts, h.base_offset) - 1
        return i >= 0 and h.base_offset < lasts[i]

    def data_batch(self, h: BatchHeader) -> None:
        """The copy pass read a data batch (whatever becomes of it)."""
        if h.is_transactional:
            self._seen.add(h.producer_id)

    def keep_marker(self, buf: Buffer, pos: int, h: BatchHeader) -> bool:
        """Keep this control batch? Records the abort entry to index when the marker stays with data."""
        if h.producer_id < 0:
            return True
        try:
            marker = read_marker(buf, pos, h)
        except (CorruptRecordError, InvalidRecordError):
            return True  # unreadable: the log keeps what it cannot judge
        if marker is None:
            return True  # another kind of control batch
        seen = h.producer_id in self._seen
        self._seen.discard(h.producer_id)
        if seen:
            entry = self._aborts.get((h.producer_id, h.base_offset))
            if entry is not None:
                self.entries.append(entry)
            return True
        if h.base_offset < self.horizon:
            self.markers_removed += 1
            return False
        return True

    def take_entries(self) -> list[AbortedTxn]:
        """The abort entries of the cleaned segment just finished."""
        out, self.entries = self.entries, []
        return out


__all__ = ["TxnCleaning"]
