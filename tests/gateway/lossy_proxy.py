"""A TCP proxy in front of the gateway that loses answers, to make Kafka clients retry.

Every ``drop_every``-th Produce request is delivered to the gateway, and when its
answer comes back the proxy cuts the connection instead of forwarding it: the
append happened, but the client cannot know and must retry (``drop_every=0``
loses nothing). Metadata answers are rewritten so clients keep coming back
through the proxy. Every request frame a client sends is kept in ``recorded``,
so tests can replay (or mutate) exactly what real clients put on the wire.
"""
from __future__ import annotations

import socket
import struct
import threading

from logan_ray.protocol import decode_request_header, decode_response, encode_response

REWRITE = {3, 10, 60}  # Metadata, FindCoordinator, DescribeCluster: broker addresses


def _exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        data = sock.recv(min(n, 1 << 20))
        if not data:
            return None
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def _frame(sock: socket.socket) -> bytes | None:
    head = _exactly(sock, 4)
    if head is None:
        return None
    body = _exactly(sock, struct.unpack(">i", head)[0])
    return None if body is None else head + body


class LossyProxy:
    def __init__(self, upstream: str, drop_every: int) -> None:
        host, port = upstream.rsplit(":", 1)
        self.upstream = (host, int(port))
        self.drop_every = drop_every
        self.produce_seen = 0
        self.dropped = 0
        self.recorded: list[bytes] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)

    def __enter__(self) -> "LossyProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._listener.close()
        for s in list(self._sockets):
            try:
                s.close()
            except OSError:
                pass

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            self._sockets += [client, server]
            pending: dict[int, tuple[int, int, bool]] = {}
            threading.Thread(target=self._upstream, args=(client, server, pending), daemon=True).start()
            threading.Thread(target=self._downstream, args=(client, server, pending), daemon=True).start()

    def _upstream(self, client: socket.socket, server: socket.socket, pending: dict) -> None:
        try:
            while True:
                frame = _frame(client)
                if frame is None:
                    break
                header, _ = decode_request_header(frame[4:])
                drop = False
                self.recorded.append(frame)
                if header.api_key == 0 and self.drop_every:
                    with self._lock:
                        self.produce_seen += 1
                        drop = self.produce_seen % self.drop_every == 0
                pending[header.correlation_id] = (header.api_key, header.api_version, drop)
                server.sendall(frame)
        except OSError:
            pass
        finally:
            self._cut(client, server)

    def _downstream(self, client: socket.socket, server: socket.socket, pending: dict) -> None:
        try:
            while True:
                frame = _frame(server)
                if frame is None:
                    break
                corr = struct.unpack_from(">i", frame, 4)[0]
                api_key, version, drop = pending.pop(corr, (None, None, False))
                if drop:
                    with self._lock:
                        self.dropped += 1
                    break
                if api_key in REWRITE:
                    _, body = decode_response(api_key, version, frame[4:])
                    for b in [body, *body.get("brokers", []), *body.get("coordinators", [])]:
                        if "host" in b and "port" in b:
                            b["host"], b["port"] = "127.0.0.1", self.port
                    frame = b"".join(encode_response(api_key, version, corr, body))
                client.sendall(frame)
        except OSError:
            pass
        finally:
            self._cut(client, server)

    @staticmethod
    def _cut(client: socket.socket, server: socket.socket) -> None:
        for s in (client, server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass
