"""The gateway's broker heartbeat (logan_ray/gateway/heartbeat.py) while Ray restarts the router.

A heartbeat sent while the router restarts waits in the restarting actor's queue. Meanwhile the
gateway keeps its lease only if Ray's GCS says the router is being restarted (and the lease still
runs); once answered, a lease that ran out meanwhile is followed by a heartbeat at once.
"""
from __future__ import annotations

import asyncio
import uuid

from logan_ray.gateway.heartbeat import Heartbeat


class _Call:
    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.calls = 0

    def remote(self, node_id: str, broker_epoch: int):
        self.calls += 1

        async def answer() -> int:
            await asyncio.sleep(self.delay_s)
            return 7
        return answer()


class _Router:
    def __init__(self, delay_s: float) -> None:
        self.broker_heartbeat = _Call(delay_s)


class _Cluster:
    def __init__(self, delay_s: float) -> None:
        self.router = _Router(delay_s)

    def forget_all(self) -> None:
        pass


def test_an_answer_that_arrives_after_its_lease_ran_out_is_followed_by_a_heartbeat_at_once():
    async def scenario() -> tuple[float, float, bool]:
        cluster = _Cluster(delay_s=0.0)
        hb = Heartbeat(cluster, uuid.uuid4().hex, session_timeout_ms=300, heartbeat_interval_ms=100)
        await hb.round()
        on_time = hb.interval_s()
        cluster.router.broker_heartbeat.delay_s = 0.25  # longer than the 200 ms lease: the router was away
        await hb.round()
        late = hb.interval_s()
        hb.board.retire()
        return on_time, late, hb.lease.valid()

    on_time, late, valid = asyncio.run(scenario())
    assert on_time == 0.1  # a timely answer: the next one after the interval
    assert not valid and late == 0.0  # a late one: the lease is over, the next heartbeat goes now


def test_a_failed_heartbeat_is_not_retried_in_a_busy_loop():
    class _Failing(_Call):
        def remote(self, node_id: str, broker_epoch: int):
            self.calls += 1

            async def fail() -> int:
                raise RuntimeError("router unreachable")
            return fail()

    async def scenario() -> float:
        cluster = _Cluster(0.0)
        hb = Heartbeat(cluster, uuid.uuid4().hex, session_timeout_ms=300, heartbeat_interval_ms=100)
        await hb.round()  # granted
        await asyncio.sleep(0.25)  # ran out
        cluster.router.broker_heartbeat = _Failing(0.0)
        try:
            await hb.round()
        except RuntimeError:
            pass
        hb.board.retire()
        return hb.interval_s()

    assert asyncio.run(scenario()) == 0.1


def _held_through(restarting: bool, away_s: float = 0.6) -> tuple[bool, bool]:
    """A heartbeat whose answer takes ``away_s`` (the router's restart); (lease valid the whole time,
    valid at the end) with the GCS answering ``restarting``."""
    async def scenario() -> tuple[bool, bool]:
        cluster = _Cluster(0.0)
        hb = Heartbeat(cluster, uuid.uuid4().hex, session_timeout_ms=300, heartbeat_interval_ms=100,
                       restarting=lambda: restarting)
        await hb.round()
        cluster.router.broker_heartbeat.delay_s = away_s
        beat = asyncio.ensure_future(hb.round())
        always = True
        while not beat.done():
            always &= hb.lease.valid()
            await asyncio.sleep(0.02)
        await beat
        at_end = hb.lease.valid()
        hb.board.retire()
        return always, at_end

    return asyncio.run(scenario())


def test_the_lease_is_carried_through_a_restart_the_gcs_reports():
    always, _ = _held_through(restarting=True)
    assert always  # 600 ms without an answer, a 200 ms lease: extended while the GCS said "restarting"


def test_without_the_gcs_saying_restarting_the_lease_runs_out_while_the_router_is_away():
    always, at_end = _held_through(restarting=False)
    assert not always  # alive but unreachable (or a cut): the lease ends as before, the node stops acknowledging


def test_a_lease_that_already_ran_out_is_not_revived_by_a_restart():
    async def scenario() -> bool:
        cluster = _Cluster(0.0)
        hb = Heartbeat(cluster, uuid.uuid4().hex, session_timeout_ms=300, heartbeat_interval_ms=100,
                       restarting=lambda: True)
        await hb.round()
        await asyncio.sleep(0.25)  # ran out: a controller may have fenced this node
        await hb.through_restart()
        valid = hb.lease.valid()
        hb.board.retire()
        return valid

    assert asyncio.run(scenario()) is False


def test_a_gcs_that_does_not_answer_gets_one_question_at_a_time_and_no_extension():
    import threading

    release, asked = threading.Event(), []

    def hanging() -> bool:  # the GCS behind a cut
        asked.append(1)
        release.wait(5)
        return True

    async def scenario() -> tuple[bool, int]:
        cluster = _Cluster(0.0)
        hb = Heartbeat(cluster, uuid.uuid4().hex, session_timeout_ms=300, heartbeat_interval_ms=100,
                       restarting=hanging)
        await hb.round()
        for _ in range(5):  # 300 ms of unanswered heartbeats, longer than the 200 ms lease
            await hb.through_restart()
            await asyncio.sleep(0.06)
        valid = hb.lease.valid()
        release.set()
        hb.stop()
        hb.board.retire()
        return valid, len(asked)

    valid, questions = asyncio.run(scenario())
    assert not valid and questions == 1
