"""The gateway's ACL authorizer: a fresh-enough snapshot of the router's ACLs and the decisions on it.

The router holds the ACLs durably; each gateway keeps a snapshot
(:class:`.router_snapshot.RouterSnapshot`: a change made anywhere applies on every
gateway within :data:`REFRESH_S`, at once on the gateway that made it). Decisions are
those of :class:`logan_ray.security.acl.Decider`.
"""
from __future__ import annotations

from typing import Any

from . import acl
from .client_host import client_host
from .router_snapshot import REFRESH_S, RouterSnapshot
from .tls import ANONYMOUS

__all__ = ["REFRESH_S", "Authorizer", "who"]


class Authorizer:
    def __init__(self, router: Any, super_users: Any = (), allow_if_no_acl: bool = False) -> None:
        self.router = router
        self.super_users = list(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._snapshot = RouterSnapshot(
            lambda: router.acl_version.remote(), lambda: router.acls.remote(),
            lambda bindings: acl.Decider(bindings, self.super_users, self.allow_if_no_acl),
            acl.Decider([], self.super_users, allow_if_no_acl))

    async def decider(self, fresh: bool = False) -> acl.Decider:
        return await self._snapshot.get(fresh)

    def invalidate(self) -> None:
        self._snapshot.invalidate()


def who(conn: Any) -> tuple[str, str]:
    """(principal, client host) of a connection."""
    session = getattr(conn, "session", None)
    principal = session.principal if session is not None else ANONYMOUS
    return principal, client_host(conn.peer[0])
