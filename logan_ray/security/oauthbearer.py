"""SASL/OAUTHBEARER's pieces apart from the state machine: the client's message and the validator.

The client's initial response is RFC 7628's GS2 form that Kafka's clients send
(KIP-255): ``n,[a=authzid],\\x01auth=Bearer <token>\\x01[key=value\\x01...]\\x01``.
:class:`OAuthBearerValidator` is what a broker configured with Kafka's
``sasl.oauthbearer.*`` settings checks a token with (KIP-768): the provider's
JWKS (:mod:`.jwks`) and the claim rules (:mod:`.jwt`).
"""
from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from .jwks import JwksCache
from .jwt import TokenRules, ValidatedToken, split, validate

MECHANISM = "OAUTHBEARER"
#: Kafka's OAuthBearerClientInitialResponse grammar (RFC 7628 section 3.1).
_GS2 = re.compile(rb"n,(?:a=([^,]*))?,\x01(.*)\x01\x01", re.DOTALL)
_KEY = re.compile(r"[A-Za-z]+")
_VALUE = re.compile(r"[\x21-\x7E \t\r\n]+")
_BEARER = re.compile(r"Bearer +([-_.a-zA-Z0-9]+) *", re.IGNORECASE)  # the scheme is case-insensitive
#: Kafka's broker settings for OAUTHBEARER validation: name -> default (None: no default).
SETTINGS = {
    "sasl.oauthbearer.jwks.endpoint.url": None,
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": 3_600_000,
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": 100,
    "sasl.oauthbearer.expected.issuer": None,
    "sasl.oauthbearer.expected.audience": None,
    "sasl.oauthbearer.sub.claim.name": "sub",
    "sasl.oauthbearer.scope.claim.name": "scope",
    "sasl.oauthbearer.clock.skew.seconds": 30,
}


class InvalidInitialResponse(ValueError):
    """The client's OAUTHBEARER message does not follow RFC 7628."""


@dataclass(frozen=True)
class InitialResponse:
    authzid: str
    token: str
    extensions: dict[str, str]


def parse_initial_response(message: bytes) -> InitialResponse:
    """The authorization id, token and SASL extensions (KIP-342) of a client's initial response."""
    m = _GS2.fullmatch(message)
    if m is None:
        raise InvalidInitialResponse("Invalid OAUTHBEARER client first message")
    try:
        authzid = (m.group(1) or b"").decode("utf-8")
        pairs = m.group(2).decode("utf-8").split("\x01")
    except UnicodeDecodeError:
        raise InvalidInitialResponse("Invalid OAUTHBEARER client first message: not UTF-8") from None
    token, extensions = None, {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not _KEY.fullmatch(key) or not _VALUE.fullmatch(value):
            raise InvalidInitialResponse("Invalid OAUTHBEARER client first message: malformed key/value pair")
        if key == "auth":
            bearer = _BEARER.fullmatch(value)
            if bearer is None:
                raise InvalidInitialResponse("Invalid OAUTHBEARER client first message: auth is not "
                                             "'Bearer <token>'")
            token = bearer.group(1)
        else:
            extensions[key] = value
    if token is None:
        raise InvalidInitialResponse("Invalid OAUTHBEARER client first message: no auth=Bearer token")
    return InitialResponse(authzid, token, extensions)


def _names(value: Any) -> tuple[str, ...]:
    """A Kafka LIST setting: already a list (resolved settings) or its comma-separated text."""
    items = value.split(",") if isinstance(value, str) else (value or ())
    return tuple(v.strip() for v in items if v.strip())


class OAuthBearerValidator:
    """Checks tokens against the provider's keys and the configured claim rules (one per gateway)."""

    def __init__(self, keys: JwksCache, rules: TokenRules) -> None:
        self.keys, self.rules = keys, rules

    @classmethod
    def from_settings(cls, settings: dict[str, Any]) -> "OAuthBearerValidator":
        """From Kafka-named settings; fetches the JWKS now (raises JwksUnavailableError/ValueError)."""
        url = settings.get("sasl.oauthbearer.jwks.endpoint.url")
        if not url:
            raise ValueError("sasl.enabled.mechanisms includes OAUTHBEARER but sasl.oauthbearer.jwks.endpoint.url "
                             "is not set: set it to the OAuth provider's JWKS URL (or a file: URL of a JWKS file)")
        value = {name: settings.get(name, default) for name, default in SETTINGS.items()}
        value = {name: (SETTINGS[name] if v is None else v) for name, v in value.items()}
        rules = TokenRules(expected_issuer=value["sasl.oauthbearer.expected.issuer"] or None,
                           expected_audience=_names(value["sasl.oauthbearer.expected.audience"]),
                           sub_claim=value["sasl.oauthbearer.sub.claim.name"],
                           scope_claim=value["sasl.oauthbearer.scope.claim.name"],
                           clock_skew_s=int(value["sasl.oauthbearer.clock.skew.seconds"]))
        cache = JwksCache(url, int(value["sasl.oauthbearer.jwks.endpoint.refresh.ms"]),
                          int(value["sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"])).load()
        return cls(cache, rules)

    async def validate(self, token: str) -> ValidatedToken:
        """The validated token, or jwt.TokenInvalid saying why."""
        kid = split(token)[0].get("kid")
        keys = await self.keys.keys_for(kid if isinstance(kid, str) else None)
        return validate(token, lambda _kid: keys, self.rules, time.time())  # a non-string kid is refused there
