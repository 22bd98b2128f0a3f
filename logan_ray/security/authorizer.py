"""The gateway's ACL authorizer: a fresh-enough snapshot of the router's ACLs and the decisions on it.

The router holds the ACLs durably; each gateway keeps a snapshot and asks the
router for its version at most every :data:`REFRESH_S` (one small Ray call), so a
change made anywhere applies on every gateway within that time, and at once on
the gateway that made it. Decisions are those of :class:`logan_ray.security.acl.Decider`.
"""
from __future__ import annotations

import asyncio
import time
from typing import Any

from . import acl
from .client_host import client_host
from .tls import ANONYMOUS

REFRESH_S = 1.0


class Authorizer:
    def __init__(self, router: Any, super_users: Any = (), allow_if_no_acl: bool = False) -> None:
        self.router = router
        self.super_users = list(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._version = -1
        self._checked = 0.0
        self._decider = acl.Decider([], self.super_users, allow_if_no_acl)
        self._lock = asyncio.Lock()

    async def decider(self, fresh: bool = False) -> acl.Decider:
        now = time.monotonic()
        if fresh or now - self._checked > REFRESH_S:
            async with self._lock:
                if fresh or time.monotonic() - self._checked > REFRESH_S:
                    version = await self.router.acl_version.remote()
                    if version != self._version:
                        version, bindings = await self.router.acls.remote()
                        self._decider = acl.Decider(bindings, self.super_users, self.allow_if_no_acl)
                        self._version = version
                    self._checked = time.monotonic()
        return self._decider

    def invalidate(self) -> None:
        self._checked = 0.0


def who(conn: Any) -> tuple[str, str]:
    """(principal, client host) of a connection."""
    session = getattr(conn, "session", None)
    principal = session.principal if session is not None else ANONYMOUS
    return principal, client_host(conn.peer[0])
