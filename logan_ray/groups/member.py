"""One member of a classic group: who it is, its timeouts, its protocols and its pending answers.

``join_cb``/``sync_cb`` hold a parked JoinGroup/SyncGroup request's ``respond``
callback until the rebalance answers it (see :mod:`.rebalance`).
"""
from __future__ import annotations

from typing import Callable

#: How the coordinator answers a parked request: called once with the response body.
Respond = Callable[[dict], None]


class Member:
    __slots__ = ("member_id", "instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_cb", "join_version",
                 "sync_cb", "is_new", "last_heartbeat")

    def __init__(self, member_id: str, instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_cb: Respond | None = None
        self.join_version = 9
        self.sync_cb: Respond | None = None
        self.is_new = False
        self.last_heartbeat = 0.0

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols
