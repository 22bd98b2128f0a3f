"""Broker-wide bounds on what clients can make the gateway hold: request bytes and connections.

Kafka's names and meanings:

- ``queued.max.request.bytes``: bytes of requests read but not yet answered. Kafka
  defaults to -1 (unbounded) and relies on muting each connection until its
  response is sent; the gateway pipelines requests per connection, so it needs a
  real cap: :data:`QUEUED_MAX_REQUEST_BYTES` (128 MiB) by default, -1 for none.
  Only bytes that arrived are counted, never a frame's claimed size: Kafka reserves
  the claim when the 4-byte header is read, which let 300 unauthenticated peers that
  each announce 512 KiB and send nothing fill the pool and stall every client
  (issue 36). When the pool is full, connections stop reading their sockets
  (back-pressure, nothing is dropped) and resume in arrival order as answers go
  out. Frames still arriving can fill the pool with nothing in flight to free it;
  then (:meth:`RequestMemoryPool.stalled`) every connection may read on, so one of
  them completes a frame and the pool drains again. Each such frame is bounded by
  ``socket.request.max.bytes`` (``sasl.server.max.receive.size`` before login) and
  its connection by the idle and login deadlines (``deadlines.py``).
- ``max.connections`` (default Int.MaxValue): at the limit the gateway stops
  accepting; new clients wait in the listen backlog until a connection closes.
- ``max.connections.per.ip`` (default Int.MaxValue) and
  ``max.connections.per.ip.overrides`` ("host:count,..."): a connection past its
  address's limit is accepted and closed at once.
"""
from __future__ import annotations

import logging
from collections import deque
from typing import Any, Callable, Mapping

from logan_ray.security.client_host import client_host

log = logging.getLogger("logan_ray.gateway")

INT_MAX = 2147483647
QUEUED_MAX_REQUEST_BYTES = 128 << 20
MAX_CONNECTIONS = INT_MAX
MAX_CONNECTIONS_PER_IP = INT_MAX
#: One read from a socket at most; the buffer is shared by every connection of the gateway.
RECV_SIZE = 256 * 1024


class RequestMemoryPool:
    """Counts request bytes held against ``queued.max.request.bytes``; wakes waiting readers.

    ``used`` is every byte held: frames still arriving (``partial``) and requests read
    but not yet answered. Only answers free bytes, so when all of ``used`` is partial
    frames nothing would ever wake a waiting reader: :meth:`has_room` says yes then.
    """

    def __init__(self, capacity: int = QUEUED_MAX_REQUEST_BYTES) -> None:
        self.capacity = capacity if capacity is not None and capacity >= 0 else -1
        self.used = 0
        self.partial = 0  # bytes of frames whose last byte has not arrived yet
        self.peak = 0
        self.waits = 0  # how often a connection had to stop reading for memory
        self._waiters: deque[Callable[[], None]] = deque()
        #: scratch space every connection reads into (one event loop: never two reads at once)
        self.scratch = bytearray(RECV_SIZE)

    @property
    def bounded(self) -> bool:
        return self.capacity >= 0

    def stalled(self) -> bool:
        """Full of frames still arriving, with no request in flight whose answer would free room."""
        return self.used > 0 and self.partial >= self.used

    def has_room(self) -> bool:
        return not self.bounded or self.used < self.capacity or self.stalled()

    def force(self, n: int) -> None:
        """Count ``n`` bytes of complete frames (read; held until their request is answered)."""
        self._take(n)

    def arrived(self, n: int) -> None:
        """Count ``n`` bytes of a frame whose end has not arrived yet."""
        self.partial += n
        self._take(n)

    def completed(self, n: int) -> None:
        """A frame of ``n`` bytes (all counted by :meth:`arrived`) is whole: it is a request in flight now."""
        self.partial -= n

    def _take(self, n: int) -> None:
        self.used += n
        if self.used > self.peak:
            self.peak = self.used

    def release(self, n: int, partial: int = 0) -> None:
        """Free ``n`` bytes, ``partial`` of them from a frame that will never complete (its peer left)."""
        self.partial -= partial
        if n <= 0:
            return
        self.used -= n
        while self._waiters and self.has_room():
            self._waiters.popleft()()

    def wait(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` once room frees up (FIFO, so no connection starves)."""
        self.waits += 1
        self._waiters.append(wake)

    def forget(self, wake: Callable[[], None]) -> None:
        try:
            self._waiters.remove(wake)
        except ValueError:
            pass


def parse_overrides(value: str | Mapping[str, int] | None) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: "host:count,host:count" (or a mapping)."""
    if not value:
        return {}
    if isinstance(value, Mapping):
        return {client_host(k): int(v) for k, v in value.items()}
    out = {}
    for item in str(value).split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"max.connections.per.ip.overrides entry {item!r} is not host:count")
        out[client_host(host.strip())] = int(count)
    return out


class ConnectionQuotas:
    """``max.connections`` and ``max.connections.per.ip`` with Kafka's defaults."""

    def __init__(self, max_connections: int = MAX_CONNECTIONS, max_per_ip: int = MAX_CONNECTIONS_PER_IP,
                 overrides: str | Mapping[str, int] | None = None) -> None:
        if max_connections < 0 or max_per_ip < 0:
            raise ValueError("max.connections and max.connections.per.ip must be at least 0")
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = parse_overrides(overrides)
        self.total = 0
        self.rejected = 0
        self._per_ip: dict[str, int] = {}

    def full(self) -> bool:
        return self.total >= self.max_connections

    def limit_for(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    def admit(self, ip: str) -> bool:
        """Count a new connection from ``ip``; False (not counted) when that address is at its limit."""
        n = self._per_ip.get(ip, 0)
        if n >= self.limit_for(ip):
            self.rejected += 1
            return False
        self._per_ip[ip] = n + 1
        self.total += 1
        return True

    def release(self, ip: str) -> None:
        n = self._per_ip.get(ip, 0) - 1
        if n <= 0:
            self._per_ip.pop(ip, None)
        else:
            self._per_ip[ip] = n
        self.total -= 1

    def stats(self) -> dict[str, Any]:
        return {"max_connections": self.max_connections, "max_connections_per_ip": self.max_per_ip,
                "rejected_connections": self.rejected}


def raise_open_files_limit(wanted: int | None = None) -> tuple[int, int]:
    """Raise this process's RLIMIT_NOFILE soft limit towards its hard limit; returns (soft, hard).

    Each connection is a file descriptor; the default soft limit (often 1024) would
    cap a gateway far below ``max.connections``. Like Kafka's docs ask of operators
    (ulimit -n), but done by the process itself, within what the hard limit allows.
    """
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    ceiling = hard if hard != resource.RLIM_INFINITY else 1 << 20
    target = ceiling if wanted is None else min(wanted, ceiling)
    if soft != resource.RLIM_INFINITY and target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as e:
            log.warning("gateway: cannot raise the open files limit to %d: %s", target, e)
    return soft, hard
