"""Brokers prove to each other that they are brokers: the LOGAN-RAY-BROKER SASL exchange.

A leader must know that a Fetch naming a ``replica_id`` comes from that broker: the
follower's position it reports moves the high watermark and the ISR, so a forged one
acknowledges ``acks=all`` writes no follower holds (Kafka requires CLUSTER_ACTION for
a replica fetch, which without an authorizer anyone has). Every gateway holds the
cluster's broker secret, handed out by the router over Ray (token-authenticated)
and never sent on the wire. The follower's replica fetcher opens its connection with
this exchange, on any listener (PLAINTEXT included, where Kafka clients never send
SaslHandshake, so their answers there stay Kafka's):

1. client -> ``<broker id>,<client nonce>``; server -> ``<server nonce>``
2. client -> HMAC(secret, ``client`` | id | both nonces); server -> HMAC(secret, ``server`` | ...)

Both sides prove they know the secret, fresh nonces make a recorded exchange useless,
and the follower knows its answers come from a broker (a man in the middle can still
take over a connection that is not TLS, as with any SASL mechanism; the inter-broker
listener can be SSL or SASL_SSL). Sans-I/O: tokens in, tokens out.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any, Awaitable, Callable

from .sasl import SaslFailed

MECHANISM = "LOGAN-RAY-BROKER"
#: The principal of a connection that proved to be a broker (ACLs see this name).
PRINCIPAL = "User:logan-ray-broker"
NONCE_BYTES = 24
_MAX_TOKEN = 256

SecretLookup = Callable[[str, str], Awaitable["dict[str, Any] | None"]]


def new_secret() -> str:
    """A cluster's broker secret (hex): made once by the controller, kept in the cluster metadata."""
    return secrets.token_hex(32)


def _proof(secret: str, side: bytes, broker_id: int, client_nonce: str, server_nonce: str) -> bytes:
    message = b"|".join((side, str(broker_id).encode(), client_nonce.encode(), server_nonce.encode()))
    return hmac.new(bytes.fromhex(secret), message, hashlib.sha256).digest()


class BrokerAuthServer:
    """The leader's side. ``step`` takes the lookup SASL servers share: ``lookup("", MECHANISM)``
    gives ``{"secret": hex}``."""

    mechanism = MECHANISM

    def __init__(self) -> None:
        self.done = False
        self.user: str | None = None
        self.broker_id: int | None = None
        self._state = 0
        self._client_nonce = ""
        self._server_nonce = ""
        self._secret = ""

    async def step(self, token: bytes, lookup: SecretLookup) -> bytes:
        if len(token) > _MAX_TOKEN:
            raise SaslFailed(f"Invalid {MECHANISM} message")
        if self._state == 0:
            text = token.decode("ascii", "replace")
            broker, sep, nonce = text.partition(",")
            if not sep or not broker.isdigit() or len(nonce) < 16 or not nonce.isalnum():
                raise SaslFailed(f"Invalid {MECHANISM} first message")
            found = await lookup("", MECHANISM)
            if not found or not found.get("secret"):
                raise SaslFailed(f"Authentication failed: {MECHANISM} is not available")
            self.broker_id, self._client_nonce, self._secret = int(broker), nonce, found["secret"]
            self._server_nonce = secrets.token_hex(NONCE_BYTES)
            self._state = 1
            return self._server_nonce.encode()
        if self._state == 1:
            self._state = 2
            assert self.broker_id is not None
            want = _proof(self._secret, b"client", self.broker_id, self._client_nonce, self._server_nonce)
            if not hmac.compare_digest(bytes(token), want):
                raise SaslFailed(f"Authentication failed: invalid {MECHANISM} proof")
            self.done, self.user = True, PRINCIPAL.split(":", 1)[1]
            return _proof(self._secret, b"server", self.broker_id, self._client_nonce, self._server_nonce)
        raise SaslFailed(f"{MECHANISM}: unexpected message after authentication completed")


class BrokerAuthClient:
    """The follower's side: :meth:`first`, then :meth:`final` with the server's nonce, then
    :meth:`verify` with the server's proof (raises :class:`SaslFailed` when it is not a broker)."""

    def __init__(self, secret: str, broker_id: int) -> None:
        self._secret = secret
        self._broker_id = broker_id
        self._client_nonce = secrets.token_hex(NONCE_BYTES)
        self._server_nonce = ""

    def first(self) -> bytes:
        return f"{self._broker_id},{self._client_nonce}".encode()

    def final(self, server_first: bytes) -> bytes:
        nonce = bytes(server_first).decode("ascii", "replace")
        if len(nonce) < 16 or not nonce.isalnum():
            raise SaslFailed(f"Invalid {MECHANISM} server message")
        self._server_nonce = nonce
        return _proof(self._secret, b"client", self._broker_id, self._client_nonce, nonce)

    def verify(self, server_final: bytes) -> None:
        want = _proof(self._secret, b"server", self._broker_id, self._client_nonce, self._server_nonce)
        if not hmac.compare_digest(bytes(server_final), want):
            raise SaslFailed(f"the leader did not prove it is a broker of this cluster ({MECHANISM})")
