"""Which connections are brokers, and who may fetch as a replica.

A Fetch naming a ``replica_id`` reports a follower's log end: the leader moves its
high watermark and ISR by it, so it must come from that broker. Kafka's rule is
CLUSTER_ACTION on the cluster; without an authorizer Kafka lets anyone, which would let
any client acknowledge ``acks=all`` writes no follower holds. Here a replica fetch is
served when its connection proved to be that very broker (the LOGAN-RAY-BROKER login,
:mod:`logan_ray.security.broker_auth`), or, with an authorizer, when the principal holds
CLUSTER_ACTION (Kafka's rule, for operators whose own tools replicate). Anything else
is answered TOPIC_AUTHORIZATION_FAILED for every partition, as Kafka does.
"""
from __future__ import annotations

from typing import Any

from logan_ray.security import acl, broker_auth
from logan_ray.security.authorizer import who

#: ``conn.state`` key: the broker id a connection proved to be
BROKER_ID = "broker_id"
#: ``conn.state`` key: the LOGAN-RAY-BROKER exchange in progress on a connection
BROKER_LOGIN = "broker_login"


class BrokerSecret:
    """The cluster's broker secret, asked of the router once and kept (it never changes: the
    router makes it once, saved before anyone can ask)."""

    def __init__(self, router: Any) -> None:
        self._router = router
        self._secret: str | None = None

    async def get(self) -> str:
        if self._secret is None:
            self._secret = await self._router.broker_secret.remote()
        return self._secret

    async def lookup(self, user: str, mechanism: str) -> dict[str, Any] | None:
        """The SASL servers' credential lookup, for :class:`~logan_ray.security.broker_auth.BrokerAuthServer`."""
        return {"secret": await self.get()} if mechanism == broker_auth.MECHANISM else None


def replica_id_of(version: int, body: dict) -> int:
    """The broker a Fetch names (``replica_state`` from v15), -1 for a consumer."""
    if version >= 15:
        return (body.get("replica_state") or {}).get("replica_id", -1)
    return body.get("replica_id", -1)


async def may_fetch_as_replica(gw: Any, conn: Any, replica_id: int) -> bool:
    """``gw``: the gateway (its ``authorizer``), ``conn``: the connection the Fetch came on."""
    proven = conn.state.get(BROKER_ID)
    if proven is not None:
        return proven == replica_id  # a broker fetches as itself only
    if gw.authorizer is None:
        return False
    decider = await gw.authorizer.decider()
    principal, host = who(conn)
    return decider.allowed(principal, host, acl.CLUSTER_ACTION, acl.CLUSTER, acl.CLUSTER_NAME)
