"""A minimal blocking Kafka client on a raw socket, for tests that need exact wire control.

It uses logan-ray's own codec to build requests and read responses; what it
tests is the gateway's behaviour on the wire (framing, ordering, error codes,
long-poll timing), which no high-level client lets us pin down.
"""
from __future__ import annotations

import socket
import struct
import time
from typing import Any

from logan_ray.protocol import decode_response, encode_request


def parse(addr: str) -> tuple[str, int]:
    host, port = addr.rsplit(":", 1)
    return host, int(port)


class Wire:
    def __init__(self, addr: str, timeout: float = 15.0) -> None:
        self.sock = socket.create_connection(parse(addr), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0
        self.sent: dict[int, tuple[int, int]] = {}

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Wire":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ requests
    def encode(self, api_key: int, version: int, body: dict) -> tuple[int, bytes]:
        self.corr += 1
        self.sent[self.corr] = (api_key, version)
        return self.corr, encode_request(api_key, version, self.corr, "wire-test", body)

    def send(self, api_key: int, version: int, body: dict) -> int:
        corr, frame = self.encode(api_key, version, body)
        self.sock.sendall(frame)
        return corr

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._exactly(4))[0]
        return self._exactly(size)

    def recv(self) -> tuple[int, dict]:
        frame = self.read_frame()
        corr = struct.unpack_from(">i", frame, 0)[0]
        api_key, version = self.sent.pop(corr)
        got, body = decode_response(api_key, version, frame)
        assert got == corr
        return corr, body

    def call(self, api_key: int, version: int, body: dict) -> dict:
        corr = self.send(api_key, version, body)
        got, response = self.recv()
        assert got == corr
        return response

    def _exactly(self, n: int) -> bytes:
        chunks = []
        while n:
            data = self.sock.recv(min(n, 1 << 20))
            if not data:
                raise ConnectionError("gateway closed the connection")
            chunks.append(data)
            n -= len(data)
        return b"".join(chunks)

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the gateway has closed this connection (EOF or reset)."""
        self.sock.settimeout(timeout)
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False
        return False


# ------------------------------------------------------------ body helpers
def produce_body(topic: str, partition: int, records: bytes | None, acks: int = 1) -> dict:
    return {"transactional_id": None, "acks": acks, "timeout_ms": 5000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}]}


def fetch_body(topic: str, parts: list[tuple[int, int, int]], max_wait_ms: int = 0, min_bytes: int = 1,
               max_bytes: int = 50 << 20) -> dict:
    """``parts``: (partition, fetch offset, partition max bytes)."""
    return {"replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": min_bytes, "max_bytes": max_bytes,
            "isolation_level": 0, "session_id": 0, "session_epoch": -1,
            "topics": [{"topic": topic, "partitions": [
                {"partition": p, "current_leader_epoch": -1, "fetch_offset": o, "log_start_offset": -1,
                 "partition_max_bytes": m} for p, o, m in parts]}],
            "forgotten_topics_data": [], "rack_id": ""}


def metadata_body(topics: list[str] | None, auto_create: bool = False) -> dict:
    return {"topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": auto_create, "include_topic_authorized_operations": False}


def list_offsets_body(topic: str, partition: int, timestamp: int) -> dict:
    return {"replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [{"partition_index": partition, "timestamp": timestamp}]}]}


def create_topics_body(name: str, partitions: int = 1, replication: int = 1, configs: dict | None = None,
                       validate_only: bool = False) -> dict:
    return {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": replication,
                        "assignments": [], "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()]}],
            "timeout_ms": 10000, "validate_only": validate_only}
