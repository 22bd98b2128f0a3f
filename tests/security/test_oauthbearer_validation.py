"""SASL/OAUTHBEARER token validation (KIP-768) without a broker: keys, claims, the SASL exchange, the JWKS.

The provider (oauth_provider.Provider) makes real RSA and EC keys and signs real
tokens; each refusal test bends one thing about an otherwise valid token.
"""
from __future__ import annotations

import asyncio
import http.server
import json
import socket
import threading
import time

import pytest
from oauth_provider import AUDIENCE, ISSUER, Provider, settings

from logan_ray.broker_config import resolve
from logan_ray.security.config import gateway_security
from logan_ray.security.jwks import JwksCache, JwksUnavailableError, parse_jwks
from logan_ray.security.jwt import TokenInvalid, TokenRules, validate
from logan_ray.security.listeners import Listener
from logan_ray.security.oauthbearer import InvalidInitialResponse, OAuthBearerValidator, parse_initial_response
from logan_ray.security.sasl import SaslFailed, server_for
from logan_ray.security.session import ListenerSecurity

RULES = TokenRules(expected_issuer=ISSUER, expected_audience=(AUDIENCE,))


@pytest.fixture(scope="module")
def provider() -> Provider:
    return Provider()


@pytest.fixture(scope="module")
def keys(provider):
    jwks = parse_jwks(json.dumps(provider.jwks()))
    return lambda kid: [k for k in jwks if kid is None or k.kid == kid]


def check(token: str, keys, rules: TokenRules = RULES, now: float | None = None):
    return validate(token, keys, rules, time.time() if now is None else now)


# ------------------------------------------------------------------ accepted tokens
def test_an_rs256_token_names_its_principal_expiry_and_scopes(provider, keys):
    claims = provider.claims(sub="alice", scope="kafka read")
    valid = check(provider.token(claims), keys)
    assert valid.principal == "alice"
    assert valid.expires_at_ms == int(claims["exp"] * 1000)
    assert valid.scopes == ("kafka", "read")


def test_an_es256_token_verifies_with_the_ec_key(provider, keys):
    assert check(provider.token(alg="ES256", kid="ec-1"), keys).principal == "alice"


def test_the_principal_comes_from_the_configured_sub_claim(provider, keys):
    token = provider.token(provider.claims(sub="svc-id", client_id="bob"))
    assert check(token, keys, TokenRules(ISSUER, (AUDIENCE,), sub_claim="client_id")).principal == "bob"


def test_an_audience_list_naming_an_expected_audience_is_accepted(provider, keys):
    assert check(provider.token(provider.claims(aud=["other", AUDIENCE])), keys).principal == "alice"


def test_an_expiry_within_the_clock_skew_is_accepted(provider, keys):
    now = time.time()
    token = provider.token(provider.claims(exp=int(now) - 10, iat=int(now) - 100))
    assert check(token, keys, now=now).principal == "alice"


# ------------------------------------------------------------------ refused tokens
def test_a_token_signed_by_another_key_is_refused(provider, keys):
    with pytest.raises(TokenInvalid, match="signature does not verify"):
        check(provider.token(key=provider.other_rsa), keys)


def test_a_token_whose_claims_were_altered_after_signing_is_refused(provider, keys):
    head, _payload, sig = provider.token().split(".")
    forged = provider.token(provider.claims(sub="admin")).split(".")[1]
    with pytest.raises(TokenInvalid, match="signature does not verify"):
        check(f"{head}.{forged}.{sig}", keys)


def test_an_expired_token_is_refused(provider, keys):
    now = time.time()
    token = provider.token(provider.claims(exp=int(now) - 60, iat=int(now) - 600))
    with pytest.raises(TokenInvalid, match="expired"):
        check(token, keys, now=now)


def test_a_token_not_yet_valid_is_refused(provider, keys):
    with pytest.raises(TokenInvalid, match="not valid before"):
        check(provider.token(provider.claims(nbf=int(time.time()) + 600)), keys)


def test_a_token_without_exp_is_refused(provider, keys):
    with pytest.raises(TokenInvalid, match="no exp claim"):
        check(provider.token(provider.claims(exp=None)), keys)


def test_a_token_from_another_issuer_is_refused(provider, keys):
    with pytest.raises(TokenInvalid, match="issuer"):
        check(provider.token(provider.claims(iss="https://evil.example")), keys)


def test_a_token_for_another_audience_is_refused(provider, keys):
    with pytest.raises(TokenInvalid, match="audience"):
        check(provider.token(provider.claims(aud="someone-else")), keys)


def test_an_unsigned_alg_none_token_is_refused(provider, keys):
    with pytest.raises(TokenInvalid, match="algorithm 'none' is not accepted"):
        check(provider.token(alg="none"), keys)


def test_an_hs256_token_using_the_public_key_as_secret_is_refused(provider, keys):
    import base64
    import hashlib
    import hmac

    head = provider.token().split(".")[0]
    forged = json.loads(base64.urlsafe_b64decode(head + "=="))
    forged["alg"] = "HS256"
    from oauth_provider import b64url
    signing_input = f"{b64url(json.dumps(forged).encode())}.{provider.token().split('.')[1]}"
    secret = json.dumps(provider.jwks()["keys"][0]).encode()
    sig = b64url(hmac.new(secret, signing_input.encode(), hashlib.sha256).digest())
    with pytest.raises(TokenInvalid, match="'HS256' is not accepted"):
        check(f"{signing_input}.{sig}", keys)


def test_a_token_naming_an_unknown_kid_is_refused(provider, keys):
    with pytest.raises(TokenInvalid, match="no key with kid 'rotated-away'"):
        check(provider.token(kid="rotated-away"), keys)


def test_a_token_without_the_principal_claim_is_refused(provider, keys):
    with pytest.raises(TokenInvalid, match="no sub claim"):
        check(provider.token(provider.claims(sub=None)), keys)


def test_an_rs256_token_is_not_checked_against_an_ec_key(provider, keys):
    with pytest.raises(TokenInvalid, match="signature does not verify"):
        check(provider.token(alg="RS256", kid="ec-1"), keys)


# ------------------------------------------------------------------ the SASL exchange
def test_the_initial_response_gives_authzid_token_and_extensions():
    r = parse_initial_response(b"n,a=alice,\x01auth=Bearer abc.def.ghi\x01traceId=123\x01\x01")
    assert (r.authzid, r.token, r.extensions) == ("alice", "abc.def.ghi", {"traceId": "123"})
    assert parse_initial_response(b"n,,\x01auth=Bearer a.b.c\x01\x01").authzid == ""
    assert parse_initial_response(b"n,,\x01auth=bearer a.b.c\x01\x01").token == "a.b.c"  # RFC 6750: any case
    for bad in (b"n,,auth=Bearer a.b.c", b"n,,\x01auth=Basic xyz\x01\x01", b"y,,\x01auth=Bearer a.b.c\x01\x01",
                b"n,,\x01traceId=1\x01\x01"):
        with pytest.raises(InvalidInitialResponse):
            parse_initial_response(bad)


def _validator(provider: Provider, tmp_path) -> OAuthBearerValidator:
    return OAuthBearerValidator.from_settings(settings(provider.write_jwks(str(tmp_path / "jwks.json"))))


def test_a_refused_token_gets_kafkas_json_challenge_then_fails_on_the_clients_ack(provider, tmp_path):
    async def run():
        server = server_for("OAUTHBEARER", _validator(provider, tmp_path))
        token = provider.token(provider.claims(iss="https://evil.example"))
        challenge = await server.step(f"n,,\x01auth=Bearer {token}\x01\x01".encode(), None)
        assert json.loads(challenge) == {"status": "invalid_token"} and not server.done
        with pytest.raises(SaslFailed, match='"status":"invalid_token"'):
            await server.step(b"\x01", None)
    asyncio.run(run())


def test_a_valid_token_completes_the_exchange_with_the_tokens_expiry(provider, tmp_path):
    async def run():
        server = server_for("OAUTHBEARER", _validator(provider, tmp_path))
        claims = provider.claims(sub="carol")
        assert await server.step(f"n,,\x01auth=Bearer {provider.token(claims)}\x01\x01".encode(), None) == b""
        assert server.done and server.user == "carol" and server.expires_at_ms == claims["exp"] * 1000
    asyncio.run(run())


def test_an_authzid_other_than_the_tokens_principal_is_refused(provider, tmp_path):
    async def run():
        server = server_for("OAUTHBEARER", _validator(provider, tmp_path))
        with pytest.raises(SaslFailed, match="authorization id"):
            await server.step(f"n,a=admin,\x01auth=Bearer {provider.token()}\x01\x01".encode(), None)
    asyncio.run(run())


def test_the_session_lifetime_is_the_tokens_remaining_life_or_the_reauth_limit_when_shorter():
    listener = Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1", 0)
    in_60s = int(time.time() * 1000) + 60_000
    lifetime = ListenerSecurity(listener).new_session().authenticated_as("User:a", in_60s)
    assert 55_000 <= lifetime <= 60_000
    assert ListenerSecurity(listener, reauth_ms=5_000).new_session().authenticated_as("User:a", in_60s) == 5_000
    assert ListenerSecurity(listener).new_session().authenticated_as("User:a") == 0


# ------------------------------------------------------------------ settings and the JWKS endpoint
def _broker(extra: dict[str, str]) -> dict:
    return gateway_security(resolve({"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
                                     "sasl.enabled.mechanisms": "OAUTHBEARER", **extra}))


def test_oauthbearer_without_a_jwks_url_fails_the_start():
    with pytest.raises(ValueError, match="sasl.oauthbearer.jwks.endpoint.url is not set"):
        _broker({})


def test_a_missing_jwks_file_fails_the_start(tmp_path):
    with pytest.raises(JwksUnavailableError, match="cannot fetch the JWKS"):
        _broker(settings(f"file://{tmp_path}/absent.json"))


def test_an_unreachable_jwks_endpoint_fails_the_start_at_once():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    t0 = time.monotonic()
    with pytest.raises(JwksUnavailableError, match=f"127.0.0.1:{port}"):
        _broker(settings(f"http://127.0.0.1:{port}/jwks"))
    assert time.monotonic() - t0 < 5


def test_a_jwks_endpoint_that_never_answers_fails_within_the_timeout():
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)  # accepts the connection, never answers
        t0 = time.monotonic()
        with pytest.raises(JwksUnavailableError, match="timed out|within"):
            JwksCache(f"http://127.0.0.1:{silent.getsockname()[1]}/jwks", timeout_s=1.0).load()
        assert time.monotonic() - t0 < 4


class _JwksHandler(http.server.BaseHTTPRequestHandler):
    document = b""
    hits = 0

    def do_GET(self):  # noqa: N802 (http.server's name)
        type(self).hits += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.document)))
        self.end_headers()
        self.wfile.write(self.document)

    def log_message(self, *args):
        pass


def test_an_http_jwks_is_fetched_again_for_a_new_kid_without_blocking_the_loop(provider):
    rotated = Provider()
    handler = type("H", (_JwksHandler,), {"document": json.dumps(provider.jwks()).encode(), "hits": 0})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/jwks"
        validator = OAuthBearerValidator.from_settings(settings(url))
        assert handler.hits == 1
        new_keys = rotated.jwks()
        new_keys["keys"][0]["kid"] = "rsa-2"
        handler.document = json.dumps(new_keys).encode()
        time.sleep(0.2)  # past sasl.oauthbearer.jwks.endpoint.retry.backoff.ms since the start-up fetch

        async def run():
            ticks = 0

            async def ticker():
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.001)
            task = asyncio.create_task(ticker())
            valid = await validator.validate(rotated.token(kid="rsa-2"))
            task.cancel()
            return valid, ticks
        valid, ticks = asyncio.run(run())
        assert valid.principal == "alice" and handler.hits == 2
        assert ticks >= 1  # the loop kept running while the JWKS was fetched
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_oauthbearer_is_a_known_mechanism_and_its_settings_have_kafkas_defaults():
    s = resolve({"sasl.enabled.mechanisms": "OAUTHBEARER,SCRAM-SHA-512"})
    assert s.get("sasl.enabled.mechanisms") == ["OAUTHBEARER", "SCRAM-SHA-512"]
    assert s.get("sasl.oauthbearer.sub.claim.name") == "sub"
    assert s.get("sasl.oauthbearer.scope.claim.name") == "scope"
    assert s.get("sasl.oauthbearer.clock.skew.seconds") == 30
    assert s.get("sasl.oauthbearer.jwks.endpoint.refresh.ms") == 3_600_000
    assert s.get("sasl.oauthbearer.expected.audience") is None


def test_a_due_refresh_from_a_provider_that_hangs_does_not_hold_up_the_login(provider):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts, never answers
        cache = JwksCache(f"http://127.0.0.1:{silent.getsockname()[1]}/jwks", refresh_ms=1, timeout_s=3.0)
        cache.keys, cache.fetched_at = parse_jwks(json.dumps(provider.jwks())), 0.0  # fetched long ago

        async def run():
            t0 = time.monotonic()
            keys = await cache.keys_for("rsa-1")
            took = time.monotonic() - t0
            await asyncio.sleep(3.5)  # let the background fetch time out before the loop closes
            return keys, took
        keys, took = asyncio.run(run())
        assert [k.kid for k in keys] == ["rsa-1"] and took < 0.5
