"""A stand-in OAuth provider for the OAUTHBEARER tests: its keys, its JWKS file, and tokens it signs.

Keys are made per test run (RSA 2048 and EC P-256); tokens are minted here by hand
(compact JWS, RFC 7515) so each test can bend exactly one thing (signature, exp,
iss, aud, alg, kid).
"""
from __future__ import annotations

import base64
import json
import time
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

ISSUER = "https://idp.test.example"
AUDIENCE = "logan-ray"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int_b64(n: int, size: int | None = None) -> str:
    return b64url(n.to_bytes(size or (n.bit_length() + 7) // 8, "big"))


class Provider:
    def __init__(self) -> None:
        self.rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.ec = ec.generate_private_key(ec.SECP256R1())
        self.other_rsa = rsa.generate_private_key(public_exponent=65537, key_size=2048)  # not in the JWKS

    def jwks(self) -> dict[str, Any]:
        r = self.rsa.public_key().public_numbers()
        e = self.ec.public_key().public_numbers()
        return {"keys": [
            {"kty": "RSA", "kid": "rsa-1", "use": "sig", "alg": "RS256", "n": _int_b64(r.n), "e": _int_b64(r.e)},
            {"kty": "EC", "kid": "ec-1", "use": "sig", "crv": "P-256", "x": _int_b64(e.x, 32),
             "y": _int_b64(e.y, 32)},
        ]}

    def write_jwks(self, path: str) -> str:
        """Writes the JWKS file; returns its file: URL."""
        with open(path, "w") as f:
            json.dump(self.jwks(), f)
        return "file://" + path

    def claims(self, sub: str = "alice", lifetime_s: float = 600, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        out = {"sub": sub, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": now + lifetime_s,
               "scope": "kafka"}
        out.update(extra)
        return {k: v for k, v in out.items() if v is not None}

    def token(self, claims: dict[str, Any] | None = None, alg: str = "RS256", kid: str | None = "rsa-1",
              key: Any = None, header: dict[str, Any] | None = None) -> str:
        """A compact JWS of ``claims`` signed with ``alg`` (RS256 or ES256) by ``key`` (the provider's)."""
        head = {"alg": alg, "typ": "JWT", **({"kid": kid} if kid is not None else {}), **(header or {})}
        signing_input = f"{b64url(json.dumps(head).encode())}.{b64url(json.dumps(claims or self.claims()).encode())}"
        data = signing_input.encode("ascii")
        if alg == "none":
            return signing_input + "."
        if alg == "RS256":
            sig = (key or self.rsa).sign(data, padding.PKCS1v15(), hashes.SHA256())
        elif alg == "ES256":
            r, s = decode_dss_signature((key or self.ec).sign(data, ec.ECDSA(hashes.SHA256())))
            sig = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        else:
            raise ValueError(alg)
        return f"{signing_input}.{b64url(sig)}"


def settings(jwks_url: str, **extra: str) -> dict[str, str]:
    """Kafka-named broker settings for a SASL_PLAINTEXT listener validating this provider's tokens."""
    return {"sasl.oauthbearer.jwks.endpoint.url": jwks_url, "sasl.oauthbearer.expected.issuer": ISSUER,
            "sasl.oauthbearer.expected.audience": AUDIENCE, **extra}
