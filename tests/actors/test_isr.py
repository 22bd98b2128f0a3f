"""The leader's follower bookkeeping (actors/isr.py): high watermark, ISR shrink and expansion, Kafka's rules."""
from __future__ import annotations

from logan_ray.actors.isr import FollowerStates


def states(isr=("L", "F1", "F2"), hw=0, now=0) -> FollowerStates:
    return FollowerStates("L", ["L", "F1", "F2"], isr, high_watermark=hw, epoch_start_offset=0, now_ms=now,
                          lag_max_ms=30_000)


def test_high_watermark_is_the_smallest_isr_log_end_and_never_moves_back():
    s = states()
    assert not s.fetched("F1", 10, leader_leo=10, now_ms=1)  # F2 still at 0
    assert s.high_watermark == 0
    assert s.fetched("F2", 7, leader_leo=10, now_ms=1) and s.high_watermark == 7
    assert s.fetched("F2", 10, leader_leo=12, now_ms=2) and s.high_watermark == 10  # F1 holds it at 10
    assert not s.fetched("F1", 5, leader_leo=12, now_ms=3)  # a follower that truncated: HW stays
    assert s.high_watermark == 10


def test_with_the_leader_alone_in_sync_the_high_watermark_is_the_log_end():
    s = states(isr=("L",))
    assert s.advance(42) and s.high_watermark == 42
    s.fetched("F1", 3, leader_leo=42, now_ms=1)  # an out-of-sync follower does not hold it back
    assert s.high_watermark == 42


def test_a_follower_not_caught_up_for_lag_time_max_leaves_the_isr():
    s = states(now=0)
    s.fetched("F1", 10, leader_leo=10, now_ms=20_000)  # caught up at 20 s
    s.fetched("F2", 4, leader_leo=10, now_ms=20_000)  # fetching, but behind since 0
    assert s.to_shrink(29_000) is None
    assert s.to_shrink(31_000) == ["L", "F1"]
    s.set_isr(["L", "F1"], leader_leo=10)
    assert s.high_watermark == 10  # F2 no longer holds it back
    assert s.to_shrink(50_001) == ["L"]  # F1 silent since 20 s


def test_a_follower_joins_once_it_reaches_the_high_watermark():
    s = states(isr=("L",), hw=0)
    s.advance(10)
    s.fetched("F1", 6, leader_leo=10, now_ms=1)
    assert s.to_expand("F1") is None
    s.fetched("F1", 10, leader_leo=10, now_ms=2)
    assert s.to_expand("F1") == ["L", "F1"]
    assert s.to_expand("L") is None and s.to_expand("nobody") is None


def test_a_follower_reaching_the_leaders_previous_log_end_stays_in_sync_while_the_log_end_moves():
    """Kafka's lastFetchLeaderLogEndOffset rule: a stream of appends with no pause between two
    fetches never lets a fetch reach the log end of its own moment, yet the follower keeps up."""
    s = states(now=0)
    leo = 0
    for t in range(0, 120_000, 500):  # two minutes, the leader 100 records ahead at every fetch
        s.fetched("F1", leo, leader_leo=leo + 100, now_ms=t)
        s.fetched("F2", leo, leader_leo=leo + 100, now_ms=t)
        leo += 100
    assert s.to_shrink(120_000) is None
    s.fetched("F2", leo - 1000, leader_leo=leo + 100, now_ms=120_000)  # F2 falls behind for good
    for t in range(120_500, 160_000, 500):
        s.fetched("F1", leo, leader_leo=leo + 100, now_ms=t)
        leo += 100
    assert s.to_shrink(160_000) == ["L", "F1"]


def test_a_follower_position_past_the_leaders_log_end_is_refused_and_not_recorded():
    import pytest

    from logan_ray.storage.errors import OffsetOutOfRangeError

    s = states(isr=("L", "F1"))
    s.fetched("F1", 5, leader_leo=10, now_ms=1)
    with pytest.raises(OffsetOutOfRangeError):
        s.fetched("F1", 2 ** 62, leader_leo=10, now_ms=2)
    assert s.leo["F1"] == 5 and s.high_watermark == 5


def test_time_the_leader_did_not_run_is_not_its_followers_lag():
    s = states(now=0)
    s.fetched("F1", 0, leader_leo=0, now_ms=10_000)
    s.fetched("F2", 0, leader_leo=0, now_ms=10_000)
    s.stalled(25_000)  # the leader was stopped from 11 s to 36 s: no fetch could be served
    assert s.to_shrink(41_000) is None  # 31 s after the last fetches, 6 s of them while the leader ran
    assert s.to_shrink(65_001) == ["L"]  # the lag still counts once the leader runs


def test_a_leader_woken_from_a_stop_does_not_shrink_its_isr_for_the_fetches_it_did_not_serve():
    """A SIGSTOPped leader's expiry loop wakes late: without the rule it shrank the ISR to itself at once
    (CI's queue-checker run, where that took the partition offline)."""
    import asyncio
    import time

    from logan_ray.actors.leader_replication import LeaderReplication

    asked: list[list[str]] = []

    class Router:
        class alter_isr:  # noqa: N801 - a Ray method's shape
            @staticmethod
            def remote(topic, partition, epoch, isr, version):
                asked.append(list(isr))

                async def answer():
                    return {"isr": list(isr), "isr_version": version + 1, "accepted": True}
                return answer()

    async def scenario() -> tuple[list, list]:
        rep = LeaderReplication("t-0", Router, "t", 0, "L", ["L", "F1", "F2"], ["L", "F1", "F2"], log_start=0,
                                log_end=lambda: 0, epoch=1, lag_max_ms=400)
        rep.start()
        await asyncio.sleep(0.05)
        time.sleep(1.0)  # the whole process stopped: nothing runs, no fetch is served
        await asyncio.sleep(0.1)
        right_after = list(asked)
        await asyncio.sleep(0.6)  # running again, and still no fetch: now they lag
        rep.stop()
        return right_after, list(asked)

    right_after, later = asyncio.run(scenario())
    assert right_after == []
    assert later and later[-1] == ["L"]
