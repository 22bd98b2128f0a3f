"""SASL mechanisms of the gateway: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER, as sans-I/O server state machines.

Each server takes the client's tokens one at a time (``step``) and answers the
server's; credentials come from an async ``lookup(user, scram_mechanism)`` (the
router's durable SCRAM store), so nothing here knows about sockets or Ray. PLAIN is
checked against the same salted SCRAM credentials: passwords are never stored, and
its PBKDF2 runs off the event loop (passwords.matches_off_loop). OAUTHBEARER checks
a JWT with the listener's :class:`~.oauthbearer.OAuthBearerValidator` instead.
Any failure raises :class:`SaslFailed` with the message Kafka's broker sends.
"""
from __future__ import annotations

import base64
import hmac
import logging
import secrets
from typing import Any, Awaitable, Callable

from . import scram
from .jwt import TokenInvalid
from .oauthbearer import InvalidInitialResponse, parse_initial_response
from .passwords import matches_off_loop, stored_credentials

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
log = logging.getLogger("logan_ray.security")

Lookup = Callable[[str, str], Awaitable["dict[str, Any] | None"]]


class SaslFailed(Exception):
    """Authentication failed; ``str()`` is the message sent with SASL_AUTHENTICATION_FAILED."""


class PlainServer:
    """RFC 4616: one token ``authzid NUL authcid NUL passwd``."""

    mechanism = "PLAIN"

    def __init__(self) -> None:
        self.done = False
        self.user: str | None = None

    async def step(self, token: bytes, lookup: Lookup) -> bytes:
        if self.done:
            raise SaslFailed("Authentication failed: PLAIN takes one message")
        parts = token.split(b"\x00")
        if len(parts) != 3:
            raise SaslFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        try:
            authzid, user, password = (p.decode("utf-8") for p in parts)
        except UnicodeDecodeError:
            raise SaslFailed("Invalid SASL/PLAIN response: not UTF-8") from None
        if not user or not password:
            raise SaslFailed("Authentication failed: username or password is empty")
        if authzid and authzid != user:
            raise SaslFailed("Authentication failed: Client requested an authorization id that is different "
                             "from username")
        if await matches_off_loop(await stored_credentials(lookup, user), password):
            self.done, self.user = True, user
            return b""
        raise SaslFailed("Authentication failed: Invalid username or password")


def _decode_saslname(name: str) -> str:
    out, i = [], 0
    while i < len(name):
        if name[i] == "=":
            code = name[i:i + 3]
            if code == "=2C":
                out.append(",")
            elif code == "=3D":
                out.append("=")
            else:
                raise SaslFailed("Invalid SCRAM username encoding")
            i += 3
            continue
        out.append(name[i])
        i += 1
    return "".join(out)


def _attributes(message: str, what: str) -> list[tuple[str, str]]:
    out = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise SaslFailed(f"Invalid SCRAM {what} message")
        out.append((part[0], part[2:]))
    return out


class ScramServer:
    """RFC 5802 server side: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str) -> None:
        self.mechanism = mechanism
        self.done = False
        self.user: str | None = None
        self._state = 0
        self._gs2 = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._cred: dict[str, Any] | None = None

    def _fail(self) -> SaslFailed:
        return SaslFailed("Authentication failed during authentication due to invalid credentials with SASL "
                          f"mechanism {self.mechanism}")

    async def step(self, token: bytes, lookup: Lookup) -> bytes:
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailed(f"Invalid {self.mechanism} message: not UTF-8") from None
        if self._state == 0:
            return await self._first(text, lookup)
        if self._state == 1:
            return self._final(text)
        raise SaslFailed(f"{self.mechanism}: unexpected message after authentication completed")

    async def _first(self, text: str, lookup: Lookup) -> bytes:
        cb, sep1, rest = text.partition(",")
        authzid, sep2, bare = rest.partition(",")
        if not sep1 or not sep2 or cb not in ("n", "y"):
            if cb.startswith("p="):
                raise SaslFailed("SCRAM channel binding is not supported")
            raise SaslFailed(f"Invalid {self.mechanism} client-first message")
        attrs = _attributes(bare, "client-first")
        if len(attrs) < 2 or attrs[0][0] != "n" or attrs[1][0] != "r" or not attrs[1][1]:
            raise SaslFailed(f"Invalid {self.mechanism} client-first message")
        user = _decode_saslname(attrs[0][1])
        for key, value in attrs[2:]:  # extensions (KIP-367): only an explicit tokenauth=false is harmless
            if key == "m" or (key == "t" and value != "false"):
                raise SaslFailed(f"Unsupported {self.mechanism} extension")
        if authzid and _decode_saslname(authzid[2:] if authzid.startswith("a=") else "\0") != user:
            raise SaslFailed("Authentication failed: Client requested an authorization id that is different "
                             "from username")
        cred = await lookup(user, self.mechanism)
        if cred is None:
            raise SaslFailed("Authentication failed: Invalid user credentials")
        self.user, self._cred = user, cred
        self._gs2 = text[:len(cb) + len(authzid) + 2]
        self._client_first_bare = bare
        self._nonce = attrs[1][1] + secrets.token_urlsafe(24)
        self._server_first = f"r={self._nonce},s={cred['salt']},i={cred['iterations']}"
        self._state = 1
        return self._server_first.encode()

    def _final(self, text: str) -> bytes:
        without_proof, sep, proof_attr = text.rpartition(",")
        attrs = _attributes(text, "client-final")
        if not sep or len(attrs) < 3 or attrs[0][0] != "c" or attrs[1][0] != "r" or not proof_attr.startswith("p="):
            raise SaslFailed(f"Invalid {self.mechanism} client-final message")
        try:
            binding = base64.b64decode(attrs[0][1], validate=True).decode("utf-8")
            proof = base64.b64decode(proof_attr[2:], validate=True)
        except Exception:
            raise SaslFailed(f"Invalid {self.mechanism} client-final message") from None
        # Kafka's broker checks that the nonce *ends with* the server-first nonce; librdkafka before 2.1 sends
        # the client nonce twice (client nonce + full nonce) and relies on that.
        if binding != self._gs2 or not attrs[1][1].endswith(self._nonce):
            raise SaslFailed(f"Invalid {self.mechanism} client-final message: nonce or channel binding mismatch")
        assert self._cred is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        stored_key = scram.unb64(self._cred["stored_key"])
        signature = scram.hmac_(self.mechanism, stored_key, auth_message)
        if len(proof) != len(signature):
            raise self._fail()
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(scram.h(self.mechanism, client_key), stored_key):
            self._state = 2
            raise self._fail()
        server_signature = scram.hmac_(self.mechanism, scram.unb64(self._cred["server_key"]), auth_message)
        self._state = 2
        self.done = True
        return b"v=" + base64.b64encode(server_signature)


class OAuthBearerServer:
    """RFC 7628 as Kafka's broker runs it (KIP-255): the client's initial response carries a JWT.

    A refused token is answered with the JSON error challenge ``{"status":"invalid_token"}``;
    the client acknowledges it with ``\x01`` and the exchange then fails with that message
    (Kafka's OAuthBearerSaslServer). Why the token was refused is logged, never sent.
    """

    mechanism = "OAUTHBEARER"

    def __init__(self, validator: Any) -> None:
        self.validator = validator
        self.done = False
        self.user: str | None = None
        self.expires_at_ms: int | None = None  # the token's exp: the session ends there (KIP-368)
        self._error: str | None = None

    async def step(self, token: bytes, lookup: Lookup) -> bytes:
        if self.done:
            raise SaslFailed("Authentication failed: OAUTHBEARER takes one message")
        if token == b"\x01" and self._error is not None:
            raise SaslFailed(self._error)
        self._error = None
        try:
            response = parse_initial_response(token)
        except InvalidInitialResponse as e:
            raise SaslFailed(str(e)) from None
        if self.validator is None:  # OAUTHBEARER enabled without a validator: never accept unsigned tokens
            raise SaslFailed("Authentication failed: OAUTHBEARER is not configured on this listener")
        try:
            valid = await self.validator.validate(response.token)
        except TokenInvalid as e:
            log.warning("OAUTHBEARER: token refused: %s", e)
            self._error = '{"status":"invalid_token"}'
            return self._error.encode()
        if response.authzid and response.authzid != valid.principal:
            raise SaslFailed(f"Authentication failed: Client requested an authorization id ({response.authzid}) "
                             f"that is different from the token's principal name ({valid.principal})")
        self.done, self.user, self.expires_at_ms = True, valid.principal, valid.expires_at_ms
        return b""


def server_for(mechanism: str, oauth: Any = None) -> PlainServer | ScramServer | OAuthBearerServer:
    """The server of one exchange; ``oauth``: the listener's OAuthBearerValidator (OAUTHBEARER only)."""
    if mechanism == "PLAIN":
        return PlainServer()
    if mechanism == "OAUTHBEARER":
        return OAuthBearerServer(oauth)
    return ScramServer(mechanism)
