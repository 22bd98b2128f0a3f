"""A budget of failed logins per client address, so password guessing costs the guesser, not the broker.

Why: a SASL/PLAIN login runs PBKDF2 (up to 16,384 iterations, once per stored
mechanism) before the password is known to be wrong, so wrong passwords at a few
hundred a second from one address keep the gateway's CPU busy, and nothing slows a
guesser down but ``connection.failed.authentication.delay.ms`` per connection (it
just opens more). Kafka has no per-address budget; this adds one:

- ``max.failed.authentications.per.ip`` (default 100; -1 for none): after that many
  failed logins from one address within
- ``failed.authentications.per.ip.window.ms`` (default 60000), every new connection
  from that address to a SASL listener is closed at once (no handshake, one log line
  a window), and a login already under way fails without a credential lookup or
  PBKDF2, until its oldest counted failure is older than the window.

Why 100 a minute: a client retrying a wrong password with its reconnect backoff
(librdkafka's grows to 10 s) fails a few times a minute and so never locks out its
neighbours on the same address, while a guesser gets under two checks a second.
A success does not reset the count (a guesser holding one valid account could
otherwise clear it between guesses). Clients behind one NAT address share its
budget: the trade-off Kafka's ``max.connections.per.ip`` makes too. At most
:data:`MAX_ADDRESSES` addresses are remembered (the least recently failing is
forgotten first), so a spread of addresses cannot grow the table without bound.
"""
from __future__ import annotations

import logging
import time
from collections import OrderedDict, deque
from typing import Any, Awaitable, Callable

from .sasl import SaslFailed

log = logging.getLogger("logan_ray.gateway")

MAX_FAILED_AUTHENTICATIONS_PER_IP = 100
FAILED_AUTHENTICATIONS_WINDOW_MS = 60_000
MAX_ADDRESSES = 65_536


class FailedLoginBudget:
    """Failed logins per address within a sliding window."""

    def __init__(self, max_failures: int = MAX_FAILED_AUTHENTICATIONS_PER_IP,
                 window_ms: int = FAILED_AUTHENTICATIONS_WINDOW_MS, max_addresses: int = MAX_ADDRESSES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.max_failures = max_failures
        self.window_s = window_ms / 1000.0
        self.max_addresses = max_addresses
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self.refused = 0  # logins failed, or connections closed, at once because their address was out of budget
        self._logged: dict[str, float] = {}  # host -> when its refusal was last logged

    @property
    def enabled(self) -> bool:
        return self.max_failures >= 0

    def wait_s(self, host: str) -> float:
        """Seconds until ``host`` may try a login again; 0 when it may now."""
        times = self._failures.get(host)
        if not self.enabled or times is None or len(times) < self.max_failures:
            return 0.0
        if self.max_failures == 0:
            return self.window_s
        return max(0.0, times[0] + self.window_s - self._clock())

    def refuse(self, host: str) -> None:
        """Count a connection of ``host`` closed at once for being out of budget (logged once a window)."""
        self.refused += 1
        now = self._clock()
        if now - self._logged.get(host, -self.window_s) >= self.window_s:
            self._logged[host] = now
            log.warning("gateway: closing new SASL connections from %s for %.0f s: too many failed "
                        "authentications (max.failed.authentications.per.ip)", host, self.wait_s(host))
            while len(self._logged) > self.max_addresses:
                self._logged.pop(next(iter(self._logged)))

    def failed(self, host: str) -> None:
        """Count one failed login from ``host``."""
        if not self.enabled or self.max_failures == 0:
            return
        times = self._failures.pop(host, None)
        if times is None:
            times = deque(maxlen=self.max_failures)
        times.append(self._clock())
        self._failures[host] = times  # most recently failing last
        while len(self._failures) > self.max_addresses:
            self._failures.popitem(last=False)

    def guard(self, server: Any, host: str) -> "GuardedServer":
        """``server`` (a SASL server of logan_ray.security.sasl) answering for ``host`` within this budget."""
        return GuardedServer(server, self, host)


class GuardedServer:
    """A SASL server whose logins from an address out of budget fail before any credential is checked.

    Looks like the server it wraps (``mechanism``, ``done``, ``user``), so the
    gateway's SaslAuthenticate handler drives it unchanged.
    """

    def __init__(self, server: Any, budget: FailedLoginBudget, host: str) -> None:
        self._server, self._budget, self._host = server, budget, host

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

    async def step(self, token: bytes, lookup: Callable[[str, str], Awaitable[Any]]) -> bytes:
        wait = self._budget.wait_s(self._host)
        if wait > 0:
            self._budget.refused += 1
            raise SaslFailed(f"Authentication failed: too many failed authentications from {self._host}; "
                             f"try again in {wait:.0f} s")
        try:
            return await self._server.step(token, lookup)
        except SaslFailed:
            self._budget.failed(self._host)
            raise
