"""SCRAM credentials (RFC 5802, RFC 7677) as Kafka stores them (KIP-84, KIP-554).

A credential is (salt, StoredKey, ServerKey, iterations): enough to verify a
client's proof and to prove the server to it, never the password. Kafka's clients
send a SaltedPassword in AlterUserScramCredentials; the CLI derives it here.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
from typing import Any

#: mechanism name -> (Kafka's ScramMechanism code, hash name)
MECHANISMS = {"SCRAM-SHA-256": (1, "sha256"), "SCRAM-SHA-512": (2, "sha512")}
BY_CODE = {code: name for name, (code, _h) in MECHANISMS.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


def hash_name(mechanism: str) -> str:
    return MECHANISMS[mechanism][1]


def h(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(hash_name(mechanism), data).digest()


def hmac_(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, hash_name(mechanism)).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(hash_name(mechanism), password.encode("utf-8"), salt, iterations)


def credential_from_salted(mechanism: str, salt: bytes, salted: bytes, iterations: int) -> dict[str, Any]:
    """The stored form: base64 salt, StoredKey and ServerKey, and the iteration count."""
    client_key = hmac_(mechanism, salted, b"Client Key")
    return {"salt": _b64(salt), "stored_key": _b64(h(mechanism, client_key)),
            "server_key": _b64(hmac_(mechanism, salted, b"Server Key")), "iterations": int(iterations)}


def new_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS) -> dict[str, Any]:
    salt = os.urandom(32)
    return credential_from_salted(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                  iterations)


def check_password(mechanism: str, credential: dict[str, Any], password: str) -> bool:
    """Does ``password`` produce this credential (SASL/PLAIN and HTTP Basic checked against the SCRAM store)?

    Both StoredKey and ServerKey are recomputed and compared in constant time; one PBKDF2 per call.
    """
    salted = salted_password(mechanism, password, unb64(credential["salt"]), credential["iterations"])
    client_key = hmac_(mechanism, salted, b"Client Key")
    stored_ok = hmac.compare_digest(h(mechanism, client_key), unb64(credential["stored_key"]))
    server_ok = hmac.compare_digest(hmac_(mechanism, salted, b"Server Key"), unb64(credential["server_key"]))
    return stored_ok & server_ok


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode("ascii")


def unb64(s: str) -> bytes:
    return base64.b64decode(s.encode("ascii"), validate=True)
