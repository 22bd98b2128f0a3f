"""What the HTTP routes share inside a Serve replica: one logan-ray client and one producer per acks.

The replica attaches to the running broker (it never starts one) and reuses the
Python API: the client for admin and routing, ``Producer`` for publish (whole
batches, idempotent), partition actor handles for reads.
"""
from __future__ import annotations

import threading
from typing import Any

from starlette.concurrency import run_in_threadpool

from logan_ray.errors import UnknownPartitionError


class Backend:
    def __init__(self, client: Any, max_body_bytes: int, security: Any = None, guard: Any = None) -> None:
        self.client = client
        self.max_body_bytes = max_body_bytes
        #: logan_ray.http.guard.HostGuard: the Host and Origin names requests may carry (None: no check)
        self.guard = guard
        #: logan_ray.http.security.HttpSecurity, None without listener security
        self.security = security
        self.passwords: Any = None  # logan_ray.security.passwords.PasswordCache
        self.authorizer: Any = None  # the gateway's ACL authorizer (logan_ray.security.authorizer)
        if security is not None and security.active:
            self._secure(client.router, security)
        self._producers: dict[int, Any] = {}
        self._lock = threading.Lock()

    def _secure(self, router: Any, security: Any) -> None:
        """The same credential store and ACL authorizer the Kafka gateways use (the router's)."""
        from logan_ray.security.authorizer import Authorizer
        from logan_ray.security.passwords import PasswordCache

        async def lookup(user: str, mechanism: str):
            return await router.scram_credential.remote(user, mechanism)

        async def version() -> int:
            return await router.scram_version.remote()

        self.passwords = PasswordCache(lookup, version)
        if security.authorizer:
            self.authorizer = Authorizer(router, security.super_users, security.allow_if_no_acl)

    def producer(self, acks: int | str):
        acks = -1 if acks == "all" else int(acks)
        with self._lock:
            p = self._producers.get(acks)
            if p is None:
                # No auto-creation over HTTP: a misspelt topic gets 404, not a new topic.
                p = self._producers[acks] = self.client.producer(acks=acks, auto_create_topics=False, linger_ms=5)
            return p

    def partition_count(self, topic: str) -> int:
        return len(self.client.partitions(topic))

    def forget(self, topic: str) -> None:
        """Drop cached routes after the topic changed shape (deleted, grown)."""
        self.client._routes.pop(topic, None)

    async def actor(self, topic: str, partition: int):
        """The partition's actor handle (routes cached by the client; refreshed once on a miss; an
        inactive partition is started)."""
        parts = self.client._routes.get(topic)
        if parts is not None and 0 <= partition < len(parts) and parts[partition][0] is not None:
            return parts[partition][0]
        if partition < 0:
            raise UnknownPartitionError(f"topic {topic!r} has no partition {partition}")
        return await run_in_threadpool(self.client.partition_actor, topic, partition)

    def close(self) -> None:
        for p in self._producers.values():
            try:
                p.close(5)
            except Exception:  # the broker may already be gone at shutdown
                pass


_current: Backend | None = None


def install(backend: Backend) -> None:
    """Make ``backend`` the one the routes of this process use (set by the Serve replica at start)."""
    global _current
    _current = backend


def current() -> Backend:
    """The replica's backend (Serve rebuilds the FastAPI app inside the replica, so it is not in app.state)."""
    if _current is None:
        from logan_ray.errors import NotRunningError

        raise NotRunningError("the HTTP API is not attached to a logan-ray broker")
    return _current
