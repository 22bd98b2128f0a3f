"""The states and their legal predecessors are Kafka's; any other move is refused."""
from __future__ import annotations

import pytest

from logan_ray.transactions.state import VALID_PREVIOUS, IllegalTransition, TxnMetadata, TxnState, is_epoch_exhausted

S = TxnState
#: Kafka's TransactionMetadata.scala, ``validPreviousStates`` of each state.
KAFKA = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_valid_previous_states_are_kafkas():
    assert {k: set(v) for k, v in VALID_PREVIOUS.items()} == KAFKA


@pytest.mark.parametrize("source", list(S), ids=lambda s: s.kafka_name)
@pytest.mark.parametrize("target", list(S), ids=lambda s: s.kafka_name)
def test_each_transition_is_allowed_exactly_when_kafka_allows_it(source, target):
    meta = TxnMetadata("tx", 1, 0, state=source)
    if source in KAFKA[target]:
        assert meta.moved(target, producer_epoch=4) == TxnMetadata("tx", 1, 4, state=target)
    else:
        with pytest.raises(IllegalTransition):
            meta.moved(target)


def test_epochs_from_short_max_minus_one_are_exhausted():
    assert not is_epoch_exhausted(32765)
    assert is_epoch_exhausted(32766) and is_epoch_exhausted(32767)


def test_state_names_parse_back_and_unknown_names_do_not():
    assert all(S.from_kafka_name(s.kafka_name) is s for s in S)
    assert S.from_kafka_name("ongoing") is None
