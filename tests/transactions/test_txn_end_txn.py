"""EndTxn: prepare, markers, completion, KIP-890 epoch bumps, idempotent retries, late acknowledgements."""
from __future__ import annotations

from dataclasses import replace

import pytest

from logan_ray.protocol import errors
from logan_ray.transactions.log_codec import decode_value
from logan_ray.transactions.state import MAX_EPOCH, TxnState
from txn_driver import FIRST_ID, coordinator, ongoing


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_version_0_end_prepares_hands_out_markers_then_completes(commit):
    c = coordinator(coordinator_epoch=6)
    pid, epoch = ongoing(c)
    out = c.end_txn("tx", pid, epoch, commit)
    prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    assert (out.error, out.producer_id, out.producer_epoch, c.txns["tx"].state) == (errors.NONE, pid, epoch, prepared)
    assert [(m.topic, m.partition, m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch)
            for m in out.markers] == [("orders", p, pid, epoch, commit, 6) for p in (0, 1)]
    assert decode_value("tx", out.records[0].value).state is prepared
    done = c.markers_written("tx", pid, epoch)
    meta = c.txns["tx"]
    assert meta.state is (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    assert meta.partitions == frozenset() and decode_value("tx", done.records[0].value) == meta.persisted()


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_version_0_retried_end_is_concurrent_while_pending_and_none_once_complete(commit):
    c = coordinator()
    pid, epoch = ongoing(c)
    c.end_txn("tx", pid, epoch, commit)
    pending = c.end_txn("tx", pid, epoch, commit)
    assert (pending.error, pending.records, pending.markers) == (errors.CONCURRENT_TRANSACTIONS, (), ())
    assert c.end_txn("tx", pid, epoch, not commit).error == errors.INVALID_TXN_STATE
    c.markers_written("tx", pid, epoch)
    again = c.end_txn("tx", pid, epoch, commit)
    assert (again.error, again.records, again.markers) == (errors.NONE, (), ())
    assert c.end_txn("tx", pid, epoch, not commit).error == errors.INVALID_TXN_STATE


def test_ending_with_no_transaction_open_is_an_invalid_state():
    c = coordinator()
    init = c.init_producer_id("tx", 1000)
    assert c.end_txn("tx", init.producer_id, 0, True).error == errors.INVALID_TXN_STATE
    assert c.end_txn("tx", init.producer_id, 0, False, transaction_version=2).error == errors.INVALID_TXN_STATE


def test_end_txn_error_codes():
    c = coordinator()
    pid, epoch = ongoing(c)
    assert c.end_txn("", pid, epoch, True).error == errors.INVALID_REQUEST
    assert c.end_txn("nobody", pid, epoch, True).error == errors.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn("tx", pid + 1, epoch, True).error == errors.INVALID_PRODUCER_ID_MAPPING
    assert c.end_txn("tx", pid, epoch + 1, True).error == errors.PRODUCER_FENCED
    assert c.txns["tx"].state is TxnState.ONGOING


def test_kip_890_every_end_bumps_the_epoch_and_the_markers_carry_it():
    c = coordinator()
    pid, epoch = ongoing(c)
    out = c.end_txn("tx", pid, epoch, True, transaction_version=2)
    assert (out.error, out.producer_id, out.producer_epoch) == (errors.NONE, pid, epoch + 1)
    assert {m.producer_epoch for m in out.markers} == {epoch + 1}  # above every batch the transaction wrote
    c.markers_written("tx", pid, epoch + 1)
    # the next transaction runs at the new epoch; the old one is fenced from starting another
    assert c.add_partitions("tx", pid, epoch, [("orders", 0)]).error == errors.PRODUCER_FENCED
    assert c.add_partitions("tx", pid, epoch + 1, [("orders", 0)]).error == errors.NONE
    nxt = c.end_txn("tx", pid, epoch + 1, False, transaction_version=2)
    assert (nxt.error, nxt.producer_epoch) == (errors.NONE, epoch + 2)


def test_kip_890_a_retried_end_is_answered_idempotently_without_writing_again():
    c = coordinator()
    for _ in range(3):
        c.init_producer_id("tx", 1000)
    pid, epoch = ongoing(c)
    assert epoch == 3
    c.end_txn("tx", pid, epoch, True, transaction_version=2)
    pending = c.end_txn("tx", pid, epoch, True, transaction_version=2)
    assert (pending.error, pending.records, pending.markers) == (errors.CONCURRENT_TRANSACTIONS, (), ())
    c.markers_written("tx", pid, epoch + 1)
    again = c.end_txn("tx", pid, epoch, True, transaction_version=2)
    assert (again.error, again.producer_id, again.producer_epoch, again.records, again.markers) == (
        errors.NONE, pid, epoch + 1, (), ())
    assert c.end_txn("tx", pid, epoch, False, transaction_version=2).error == errors.INVALID_TXN_STATE
    # an epoch two below is no retry: that producer is fenced
    assert c.end_txn("tx", pid, epoch - 1, True, transaction_version=2).error == errors.PRODUCER_FENCED


def test_kip_890_an_exhausted_epoch_moves_to_a_new_producer_id_at_the_end():
    c = coordinator()
    pid, _ = ongoing(c)
    c.txns["tx"] = replace(c.txns["tx"], producer_epoch=MAX_EPOCH - 1)
    out = c.end_txn("tx", pid, MAX_EPOCH - 1, True, transaction_version=2)
    new_pid = FIRST_ID + 1
    assert (out.error, out.producer_id, out.producer_epoch) == (errors.NONE, new_pid, 0)
    assert {(m.producer_id, m.producer_epoch) for m in out.markers} == {(pid, MAX_EPOCH)}
    c.markers_written("tx", pid, MAX_EPOCH)
    meta = c.txns["tx"]
    assert (meta.producer_id, meta.producer_epoch, meta.previous_producer_id) == (new_pid, 0, pid)
    retry = c.end_txn("tx", pid, MAX_EPOCH - 1, True, transaction_version=2)
    assert (retry.error, retry.producer_id, retry.producer_epoch, retry.records) == (errors.NONE, new_pid, 0, ())


def test_late_marker_acknowledgement_never_completes_a_later_transaction():
    c = coordinator()
    pid, epoch = ongoing(c)
    c.end_txn("tx", pid, epoch, True, transaction_version=2)
    # while the markers of one transaction are pending, the next cannot start anywhere
    assert c.add_partitions("tx", pid, epoch + 1, [("orders", 0)]).error == errors.CONCURRENT_TRANSACTIONS
    assert c.markers_written("tx", pid, epoch + 1).error == errors.NONE
    assert c.add_partitions("tx", pid, epoch + 1, [("orders", 0)]).error == errors.NONE
    # the same acknowledgement delivered again, and one from an older epoch, change nothing
    late = c.markers_written("tx", pid, epoch + 1)
    stale = c.markers_written("tx", pid, epoch)
    assert (late.error, late.records) == (errors.INVALID_TXN_STATE, ())
    assert (stale.error, stale.records) == (errors.PRODUCER_FENCED, ())
    assert c.markers_written("tx", pid + 1, epoch + 1).error == errors.INVALID_PRODUCER_ID_MAPPING
    assert c.txns["tx"].state is TxnState.ONGOING
    # a late batch of the ended transaction on a partition not added to this one cannot join it
    assert c.verify_partitions("tx", pid, epoch + 1, [("orders", 1)]) == {("orders", 1): errors.TRANSACTION_ABORTABLE}
    assert c.verify_partitions("tx", pid, epoch, [("orders", 0)]) == {("orders", 0): errors.PRODUCER_FENCED}
