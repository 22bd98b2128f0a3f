"""The SASL server state machines and SCRAM credentials, checked against RFC 7677's test vector."""
from __future__ import annotations

import asyncio
import base64

import pytest

from logan_ray.security import sasl, scram
from logan_ray.security.sasl import SaslFailed, server_for

# RFC 7677 section 3: user "user", password "pencil"
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
SERVER_NONCE_SUFFIX = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _store(**users: str):
    creds = {}
    for name, password in users.items():
        for mech in scram.MECHANISMS:
            salted = scram.salted_password(mech, password, SALT, 4096)
            creds[(name, mech)] = scram.credential_from_salted(mech, SALT, salted, 4096)

    async def lookup(user: str, mech: str):
        return creds.get((user, mech))
    return lookup, creds


def _run(coro):
    return asyncio.run(coro)


def test_scram_sha_256_exchange_matches_rfc7677(monkeypatch):
    monkeypatch.setattr(sasl.secrets, "token_urlsafe", lambda n: SERVER_NONCE_SUFFIX)
    lookup, _ = _store(user="pencil")
    server = server_for("SCRAM-SHA-256")
    assert _run(server.step(CLIENT_FIRST, lookup)) == SERVER_FIRST
    assert _run(server.step(CLIENT_FINAL, lookup)) == SERVER_FINAL
    assert server.done and server.user == "user"


def test_stored_credential_never_holds_the_password():
    cred = scram.new_credential("SCRAM-SHA-512", "pencil")
    assert set(cred) == {"salt", "stored_key", "server_key", "iterations"}
    assert "pencil" not in repr(cred)
    assert scram.check_password("SCRAM-SHA-512", cred, "pencil")
    assert not scram.check_password("SCRAM-SHA-512", cred, "pencil2")


def test_wrong_proof_fails_with_kafkas_message(monkeypatch):
    monkeypatch.setattr(sasl.secrets, "token_urlsafe", lambda n: SERVER_NONCE_SUFFIX)
    lookup, _ = _store(user="not-pencil")
    server = server_for("SCRAM-SHA-256")
    _run(server.step(CLIENT_FIRST, lookup))
    with pytest.raises(SaslFailed, match="invalid credentials with SASL mechanism SCRAM-SHA-256"):
        _run(server.step(CLIENT_FINAL, lookup))
    assert not server.done


def test_unknown_user_and_garbage_fail():
    lookup, _ = _store(user="pencil")
    with pytest.raises(SaslFailed, match="Invalid user credentials"):
        _run(server_for("SCRAM-SHA-512").step(b"n,,n=nobody,r=abc", lookup))
    for junk in (b"", b"\xff\xfe", b"garbage", b"p=tls-unique,,n=user,r=x", b"n,,r=x,n=user", b"n,,n=us=ZZer,r=x"):
        with pytest.raises(SaslFailed):
            _run(server_for("SCRAM-SHA-512").step(junk, lookup))


def test_client_final_with_another_nonce_fails(monkeypatch):
    lookup, _ = _store(user="pencil")
    server = server_for("SCRAM-SHA-256")
    _run(server.step(CLIENT_FIRST, lookup))  # a random server nonce this time: the RFC's final no longer fits
    with pytest.raises(SaslFailed, match="nonce"):
        _run(server.step(CLIENT_FINAL, lookup))


def test_plain_checks_against_the_scram_store():
    lookup, _ = _store(alice="wonder")
    ok = server_for("PLAIN")
    assert _run(ok.step(b"\x00alice\x00wonder", lookup)) == b"" and ok.done and ok.user == "alice"
    with pytest.raises(SaslFailed, match="Invalid username or password"):
        _run(server_for("PLAIN").step(b"\x00alice\x00wrong", lookup))
    with pytest.raises(SaslFailed, match="authorization id"):
        _run(server_for("PLAIN").step(b"bob\x00alice\x00wonder", lookup))
    with pytest.raises(SaslFailed):
        _run(server_for("PLAIN").step(b"no separators", lookup))


def test_client_final_nonce_is_checked_like_kafka_ends_with(monkeypatch):
    """librdkafka < 2.1 repeats the client nonce in front of the full nonce; Kafka accepts that (endsWith)."""
    import hashlib
    import hmac as hmac_mod

    monkeypatch.setattr(sasl.secrets, "token_urlsafe", lambda n: SERVER_NONCE_SUFFIX)
    lookup, _ = _store(user="pencil")
    server = server_for("SCRAM-SHA-256")
    server_first = _run(server.step(CLIENT_FIRST, lookup)).decode()
    nonce = "rOprNGfwEbeRWgbNEkqO" + server_first.split(",")[0][2:]
    without_proof = f"c=biws,r={nonce}"
    salted = scram.salted_password("SCRAM-SHA-256", "pencil", SALT, 4096)
    client_key = hmac_mod.new(salted, b"Client Key", "sha256").digest()
    auth = f"n=user,r=rOprNGfwEbeRWgbNEkqO,{server_first},{without_proof}".encode()
    sig = hmac_mod.new(hashlib.sha256(client_key).digest(), auth, "sha256").digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, sig))).decode()
    assert _run(server.step(f"{without_proof},p={proof}".encode(), lookup)).startswith(b"v=")
    assert server.done
