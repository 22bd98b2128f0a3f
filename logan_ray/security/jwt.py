"""Validating a JWT access token as Kafka's broker does for SASL/OAUTHBEARER (KIP-768).

A token is accepted only when its JWS signature verifies with a key of the
provider's key set (RS256/384/512, PS256/384/512, ES256/384/512; never ``none``,
never a key the set does not hold), it has not expired, is already valid and
was issued (``exp``, ``nbf``, ``iat``, each with ``sasl.oauthbearer.clock.skew.seconds``),
it names the expected issuer and one of the expected audiences when those are
set, and it carries the principal claim (``sasl.oauthbearer.sub.claim.name``).
Pure: keys come in as ``cryptography`` public keys and time as a number, so
nothing here does I/O (the key set is fetched by :mod:`.jwks`).
"""
from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

#: alg -> (key type, hash, padding kind: "pkcs1", "pss" or the EC curve name)
ALGORITHMS: dict[str, tuple[str, type, str]] = {
    "RS256": ("RSA", hashes.SHA256, "pkcs1"), "RS384": ("RSA", hashes.SHA384, "pkcs1"),
    "RS512": ("RSA", hashes.SHA512, "pkcs1"),
    "PS256": ("RSA", hashes.SHA256, "pss"), "PS384": ("RSA", hashes.SHA384, "pss"),
    "PS512": ("RSA", hashes.SHA512, "pss"),
    "ES256": ("EC", hashes.SHA256, "secp256r1"), "ES384": ("EC", hashes.SHA384, "secp384r1"),
    "ES512": ("EC", hashes.SHA512, "secp521r1"),
}


class TokenInvalid(Exception):
    """The token is refused; ``str()`` says why (logged by the broker, never sent to the client)."""


@dataclass(frozen=True)
class TokenRules:
    """What a token must satisfy beyond its signature: Kafka's sasl.oauthbearer.* broker settings."""

    expected_issuer: str | None = None
    expected_audience: tuple[str, ...] = ()
    sub_claim: str = "sub"
    scope_claim: str = "scope"
    clock_skew_s: int = 30


@dataclass(frozen=True)
class ValidatedToken:
    principal: str  # the value of the principal claim: the session is User:<principal>
    expires_at_ms: int  # exp in milliseconds since the epoch: the session lifetime ends there
    scopes: tuple[str, ...]
    claims: dict[str, Any]


@dataclass(frozen=True)
class Jwk:
    """One verification key of a JWKS: its kid, key type and the key; ``alg`` when the set pins one."""

    kid: str | None
    kty: str
    key: Any
    alg: str | None = None


KeyLookup = Callable[[str | None], Iterable[Jwk]]


def _b64url(part: str, what: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise TokenInvalid(f"the token's {what} is not base64url") from None


def split(token: str) -> tuple[dict[str, Any], dict[str, Any], bytes, bytes]:
    """(header, claims, signing input, signature) of a compact JWS; raises TokenInvalid when malformed."""
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenInvalid(f"a JWT has 3 dot-separated parts; this token has {len(parts)}")
    try:
        header = json.loads(_b64url(parts[0], "header"))
        claims = json.loads(_b64url(parts[1], "payload"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise TokenInvalid("the token's header or payload is not JSON") from None
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenInvalid("the token's header and payload must be JSON objects")
    return header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), _b64url(parts[2], "signature")


def _verifies(jwk: Jwk, alg: str, signing_input: bytes, signature: bytes) -> bool:
    kty, digest, how = ALGORITHMS[alg]
    if jwk.kty != kty or (jwk.alg is not None and jwk.alg != alg):
        return False
    try:
        if kty == "RSA":
            if not isinstance(jwk.key, rsa.RSAPublicKey):
                return False
            pad = padding.PKCS1v15() if how == "pkcs1" else \
                padding.PSS(mgf=padding.MGF1(digest()), salt_length=digest.digest_size)
            jwk.key.verify(signature, signing_input, pad, digest())
            return True
        if not isinstance(jwk.key, ec.EllipticCurvePublicKey) or jwk.key.curve.name != how:
            return False
        size = (jwk.key.curve.key_size + 7) // 8
        if len(signature) != 2 * size:  # JWS sends r || s, each of the curve's size (RFC 7518 3.4)
            return False
        r, s = int.from_bytes(signature[:size], "big"), int.from_bytes(signature[size:], "big")
        jwk.key.verify(encode_dss_signature(r, s), signing_input, ec.ECDSA(digest()))
        return True
    except InvalidSignature:
        return False


def _seconds(claims: dict[str, Any], name: str, required: bool) -> float | None:
    value = claims.get(name)
    if value is None:
        if required:
            raise TokenInvalid(f"the token has no {name} claim")
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TokenInvalid(f"the token's {name} claim is not a number of seconds")
    return float(value)


def _strings(value: Any, name: str, separator: str | None = None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split(separator)) if separator else (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TokenInvalid(f"the token's {name} claim is neither a string nor a list of strings")


def validate(token: str, keys: KeyLookup, rules: TokenRules, now: float) -> ValidatedToken:
    """The validated token, or TokenInvalid saying why (``now``: seconds since the epoch)."""
    header, claims, signing_input, signature = split(token)
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise TokenInvalid(f"the token's signature algorithm {str(alg)[:16]!r} is not accepted "
                           f"(accepted: {', '.join(ALGORITHMS)})")
    if header.get("crit"):
        raise TokenInvalid("the token has critical header parameters this broker does not understand")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise TokenInvalid("the token's kid is not a string")
    candidates = list(keys(kid))
    if not candidates:
        raise TokenInvalid(f"no key with kid {kid!r} in the JWKS" if kid is not None else
                           "the token names no kid and the JWKS has no key for it")
    if not any(_verifies(k, alg, signing_input, signature) for k in candidates):
        raise TokenInvalid("the token's signature does not verify")
    skew = rules.clock_skew_s
    exp = _seconds(claims, "exp", required=True)
    iat = _seconds(claims, "iat", required=True)
    nbf = _seconds(claims, "nbf", required=False)
    assert exp is not None and iat is not None
    if now - skew >= exp:
        raise TokenInvalid(f"the token expired at {exp:.0f} (now {now:.0f}, clock skew {skew} s)")
    if nbf is not None and now + skew < nbf:
        raise TokenInvalid(f"the token is not valid before {nbf:.0f} (now {now:.0f}, clock skew {skew} s)")
    if now + skew < iat:
        raise TokenInvalid(f"the token was issued in the future ({iat:.0f}; now {now:.0f}, clock skew {skew} s)")
    if rules.expected_issuer is not None and claims.get("iss") != rules.expected_issuer:
        raise TokenInvalid(f"the token's issuer {str(claims.get('iss'))[:200]!r} is not "
                           f"{rules.expected_issuer!r}")
    if rules.expected_audience:
        audience = _strings(claims.get("aud"), "aud")
        if not set(audience) & set(rules.expected_audience):
            raise TokenInvalid(f"the token's audience {list(audience)[:8]} names none of "
                               f"{list(rules.expected_audience)}")
    principal = claims.get(rules.sub_claim)
    if not isinstance(principal, str) or not principal.strip():
        raise TokenInvalid(f"the token has no {rules.sub_claim} claim naming its principal")
    scopes = _strings(claims.get(rules.scope_claim), rules.scope_claim, separator=" ")
    return ValidatedToken(principal.strip(), int(exp * 1000), tuple(s for s in scopes if s), claims)
