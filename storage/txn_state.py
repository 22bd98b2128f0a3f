"""A partition's transactions in flight, and its last stable offset (LSO).

Part of the producer state (:class:`.producer_state.ProducerStateTable` owns
one): each producer's open transaction starts at the offset of its first
transactional batch here, and ends when its marker is appended. Kafka's rules
(``ProducerStateManager``):

* the *first unstable offset* is the smallest first offset of the open
  transactions and of the completed ones whose marker is not yet replicated
  (at or above the high watermark);
* the LSO is the first unstable offset when it lies below the high watermark,
  else the high watermark: a ``read_committed`` consumer reads up to it;
* an aborted transaction's index entry records, as its last stable offset, the
  first offset of the oldest transaction still open once it ended (its own
  producer's excluded), else its marker's offset + 1.

Nothing here reads or writes files; the log writes the index entries.
"""
from __future__ import annotations

from typing import NamedTuple


class CompletedTxn(NamedTuple):
    """A transaction ended by a marker in this partition."""

    producer_id: int
    first_offset: int  # its first batch here (the marker's own offset if it wrote nothing here)
    last_offset: int  # the marker's offset
    aborted: bool
    last_stable_offset: int  # for the aborted-transaction index entry (see the module docstring)


class TxnTracker:
    """Open transactions by producer id, and completed ones until the high watermark passes their marker."""

    def __init__(self) -> None:
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.unreplicated: list[CompletedTxn] = []  # in marker order

    def __len__(self) -> int:
        return len(self.ongoing)

    def begin(self, producer_id: int, first_offset: int) -> None:
        self.ongoing.setdefault(producer_id, first_offset)

    def complete(self, producer_id: int, marker_offset: int, aborted: bool) -> CompletedTxn:
        """End ``producer_id``'s transaction with the marker at ``marker_offset``."""
        first = self.ongoing.pop(producer_id, marker_offset)
        lso = min(self.ongoing.values(), default=marker_offset + 1)
        done = CompletedTxn(producer_id, first, marker_offset, aborted, lso)
        self.unreplicated.append(done)
        return done

    def forget(self, producer_id: int) -> None:
        self.ongoing.pop(producer_id, None)

    def truncate(self, log_end: int) -> None:
        """Forget what lies at or after ``log_end`` (cut off the log)."""
        self.ongoing = {p: f for p, f in self.ongoing.items() if f < log_end}
        self.unreplicated = [t for t in self.unreplicated if t.last_offset < log_end]

    def on_high_watermark(self, high_watermark: int) -> None:
        """Completed transactions whose marker is below the high watermark are stable now."""
        if self.unreplicated and self.unreplicated[0].last_offset < high_watermark:
            self.unreplicated = [t for t in self.unreplicated if t.last_offset >= high_watermark]

    def first_unstable_offset(self) -> int | None:
        firsts = list(self.ongoing.values())
        firsts.extend(t.first_offset for t in self.unreplicated)
        return min(firsts, default=None)

    def last_stable_offset(self, high_watermark: int) -> int:
        """The LSO for ``high_watermark`` (moves the unreplicated transactions it passes out first)."""
        self.on_high_watermark(high_watermark)
        first = self.first_unstable_offset()
        return first if first is not None and first < high_watermark else high_watermark


__all__ = ["CompletedTxn", "TxnTracker"]
