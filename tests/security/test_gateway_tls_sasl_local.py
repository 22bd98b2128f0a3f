"""The gateway's TLS and SASL paths in this process, over real sockets (no Ray: a stand-in router).

Why in-process: these check the protocol edges (handshake, login, refusal, close)
and the gateway's counters (connections, request bytes), which an actor hides.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import os
import socket
import ssl
import struct
import time
from contextlib import contextmanager

import pytest
from certs import make_pki

from logan_ray.broker_config import resolve
from logan_ray.gateway.server import Gateway
from logan_ray.protocol import decode_response, encode_request
from logan_ray.security import scram
from logan_ray.security.config import gateway_security, listener_securities
from tests.tooling.served_gateway import gateway_thread

CREDS = {("alice", m): scram.new_credential(m, "pw") for m in scram.MECHANISMS}


class _Method:
    def __init__(self, fn):
        self.fn = fn

    def remote(self, *args):
        return self.fn(*args)


class FakeRouter:
    def __init__(self) -> None:
        self.bindings: list = []

        async def cred(user, mech):
            return CREDS.get((user, mech))

        async def version():
            return len(self.bindings)

        async def acls():
            return len(self.bindings), list(self.bindings)
        self.scram_credential = _Method(cred)
        self.acl_version = _Method(version)
        self.acls = _Method(acls)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(str(tmp_path_factory.mktemp("pki-local")))


@contextmanager
def secured_gateway(pki, authorizer: bool = False, **extra):
    settings = resolve({"listeners": "SSL://127.0.0.1:0,SASL_SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
                        "ssl.keystore.location": pki.server, "ssl.truststore.location": pki.ca,
                        "listener.name.ssl.ssl.client.auth": "required",
                        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512", **extra})
    async def start():
        gw = Gateway(FakeRouter(), "0123456789abcdef")
        if authorizer:
            from logan_ray.security.authorizer import Authorizer

            gw.authorizer = Authorizer(gw.cluster.router, ["User:admin"], False)
        return gw, {sec.listener.name: gw.listen("127.0.0.1", 0, security=sec)
                    for sec in listener_securities(gateway_security(settings))}

    with gateway_thread(start) as (gw, addrs, _loop):
        yield gw, addrs


def call(sock, api_key: int, version: int, body: dict, corr: int = 1) -> dict:
    sock.sendall(encode_request(api_key, version, corr, "test", body))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    got_corr, resp = decode_response(api_key, version, recv_exact(sock, size))
    assert got_corr == corr
    return resp


def recv_exact(sock, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def closed(sock, timeout: float = 10) -> bool:
    """The peer closed the connection within ``timeout``. What it sent before closing is read and
    passed over: TLS answers some garbage with an alert record before closing (about one random
    2,000-byte blob in 300, which made the hostile-peers test fail now and then)."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            sock.settimeout(left)
            if sock.recv(65536) == b"":
                return True
    except (ConnectionError, ssl.SSLError):
        return True
    except socket.timeout:
        return False


def tls_client(pki, addr, cert=None):
    ctx = ssl.create_default_context(cafile=pki.ca)
    if cert:
        ctx.load_cert_chain(*cert)
    s = ctx.wrap_socket(socket.create_connection(addr), server_hostname="localhost")
    s.settimeout(10)
    return s


def scram_login(sock, user: str, password: str, mech: str = "SCRAM-SHA-512") -> dict:
    """A minimal RFC 5802 client: returns the last SaslAuthenticate response."""
    name = scram.hash_name(mech)
    assert call(sock, 17, 1, {"mechanism": mech})["error_code"] == 0
    nonce = base64.b64encode(os.urandom(18)).decode()
    first_bare = f"n={user},r={nonce}"
    r1 = call(sock, 36, 2, {"auth_bytes": ("n,," + first_bare).encode()}, corr=2)
    if r1["error_code"]:
        return r1
    server_first = r1["auth_bytes"].decode()
    attrs = dict(a.split("=", 1) for a in server_first.split(","))
    salted = hashlib.pbkdf2_hmac(name, password.encode(), base64.b64decode(attrs["s"]), int(attrs["i"]))
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored = hashlib.new(name, client_key).digest()
    without_proof = f"c=biws,r={attrs['r']}"
    auth_message = f"{first_bare},{server_first},{without_proof}".encode()
    signature = hmac.new(stored, auth_message, name).digest()
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature))).decode()
    r2 = call(sock, 36, 2, {"auth_bytes": f"{without_proof},p={proof}".encode()}, corr=3)
    if r2["error_code"] == 0:
        server_key = hmac.new(salted, b"Server Key", name).digest()
        expected = base64.b64encode(hmac.new(server_key, auth_message, name).digest())
        assert r2["auth_bytes"] == b"v=" + expected  # the server proved it knows the credential
    return r2


def test_scram_over_tls_logs_in_and_then_serves_requests(pki):
    with secured_gateway(pki) as (gw, addrs):
        with tls_client(pki, addrs["SASL_SSL"]) as s:
            assert call(s, 18, 3, {"client_software_name": "t", "client_software_version": "1"})["error_code"] == 0
            assert scram_login(s, "alice", "pw")["error_code"] == 0
            session = next(iter(gw.connections)).session
            assert session.principal == "User:alice" and session.authenticated
            assert call(s, 18, 0, {}, corr=9)["error_code"] == 0


def test_wrong_password_is_sasl_authentication_failed_with_a_message_then_closed(pki):
    with secured_gateway(pki) as (gw, addrs):
        with tls_client(pki, addrs["SASL_SSL"]) as s:
            r = scram_login(s, "alice", "not-pw")
            assert r["error_code"] == 58 and "invalid credentials" in r["error_message"]
            assert closed(s)
        with socket.create_connection(addrs["SASL_PLAINTEXT"]) as s:
            assert call(s, 17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
            r = call(s, 36, 1, {"auth_bytes": b"\x00alice\x00wrong"}, corr=2)
            assert r["error_code"] == 58 and "Invalid username or password" in r["error_message"]
            assert closed(s)


def test_failed_login_response_reaches_a_slow_client_before_the_close(pki):
    """A client that reads late gets the error response, and EOF only after it closes (or 2 s).

    kafka-python 3.0 drops a response that arrives in the same read as the peer's FIN and
    reports "socket disconnected" instead of the failed login; under load that was every
    first attempt. So the gateway lets the peer close first.
    """
    with secured_gateway(pki) as (gw, addrs):
        with socket.create_connection(addrs["SASL_PLAINTEXT"]) as s:
            assert call(s, 17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
            s.sendall(encode_request(36, 1, 2, "test", {"auth_bytes": b"\x00alice\x00wrong"}))
            time.sleep(0.5)  # a loaded client: the response and anything after it are queued by now
            s.setblocking(False)
            got, eof = b"", False
            while True:  # one drain, as kafka-python reads
                try:
                    chunk = s.recv(4096)
                except BlockingIOError:
                    break
                if not chunk:
                    eof = True
                    break
                got += chunk
            assert not eof, "the gateway closed before the client read its response"
            size = struct.unpack(">i", got[:4])[0]
            assert len(got) == 4 + size
            r = decode_response(36, 1, got[4:])[1]
            assert r["error_code"] == 58 and "Invalid username or password" in r["error_message"]
            t0 = time.monotonic()
            assert closed(s)  # a client that never closes: the gateway does, boundedly
            assert time.monotonic() - t0 < 5


def test_plain_and_reauthentication_lifetime(pki):
    with secured_gateway(pki, **{"connections.max.reauth.ms": "60000"}) as (gw, addrs):
        with socket.create_connection(addrs["SASL_PLAINTEXT"]) as s:
            assert call(s, 17, 1, {"mechanism": "PLAIN"})["error_code"] == 0
            r = call(s, 36, 1, {"auth_bytes": b"\x00alice\x00pw"}, corr=2)
            assert r["error_code"] == 0 and r["session_lifetime_ms"] == 60000  # KIP-368
            # re-authentication on the same connection, as a client does before the lifetime ends
            assert call(s, 17, 1, {"mechanism": "PLAIN"}, corr=3)["error_code"] == 0
            assert call(s, 36, 1, {"auth_bytes": b"\x00alice\x00pw"}, corr=4)["error_code"] == 0


def test_unsupported_mechanism_names_the_enabled_ones(pki):
    with secured_gateway(pki) as (gw, addrs):
        with socket.create_connection(addrs["SASL_PLAINTEXT"]) as s:
            r = call(s, 17, 1, {"mechanism": "SCRAM-SHA-256"})
            assert r["error_code"] == 33 and r["mechanisms"] == ["PLAIN", "SCRAM-SHA-512"]
        with socket.create_connection(addrs["SASL_PLAINTEXT"]) as s:  # v0 (raw tokens) is not offered
            r = call(s, 17, 0, {"mechanism": "PLAIN"})
            assert r["error_code"] == 35 and closed(s)


def test_client_certificate_subject_is_the_principal(pki):
    with secured_gateway(pki) as (gw, addrs):
        with tls_client(pki, addrs["SSL"], cert=pki.client("writer", org="Acme")) as s:
            assert call(s, 18, 0, {})["error_code"] == 0
            assert next(iter(gw.connections)).session.principal == "User:CN=writer,O=Acme"
        with pytest.raises((ssl.SSLError, ConnectionError)):  # ssl.client.auth=required: no certificate, no entry
            with tls_client(pki, addrs["SSL"]) as s:
                call(s, 18, 0, {})


def test_hostile_peers_close_only_their_connection_and_free_everything(pki, monkeypatch):
    from logan_ray.gateway import connection

    # garbage that happens to start like a TLS record header waits for the handshake timeout (10 s);
    # 2 s here, so a loaded machine's delays fit in the wait below (a stalled handshake: its own test)
    monkeypatch.setattr(connection, "TLS_HANDSHAKE_TIMEOUT_S", 2.0)
    with secured_gateway(pki) as (gw, addrs):
        keeper = tls_client(pki, addrs["SASL_SSL"])
        assert scram_login(keeper, "alice", "pw")["error_code"] == 0
        socks = []
        for _ in range(20):
            s = socket.create_connection(addrs["SSL"])
            s.sendall(os.urandom(2000))  # garbage instead of a TLS ClientHello
            socks.append(s)
            s = socket.create_connection(addrs["SASL_PLAINTEXT"])
            s.sendall(struct.pack(">i", 1 << 30))  # a 1 GiB frame before login: over sasl.server.max.receive.size
            socks.append(s)
            s = socket.create_connection(addrs["SASL_PLAINTEXT"])
            s.sendall(encode_request(3, 1, 5, "x", {"topics": None}))  # Metadata before login
            socks.append(s)
        s = socket.create_connection(addrs["SSL"])
        s.sendall(b"\xad\x03" + os.urandom(1998))  # a TLS version in bytes 1-2: answered with an alert, then closed
        socks.append(s)
        assert all(closed(s, timeout=15) for s in socks)
        for s in socks:
            s.close()
        deadline = time.monotonic() + 10
        while len(gw.connections) > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(gw.connections) == 1 and gw.pool.used == 0
        assert call(keeper, 18, 0, {}, corr=11)["error_code"] == 0  # the good client never noticed
        keeper.close()


def test_a_stalled_tls_handshake_is_dropped(pki, monkeypatch):
    from logan_ray.gateway import connection

    monkeypatch.setattr(connection, "TLS_HANDSHAKE_TIMEOUT_S", 0.5)
    with secured_gateway(pki) as (gw, addrs):
        with socket.create_connection(addrs["SASL_SSL"]) as s:  # connects, never says a word
            assert closed(s, timeout=10)


def plain_login(sock, user: str, password: str) -> None:
    assert call(sock, 17, 1, {"mechanism": "PLAIN"}, corr=90)["error_code"] == 0
    assert call(sock, 36, 1, {"auth_bytes": f"\x00{user}\x00{password}".encode()}, corr=91)["error_code"] == 0


def test_group_and_cluster_apis_answer_authorization_failures(pki):
    from logan_ray.security import acl

    with secured_gateway(pki, authorizer=True) as (gw, addrs):
        gw.cluster.router.handle.bindings.append(
            [acl.GROUP, "team-", acl.PREFIXED, "User:bob", "*", acl.READ, acl.ALLOW])  # not alice's
        with socket.create_connection(addrs["SASL_PLAINTEXT"]) as s:
            plain_login(s, "alice", "pw")
            join = {"group_id": "team-1", "session_timeout_ms": 10000, "rebalance_timeout_ms": 10000,
                    "member_id": "", "protocol_type": "consumer", "protocols": []}
            assert call(s, 11, 5, join)["error_code"] == 30  # GROUP_AUTHORIZATION_FAILED
            assert call(s, 10, 2, {"key": "team-1", "key_type": 0}, corr=2)["error_code"] == 30
            binding = {"resource_type": acl.TOPIC, "resource_name": "t", "resource_pattern_type": acl.LITERAL,
                       "principal": "User:alice", "host": "*", "operation": acl.READ, "permission_type": acl.ALLOW}
            r = call(s, 30, 1, {"creations": [binding]}, corr=3)
            assert r["results"][0]["error_code"] == 31  # CLUSTER_AUTHORIZATION_FAILED
            r = call(s, 29, 1, {"resource_type_filter": 1, "operation": 1, "permission_type": 1}, corr=4)
            assert r["error_code"] == 31
            r = call(s, 50, 0, {"users": None}, corr=5)
            assert r["error_code"] == 31


def test_offset_fetch_and_commit_by_topic_id_are_not_served_so_nothing_bypasses_the_acls(pki):
    """v10 of OffsetFetch/OffsetCommit names topics by id (KIP-848); the gateway neither advertises nor
    serves it, so a client cannot reach committed offsets through a path the name-based checks miss."""
    import uuid

    from logan_ray.security import acl

    with secured_gateway(pki, authorizer=True) as (gw, addrs):
        gw.cluster.router.handle.bindings.append(
            [acl.GROUP, "g", acl.LITERAL, "User:alice", "*", acl.READ, acl.ALLOW])
        with socket.create_connection(addrs["SASL_PLAINTEXT"]) as s:
            plain_login(s, "alice", "pw")
            apis = {a["api_key"]: a for a in call(s, 18, 3, {"client_software_name": "t",
                                                             "client_software_version": "1"})["api_keys"]}
            assert apis[9]["max_version"] == 9 and apis[8]["max_version"] == 9
            by_id = {"groups": [{"group_id": "g", "topics": [{"topic_id": uuid.uuid4(), "partition_indexes": [0]}]}],
                     "require_stable": False}
            s.sendall(encode_request(9, 10, 7, "test", by_id))
            assert closed(s)  # as Kafka does for a version it does not serve: no answer, connection closed
