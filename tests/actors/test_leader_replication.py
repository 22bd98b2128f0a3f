"""A replicated leader's starting high watermark and its checkpoint (no Ray: the bookkeeping alone)."""
from __future__ import annotations

import asyncio

from logan_ray.actors.leader_replication import LeaderReplication
from logan_ray.storage.hw_checkpoint import read_high_watermark, write_high_watermark


def leader(directory: str, isr: list[str], log_end: int = 10, log_start: int = 2) -> LeaderReplication:
    return LeaderReplication("t-0", None, "t", 0, "L", ["L", "F"], isr, log_start=log_start,
                             log_end=lambda: log_end, epoch=1, directory=directory)


def test_a_restarted_leader_starts_its_high_watermark_at_the_checkpoint_never_past_its_log(tmp_path):
    d = str(tmp_path)
    assert leader(d, ["L", "F"]).high_watermark == 2  # no checkpoint: the log start, until followers report
    assert leader(d, ["L"]).high_watermark == 10  # alone in sync: the log end
    write_high_watermark(d, 7)
    assert leader(d, ["L", "F"]).high_watermark == 7
    write_high_watermark(d, 12)  # a checkpoint ahead of a log that lost its unsynced tail
    assert leader(d, ["L", "F"]).high_watermark == 10


def test_the_high_watermark_is_checkpointed_when_it_moved(tmp_path):
    d = str(tmp_path)
    lr = leader(d, ["L", "F"])

    async def run() -> None:
        await lr.checkpoint()
        assert read_high_watermark(d) == 2
        lr.states.fetched("F", 9, 10, 0)  # the follower reports its log end 9
        await lr.checkpoint()

    asyncio.run(run())
    assert read_high_watermark(d) == 9


class _Router:
    """The controller's alter_isr: persists the change, then the answer is lost (``lose``) or comes back."""

    def __init__(self, lose: bool) -> None:
        self.lose, self.stored = lose, None
        self.alter_isr = self

    def remote(self, topic, partition, epoch, isr, version):  # noqa: ANN001 - Ray's call shape
        self.stored = list(isr)

        async def answer() -> dict:
            if self.lose:
                raise ConnectionError("the controller went away before answering")
            return {"accepted": True, "isr": list(isr), "isr_version": version + 1}

        return answer()


def three(router: _Router, log_end: list[int]) -> LeaderReplication:
    return LeaderReplication("t-0", router, "t", 0, "L", ["L", "F1", "F2"], ["L", "F1"], log_start=0,
                             log_end=lambda: log_end[0], epoch=1)


def test_a_follower_whose_joining_was_not_answered_holds_back_the_high_watermark():
    """The controller may have added F2 (and may elect it once this leader is fenced): until an answer
    says otherwise, the high watermark waits for F2 too, so nothing F2 lacks is acknowledged."""
    end = [10]
    lr = three(_Router(lose=True), end)

    async def run() -> None:
        lr.states.fetched("F1", 10, 10, 0)
        assert lr.high_watermark == 10
        await lr.follower_fetched("F2", 10)  # caught up: asked into the ISR; the answer is lost
        assert lr._router.stored == ["L", "F1", "F2"] and lr.states.isr == ["L", "F1"]
        end[0] = 20
        lr.states.fetched("F1", 20, 20, 1)
        assert lr.high_watermark == 10  # F2 (maybe in the controller's ISR) is at 10
        lr.states.fetched("F2", 20, 20, 2)
        assert lr.high_watermark == 20

    asyncio.run(run())


def test_an_answered_change_leaves_nothing_pending():
    end = [10]
    lr = three(_Router(lose=False), end)

    async def run() -> None:
        lr.states.fetched("F1", 10, 10, 0)
        await lr.follower_fetched("F2", 10)
        assert lr.states.isr == ["L", "F1", "F2"] and lr.states.pending == set()
        lr.isr_changed(["L", "F1"], 5)  # F2 died: the controller took it out
        end[0] = 20
        lr.states.fetched("F1", 20, 20, 1)
        assert lr.high_watermark == 20

    asyncio.run(run())


def test_acks_all_needs_no_lease_only_while_another_replica_confirms():
    lr = three(_Router(lose=False), [10])
    assert lr.confirmed_by_others  # F1 in the ISR
    lr.isr_changed(["L"], 3)
    assert not lr.confirmed_by_others  # alone: an acks=all write is one copy, the lease must hold
    lr.states.asking(["L", "F2"])
    assert lr.confirmed_by_others  # F2 may have joined: the high watermark waits for it
