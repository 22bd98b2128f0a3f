"""The gateway's socket-server bounds, on a gateway served in this process (no Ray needed).

Why in-process: these tests need to hold requests in flight on purpose (a handler
that waits) and read the memory pool's counters, which an actor hides. Requests are
real Kafka frames over real TCP sockets, through the same Gateway and Connection code.
"""
from __future__ import annotations

import asyncio
import socket
import struct
import threading
import time
from contextlib import contextmanager

import pytest

from logan_ray.gateway.limits import RECV_SIZE, ConnectionQuotas, RequestMemoryPool, parse_overrides
from logan_ray.gateway.server import Gateway
from logan_ray.protocol import encode_request
from wire_client import Wire

from tests.tooling.served_gateway import gateway_thread

API_VERSIONS = 18


@contextmanager
def local_gateway(**limits):
    """A gateway core on its own thread; yields (gateway, "host:port", its loop)."""
    async def start():
        gw = Gateway(None, "0123456789abcdef", **limits)
        return gw, "%s:%d" % gw.listen("127.0.0.1", 0)

    with gateway_thread(start) as served:
        yield served


def on_loop(loop, fn):
    """Run ``fn`` on the gateway's loop and return its result."""
    done = threading.Event()
    box = {}

    def call() -> None:
        box["v"] = fn()
        done.set()

    loop.call_soon_threadsafe(call)
    assert done.wait(10)
    return box["v"]


def api_versions_frame(corr: int, padding: int = 0) -> bytes:
    """An ApiVersions v3 request; ``padding`` extra bytes (allowed trailing) make it as large as wanted."""
    frame = encode_request(API_VERSIONS, 3, corr, "limits-test",
                           {"client_software_name": "t", "client_software_version": "1"})
    body = frame[4:] + bytes(padding)
    return struct.pack(">i", len(body)) + body


def test_frame_header_claiming_2_gb_allocates_nothing_and_closes_only_that_connection():
    with local_gateway(max_frame_bytes=2**31 - 1) as (gw, addr, loop):
        with Wire(addr) as good:
            good.send(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert good.recv()[1]["error_code"] == 0
            bad = socket.create_connection(good.sock.getpeername(), timeout=10)
            bad.sendall(struct.pack(">i", 2**31 - 1) + b"\x00\x12\x00\x03")
            time.sleep(0.3)
            # neither the pool's accounting nor a buffer holds the claim: only the 4 bytes that arrived
            conn = next(c for c in on_loop(loop, lambda: list(gw.connections)) if c._frame is not None)
            assert conn._frame_size == 2**31 - 1
            assert len(conn._frame) < 1 << 20
            assert on_loop(loop, lambda: gw.pool.used) == len(conn._frame) == 4
            bad.close()  # peer goes away mid-frame: the reservation is returned
            deadline = time.time() + 5
            while on_loop(loop, lambda: gw.pool.used) and time.time() < deadline:
                time.sleep(0.05)
            assert on_loop(loop, lambda: gw.pool.used) == 0
            good.send(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert good.recv()[1]["error_code"] == 0


def test_frame_over_socket_request_max_bytes_closes_the_connection():
    with local_gateway() as (gw, addr, loop):
        with Wire(addr) as w:
            w.send_raw(struct.pack(">i", 2**31 - 1))
            w.sock.settimeout(5)
            assert w.sock.recv(10) == b""  # closed, nothing else
        assert on_loop(loop, lambda: gw.pool.used) == 0


def test_requests_in_flight_stay_within_queued_max_request_bytes_and_none_is_dropped():
    """Handlers held back: the pool fills, sockets stop being read, and every request is answered later."""
    cap = 1 << 20
    with local_gateway(queued_max_request_bytes=cap) as (gw, addr, loop):
        gate = asyncio.Event()
        low, high, real = gw.handlers[API_VERSIONS]

        async def held(gw_, conn, header, body):
            await gate.wait()
            return await real(gw_, conn, header, body)

        gw.handlers[API_VERSIONS] = (low, high, held)
        clients, per_client, size = 4, 12, 200_000
        host, port = addr.rsplit(":", 1)
        socks = [socket.create_connection((host, int(port)), timeout=30)
                 for _ in range(clients)]
        senders = []
        for s in socks:
            data = b"".join(api_versions_frame(i, size) for i in range(per_client))
            t = threading.Thread(target=s.sendall, args=(data,), daemon=True)
            t.start()
            senders.append(t)
        time.sleep(1.0)
        used = on_loop(loop, lambda: gw.pool.used)
        assert 0 < used <= cap + RECV_SIZE  # bytes already read when the pool filled are held, not dropped
        assert on_loop(loop, lambda: gw.pool.waits) > 0  # some connection stopped reading
        loop.call_soon_threadsafe(gate.set)
        for s in socks:
            got = []
            s.settimeout(30)
            for _ in range(per_client):
                head = _exactly(s, 4)
                frame = _exactly(s, struct.unpack(">i", head)[0])
                got.append(struct.unpack_from(">i", frame)[0])
            assert got == list(range(per_client))  # all answered, in order
            s.close()
        for t in senders:
            t.join(10)
        assert on_loop(loop, lambda: gw.pool.peak) <= cap + RECV_SIZE
        deadline = time.time() + 5
        while on_loop(loop, lambda: gw.pool.used) and time.time() < deadline:
            time.sleep(0.05)
        assert on_loop(loop, lambda: gw.pool.used) == 0


def _exactly(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        assert chunk, "connection closed"
        buf += chunk
    return bytes(buf)


def test_max_connections_per_ip_closes_the_extra_connection_only():
    with local_gateway(max_connections_per_ip=2) as (gw, addr, loop):
        a, b = Wire(addr), Wire(addr)
        extra = Wire(addr)
        extra.sock.settimeout(5)
        assert extra.sock.recv(1) == b""  # accepted, then closed at once
        for w in (a, b):
            w.send(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert w.recv()[1]["error_code"] == 0
        a.close()
        time.sleep(0.2)
        with Wire(addr) as again:  # a slot is free again
            again.send(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
            assert again.recv()[1]["error_code"] == 0
        b.close()
        extra.close()
        assert on_loop(loop, lambda: gw.quotas.rejected) == 1


def test_max_connections_makes_new_clients_wait_until_one_closes():
    with local_gateway(max_connections=1) as (gw, addr, loop):
        first = Wire(addr)
        second = Wire(addr, timeout=10)  # sits in the listen backlog
        second.send(API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
        second.sock.settimeout(0.5)
        with pytest.raises(socket.timeout):
            second.sock.recv(1)
        second.sock.settimeout(10)
        first.close()
        assert second.recv()[1]["error_code"] == 0
        second.close()


def test_quota_and_pool_rules():
    q = ConnectionQuotas(max_connections=3, max_per_ip=1, overrides="10.0.0.1:2, other-host:0")
    assert q.admit("10.0.0.1") and q.admit("10.0.0.1") and not q.admit("10.0.0.1")
    assert not q.admit("other-host")
    assert q.admit("10.0.0.2") and q.full()
    q.release("10.0.0.1")
    assert not q.full()
    assert parse_overrides({"h": 3}) == {"h": 3}
    with pytest.raises(ValueError):
        parse_overrides("no-count")
    pool = RequestMemoryPool(100)
    pool.force(150)  # a whole request in flight, over the pool
    assert not pool.has_room()
    pool.arrived(50)  # and part of a frame
    woken = []
    pool.wait(lambda: woken.append(1))
    pool.release(150)  # answered: only the frame still arriving is held
    assert woken == [1] and pool.used == 50 and pool.has_room()
    pool.arrived(60)  # full of frames still arriving, nothing in flight to free room: readers go on
    assert pool.used == 110 and pool.stalled() and pool.has_room()
    pool.completed(110)  # the frame is whole: a request in flight, which will free room
    assert not pool.stalled() and not pool.has_room()
    pool.release(110)
    assert pool.used == 0 and pool.partial == 0
    unbounded = RequestMemoryPool(-1)
    unbounded.force(10**12)
    assert unbounded.has_room()
