"""A transaction coordinator on a hand-driven clock and producer-id counter, for the tests here."""
from __future__ import annotations

import itertools

from logan_ray.transactions import TransactionCoordinator

FIRST_ID = 1000
TIMEOUT_MS = 10_000


class Clock:
    """Milliseconds that move only when a test says so."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def coordinator(clock: Clock | None = None, **kwargs) -> TransactionCoordinator:
    ids = itertools.count(FIRST_ID)
    return TransactionCoordinator(new_producer_id=lambda: next(ids), clock=clock or Clock(), **kwargs)


def ongoing(c: TransactionCoordinator, tid: str = "tx", partitions=(("orders", 0), ("orders", 1))):
    """A transactional id initialised and with a transaction open on ``partitions``: (producer id, epoch)."""
    init = c.init_producer_id(tid, TIMEOUT_MS)
    assert init.error == 0
    added = c.add_partitions(tid, init.producer_id, init.producer_epoch, partitions)
    assert added.error == 0
    return init.producer_id, init.producer_epoch


def log_of(*outcomes):
    """The (key, value) pairs the outcomes asked to append, in order."""
    return [(r.key, r.value) for o in outcomes for r in o.records]
