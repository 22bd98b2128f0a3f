"""Kafka clients over TLS and SASL against a real broker process: confluent-kafka, kafka-python, aiokafka, kcat.

Each client connects with SASL_SSL + SCRAM-SHA-512 and with an SSL client
certificate, produces and consumes; a wrong password fails with
SASL_AUTHENTICATION_FAILED; requests before authentication and garbage close only
that connection while the broker keeps serving.
"""
from __future__ import annotations

import asyncio
import socket
import ssl
import struct
import subprocess
import time
import uuid

import pytest
from certs import make_pki
from secure_broker import SecureBroker, write_properties

#: a real broker process (and, for ACLs, a restart): about 1.5 minutes per module
pytestmark = pytest.mark.slow

PASSWORD = "s3cret-alice"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def broker(tmp_path_factory, pki):
    folder = tmp_path_factory.mktemp("secure-broker")
    b = SecureBroker(str(folder / "data"), write_properties(str(folder / "server.properties"), pki))
    b.start()
    try:
        b.add_user("alice", PASSWORD)
        yield b
    finally:
        b.stop()


def _topic() -> str:
    return f"sec-{uuid.uuid4().hex[:10]}"


def _confluent_conf(broker, pki, kind: str, password: str = PASSWORD) -> dict:
    if kind == "sasl_ssl":
        return {"bootstrap.servers": broker.listeners["SASL_SSL"], "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice", "sasl.password": password,
                "ssl.ca.location": pki.ca}
    cert, key = pki.client("bob")
    return {"bootstrap.servers": broker.listeners["SSL"], "security.protocol": "SSL", "ssl.ca.location": pki.ca,
            "ssl.certificate.location": cert, "ssl.key.location": key}


@pytest.mark.parametrize("kind", ["sasl_ssl", "ssl"])
def test_confluent_kafka_produces_and_consumes(broker, pki, kind):
    from confluent_kafka import Consumer, Producer

    topic = _topic()
    conf = _confluent_conf(broker, pki, kind)
    p = Producer({**conf, "enable.idempotence": True})
    for i in range(50):
        p.produce(topic, b"v%d" % i, key=b"k")
    assert p.flush(30) == 0
    c = Consumer({**conf, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 50 and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [b"v%d" % i for i in range(50)]


def test_confluent_kafka_wrong_password_is_sasl_authentication_failed(broker, pki):
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    errors = []
    admin = AdminClient({**_confluent_conf(broker, pki, "sasl_ssl", password="wrong"),
                         "error_cb": lambda e: errors.append(e)})
    with pytest.raises(Exception):
        admin.list_topics(timeout=5)
    deadline = time.monotonic() + 15
    while not errors and time.monotonic() < deadline:
        admin.poll(0.5)  # error callbacks are served by poll
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("invalid credentials" in e.str() or "Authentication failed" in e.str() for e in errors), errors


def _kafka_python_conf(broker, pki, kind: str, password: str = PASSWORD) -> dict:
    if kind == "sasl_ssl":
        return {"bootstrap_servers": broker.listeners["SASL_SSL"], "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice", "sasl_plain_password": password,
                "ssl_cafile": pki.ca}
    cert, key = pki.client("carol")
    return {"bootstrap_servers": broker.listeners["SSL"], "security_protocol": "SSL", "ssl_cafile": pki.ca,
            "ssl_certfile": cert, "ssl_keyfile": key}


@pytest.mark.parametrize("kind", ["sasl_ssl", "ssl"])
def test_kafka_python_produces_and_consumes(broker, pki, kind):
    from kafka import KafkaConsumer, KafkaProducer

    topic = _topic()
    conf = _kafka_python_conf(broker, pki, kind)
    p = KafkaProducer(**conf)
    for i in range(20):
        p.send(topic, b"kp%d" % i).get(timeout=30)
    p.close()
    c = KafkaConsumer(topic, **conf, group_id=f"g-{topic}", auto_offset_reset="earliest", consumer_timeout_ms=15000)
    got = []
    for m in c:  # ends at the 20th record (or after 15 s without one)
        got.append(m.value)
        if len(got) == 20:
            break
    c.close()
    assert got == [b"kp%d" % i for i in range(20)]


def test_kafka_python_wrong_password_fails_authentication(broker, pki, caplog):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    # it retries the bootstrap until its timeout, logging why; the first attempt already says it
    # (the gateway lets the client read the failure before the FIN: see test_gateway_tls_sasl_local)
    with pytest.raises(KafkaError):
        p = KafkaProducer(**_kafka_python_conf(broker, pki, "sasl_ssl", password="nope"), max_block_ms=4000,
                          bootstrap_timeout_ms=8000)
        p.send(_topic(), b"never").get(timeout=5)
    assert "SaslAuthenticationFailedError" in caplog.text
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in caplog.text


def _aiokafka_conf(broker, pki, kind: str) -> dict:
    from aiokafka.helpers import create_ssl_context

    if kind == "sasl_ssl":
        return {"bootstrap_servers": broker.listeners["SASL_SSL"], "security_protocol": "SASL_SSL",
                "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "alice", "sasl_plain_password": PASSWORD,
                "ssl_context": create_ssl_context(cafile=pki.ca)}
    cert, key = pki.client("dave")
    return {"bootstrap_servers": broker.listeners["SSL"], "security_protocol": "SSL",
            "ssl_context": create_ssl_context(cafile=pki.ca, certfile=cert, keyfile=key)}


@pytest.mark.parametrize("kind", ["sasl_ssl", "ssl"])
def test_aiokafka_produces_and_consumes(broker, pki, kind):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = _topic()

    async def run() -> list[bytes]:
        p = AIOKafkaProducer(**_aiokafka_conf(broker, pki, kind))
        await p.start()
        try:
            for i in range(20):
                await p.send_and_wait(topic, b"ai%d" % i)
        finally:
            await p.stop()
        c = AIOKafkaConsumer(topic, **_aiokafka_conf(broker, pki, kind), group_id=f"g-{topic}",
                             auto_offset_reset="earliest")
        await c.start()
        got: list[bytes] = []
        try:
            deadline = time.monotonic() + 60
            while len(got) < 20 and time.monotonic() < deadline:
                batch = await c.getmany(timeout_ms=1000)
                for msgs in batch.values():
                    got += [m.value for m in msgs]
        finally:
            await c.stop()
        return got

    assert asyncio.run(run()) == [b"ai%d" % i for i in range(20)]


def _kcat(broker, pki, kind: str, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    if kind == "sasl_ssl":
        conf = ["-b", broker.listeners["SASL_SSL"], "-X", "security.protocol=SASL_SSL", "-X",
                "sasl.mechanism=SCRAM-SHA-512", "-X", "sasl.username=alice", "-X", f"sasl.password={PASSWORD}",
                "-X", f"ssl.ca.location={pki.ca}"]
    else:
        cert, key = pki.client("erin")
        conf = ["-b", broker.listeners["SSL"], "-X", "security.protocol=SSL", "-X", f"ssl.ca.location={pki.ca}",
                "-X", f"ssl.certificate.location={cert}", "-X", f"ssl.key.location={key}"]
    return subprocess.run(["kcat", *conf, *args], input=stdin, capture_output=True, timeout=60)


@pytest.mark.parametrize("kind", ["sasl_ssl", "ssl"])
def test_kcat_produces_and_consumes(broker, pki, kind):
    topic = _topic()
    lines = b"".join(b"kc%d\n" % i for i in range(30))
    r = _kcat(broker, pki, kind, "-P", "-t", topic, stdin=lines)
    assert r.returncode == 0, r.stderr.decode()
    r = _kcat(broker, pki, kind, "-C", "-t", topic, "-o", "beginning", "-e", "-c", "30")
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout == lines


# ------------------------------------------------------------ hostile peers
def _frame(api_key: int, version: int, corr: int, body: bytes = b"") -> bytes:
    payload = struct.pack(">hhih", api_key, version, corr, 1) + b"x" + body
    return struct.pack(">i", len(payload)) + payload


def _closed(sock: socket.socket, timeout: float = 10) -> bool:
    sock.settimeout(timeout)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except (ConnectionError, ssl.SSLError):
        return True
    except socket.timeout:
        return False


def _addr(ep: str) -> tuple[str, int]:
    host, port = ep.rsplit(":", 1)
    return host, int(port)


def _still_serves(broker, pki) -> None:
    from confluent_kafka.admin import AdminClient

    md = AdminClient(_confluent_conf(broker, pki, "sasl_ssl")).list_topics(timeout=20)
    assert md.brokers


def test_request_before_sasl_authentication_closes_only_that_connection(broker, pki):
    ctx = ssl.create_default_context(cafile=pki.ca)
    with socket.create_connection(_addr(broker.listeners["SASL_SSL"])) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(_frame(3, 1, 7, struct.pack(">i", -1)))  # Metadata v1 (all topics) without logging in
            assert _closed(s)
    with socket.create_connection(_addr(broker.listeners["SASL_PLAINTEXT"])) as s:
        s.sendall(_frame(3, 1, 7, struct.pack(">i", -1)))
        assert _closed(s)
    _still_serves(broker, pki)


def test_garbage_tls_handshake_closes_only_that_connection(broker, pki):
    for name in ("SSL", "SASL_SSL"):
        with socket.create_connection(_addr(broker.listeners[name])) as s:
            s.sendall(b"\x16\x03\x01\x00\x05hello" + b"\x00" * 1000)
            assert _closed(s)
        with socket.create_connection(_addr(broker.listeners[name])) as s:
            s.sendall(_frame(18, 0, 1))  # plaintext Kafka to a TLS port
            assert _closed(s)
    _still_serves(broker, pki)


def test_ssl_listener_requires_a_client_certificate(broker, pki):
    ctx = ssl.create_default_context(cafile=pki.ca)
    with socket.create_connection(_addr(broker.listeners["SSL"])) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
                s.sendall(_frame(18, 0, 1))
                s.settimeout(10)
                if not s.recv(4):
                    raise ConnectionError("closed")


def test_garbage_and_huge_sasl_messages_close_only_that_connection(broker, pki):
    addr = _addr(broker.listeners["SASL_PLAINTEXT"])
    # a frame claiming 50 MB before authentication: over sasl.server.max.receive.size, closed at once
    with socket.create_connection(addr) as s:
        s.sendall(struct.pack(">i", 50 << 20) + b"\x00" * 100)
        assert _closed(s)
    # a handshake, then SaslAuthenticate with garbage for SCRAM: SASL_AUTHENTICATION_FAILED, then closed
    with socket.create_connection(addr) as s:
        mech = b"SCRAM-SHA-512"
        s.sendall(_frame(17, 1, 1, struct.pack(">h", len(mech)) + mech))
        s.settimeout(10)
        size = struct.unpack(">i", s.recv(4))[0]
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
        assert struct.unpack(">h", body[4:6])[0] == 0  # handshake accepted
        junk = b"\xff\xfe garbage \x00\x01" * 10
        s.sendall(_frame(36, 1, 2, struct.pack(">i", len(junk)) + junk))
        size = struct.unpack(">i", s.recv(4))[0]
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
        assert struct.unpack(">h", body[4:6])[0] == 58  # SASL_AUTHENTICATION_FAILED
        assert _closed(s)
    # an unknown mechanism: UNSUPPORTED_SASL_MECHANISM naming the enabled ones
    with socket.create_connection(addr) as s:
        mech = b"GSSAPI"
        s.sendall(_frame(17, 1, 1, struct.pack(">h", len(mech)) + mech))
        s.settimeout(10)
        size = struct.unpack(">i", s.recv(4))[0]
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
        assert struct.unpack(">h", body[4:6])[0] == 33
        assert b"SCRAM-SHA-512" in body
    _still_serves(broker, pki)
