"""What a peer that never logs in, or logs in wrongly, can cost the gateway (issue 36, item 2).

300 unauthenticated connections that each announced a 512 KiB frame and sent nothing
stalled a node: the claims were reserved from queued.max.request.bytes, nothing closed
them, and PLAIN logins hashed passwords on the event loop with no per-address limit.
Each test keeps one of those holes shut. The gateway core runs in this process on real
sockets (no Ray: a stand-in router serves the SCRAM credentials).
"""
from __future__ import annotations

import asyncio
import socket
import struct
import time
from contextlib import contextmanager

import pytest

from logan_ray.protocol import decode_response, encode_request
from logan_ray.security import scram
from logan_ray.security.listeners import Listener
from logan_ray.security.sasl import PlainServer, SaslFailed
from logan_ray.security.session import ListenerSecurity
from tests.tooling.served_gateway import served_gateway

CREDS = {("alice", m): scram.new_credential(m, "pw") for m in scram.MECHANISMS}
API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
HALF_MIB = 512 * 1024


class _Method:
    def __init__(self, fn) -> None:
        self.fn = fn

    def remote(self, *args):
        return self.fn(*args)


class FakeRouter:
    def __init__(self) -> None:
        async def cred(user, mech):
            return CREDS.get((user, mech))
        self.scram_credential = _Method(cred)


@contextmanager
def sasl_gateway(**limits):
    """A gateway with one SASL_PLAINTEXT listener (PLAIN) on its own loop and thread; yields (gateway, address)."""
    listener = Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "127.0.0.1", 0)
    with served_gateway(router=FakeRouter(), security=ListenerSecurity(listener, None, ("PLAIN",)),
                        **limits) as (gw, port):
        yield gw, ("127.0.0.1", port)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def call(sock: socket.socket, api_key: int, version: int, body: dict, corr: int = 1) -> dict:
    sock.sendall(encode_request(api_key, version, corr, "preauth", body))
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    got_corr, resp = decode_response(api_key, version, recv_exact(sock, size))
    assert got_corr == corr
    return resp


def api_versions(sock: socket.socket, corr: int = 7) -> int:
    return call(sock, API_VERSIONS, 0, {}, corr)["error_code"]


def plain_login(sock: socket.socket, password: str = "pw") -> dict:
    assert call(sock, SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, corr=90)["error_code"] == 0
    return call(sock, SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0" + password.encode()}, corr=91)


def connect(addr, source: str = "127.0.0.1", timeout: float = 10) -> socket.socket:
    sock = socket.create_connection(addr, timeout=timeout, source_address=(source, 0))
    sock.settimeout(timeout)
    return sock


def closed(sock: socket.socket, timeout: float) -> bool:
    """The gateway closed ``sock`` within ``timeout`` (what it sent before is passed over)."""
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            sock.settimeout(left)
            if sock.recv(65536) == b"":
                return True
    except ConnectionError:
        return True
    except socket.timeout:
        return False


def wait_for(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not predicate() and time.monotonic() < deadline:
        time.sleep(0.02)
    return predicate()


# ---------------------------------------------------------------- 1. connections.max.idle.ms


def test_a_connection_without_traffic_for_connections_max_idle_ms_is_closed():
    with sasl_gateway(connections_max_idle_ms=300) as (gw, addr), connect(addr) as idle:
        assert plain_login(idle)["error_code"] == 0
        t0 = time.monotonic()
        assert closed(idle, timeout=5)
        assert time.monotonic() - t0 >= 0.25
        assert gw.deadlines.closed_idle == 1


def test_a_connection_with_a_request_in_flight_is_not_idle():
    with sasl_gateway(connections_max_idle_ms=300) as (gw, addr), connect(addr) as busy:
        assert plain_login(busy)["error_code"] == 0
        low, high, real = gw.handlers[API_VERSIONS]

        async def slow(gw_, conn, header, body):
            await asyncio.sleep(1.2)  # four idle timeouts while the request is handled
            return await real(gw_, conn, header, body)

        gw.handlers[API_VERSIONS] = (low, high, slow)
        assert api_versions(busy) == 0
        assert gw.deadlines.closed_idle == 0


# ---------------------------------------------------------------- 2. a deadline to log in


def test_a_sasl_connection_that_does_not_log_in_in_time_is_closed_even_while_it_talks():
    with sasl_gateway(connections_max_unauthenticated_ms=500) as (gw, addr), \
            connect(addr) as stranger, connect(addr) as member:
        assert plain_login(member)["error_code"] == 0
        t0 = time.monotonic()
        with pytest.raises(ConnectionError):
            for corr in range(100):  # ApiVersions every 50 ms: never idle, never logged in
                assert api_versions(stranger, corr) == 0
                time.sleep(0.05)
        assert 0.45 <= time.monotonic() - t0 < 4
        assert gw.deadlines.closed_unauthenticated == 1
        assert api_versions(member) == 0  # a logged-in connection has no such deadline


# ---------------------------------------------------------------- 3. only bytes that arrived are counted


def test_a_frame_header_reserves_no_request_memory_until_its_bytes_arrive():
    with sasl_gateway(queued_max_request_bytes=1 << 20) as (gw, addr), connect(addr) as member:
        assert plain_login(member)["error_code"] == 0
        hostile = [connect(addr) for _ in range(20)]  # 20 x 512 KiB claimed: ten times the pool
        try:
            for s in hostile:
                s.sendall(struct.pack(">i", HALF_MIB))
            assert wait_for(lambda: len(gw.connections) == 21 and gw.accepted == 21)
            time.sleep(0.2)  # the headers are read by now
            assert gw.pool.used == 0
            member.settimeout(3)
            assert api_versions(member) == 0  # the pool is not full: the logged-in client is served
            hostile[0].sendall(b"\0" * 1000)
            assert wait_for(lambda: gw.pool.used == 1000)  # what arrived is counted
        finally:
            for s in hostile:
                s.close()
        assert wait_for(lambda: gw.pool.used == 0 and gw.pool.partial == 0)


# ---------------------------------------------------------------- 4. max.connections.per.ip under attack


def test_max_connections_per_ip_holds_under_hundreds_of_hostile_connections():
    with sasl_gateway(max_connections_per_ip=20) as (gw, addr):
        hostile = []
        try:
            for _ in range(300):
                s = connect(addr)
                try:
                    s.sendall(struct.pack(">i", HALF_MIB))
                except ConnectionError:
                    pass  # already closed: over the limit
                hostile.append(s)
            assert wait_for(lambda: gw.quotas.rejected == 280)
            assert len(gw.connections) == 20
            with connect(addr, source="127.0.0.2") as other:  # another address is not affected
                assert plain_login(other)["error_code"] == 0
                assert api_versions(other) == 0
        finally:
            for s in hostile:
                s.close()


# ------------------------------------------------------------ 5. failed logins: a budget per address, PBKDF2 off the loop


def test_logins_from_an_address_out_of_failed_login_budget_fail_at_once_without_hashing(monkeypatch):
    hashed = []
    real_check = scram.check_password

    def counting(*args):
        hashed.append(1)
        return real_check(*args)

    monkeypatch.setattr(scram, "check_password", counting)
    with sasl_gateway(max_failed_authentications_per_ip=3) as (gw, addr):
        def wrong_login() -> None:
            with connect(addr) as s:
                r = plain_login(s, "guess")
                assert r["error_code"] == 58 and "Invalid username or password" in r["error_message"]

        wrong_login()
        wrong_login()
        with connect(addr) as early:  # a login under way when the budget runs out
            assert call(early, SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"}, corr=90)["error_code"] == 0
            wrong_login()
            before = len(hashed)
            with connect(addr) as s:  # even with the right password: the address is out of budget
                assert closed(s, timeout=5)  # closed at accept, before any handshake
            r = call(early, SASL_AUTHENTICATE, 2, {"auth_bytes": b"\0alice\0pw"}, corr=91)
            assert r["error_code"] == 58 and "too many failed authentications" in r["error_message"]
        assert len(hashed) == before  # both refused before any PBKDF2
        assert gw.login_budget.refused == 2
        with connect(addr, source="127.0.0.2") as s:  # another address keeps its own budget
            assert plain_login(s, "pw")["error_code"] == 0


def test_a_plain_login_hashes_its_password_off_the_event_loop():
    cred = scram.new_credential("SCRAM-SHA-512", "pw", iterations=scram.MAX_ITERATIONS)

    async def lookup(user, mechanism):
        return cred if mechanism == "SCRAM-SHA-512" else None

    async def main() -> tuple[int, bool]:
        ticks = 0
        running = True

        async def ticker() -> None:
            nonlocal ticks
            while running:
                await asyncio.sleep(0.001)
                ticks += 1

        task = asyncio.create_task(ticker())
        await asyncio.sleep(0.01)
        before = ticks

        async def wrong() -> None:
            with pytest.raises(SaslFailed):
                await PlainServer().step(b"\0alice\0wrong", lookup)

        await asyncio.gather(*(wrong() for _ in range(4)))  # four 16,384-iteration PBKDF2s
        during = ticks - before
        right = PlainServer()
        await right.step(b"\0alice\0pw", lookup)
        running = False
        await task
        return during, right.done

    during, logged_in = asyncio.run(main())
    assert during >= 3, "the event loop did not run while passwords were hashed"
    assert logged_in
