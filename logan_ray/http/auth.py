"""HTTP Basic authentication in front of every route (API, console, its data, /docs, /openapi.json).

An ASGI middleware, so nothing the app serves is reachable around it. With
authentication on (logan_ray.http.security) a request needs ``Authorization: Basic``
credentials of a SCRAM user, checked against the gateway's credential store through a
short-lived cache (logan_ray.security.passwords); missing or wrong credentials get 401
with ``WWW-Authenticate: Basic realm="logan-ray"`` and the API's JSON error with
SASL_AUTHENTICATION_FAILED (a wrong password after 100 ms, like the gateway's failed
logins). The verdict (principal and ACL snapshot) travels to the routes as an
:class:`~logan_ray.http.access.Access` in the request scope.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import logging

from starlette.responses import JSONResponse

from logan_ray.protocol import errors as E
from logan_ray.security.client_host import client_host
from logan_ray.security.tls import ANONYMOUS

from .access import Access
from .errors import CHALLENGE, error_body

log = logging.getLogger("logan_ray.http")
#: connection.failed.authentication.delay.ms, as the gateway applies it
FAILED_AUTH_DELAY_S = 0.1


class Unauthorized(Exception):
    pass


def basic_credentials(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an ``Authorization: Basic`` header; None when there is none; raises on a bad one."""
    if header is None:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        raise Unauthorized(f"unsupported authorization scheme {scheme!r}; use HTTP Basic")
    try:
        user, colon, password = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
    except (binascii.Error, ValueError):
        raise Unauthorized("malformed HTTP Basic credentials") from None
    if not colon or not user or not password:
        raise Unauthorized("Authentication failed: username or password is empty")
    return user, password


def _header(scope, name: bytes) -> str | None:
    for k, v in scope.get("headers") or ():
        if k == name:
            return v.decode("latin-1")
    return None


def _refuse(status: int, message: str, code: int = E.SASL_AUTHENTICATION_FAILED) -> JSONResponse:
    headers = {"WWW-Authenticate": CHALLENGE} if status == 401 else None
    return JSONResponse(error_body(code, message), status_code=status, headers=headers)


class AuthMiddleware:
    def __init__(self, app) -> None:
        self.app = app

    async def __call__(self, scope, receive, send) -> None:
        from .backend import _current as backend

        security = backend.security if backend is not None else None
        if scope["type"] not in ("http", "websocket") or security is None or not security.active:
            await self.app(scope, receive, send)
            return
        client = scope.get("client")
        host = client_host(client[0]) if client else ""
        try:
            creds = basic_credentials(_header(scope, b"authorization"))
            if creds is None and security.authenticate:
                raise Unauthorized("Authentication required: HTTP Basic credentials of a SCRAM user")
            if creds is not None:
                try:
                    ok = await backend.passwords.verify(*creds)
                except Exception as e:  # the credential store is unreachable: not a wrong password
                    log.warning("http: cannot check credentials of %r: %s", creds[0], e)
                    await _refuse(503, f"Authentication failed: credentials unavailable ({e})")(scope, receive, send)
                    return
                if not ok:
                    log.warning("http: failed authentication of %r from %s", creds[0], host)
                    await asyncio.sleep(FAILED_AUTH_DELAY_S)
                    raise Unauthorized("Authentication failed: Invalid username or password")
        except Unauthorized as e:
            await _refuse(401, str(e))(scope, receive, send)
            return
        principal = ANONYMOUS if creds is None else f"User:{creds[0]}"

        async def renew(check_password: bool = True) -> Access | None:
            if check_password and creds is not None and not await backend.passwords.verify(*creds):
                return None
            decider = await backend.authorizer.decider() if backend.authorizer is not None else None
            return Access(principal, host, decider, renew)
        try:
            access = await renew(check_password=False)
        except Exception as e:  # the ACL store is unreachable: refuse rather than guess
            log.warning("http: cannot read the ACLs: %s", e)
            await _refuse(503, f"authorization unavailable ({e})", E.UNKNOWN_SERVER_ERROR)(scope, receive, send)
            return
        scope.setdefault("state", {})["logan_access"] = access
        await self.app(scope, receive, send)
