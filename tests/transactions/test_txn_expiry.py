"""transaction.timeout.ms aborts and fences; transactional.id.expiration.ms forgets idle ids."""
from __future__ import annotations

import pytest

from logan_ray.protocol import errors
from logan_ray.transactions.state import TxnState
from txn_driver import TIMEOUT_MS, Clock, coordinator, ongoing


def test_an_ongoing_transaction_past_its_timeout_is_aborted_and_its_producer_fenced():
    clock = Clock()
    c = coordinator(clock)
    pid, epoch = ongoing(c)
    clock.now += TIMEOUT_MS
    assert c.abort_expired().records == () and c.txns["tx"].state is TxnState.ONGOING  # at the limit
    clock.now += 1
    out = c.abort_expired()
    meta = c.txns["tx"]
    assert (meta.state, meta.producer_epoch) == (TxnState.PREPARE_ABORT, epoch + 2)
    assert [(m.partition, m.producer_id, m.producer_epoch, m.commit) for m in out.markers] == [
        (0, pid, epoch + 2, False), (1, pid, epoch + 2, False)]
    assert len(out.records) == 1
    assert c.add_partitions("tx", pid, epoch, [("orders", 2)]).error == errors.PRODUCER_FENCED
    assert c.end_txn("tx", pid, epoch, True, transaction_version=2).error == errors.PRODUCER_FENCED
    assert c.end_txn("tx", pid, epoch, True).error == errors.PRODUCER_FENCED
    assert c.abort_expired().records == ()  # once is enough


def test_the_timeout_runs_from_the_transactions_start_not_from_init():
    clock = Clock()
    c = coordinator(clock)
    init = c.init_producer_id("tx", TIMEOUT_MS)
    clock.now += 5 * TIMEOUT_MS
    c.add_partitions("tx", init.producer_id, init.producer_epoch, [("a", 0)])
    clock.now += TIMEOUT_MS - 1
    assert c.abort_expired().records == () and c.txns["tx"].state is TxnState.ONGOING


@pytest.mark.parametrize("finish", ["empty", "prepared", "completed"])
def test_only_ongoing_transactions_expire(finish):
    clock = Clock()
    c = coordinator(clock)
    if finish == "empty":
        c.init_producer_id("tx", TIMEOUT_MS)
    else:
        pid, epoch = ongoing(c)
        c.end_txn("tx", pid, epoch, True)
        if finish == "completed":
            c.markers_written("tx", pid, epoch)
    before = c.txns["tx"]
    clock.now += 10 * TIMEOUT_MS
    assert c.abort_expired().records == () and c.txns["tx"] == before


def test_idle_transactional_ids_expire_with_a_tombstone_but_open_transactions_do_not():
    clock = Clock()
    c = coordinator(clock, id_expiration_ms=60_000)
    c.init_producer_id("idle", TIMEOUT_MS)
    ongoing(c, "busy")
    clock.now += 60_000 - 1
    assert c.expire_transactional_ids().records == ()
    clock.now += 1
    out = c.expire_transactional_ids()
    assert [(r.transactional_id, r.value) for r in out.records] == [("idle", None)]
    assert set(c.txns) == {"busy"}
    # a forgotten id starts over with a new producer id
    assert c.init_producer_id("idle", TIMEOUT_MS).producer_epoch == 0
