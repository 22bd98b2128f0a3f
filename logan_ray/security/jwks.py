"""The OAuth provider's key set (RFC 7517 JWKS) from ``sasl.oauthbearer.jwks.endpoint.url``.

As Kafka's broker: an ``http(s)://`` set is fetched at start-up (a provider that
cannot be reached then is a start-up error, not a broker that later refuses
every login), again every ``sasl.oauthbearer.jwks.endpoint.refresh.ms``, and on
demand when a token names a kid the cache does not hold (at most once per
``sasl.oauthbearer.jwks.endpoint.retry.backoff.ms``, so unknown kids cannot make the
broker hammer the provider); a ``file:`` set is read at start-up and a token with
a kid it does not hold is refused. Every fetch is bounded (:data:`FETCH_TIMEOUT_S`,
:data:`MAX_JWKS_BYTES`), and once serving it runs off the event loop.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, rsa

from .jwt import Jwk

log = logging.getLogger("logan_ray.security")

#: The longest one JWKS fetch may take, connection and body together.
FETCH_TIMEOUT_S = 10.0
#: The largest JWKS document read (a provider's set is a few KiB).
MAX_JWKS_BYTES = 1 << 20
_CURVES = {"P-256": ec.SECP256R1, "P-384": ec.SECP384R1, "P-521": ec.SECP521R1}


class JwksUnavailableError(ValueError):
    """The JWKS could not be fetched or read; the message names the URL and what to do."""


def _int(jwk: dict[str, Any], name: str) -> int:
    value = jwk.get(name)
    if not isinstance(value, str):
        raise ValueError(f"member {name!r} is missing")
    try:
        return int.from_bytes(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)), "big")
    except (binascii.Error, ValueError):
        raise ValueError(f"member {name!r} is not base64url") from None


def parse_jwks(document: bytes | str) -> list[Jwk]:
    """The signature keys of a JWKS document (RSA and EC public keys; others are skipped)."""
    try:
        data = json.loads(document)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
        raise ValueError('not a JWKS: expected an object with a "keys" list')
    out = []
    for i, jwk in enumerate(data["keys"]):
        if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig":
            continue
        kty, kid, alg = jwk.get("kty"), jwk.get("kid"), jwk.get("alg")
        try:
            if kty == "RSA":
                key: Any = rsa.RSAPublicNumbers(_int(jwk, "e"), _int(jwk, "n")).public_key()
            elif kty == "EC" and jwk.get("crv") in _CURVES:
                key = ec.EllipticCurvePublicNumbers(_int(jwk, "x"), _int(jwk, "y"),
                                                    _CURVES[jwk["crv"]]()).public_key()
            else:
                continue  # a key type or curve this broker does not verify with: never matches a token
        except ValueError as e:
            raise ValueError(f"key {i} (kid {kid!r}) is not a valid {kty} key: {e}") from None
        out.append(Jwk(kid if isinstance(kid, str) else None, kty, key, alg if isinstance(alg, str) else None))
    return out


def read_url(url: str, timeout_s: float = FETCH_TIMEOUT_S) -> bytes:
    """The document at ``url`` (``file:`` or ``http(s)://``), bounded in time and size (blocking)."""
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("file", "http", "https"):
        raise JwksUnavailableError(f"sasl.oauthbearer.jwks.endpoint.url={url!r}: use an http://, https:// or "
                                   "file: URL")
    deadline = time.monotonic() + timeout_s
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            chunks, size = [], 0
            while True:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no complete answer within {timeout_s:g} s")
                chunk = response.read(65536)
                if not chunk:
                    return b"".join(chunks)
                size += len(chunk)
                if size > MAX_JWKS_BYTES:
                    raise ValueError(f"the JWKS is larger than {MAX_JWKS_BYTES} bytes")
                chunks.append(chunk)
    except JwksUnavailableError:
        raise
    except (OSError, ValueError, urllib.error.URLError) as e:  # TimeoutError and HTTPError are OSErrors
        reason = getattr(e, "reason", None) or e
        raise JwksUnavailableError(f"cannot fetch the JWKS from sasl.oauthbearer.jwks.endpoint.url={url}: "
                                   f"{reason} (check the URL and that the OAuth provider is reachable)") from None


class JwksCache:
    """The provider's keys, as fetched last, and when to fetch them again."""

    def __init__(self, url: str, refresh_ms: int = 3_600_000, retry_backoff_ms: int = 100,
                 timeout_s: float = FETCH_TIMEOUT_S) -> None:
        self.url, self.refresh_ms, self.retry_backoff_ms, self.timeout_s = url, refresh_ms, retry_backoff_ms, timeout_s
        self.remote = urllib.parse.urlsplit(url).scheme.lower() in ("http", "https")
        self.keys: list[Jwk] = []
        self.fetched_at = 0.0  # monotonic time of the last successful fetch
        self._tried_at = 0.0  # monotonic time of the last attempt, successful or not
        self._refreshing: asyncio.Future | None = None

    def load(self) -> "JwksCache":
        """Fetch now, blocking (start-up); raises JwksUnavailableError with a clear message."""
        self._tried_at = time.monotonic()
        document = read_url(self.url, self.timeout_s)
        try:
            keys = parse_jwks(document)
        except ValueError as e:
            raise JwksUnavailableError(f"the JWKS at sasl.oauthbearer.jwks.endpoint.url={self.url} is not "
                                       f"usable: {e}") from None
        if not keys:
            raise JwksUnavailableError(f"the JWKS at sasl.oauthbearer.jwks.endpoint.url={self.url} holds no RSA "
                                       "or EC signature key")
        self.keys, self.fetched_at = keys, time.monotonic()
        return self

    def matching(self, kid: str | None) -> list[Jwk]:
        """Keys a token naming ``kid`` may be signed with (without a kid: every key)."""
        return [k for k in self.keys if kid is None or k.kid == kid]

    async def keys_for(self, kid: str | None) -> list[Jwk]:
        """The keys for ``kid``. A set lacking that kid is fetched again (off the loop) and waited for; a set
        older than the refresh interval is fetched again in the background, and this login goes on with the
        keys it has (an unreachable provider must not slow every login down by the fetch timeout)."""
        if self.remote:
            now = time.monotonic()
            due = now - self._tried_at > self.retry_backoff_ms / 1000.0
            if due and not self.matching(kid):
                await self._refresh()
            elif due and now - self.fetched_at > self.refresh_ms / 1000.0:
                self._start_refresh()
        return self.matching(kid)

    def _start_refresh(self) -> asyncio.Future:
        if self._refreshing is None:  # one fetch at a time; concurrent logins share it
            self._tried_at = time.monotonic()
            future = asyncio.get_running_loop().run_in_executor(None, self.load)
            future.add_done_callback(self._refreshed)
            self._refreshing = future
        return self._refreshing

    def _refreshed(self, future: asyncio.Future) -> None:
        if self._refreshing is future:
            self._refreshing = None
        if not future.cancelled() and future.exception() is not None:
            log.warning("OAUTHBEARER: %s (the keys fetched before stay in use)", future.exception())

    async def _refresh(self) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(self._start_refresh()), self.timeout_s + 1.0)
        except Exception:
            pass  # logged by _refreshed; the token is then checked against the keys fetched before
