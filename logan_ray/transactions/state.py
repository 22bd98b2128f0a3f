"""What the transaction coordinator knows about one transactional.id, and its legal moves.

Kafka's ``TransactionState`` / ``TransactionMetadata``: the states carry Kafka's ids
(the byte ``__transaction_state`` stores) and names (what DescribeTransactions and
ListTransactions show), and each state lists the states it may be entered from, so
a coordinator bug becomes an exception instead of a silently wrong log record.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Kafka never hands out Short.MaxValue: the coordinator keeps it to fence with.
MAX_EPOCH = 32767


class TxnState(enum.Enum):
    """Kafka's transaction states, valued by the id ``__transaction_state`` stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name Kafka's admin APIs show ("PrepareCommit", ...)."""
        return "".join(part.title() for part in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, name: str) -> "TxnState | None":
        return _BY_NAME.get(name)


_BY_NAME = {state.kafka_name: state for state in TxnState}

#: Kafka's ``validPreviousStates`` of each state.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                                 TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}

#: States whose transaction is not finished: the producer id may not be rotated.
PENDING = frozenset({TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


class IllegalTransition(RuntimeError):
    """The coordinator tried a move Kafka's state machine forbids (a bug, never a client error)."""


def is_epoch_exhausted(epoch: int) -> bool:
    """Kafka's rule: from MAX_EPOCH - 1 on, the next bump needs a new producer id."""
    return epoch >= MAX_EPOCH - 1


@dataclass
class TxnMetadata:
    """One transactional.id's state (Kafka's ``TransactionMetadata``).

    ``last_producer_epoch`` lets a retried InitProducerId (KIP-360) get the same
    answer; like Kafka it is not written to ``__transaction_state``, so a loaded
    entry starts without it. ``transaction_version`` is the client's (KIP-890: 2
    bumps the epoch at every end).
    """

    transactional_id: str
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    timeout_ms: int = 60_000
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    start_ms: int = -1
    last_update_ms: int = -1
    transaction_version: int = 0

    def moved(self, state: TxnState, **changes: object) -> "TxnMetadata":
        """A copy in ``state`` with ``changes``; refuses a move Kafka forbids."""
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> {state.kafka_name}")
        return replace(self, state=state, **changes)

    @property
    def epoch_exhausted(self) -> bool:
        return is_epoch_exhausted(self.producer_epoch)

    def persisted(self) -> "TxnMetadata":
        """This entry as ``__transaction_state`` keeps it (what a replay rebuilds)."""
        return replace(self, last_producer_epoch=NO_PRODUCER_EPOCH)
