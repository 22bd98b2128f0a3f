"""SASL/OAUTHBEARER on a real broker process: librdkafka produces and consumes with OIDC tokens.

The broker validates tokens against a JWKS file of the test's provider (KIP-768
settings in its server.properties) and runs the ACL authorizer: the principal is
the token's ``sub`` claim, so ACLs granted to ``User:alice`` decide what a token
for alice may do. Refused tokens write nothing.
"""
from __future__ import annotations

import socket
import time
import uuid

import pytest
from certs import make_pki
from oauth_provider import Provider, settings
from secure_broker import SecureBroker, write_properties

#: a real broker process: about a minute for the module
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def provider() -> Provider:
    return Provider()


@pytest.fixture(scope="module")
def broker(tmp_path_factory, provider):
    folder = tmp_path_factory.mktemp("oauth-broker")
    pki = make_pki(str(folder / "pki"))
    props = write_properties(str(folder / "server.properties"), pki, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,OAUTHBEARER",
        # every refused token below is retried by librdkafka for seconds: 82 failed logins from 127.0.0.1
        # in 80 s here, and a faster machine reached the default budget (100 a minute), after which the
        # admin's own logins from that address were refused (_ALL_BROKERS_DOWN in a full CI run); the
        # budget has its own tests (test_preauth_limits.py)
        "max.failed.authentications.per.ip": "-1",
        **settings(provider.write_jwks(str(folder / "jwks.json"))),
    })
    b = SecureBroker(str(folder / "data"), props).start()
    try:
        b.add_user("admin", "admin-pw")
        yield b
    finally:
        b.stop()


def admin_conf(broker) -> dict:
    return {"bootstrap.servers": broker.listeners["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "admin", "sasl.password": "admin-pw"}


def token_conf(broker, token: str, errors: list | None = None) -> dict:
    conf = {"bootstrap.servers": broker.listeners["SASL_PLAINTEXT"], "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "oauth_cb": lambda _cfg: (token, time.time() + 600)}
    if errors is not None:
        conf["error_cb"] = errors.append
    return conf


def create_topic(broker, name: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(admin_conf(broker))
    admin.create_topics([NewTopic(name, 1)])[name].result(30)


def end_offset(broker, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**admin_conf(broker), "group.id": "offsets-reader"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=20)[1]
    finally:
        c.close()


def acls(broker, *args: str) -> None:
    r = broker.cli("acls", "add", *args)
    assert r.returncode == 0, r.stderr.decode()
    time.sleep(1.5)  # gateways refresh their ACL snapshot within a second


def produce(broker, token: str, topic: str, n: int = 3, errors: list | None = None, timeout_ms: int = 10000):
    from confluent_kafka import Producer

    reports = []
    p = Producer({**token_conf(broker, token, errors), "message.timeout.ms": timeout_ms})
    for i in range(n):
        p.produce(topic, b"m%d" % i, on_delivery=lambda err, msg: reports.append(err))
    p.flush(timeout_ms / 1000 + 10)
    return reports


def test_a_valid_token_produces_and_consumes_as_the_principal_of_its_sub_claim(broker, provider):
    from confluent_kafka import Consumer, KafkaError

    topic, group = f"oauth-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic)
    alice = provider.token(provider.claims(sub="alice"))
    reports = produce(broker, alice, topic)
    assert reports and all(e is not None and e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in reports)
    assert end_offset(broker, topic) == 0
    acls(broker, "--principal", "User:alice", "--operation", "write", "--operation", "describe", "--topic", topic)
    assert produce(broker, alice, topic) == [None, None, None]
    assert end_offset(broker, topic) == 3
    acls(broker, "--principal", "User:alice", "--operation", "read", "--topic", topic)
    acls(broker, "--principal", "User:alice", "--operation", "read", "--group", group)
    c = Consumer({**token_conf(broker, provider.token(provider.claims(sub="alice"), alg="ES256", kid="ec-1")),
                  "group.id": group, "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        got, deadline = [], time.monotonic() + 60
        while len(got) < 3 and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got.append(m.value())
        assert got == [b"m0", b"m1", b"m2"]
    finally:
        c.close()
    bob = provider.token(provider.claims(sub="bob"))  # the same provider, another principal: no ACLs
    assert all(e is not None for e in produce(broker, bob, topic))
    assert end_offset(broker, topic) == 3


REFUSED = {
    "wrong signature": lambda p: p.token(p.claims(sub="admin"), key=p.other_rsa),
    "expired": lambda p: p.token(p.claims(sub="admin", exp=int(time.time()) - 120, iat=int(time.time()) - 900)),
    "wrong issuer": lambda p: p.token(p.claims(sub="admin", iss="https://evil.example")),
    "wrong audience": lambda p: p.token(p.claims(sub="admin", aud="another-service")),
    "alg none": lambda p: p.token(p.claims(sub="admin"), alg="none"),
    "unknown kid": lambda p: p.token(p.claims(sub="admin"), kid="not-in-the-jwks"),
}


@pytest.mark.parametrize("why", list(REFUSED))
def test_a_refused_token_even_for_a_super_user_is_sasl_authentication_failed_and_writes_nothing(broker, provider,
                                                                                               why):
    topic = f"refused-{uuid.uuid4().hex[:8]}"
    create_topic(broker, topic)
    errors: list = []
    reports = produce(broker, REFUSED[why](provider), topic, errors=errors, timeout_ms=5000)
    assert reports and all(e is not None for e in reports)
    assert any("invalid_token" in e.str() for e in errors), [e.str() for e in errors]
    assert end_offset(broker, topic) == 0


def test_an_unreachable_jwks_endpoint_stops_the_start_with_one_clear_line(tmp_path, provider):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    pki = make_pki(str(tmp_path / "pki"))
    props = write_properties(str(tmp_path / "server.properties"), pki, {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "OAUTHBEARER",
        **settings(f"http://127.0.0.1:{port}/jwks")})
    t0 = time.monotonic()
    with pytest.raises(AssertionError, match=f"cannot fetch the JWKS from sasl.oauthbearer.jwks.endpoint.url="
                                             f"http://127.0.0.1:{port}/jwks"):
        SecureBroker(str(tmp_path / "data"), props).start()
    assert time.monotonic() - t0 < 60
