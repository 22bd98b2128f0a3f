"""The HTTP API of a broker with Kafka security on: the gateway's users, ACLs and certificate apply to HTTP too.

One real broker process (``logan-ray start`` with a SASL_SSL listener, an authorizer and
``super.users=User:admin``) serving the HTTP API; a real httpx client over HTTPS checked
against the test CA; users and ACLs made with Kafka's admin API (confluent-kafka), as an
operator would; records published over HTTP read back by a SASL/SCRAM Kafka consumer.
"""
from __future__ import annotations

import os
import socket
import ssl
import sys
import time
import uuid

import httpx
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "security"))
from certs import make_pki  # noqa: E402
from secure_broker import SecureBroker, write_properties  # noqa: E402

#: a real broker process with Serve: about a minute for the module
pytestmark = pytest.mark.slow

PASSWORDS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("http-pki")))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):
    folder = tmp_path_factory.mktemp("http-secure")
    props = write_properties(str(folder / "server.properties"), pki, {
        "listeners": "SASL_SSL://127.0.0.1:0",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin",
    })
    b = SecureBroker(str(folder / "data"), props, http=f"127.0.0.1:{_free_port()}")
    b.start()
    try:
        b.add_user("admin", PASSWORDS["admin"])
        set_password("alice", PASSWORDS["alice"], b, pki)
        set_password("bob", PASSWORDS["bob"], b, pki)
        yield b
    finally:
        b.stop()


def kafka_conf(broker, pki, user: str) -> dict:
    return {"bootstrap.servers": broker.listeners.get("SASL_SSL") or _bootstrap(broker),
            "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": PASSWORDS[user], "ssl.ca.location": pki.ca}


def _bootstrap(broker) -> str:
    import json

    return json.load(open(os.path.join(broker.data_dir, "broker.json")))["kafka"]


def set_password(user: str, password: str, broker, pki) -> None:
    """AlterUserScramCredentials through the gateway, as admin (SCRAM-SHA-512 and -256)."""
    from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism,
                                       UserScramCredentialUpsertion)

    admin = AdminClient(kafka_conf(broker, pki, "admin"))
    ups = [UserScramCredentialUpsertion(user, ScramCredentialInfo(m, 4096), password.encode())
           for m in (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)]
    for f in admin.alter_user_scram_credentials(ups).values():
        f.result(30)
    PASSWORDS[user] = password


def grant(broker, pki, principal: str, resource: str, name: str, *operations: str) -> None:
    from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)

    admin = AdminClient(kafka_conf(broker, pki, "admin"))
    rtype = ResourceType["BROKER" if resource == "cluster" else resource.upper()]  # librdkafka's name for it
    bindings = [AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", AclOperation[op.upper()],
                           AclPermissionType.ALLOW) for op in operations]
    for f in admin.create_acls(bindings).values():
        f.result(30)
    time.sleep(1.5)  # the HTTP API's authorizer refreshes its ACL snapshot within a second


def revoke(broker, pki, principal: str, topic: str) -> None:
    from confluent_kafka.admin import (AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                       ResourcePatternType, ResourceType)

    admin = AdminClient(kafka_conf(broker, pki, "admin"))
    flt = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.ANY, principal, None, AclOperation.ANY,
                           AclPermissionType.ANY)
    for f in admin.delete_acls([flt]).values():
        f.result(30)


def http(broker, pki, user: str | None, password: str | None = None) -> httpx.Client:
    auth = None if user is None else (user, password if password is not None else PASSWORDS[user])
    return httpx.Client(base_url=broker.http_url, auth=auth, verify=ssl.create_default_context(cafile=pki.ca),
                        timeout=30)


def new_topic(broker, pki) -> str:
    name = f"h-{uuid.uuid4().hex[:8]}"
    with http(broker, pki, "admin") as c:
        r = c.post("/topic", json={"name": name})
        assert r.status_code == 201, r.text
    return name


def assert_refused(r: httpx.Response, status: int, name: str) -> None:
    assert r.status_code == status, r.text
    assert r.json()["error_name"] == name, r.text
    if status == 401:
        assert r.headers["www-authenticate"].startswith('Basic realm="logan-ray"')


def test_every_endpoint_needs_valid_credentials_of_a_scram_user(broker, pki):
    assert broker.http_url.startswith("https://")  # the SASL_SSL listener's certificate serves HTTPS too
    paths = ["/topic", "/console", "/console/console.js", "/console/state", "/docs", "/openapi.json"]
    for user, password in ((None, None), ("alice", "wrong"), ("nobody", "x")):
        with http(broker, pki, user, password) as c:
            for path in paths:
                assert_refused(c.get(path), 401, "SASL_AUTHENTICATION_FAILED")
            assert_refused(c.post("/publish", json={"topic": "t", "records": [{"value": "v"}]}), 401,
                           "SASL_AUTHENTICATION_FAILED")
    with http(broker, pki, "admin") as c:
        for path in paths:
            assert c.get(path).status_code == 200, path
    with http(broker, pki, "bob") as c:  # authenticated, no ACLs: the pages load, they show nothing
        assert c.get("/console").status_code == 200
        assert c.get("/topic").json() == {"topics": []}
    with pytest.raises(httpx.HTTPError):  # plain HTTP to the HTTPS port gets no answer
        httpx.get(broker.http_url.replace("https://", "http://") + "/topic", auth=("admin", "admin-pw"), timeout=10)


def test_acls_decide_publish_subscribe_and_topic_administration(broker, pki):
    topic, other = new_topic(broker, pki), new_topic(broker, pki)
    record = {"topic": topic, "records": [{"value": "v0"}]}
    read = {"topic": topic, "partition": 0, "offset": 0}
    with http(broker, pki, "alice") as alice, http(broker, pki, "admin") as admin:
        assert_refused(alice.post("/publish", json=record), 403, "TOPIC_AUTHORIZATION_FAILED")
        assert_refused(alice.post("/subscribe", json=read), 403, "TOPIC_AUTHORIZATION_FAILED")
        assert_refused(alice.get(f"/stream/{topic}/0", params={"max_records": 1}), 403, "TOPIC_AUTHORIZATION_FAILED")
        assert_refused(alice.get(f"/topic/{topic}"), 403, "TOPIC_AUTHORIZATION_FAILED")
        assert_refused(alice.post("/topic", json={"name": f"{topic}-new"}), 403, "TOPIC_AUTHORIZATION_FAILED")
        assert_refused(alice.patch(f"/topic/{topic}", json={"config": {"retention.ms": 1000}}), 403,
                       "TOPIC_AUTHORIZATION_FAILED")
        assert_refused(alice.delete(f"/topic/{topic}"), 403, "TOPIC_AUTHORIZATION_FAILED")
        assert admin.post("/subscribe", json=read).json()["records"] == []  # the denied publish wrote nothing

        grant(broker, pki, "User:alice", "topic", topic, "write")
        assert alice.post("/publish", json=record).status_code == 200
        assert alice.get("/topic").json()["topics"] == [topic]  # WRITE implies DESCRIBE; `other` stays hidden
        described = alice.get(f"/topic/{topic}").json()
        assert described["partitions"][0]["log_end_offset"] == 1 and described["config"] is None
        assert_refused(alice.post("/subscribe", json=read), 403, "TOPIC_AUTHORIZATION_FAILED")

        grant(broker, pki, "User:alice", "topic", topic, "read", "alter_configs")
        assert [r["value"] for r in alice.post("/subscribe", json=read).json()["records"]] == ["v0"]
        with alice.stream("GET", f"/stream/{topic}/0", params={"offset": 0, "max_records": 1}) as s:
            assert s.status_code == 200 and '"value":"v0"' in s.read().decode()
        r = alice.patch(f"/topic/{topic}", json={"config": {"retention.ms": 3600000}})
        assert r.status_code == 200 and r.json()["overrides"]["retention.ms"] == "3600000"
        assert_refused(alice.patch(f"/topic/{topic}", json={"partitions": 2}), 403, "TOPIC_AUTHORIZATION_FAILED")
        assert_refused(alice.delete(f"/topic/{topic}"), 403, "TOPIC_AUTHORIZATION_FAILED")
        assert_refused(alice.post("/publish", json={**record, "topic": other}), 403, "TOPIC_AUTHORIZATION_FAILED")

        grant(broker, pki, "User:alice", "cluster", "kafka-cluster", "create")
        assert alice.post("/topic", json={"name": f"{topic}-new"}).status_code == 201
        grant(broker, pki, "User:alice", "topic", f"{topic}-new", "delete")
        assert alice.delete(f"/topic/{topic}-new").status_code == 204


def test_a_live_stream_ends_when_its_reader_loses_read(broker, pki):
    import json

    topic = new_topic(broker, pki)
    grant(broker, pki, "User:alice", "topic", topic, "read", "write")
    with http(broker, pki, "alice") as alice:
        assert alice.post("/publish", json={"topic": topic, "records": [{"value": "first"}]}).status_code == 200
        with alice.stream("GET", f"/stream/{topic}/0", params={"offset": 0, "idle_timeout_ms": 30000}) as s:
            lines = s.iter_lines()
            assert json.loads(next(lines))["value"] == "first"
            started = time.monotonic()
            revoke(broker, pki, "User:alice", topic)
            last = json.loads(next(lines))
            assert last["error_name"] == "TOPIC_AUTHORIZATION_FAILED", last
            assert time.monotonic() - started < 10
            assert list(lines) == []  # and the stream ends there


def test_console_shows_only_what_the_principal_may_describe(broker, pki):
    mine, hidden = new_topic(broker, pki), new_topic(broker, pki)
    grant(broker, pki, "User:bob", "topic", mine, "describe")
    with http(broker, pki, "bob") as bob, http(broker, pki, "admin") as admin:
        shown = [t["name"] for t in bob.get("/console/state").json()["topics"]]
        assert mine in shown and hidden not in shown
        every = [t["name"] for t in admin.get("/console/state").json()["topics"]]
        assert {mine, hidden} <= set(every)


def test_a_changed_password_takes_effect_at_once(broker, pki):
    with http(broker, pki, "bob") as c:
        for _ in range(3):  # verified once, then from the cache
            assert c.get("/topic").status_code == 200
    old = PASSWORDS["bob"]
    set_password("bob", "bob-new-pw", broker, pki)
    time.sleep(1.2)  # the cache asks the store's version at most every second
    with http(broker, pki, "bob", old) as c:
        assert_refused(c.get("/topic"), 401, "SASL_AUTHENTICATION_FAILED")
    with http(broker, pki, "bob") as c:
        assert c.get("/topic").status_code == 200


def test_a_record_published_over_http_is_read_by_a_scram_kafka_consumer(broker, pki):
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    topic = new_topic(broker, pki)
    group = f"g-{uuid.uuid4().hex[:6]}"
    grant(broker, pki, "User:alice", "topic", topic, "write", "read")
    grant(broker, pki, "User:alice", "group", group, "read")
    with http(broker, pki, "alice") as alice:
        r = alice.post("/publish", json={"topic": topic, "records": [{"key": "k", "value": "over https"}]})
        assert r.status_code == 200, r.text
    c = Consumer({**kafka_conf(broker, pki, "alice"), "group.id": group, "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline, got = time.monotonic() + 30, None
        while got is None and time.monotonic() < deadline:
            m = c.poll(1.0)
            if m is not None and m.error() is None:
                got = m
        assert got is not None and (got.key(), got.value()) == (b"k", b"over https")
    finally:
        c.close()
