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
"""
from __future__ import annotations

import logging
import time
from typing import Any, Awaitable, Callable

from logan_ray.actors.broker_lease import BrokerLease
from logan_ray.actors.lease_board import LeaseWriter

from .periodic import Periodic

log = logging.getLogger("logan_ray.gateway")


class Heartbeat(Periodic):
    what = "broker heartbeat"  # failed: the router may be restarting; the lease runs out meanwhile

    def __init__(self, cluster: Any, node_id: str, session_timeout_ms: int, heartbeat_interval_ms: int,
                 on_new_epoch: Callable[[], Awaitable[None]] | None = None) -> None:
        super().__init__()
        self._cluster = cluster
        self._node_id = node_id
        self.lease = BrokerLease(session_timeout_ms, heartbeat_interval_ms)
        #: registers the gateway's addresses again: a new broker epoch may be a new router (one that
        #: replaced a dead one) that knows no gateway yet, and leaves this one out of Metadata until then
        self._on_new_epoch = on_new_epoch
        #: the lease for this node's partition actors too: they fence Python and Ray Data writes by it
        self.board = LeaseWriter(node_id)

    async def beat(self) -> None:
        """One heartbeat; the lease counts from before it was sent."""
        sent = time.monotonic()
        epoch = await self._cluster.router.broker_heartbeat.remote(self._node_id, self.lease.broker_epoch)
        if epoch != self.lease.broker_epoch:
            if self.lease.broker_epoch >= 0:
                log.warning("gateway: this node was fenced; registered again (broker epoch %d)", epoch)
            self._cluster.forget_all()  # before the lease runs again under the new epoch
            if self._on_new_epoch is not None and self.lease.broker_epoch >= 0:
                try:
                    await self._on_new_epoch()
                except Exception as e:  # the periodic registration tries again
                    log.warning("gateway: registering again failed: %s", e)
        self.lease.granted(sent, epoch)
        self.board.publish(self.lease.until, epoch)

    async def round(self) -> None:
        await self.beat()

    def interval_s(self) -> float:
        return self.lease.heartbeat_interval_s
