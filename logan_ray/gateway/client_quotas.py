"""Produce and fetch byte-rate quotas (KIP-13, KIP-55, KIP-219): what a gateway holds and does per request.

Quotas are durable cluster metadata kept by the router (actors.security_meta); each
gateway keeps a fresh-enough copy as it keeps the ACLs (RouterSnapshot) and counts
bytes per bucket in windows (security.quota_rate), so a quota applies per broker,
as Kafka's does. A produce is appended first and its request bytes recorded; a fetch
records its response bytes, and when that puts the client over its quota the bytes
are taken back and the response goes out empty (Kafka's getThrottledResponse). Either
way the answer carries ``throttle_time_ms``; for request versions with KIP-219
(Produce v6+, Fetch v8+) it goes out at once and the connection then reads nothing
for that long (the client waits too), older versions get their answer that much later.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from logan_ray.protocol import encode_response
from logan_ray.security.quota import CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, Limit, QuotaTable
from logan_ray.security.quota_rate import WINDOW_NUM, WINDOW_SIZE_MS, Sensors
from logan_ray.security.router_snapshot import RouterSnapshot
from logan_ray.security.tls import ANONYMOUS

from .broker_identity import BROKER_ID
from .connection import MuteAfter, release

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("logan_ray.gateway")

PRODUCE, FETCH = 0, 1
THROTTLED_APIS = frozenset((PRODUCE, FETCH))
#: first request version whose client throttles itself, so the broker answers at once and mutes (KIP-219)
CLIENT_THROTTLES_FROM = {PRODUCE: 6, FETCH: 8}


def quota_user(conn: "Connection") -> str:
    """The user a quota names: the principal's name (``ANONYMOUS`` without a login), as Kafka's."""
    session = conn.session
    principal = session.principal if session is not None else ANONYMOUS
    return principal.split(":", 1)[1] if ":" in principal else principal


class ClientQuotas:
    """One gateway's quota configuration (refreshed from the router) and the byte rates it measures."""

    def __init__(self, router: Any, window_num: int = WINDOW_NUM, window_size_ms: int = WINDOW_SIZE_MS) -> None:
        self._snapshot: RouterSnapshot[QuotaTable] | None = None
        if router is not None:
            # the first load is waited for (a quota holds from a gateway's first request); later refreshes
            # run in the background, so a stalled router never holds a produce or fetch back
            self._snapshot = RouterSnapshot(lambda: router.quota_version.remote(), lambda: router.quotas.remote(),
                                            QuotaTable, QuotaTable())
        self.sensors = {PRODUCE: Sensors(window_num, window_size_ms), FETCH: Sensors(window_num, window_size_ms)}
        self.throttled = 0
        self._idle_after_ms = window_num * window_size_ms
        self._swept_ms = 0.0

    async def table(self, fresh: bool = False) -> QuotaTable:
        if self._snapshot is None:
            return QuotaTable()
        try:
            return await self._snapshot.get(fresh)
        except Exception as e:  # the router is away: keep enforcing what was last known
            log.debug("gateway: client quotas not refreshed: %s", e)
            return self._snapshot.current

    def invalidate(self) -> None:
        if self._snapshot is not None:
            self._snapshot.invalidate()

    async def limit(self, api_key: int, conn: "Connection", client_id: str | None) -> Limit | None:
        """The client's produce or fetch quota, None when it has none."""
        table = await self.table()
        if not table or conn.state.get(BROKER_ID) is not None:  # replica fetches are not client traffic
            return None
        key = PRODUCER_BYTE_RATE if api_key == PRODUCE else CONSUMER_BYTE_RATE
        return table.limit(key, quota_user(conn), client_id or "")

    async def apply(self, conn: "Connection", header: Any, response: dict | None, chunks: list[Any] | None,
                    request_bytes: int) -> list[Any] | None:
        """The chunks to send for a Produce or Fetch answer, throttled when the client is over its quota."""
        api_key, version = header.api_key, header.api_version
        limit = await self.limit(api_key, conn, header.client_id)
        if limit is None:
            return chunks
        nbytes = request_bytes if api_key == PRODUCE else sum(len(c) for c in chunks or ())
        now_ms = asyncio.get_running_loop().time() * 1000.0
        if now_ms - self._swept_ms > self._idle_after_ms:  # clients come and go: forget their idle rates
            self._swept_ms = now_ms
            for sensors in self.sensors.values():
                sensors.forget_idle(now_ms)
        rate = self.sensors[api_key].rate(limit.bucket)
        rate.record(nbytes, now_ms)
        wait_ms = rate.throttle_ms(limit.bound, now_ms)
        if wait_ms <= 0:
            return chunks
        self.throttled += 1
        if response is None:  # acks=0: nothing to answer, the channel is muted (KIP-219)
            conn.mute(wait_ms / 1000.0)
            return chunks
        if api_key == FETCH:  # not sent, so not counted: the client fetches the same again after waiting
            rate.unrecord(nbytes, now_ms)
            response = {**response, "responses": []}
        response["throttle_time_ms"] = wait_ms
        release(chunks or [])
        out = encode_response(api_key, version, header.correlation_id, response)
        if version >= CLIENT_THROTTLES_FROM[api_key]:
            out.append(MuteAfter(wait_ms / 1000.0))
            return out
        await asyncio.sleep(wait_ms / 1000.0)  # an older client does not wait by itself: answer late
        return out
