"""Closing connections that hold a slot and do nothing: idle ones, and ones that never log in.

Why: without these a peer can open connections, announce a frame and send nothing,
and keep them forever (issue 36: 300 such peers stalled a node). Two bounds:

- ``connections.max.idle.ms`` (Kafka's name and default, 600000; -1 for none): a
  connection with no request in flight and no byte read or written for that long is
  closed, as Kafka's Selector does.
- ``connections.max.unauthenticated.ms`` (logan-ray's own, default 10000; -1 for
  none): a connection of a SASL listener that has not logged in this long after it
  was accepted is closed, whatever it is doing. Kafka has no such setting (its only
  bound on an unauthenticated connection is the 10 minute idle timeout, which a peer
  that trickles one byte a minute never meets); a real client logs in within
  milliseconds of connecting, so 10 s leaves retries and a slow TLS handshake room.

One sweep every second at most (a timer per connection would be re-armed on every
read); a deadline is therefore met within one sweep interval.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Iterable

log = logging.getLogger("logan_ray.gateway")

#: Kafka's connections.max.idle.ms default
CONNECTIONS_MAX_IDLE_MS = 600_000
#: logan-ray's connections.max.unauthenticated.ms default
CONNECTIONS_MAX_UNAUTHENTICATED_MS = 10_000
#: longest time between two sweeps
MAX_SWEEP_S = 1.0


def _seconds(ms: int | None) -> float | None:
    return None if ms is None or ms < 0 else ms / 1000.0


def unauthenticated(conn: Any) -> bool:
    """Is ``conn`` on a SASL listener and not logged in yet?"""
    session = conn.session
    return session is not None and session.needs_sasl and not session.authenticated


class Deadlines:
    """Sweeps the gateway's connections and closes those past a deadline."""

    def __init__(self, idle_ms: int | None = CONNECTIONS_MAX_IDLE_MS,
                 unauthenticated_ms: int | None = CONNECTIONS_MAX_UNAUTHENTICATED_MS) -> None:
        self.idle_s = _seconds(idle_ms)
        self.unauthenticated_s = _seconds(unauthenticated_ms)
        self.closed_idle = 0
        self.closed_unauthenticated = 0
        self._task: asyncio.Task | None = None

    @property
    def interval_s(self) -> float:
        bounds = [b for b in (self.idle_s, self.unauthenticated_s) if b is not None]
        return min([MAX_SWEEP_S, *(max(b / 4, 0.01) for b in bounds)])

    def start(self, connections: Callable[[], Iterable[Any]]) -> None:
        """Sweep ``connections()`` periodically on the running loop (once; later calls do nothing)."""
        if self._task is None and (self.idle_s is not None or self.unauthenticated_s is not None):
            self._task = asyncio.get_running_loop().create_task(self._run(connections))

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self, connections: Callable[[], Iterable[Any]]) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                self.sweep(list(connections()), loop.time())
            except Exception:  # never let one bad connection end the sweeps
                log.exception("gateway: connection deadline sweep failed")

    def sweep(self, conns: Iterable[Any], now: float) -> int:
        """Close every connection of ``conns`` past a deadline at loop time ``now``; how many were closed."""
        closed = 0
        for conn in conns:
            if conn.closed:
                continue
            if self.unauthenticated_s is not None and now - conn.opened > self.unauthenticated_s \
                    and unauthenticated(conn):
                self.closed_unauthenticated += 1
                conn.close(f"not authenticated within {self.unauthenticated_s:g} s "
                           "(connections.max.unauthenticated.ms)")
                closed += 1
            elif self.idle_s is not None and now - conn.last_active > self.idle_s and not conn.in_flight:
                self.closed_idle += 1
                conn.close(f"idle for more than {self.idle_s:g} s (connections.max.idle.ms)")
                closed += 1
        return closed

    def stats(self) -> dict[str, Any]:
        return {"closed_idle": self.closed_idle, "closed_unauthenticated": self.closed_unauthenticated}
