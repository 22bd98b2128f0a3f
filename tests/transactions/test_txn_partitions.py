"""AddPartitionsToTxn, its KIP-890 verify-only form, and AddOffsetsToTxn."""
from __future__ import annotations

import pytest

from logan_ray.protocol import errors
from logan_ray.transactions.state import TxnState
from txn_driver import TIMEOUT_MS, Clock, coordinator, ongoing


def test_the_first_partition_starts_the_transaction_at_the_clock_and_is_logged():
    clock = Clock()
    c = coordinator(clock)
    init = c.init_producer_id("tx", TIMEOUT_MS)
    clock.now += 500
    out = c.add_partitions("tx", init.producer_id, 0, [("a", 0)])
    meta = c.txns["tx"]
    assert (out.error, len(out.records)) == (errors.NONE, 1)
    assert (meta.state, meta.partitions, meta.start_ms) == (TxnState.ONGOING, {("a", 0)}, clock.now)


def test_partitions_already_in_the_transaction_write_nothing_and_new_ones_join_without_restarting_it():
    clock = Clock()
    c = coordinator(clock)
    pid, epoch = ongoing(c, partitions=[("a", 0)])
    start = c.txns["tx"].start_ms
    assert c.add_partitions("tx", pid, epoch, [("a", 0)]).records == ()
    clock.now += 100
    out = c.add_partitions("tx", pid, epoch, [("a", 0), ("b", 3)])
    assert len(out.records) == 1
    assert (c.txns["tx"].partitions, c.txns["tx"].start_ms) == ({("a", 0), ("b", 3)}, start)


def test_add_partitions_error_codes():
    c = coordinator()
    pid, epoch = ongoing(c)
    assert c.add_partitions("", pid, epoch, [("a", 0)]).error == errors.INVALID_REQUEST
    assert c.add_partitions("nobody", pid, epoch, [("a", 0)]).error == errors.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("tx", pid + 1, epoch, [("a", 0)]).error == errors.INVALID_PRODUCER_ID_MAPPING
    assert c.add_partitions("tx", pid, epoch + 1, [("a", 0)]).error == errors.PRODUCER_FENCED
    c.end_txn("tx", pid, epoch, True)
    out = c.add_partitions("tx", pid, epoch, [("a", 0)])
    assert (out.error, out.records) == (errors.CONCURRENT_TRANSACTIONS, ())


def test_add_offsets_adds_the_groups_consumer_offsets_partition():
    c = coordinator(offsets_partition=lambda group: {"g": 7}[group])
    pid, epoch = ongoing(c, partitions=[("a", 0)])
    assert c.add_offsets("tx", pid, epoch, "g").error == errors.NONE
    assert c.txns["tx"].partitions == {("a", 0), ("__consumer_offsets", 7)}
    assert c.add_offsets("tx", pid, epoch, "").error == errors.INVALID_REQUEST
    assert c.add_offsets("tx", pid, epoch + 1, "g").error == errors.PRODUCER_FENCED


def test_verify_only_answers_per_partition_and_a_partition_not_added_is_abortable():
    c = coordinator()
    pid, epoch = ongoing(c, partitions=[("a", 0)])
    assert c.verify_partitions("tx", pid, epoch, [("a", 0), ("a", 1)]) == {
        ("a", 0): errors.NONE, ("a", 1): errors.TRANSACTION_ABORTABLE}
    assert c.txns["tx"].partitions == {("a", 0)}  # verifying adds nothing


@pytest.mark.parametrize("tid, pid_delta, epoch_delta, expected", [
    ("", 0, 0, errors.INVALID_REQUEST),
    ("nobody", 0, 0, errors.INVALID_PRODUCER_ID_MAPPING),
    ("tx", 1, 0, errors.INVALID_PRODUCER_ID_MAPPING),
    ("tx", 0, -1, errors.PRODUCER_FENCED),
])
def test_verify_only_error_codes(tid, pid_delta, epoch_delta, expected):
    c = coordinator()
    c.init_producer_id("tx", TIMEOUT_MS)
    pid, epoch = ongoing(c)
    assert c.verify_partitions(tid, pid + pid_delta, epoch + epoch_delta, [("orders", 0)]) == {
        ("orders", 0): expected}


def test_verify_only_while_markers_are_pending_is_concurrent():
    c = coordinator()
    pid, epoch = ongoing(c)
    c.end_txn("tx", pid, epoch, False)
    assert c.verify_partitions("tx", pid, epoch, [("orders", 0)]) == {("orders", 0): errors.CONCURRENT_TRANSACTIONS}
