"""Refusing what a browser can be made to send: foreign ``Host`` names and foreign ``Origin`` writes.

A web page the user opens can make the browser send requests to the API, with any
cached Basic credentials: a cross-origin "simple" request (a form POST, ``DELETE`` is not
one but is refused too) or, by DNS rebinding, a same-origin one to a name of the
attacker's that now resolves to the API's address. Two checks, before anything else:

- **Host**: the request's ``Host`` must be a name the server answers to: loopback
  names and addresses when it listens on loopback, its listen address otherwise (any IP
  literal when it listens on every interface: an address cannot be rebound), and the
  names of the allow-list (``--http-allowed-hosts``). Anything else is 421 Misdirected
  Request: a rebound name never reaches a route.
- **Origin**: a state-changing request (``POST``, ``PUT``, ``PATCH``, ``DELETE``) with
  an ``Origin`` header must come from the server's own origin (the ``Host`` it was sent
  to) or an allow-listed name; anything else, ``Origin: null`` included, is 403.

The third part, a body that is not ``application/json``, is refused by
logan_ray.http.body.read_body (415): a browser sends ``text/plain`` without asking.
"""
from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.responses import JSONResponse

from logan_ray.protocol import errors as E

from .auth import _header
from .errors import error_body

#: Methods that change state: cross-origin ones are refused.
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
LOOPBACK_NAMES = frozenset({"localhost", "localhost.", "ip6-localhost"})
WILDCARDS = frozenset({"", "0.0.0.0", "::"})


def host_name(netloc: str) -> str:
    """``Host``/``Origin`` authority -> lower-case host without port or IPv6 brackets ("" when unparsable)."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        end = netloc.find("]")
        return netloc[1:end] if end > 0 else ""
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    ip = _ip(host)
    return host.lower() in LOOPBACK_NAMES if ip is None else ip.is_loopback


@dataclass(frozen=True)
class HostGuard:
    """What ``Host`` and ``Origin`` a server listening on ``bind_host`` accepts."""

    bind_host: str = "127.0.0.1"
    allowed_hosts: tuple[str, ...] = ()  # extra names (lower case), e.g. the DNS name users type

    def host_allowed(self, host_header: str | None) -> bool:
        if not host_header:
            return False  # HTTP/1.1 requires it; without it there is nothing to check against
        name = host_name(host_header)
        if not name:
            return False
        if name in self.allowed_hosts:
            return True
        bind = self.bind_host.strip().lower()
        if is_loopback(bind):
            return is_loopback(name)
        if bind in WILDCARDS:
            return is_loopback(name) or _ip(name) is not None
        ip, bound_ip = _ip(name), _ip(bind)
        return name == bind or (ip is not None and ip == bound_ip)

    def origin_allowed(self, origin: str, host_header: str) -> bool:
        parts = urlsplit(origin.strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            return False  # "null" (sandboxed frames, file: pages) and anything odd
        if parts.netloc.lower() == host_header.strip().lower():
            return True  # same origin: the page came from this server
        return host_name(parts.netloc) in self.allowed_hosts


def _refuse(status: int, message: str) -> JSONResponse:
    return JSONResponse(error_body(E.INVALID_REQUEST, message), status_code=status)


class GuardMiddleware:
    """ASGI middleware applying the replica's :class:`HostGuard` to every request."""

    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        from .backend import _current as backend

        guard = backend.guard if backend is not None else None
        if scope["type"] not in ("http", "websocket") or guard is None:
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        if not guard.host_allowed(host):
            await _refuse(421, f"this server does not answer to the host name {host!r} (DNS rebinding?); "
                               "add it with --http-allowed-hosts if users reach the API by it")(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        if origin is not None and scope.get("method", "GET") in WRITES and not guard.origin_allowed(origin, host):
            await _refuse(403, f"cross-origin {scope.get('method')} from {origin!r} refused; add its host with "
                               "--http-allowed-hosts if it is trusted")(scope, receive, send)
            return
        await self.app(scope, receive, send)
