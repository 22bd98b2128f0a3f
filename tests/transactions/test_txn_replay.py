"""Loading ``__transaction_state`` rebuilds what the live calls built, and resends pending markers."""
from __future__ import annotations

from logan_ray.protocol import errors
from logan_ray.transactions.state import TxnState
from txn_driver import TIMEOUT_MS, Clock, coordinator, log_of


class Recorder:
    """Runs coordinator calls and keeps every record their outcomes asked to append, in order."""

    def __init__(self, c):
        self.c, self.log = c, []

    def __getattr__(self, name):
        call = getattr(self.c, name)

        def run(*args, **kwargs):
            out = call(*args, **kwargs)
            self.log += log_of(out)
            return out
        return run

    def open(self, tid, partitions=(("orders", 0), ("orders", 1))):
        init = self.init_producer_id(tid, TIMEOUT_MS)
        self.add_partitions(tid, init.producer_id, init.producer_epoch, partitions)
        return init.producer_id, init.producer_epoch


def _busy_history():
    clock = Clock()
    live = Recorder(coordinator(clock, id_expiration_ms=50_000))
    pid, epoch = live.open("committed")
    live.end_txn("committed", pid, epoch, True, transaction_version=2)
    live.markers_written("committed", pid, epoch + 1)
    live.init_producer_id("expired", TIMEOUT_MS)
    clock.now += 30_000
    pid, epoch = live.open("preparing", [("a", 0), ("b", 4)])
    live.add_offsets("preparing", pid, epoch, "group")
    live.end_txn("preparing", pid, epoch, False)
    live.open("open")
    pid, epoch = live.open("timed-out")
    clock.now += TIMEOUT_MS + 1
    live.abort_expired()
    live.init_producer_id("fenced", TIMEOUT_MS)
    live.init_producer_id("fenced", TIMEOUT_MS)
    clock.now += 25_000
    live.expire_transactional_ids()  # "committed" and "expired" go
    return live, clock


def test_replay_rebuilds_the_same_entries():
    live, clock = _busy_history()
    assert set(live.c.txns) == {"preparing", "open", "timed-out", "fenced"}
    rebuilt = coordinator(clock)
    rebuilt.load(live.log)
    assert rebuilt.txns == {tid: meta.persisted() for tid, meta in live.c.txns.items()}


def test_replay_of_every_prefix_matches_the_live_state_after_that_many_records():
    clock = Clock()
    live = Recorder(coordinator(clock))
    states = []

    def step():
        states.append((len(live.log), {t: m.persisted() for t, m in live.c.txns.items()}))

    pid, epoch = live.open("tx")
    step()
    live.end_txn("tx", pid, epoch, True, transaction_version=2)
    step()
    live.markers_written("tx", pid, epoch + 1)
    step()
    live.init_producer_id("tx", TIMEOUT_MS)
    step()
    for length, expected in states:
        rebuilt = coordinator(clock)
        rebuilt.load(live.log[:length])
        assert rebuilt.txns == expected


def test_replay_hands_out_the_markers_of_prepared_transactions_at_the_new_coordinator_epoch():
    live = Recorder(coordinator(coordinator_epoch=3))
    pid, epoch = live.open("p")
    live.init_producer_id("other", TIMEOUT_MS)
    live.end_txn("p", pid, epoch, True)
    rebuilt = coordinator()
    out = rebuilt.load(live.log, coordinator_epoch=9)
    assert [(m.topic, m.partition, m.producer_id, m.producer_epoch, m.commit, m.coordinator_epoch)
            for m in out.markers] == [("orders", 0, pid, epoch, True, 9), ("orders", 1, pid, epoch, True, 9)]
    # and the transaction completes on the new coordinator as it would have on the old
    assert rebuilt.markers_written("p", pid, epoch).error == errors.NONE
    assert rebuilt.txns["p"].state is TxnState.COMPLETE_COMMIT


def test_a_tombstone_in_the_log_removes_the_entry():
    first = log_of(coordinator().init_producer_id("tx", TIMEOUT_MS))
    rebuilt = coordinator()
    rebuilt.load(first + [(first[0][0], None)])
    assert rebuilt.txns == {}
