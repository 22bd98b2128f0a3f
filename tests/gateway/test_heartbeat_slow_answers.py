"""The gateway's heartbeats when the router's answers are slow (logan_ray/gateway/heartbeat.py).

On a loaded machine a Ray call can take seconds to come back. A gateway that sent its next
heartbeat only after the last answer would reach the router once per round trip, and the router
would fence a live broker (on two loaded cores every broker was fenced a dozen times a minute).
Heartbeats go out every interval whatever the answers do, a bounded number at once, and an
answer counts from when its heartbeat was sent.
"""
from __future__ import annotations

import asyncio
import time
import uuid

from logan_ray.gateway.heartbeat import MAX_IN_FLIGHT, Heartbeat


class _SlowRouterCall:
    """broker_heartbeat of a router whose answers take ``delay_s``; records when each heartbeat was sent."""

    def __init__(self, delay_s: float, epoch: int = 7) -> None:
        self.delay_s, self.epoch = delay_s, epoch
        self.sent: list[float] = []

    def remote(self, node_id: str, broker_epoch: int):
        self.sent.append(time.monotonic())
        epoch = self.epoch

        async def answer() -> int:
            await asyncio.sleep(self.delay_s)
            return epoch
        return answer()


class _Cluster:
    def __init__(self, call: _SlowRouterCall) -> None:
        self.router = type("Router", (), {"broker_heartbeat": call})()
        self.forgot = 0

    def forget_all(self) -> None:
        self.forgot += 1


def _run(call: _SlowRouterCall, seconds: float) -> tuple[Heartbeat, _Cluster]:
    async def scenario() -> tuple[Heartbeat, _Cluster]:
        cluster = _Cluster(call)
        hb = Heartbeat(cluster, uuid.uuid4().hex, session_timeout_ms=1000, heartbeat_interval_ms=100,
                       restarting=lambda: False)
        hb.start()
        await asyncio.sleep(seconds)
        valid = hb.lease.valid()
        hb.stop()
        hb.board.retire()
        hb.valid_at_end = valid
        return hb, cluster
    return asyncio.run(scenario())


def test_heartbeats_go_out_every_interval_while_the_answers_take_four_intervals():
    call = _SlowRouterCall(delay_s=0.4)
    hb, _ = _run(call, 2.0)
    gaps = [b - a for a, b in zip(call.sent, call.sent[1:])]
    # one per round trip would be a gap of 0.5 s (answer + interval) and ~4 heartbeats
    assert len(call.sent) >= 12 and max(gaps) < 0.25, gaps
    assert hb.valid_at_end  # the answers, late as they are, keep the 0.9 s lease running


def test_a_router_that_answers_nothing_gets_a_bounded_number_of_heartbeats():
    call = _SlowRouterCall(delay_s=60.0)
    _run(call, 1.5)
    assert len(call.sent) == MAX_IN_FLIGHT


def test_an_answer_from_before_a_re_registration_does_not_count_as_one():
    """Heartbeats in flight across a fence: the answer with the new epoch re-registers the node once; a
    late answer carrying the old epoch is dropped, not taken for a second re-registration."""
    async def scenario() -> tuple[int, int]:
        call = _SlowRouterCall(delay_s=0.0, epoch=7)
        cluster = _Cluster(call)
        hb = Heartbeat(cluster, uuid.uuid4().hex, session_timeout_ms=1000, heartbeat_interval_ms=100,
                       restarting=lambda: False)
        await hb.round()  # registered under 7
        call.delay_s = 0.25
        old = asyncio.ensure_future(hb.round())  # sent under 7, answered 7 after 0.25 s
        await asyncio.sleep(0.05)
        call.epoch, call.delay_s = 9, 0.0  # the router fenced the node meanwhile: the next answer says 9
        hb._send()
        await old
        epoch_after_first = hb.lease.broker_epoch
        await asyncio.sleep(0.3)
        await hb.round()  # the late answer with 7 is now done too
        hb.stop()
        hb.board.retire()
        return epoch_after_first, hb.lease.broker_epoch, cluster.forgot

    first, last, forgot = asyncio.run(scenario())
    assert first == 9 and last == 9
    assert forgot == 2  # the first registration and the one re-registration, not a third for the stale 7


def test_heartbeats_go_on_while_a_fenced_gateway_registers_its_addresses_again():
    """The re-registration after a fence is a router call that took seconds under load: the heartbeats
    must not wait for it, or the node just fenced for silence is silent again."""
    async def scenario() -> tuple[int, int]:
        call = _SlowRouterCall(delay_s=0.0, epoch=7)
        cluster = _Cluster(call)
        registered = asyncio.Event()

        async def register() -> None:
            await asyncio.sleep(1.0)
            registered.set()
        hb = Heartbeat(cluster, uuid.uuid4().hex, session_timeout_ms=1000, heartbeat_interval_ms=100,
                       on_new_epoch=register, restarting=lambda: False)
        await hb.round()  # registered under 7
        call.epoch = 9  # fenced: the next answer re-registers the node
        hb.start()
        await asyncio.sleep(0.8)
        sent_while_registering = len(call.sent)
        await asyncio.wait_for(registered.wait(), 2.0)
        hb.stop()
        hb.board.retire()
        return sent_while_registering, hb.lease.broker_epoch

    sent, epoch = asyncio.run(scenario())
    assert epoch == 9 and sent >= 6  # about one per 100 ms; waiting for the registration would be 2
