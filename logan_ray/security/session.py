"""Who is on a connection, and what it may send before it has said so.

One :class:`ListenerSecurity` per listener (TLS context, SASL mechanisms, limits);
one :class:`Session` per connection (principal, SASL progress, KIP-368 expiry).
The gateway asks ``Session.refusal(api_key)`` before it runs any request: on a
SASL listener only ApiVersions, SaslHandshake and SaslAuthenticate are accepted
until authentication succeeds, as Kafka's SaslServerAuthenticator does; anything
else closes that connection. A session created with a client address and a
:class:`~.login_budget.FailedLoginBudget` runs each SASL exchange within that
address's budget of failed logins.
"""
from __future__ import annotations

import ssl
import time
from dataclasses import dataclass, field
from typing import Any

from .listeners import Listener
from .tls import ANONYMOUS

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
#: Kafka's sasl.server.max.receive.size default: the largest frame before authentication.
SASL_MAX_RECEIVE = 524288


@dataclass
class ListenerSecurity:
    listener: Listener
    tls: ssl.SSLContext | None = None
    mechanisms: tuple[str, ...] = ()
    reauth_ms: int = 0  # connections.max.reauth.ms: 0 means sessions do not expire
    max_receive: int = SASL_MAX_RECEIVE
    failed_auth_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    oauth: Any = None  # the OAuthBearerValidator when OAUTHBEARER is enabled here

    def new_session(self, host: str | None = None, budget: Any = None) -> "Session":
        """A session for a client at ``host``; ``budget`` (FailedLoginBudget) bounds its failed logins."""
        return Session(self, host=host, budget=budget)


@dataclass
class Session:
    security: ListenerSecurity
    principal: str = ANONYMOUS
    authenticated: bool = False
    mechanism: str | None = None
    expires_at: float | None = None
    logins: int = 0
    host: str | None = None  # the client's address, as per-address limits see it
    budget: Any = None  # the gateway's FailedLoginBudget, shared by its connections
    _server: Any = None
    _t0: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.authenticated = not self.security.listener.sasl

    @property
    def server(self) -> Any:
        """The SASL server of an exchange in progress (None between exchanges)."""
        return self._server

    @server.setter
    def server(self, server: Any) -> None:
        if server is not None and self.budget is not None and self.host is not None:
            server = self.budget.guard(server, self.host)
        self._server = server

    @property
    def needs_sasl(self) -> bool:
        return self.security.listener.sasl

    def refusal(self, api_key: int) -> str | None:
        """Why this request closes the connection, or None when it may run."""
        if api_key in (API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE):
            return None
        if not self.authenticated:
            return f"api key {api_key} sent before SASL authentication"
        if self.expires_at is not None and time.monotonic() > self.expires_at:
            return "SASL session expired (connections.max.reauth.ms or the token's expiry) without re-authentication"
        return None

    def authenticated_as(self, principal: str, credential_expires_at_ms: int | None = None) -> int:
        """Record a completed login; returns the session lifetime (ms) to report, 0 for none.

        As Kafka's SaslServerAuthenticator: the lifetime is connections.max.reauth.ms when set,
        the credential's remaining life (an OAUTHBEARER token's exp) when it has one, the
        shorter of the two when both apply; the session is refused after it.
        """
        self.principal = principal
        self.authenticated = True
        self.logins += 1
        self.server = None
        lifetimes = [self.security.reauth_ms] if self.security.reauth_ms > 0 else []
        if credential_expires_at_ms is not None:
            lifetimes.append(max(0, credential_expires_at_ms - int(time.time() * 1000)))
        if not lifetimes:
            self.expires_at = None
            return 0
        lifetime = min(lifetimes)
        self.expires_at = time.monotonic() + lifetime / 1000.0
        return lifetime
