"""InitProducerId: new ids, epoch bumps, fencing zombies and ongoing transactions, KIP-360 recovery."""
from __future__ import annotations

from dataclasses import replace

import pytest

from logan_ray.protocol import errors
from logan_ray.transactions.log_codec import decode_key, decode_value
from logan_ray.transactions.state import MAX_EPOCH, TxnState
from txn_driver import FIRST_ID, TIMEOUT_MS, coordinator, ongoing


def test_without_a_transactional_id_every_call_gets_a_new_producer_id_and_nothing_is_logged():
    c = coordinator()
    first, second = c.init_producer_id(None, TIMEOUT_MS), c.init_producer_id(None, TIMEOUT_MS)
    assert (first.producer_id, first.producer_epoch, second.producer_id) == (FIRST_ID, 0, FIRST_ID + 1)
    assert first.records == () and c.txns == {}


def test_an_empty_transactional_id_is_an_invalid_request():
    assert coordinator().init_producer_id("", TIMEOUT_MS).error == errors.INVALID_REQUEST


@pytest.mark.parametrize("timeout_ms", [0, -1, 900_001])
def test_a_timeout_outside_one_ms_to_the_maximum_is_refused(timeout_ms):
    c = coordinator()
    assert c.init_producer_id("tx", timeout_ms).error == errors.INVALID_TRANSACTION_TIMEOUT
    assert c.txns == {}
    assert c.init_producer_id("tx", 900_000).error == errors.NONE


def test_a_new_transactional_id_gets_a_new_producer_id_at_epoch_0_and_one_record():
    c = coordinator()
    out = c.init_producer_id("tx", TIMEOUT_MS)
    assert (out.error, out.producer_id, out.producer_epoch) == (errors.NONE, FIRST_ID, 0)
    (record,) = out.records
    assert decode_key(record.key) == "tx"
    assert decode_value("tx", record.value) == c.txns["tx"].persisted()
    assert c.txns["tx"].state is TxnState.EMPTY and c.txns["tx"].timeout_ms == TIMEOUT_MS


def test_a_second_producer_bumps_the_epoch_and_fences_the_zombie():
    c = coordinator()
    zombie = c.init_producer_id("tx", TIMEOUT_MS)
    fresh = c.init_producer_id("tx", TIMEOUT_MS)
    assert (fresh.producer_id, fresh.producer_epoch) == (zombie.producer_id, 1)
    assert c.add_partitions("tx", zombie.producer_id, 0, [("t", 0)]).error == errors.PRODUCER_FENCED
    assert c.add_partitions("tx", fresh.producer_id, 1, [("t", 0)]).error == errors.NONE


@pytest.mark.parametrize("server_version, abort_epoch", [(2, 2), (0, 1)])
def test_an_ongoing_transaction_is_aborted_first_and_the_client_told_to_retry(server_version, abort_epoch):
    c = coordinator(transaction_version=server_version)
    pid, epoch = ongoing(c)
    out = c.init_producer_id("tx", TIMEOUT_MS)
    assert out.error == errors.CONCURRENT_TRANSACTIONS
    meta = c.txns["tx"]
    assert (meta.state, meta.producer_epoch) == (TxnState.PREPARE_ABORT, abort_epoch)
    assert [(m.topic, m.partition, m.producer_id, m.producer_epoch, m.commit) for m in out.markers] == [
        ("orders", 0, pid, abort_epoch, False), ("orders", 1, pid, abort_epoch, False)]
    assert decode_value("tx", out.records[-1].value) == meta.persisted()
    # the old producer is fenced; the new one waits for the markers, then gets the next epoch
    assert c.end_txn("tx", pid, epoch, True).error == errors.PRODUCER_FENCED
    assert c.init_producer_id("tx", TIMEOUT_MS).error == errors.CONCURRENT_TRANSACTIONS
    assert c.markers_written("tx", pid, abort_epoch).error == errors.NONE
    retry = c.init_producer_id("tx", TIMEOUT_MS)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (errors.NONE, pid, abort_epoch + 1)


@pytest.mark.parametrize("state", [TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT])
def test_while_markers_are_pending_init_is_concurrent_and_writes_nothing(state):
    c = coordinator()
    pid, epoch = ongoing(c)
    c.end_txn("tx", pid, epoch, state is TxnState.PREPARE_COMMIT)
    out = c.init_producer_id("tx", TIMEOUT_MS)
    assert (out.error, out.records, c.txns["tx"].state) == (errors.CONCURRENT_TRANSACTIONS, (), state)


def test_kip_360_a_producer_recovering_with_its_current_epoch_gets_the_next_one():
    c = coordinator()
    first = c.init_producer_id("tx", TIMEOUT_MS)
    out = c.init_producer_id("tx", TIMEOUT_MS, first.producer_id, 0)
    assert (out.error, out.producer_id, out.producer_epoch) == (errors.NONE, first.producer_id, 1)
    assert c.txns["tx"].last_producer_epoch == 0
    # the same request retried (its answer lost) gets the same answer, no second bump
    again = c.init_producer_id("tx", TIMEOUT_MS, first.producer_id, 0)
    assert (again.error, again.producer_epoch) == (errors.NONE, 1)


def test_kip_360_a_producer_whose_epoch_was_taken_by_another_is_fenced():
    c = coordinator()
    first = c.init_producer_id("tx", TIMEOUT_MS)
    c.init_producer_id("tx", TIMEOUT_MS)  # another producer: epoch 1, last epoch forgotten
    c.init_producer_id("tx", TIMEOUT_MS)  # and another: epoch 2
    assert c.init_producer_id("tx", TIMEOUT_MS, first.producer_id, 0).error == errors.PRODUCER_FENCED
    assert c.init_producer_id("tx", TIMEOUT_MS, first.producer_id + 77, 2).error == errors.PRODUCER_FENCED
    assert c.txns["tx"].producer_epoch == 2


def test_an_exhausted_epoch_rotates_the_producer_id_and_a_kip_360_retry_still_matches():
    c = coordinator()
    first = c.init_producer_id("tx", TIMEOUT_MS)
    c.txns["tx"] = replace(c.txns["tx"], producer_epoch=MAX_EPOCH - 1)
    out = c.init_producer_id("tx", TIMEOUT_MS, first.producer_id, MAX_EPOCH - 1)
    assert (out.error, out.producer_id, out.producer_epoch) == (errors.NONE, FIRST_ID + 1, 0)
    assert c.txns["tx"].previous_producer_id == first.producer_id
    retry = c.init_producer_id("tx", TIMEOUT_MS, first.producer_id, MAX_EPOCH - 1)
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (errors.NONE, FIRST_ID + 1, 0)
