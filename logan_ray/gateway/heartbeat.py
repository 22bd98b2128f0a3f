"""The gateway's broker heartbeat: keeps this node's lease with the controller (the router).

Kafka's BrokerLifecycleManager: every ``broker.heartbeat.interval.ms`` the gateway tells
the router it is alive (``broker_heartbeat``), and each answer extends its lease
(actors/broker_lease.py): while the lease runs this node may acknowledge writes to
the replicated partitions it leads (it publishes the lease on the node's lease board, so its
partition actors refuse writes that do not come through the gateway by it too); once it lapses
(the router unreachable, this node stopped or cut off), produce is answered NOT_LEADER_OR_FOLLOWER, as a fenced Kafka
broker does, before the router may elect another leader. An answer with a new broker
epoch (the router had fenced this node) first drops every route this gateway cached:
the partitions it led may have other leaders now.

A heartbeat not answered within an interval does not hold the next one back (as Kafka's
broker times a heartbeat out and sends another, KAFKA-14392): on a loaded machine a Ray call
can take seconds to come back, and one heartbeat per round trip would let the session lapse
at the router though this broker is alive. Up to :data:`MAX_IN_FLIGHT` go at once; an answer
that comes late still counts (from when it was sent), one older than the epoch held is dropped.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import time
from typing import Any, Awaitable, Callable

from logan_ray.actors.broker_lease import BrokerLease
from logan_ray.actors.lease_board import LeaseWriter

from .periodic import Periodic

log = logging.getLogger("logan_ray.gateway")

#: heartbeats unanswered at once, at most: a router that answers none (restarting, or gone) is not
#: sent an unbounded queue of them
MAX_IN_FLIGHT = 6


def router_restarting(router: Any) -> bool:
    """Does Ray's GCS say the router actor is being restarted (its process died; the next one not yet
    serving)? Blocking (one GCS call): run it off the event loop."""
    from ray._private.state import state

    handle = getattr(router, "handle", router)  # the gateway's RouterProxy, or a bare actor handle
    return state.actor_table(handle._actor_id.hex()).get("State") == "RESTARTING"


class Heartbeat(Periodic):
    what = "broker heartbeat"  # failed: the router may be restarting; the lease runs out meanwhile

    def __init__(self, cluster: Any, node_id: str, session_timeout_ms: int, heartbeat_interval_ms: int,
                 on_new_epoch: Callable[[], Awaitable[None]] | None = None,
                 restarting: Callable[[], bool] | None = None) -> None:
        super().__init__()
        self._cluster = cluster
        self._node_id = node_id
        #: asks Ray's GCS whether the router is being restarted (:func:`router_restarting`)
        self._restarting = restarting or (lambda: router_restarting(cluster.router))
        self._told_restart = False
        #: the GCS question runs on a thread of its own, one at a time: a GCS that does not answer (a
        #: cut) must not use up the loop's default executor, which the replica fetcher reads files on
        self._asker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="lease-gcs")
        self._asking: asyncio.Future | None = None
        self.lease = BrokerLease(session_timeout_ms, heartbeat_interval_ms)
        #: registers the gateway's addresses again: a new broker epoch may be a new router (one that
        #: replaced a dead one) that knows no gateway yet, and leaves this one out of Metadata until then
        self._on_new_epoch = on_new_epoch
        #: the lease for this node's partition actors too: they fence Python and Ray Data writes by it
        self.board = LeaseWriter(node_id)
        #: the last answer came too late to give a running lease (the call waited out a router restart
        #: in its queue): the next heartbeat goes at once, not an interval later
        self._late = False
        #: heartbeats sent and not answered yet -> when each was sent
        self._in_flight: dict[asyncio.Future, float] = {}
        self._carrying: asyncio.Future | None = None  # a through_restart under way
        self._registering: asyncio.Future | None = None  # the gateway's addresses told again after a fence

    def _send(self) -> None:
        if len(self._in_flight) < MAX_IN_FLIGHT:
            sent = time.monotonic()
            call = self._cluster.router.broker_heartbeat.remote(self._node_id, self.lease.broker_epoch)
            self._in_flight[asyncio.ensure_future(call)] = sent

    async def _answer(self) -> tuple[float, int]:
        """(sent, broker epoch) of the latest-sent heartbeat answered: one more goes each interval
        without an answer (and while none comes, the lease may be carried through a router restart)."""
        self._send()
        while True:
            done, _ = await asyncio.wait(set(self._in_flight), timeout=self.lease.heartbeat_interval_s,
                                         return_when=asyncio.FIRST_COMPLETED)
            answers, failure = [], None
            for f in done:
                sent = self._in_flight.pop(f)
                if f.exception() is not None:
                    failure = failure or f.exception()
                elif f.result() >= self.lease.broker_epoch:  # an answer from before a re-registration: void
                    answers.append((f.result(), sent))
            if answers:
                epoch, sent = max(answers)
                return sent, epoch
            if failure is not None:
                raise failure
            if not done:
                self._carry()
            self._send()

    async def beat(self) -> None:
        """One heartbeat answered; the lease counts from before it was sent."""
        sent, epoch = await self._answer()
        self._told_restart = False
        if epoch != self.lease.broker_epoch:
            if self.lease.broker_epoch >= 0:
                log.warning("gateway: this node was fenced; registered again (broker epoch %d)", epoch)
            self._cluster.forget_all()  # before the lease runs again under the new epoch
            if self._on_new_epoch is not None and self.lease.broker_epoch >= 0:
                # beside the heartbeats, not before the next one: on a loaded machine the registration
                # took seconds, and a node that had just been fenced for silence was silent again
                self._registering = asyncio.ensure_future(self._register_again())
        self.lease.granted(sent, epoch)
        self.board.publish(self.lease.until, epoch)
        self._late = not self.lease.valid()

    async def _register_again(self) -> None:
        try:
            await self._on_new_epoch()
        except Exception as e:  # the periodic registration tries again
            log.warning("gateway: registering again failed: %s", e)

    def _carry(self) -> None:
        """Ask about a router restart beside the heartbeats, not before the next one: a loaded GCS takes
        up to a lease length to answer, and the heartbeats must go on meanwhile."""
        if self._carrying is None or self._carrying.done():
            self._carrying = asyncio.ensure_future(self.through_restart())

    async def through_restart(self) -> None:
        """Keep acknowledging while Ray restarts the router, as Kafka's brokers serve on while the
        controller is briefly away: if the GCS says the router is restarting, a lease still running is
        extended (``BrokerLease.extend``: why that is safe). A router that is alive but unreachable, a
        GCS that does not answer, or a lease already over: nothing changes, the lease runs out."""
        if not self.lease.valid():
            return
        if self._asking is not None and not self._asking.done():
            return  # the last question is still unanswered: no answer, no extension
        asked = time.monotonic()
        self._asking = asyncio.get_running_loop().run_in_executor(self._asker, self._restarting)
        self._asking.add_done_callback(lambda f: f.cancelled() or f.exception())  # a late failure: not logged
        try:  # a loaded GCS may take longer than a heartbeat interval to answer: the extension counts
            # from ``asked`` whenever the answer comes, so it is waited for up to a lease length
            restarting = await asyncio.wait_for(asyncio.shield(self._asking), timeout=self.lease.lease_s)
        except Exception:  # noqa: BLE001 - no answer from the GCS: no extension
            return
        if restarting and self.lease.extend(asked):
            self.board.publish(self.lease.until, self.lease.broker_epoch)
            if not self._told_restart:
                self._told_restart = True
                log.warning("gateway: the router is being restarted; this node keeps its lease meanwhile")

    def stop(self) -> None:
        super().stop()
        for f in [*self._in_flight, *(t for t in (self._carrying, self._registering) if t is not None)]:
            f.cancel()
        self._in_flight.clear()
        self._asker.shutdown(wait=False, cancel_futures=True)

    async def round(self) -> None:
        self._late = False
        try:
            await self.beat()
        except Exception:
            await self.through_restart()  # a call that failed at once (the router's restart under way)
            raise

    def interval_s(self) -> float:
        return 0.0 if self._late else self.lease.heartbeat_interval_s
