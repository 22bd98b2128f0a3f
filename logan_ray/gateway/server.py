"""The gateway core: a listening socket, its connections, and request dispatch.

Independent of how it is hosted (a Ray actor per node in production); it needs
only a running asyncio loop and a router handle. Handlers live in the sibling
modules, one per family of APIs, each declaring the versions it implements;
ApiVersions advertises exactly those.
"""
from __future__ import annotations

import asyncio
import functools
import logging
import socket
import time
from typing import Any

from logan_ray import protocol
from logan_ray.protocol import (
    ProtocolDecodeError,
    UnknownApiKeyError,
    UnsupportedVersionError,
    api_versions_fallback_response,
    decode_request,
    encode_response,
)

from logan_ray.security.client_host import client_host
from logan_ray.security.current import set_other_listener
from logan_ray.security.login_budget import (
    FAILED_AUTHENTICATIONS_WINDOW_MS,
    MAX_FAILED_AUTHENTICATIONS_PER_IP,
    FailedLoginBudget,
)
from logan_ray.security.quota_rate import WINDOW_NUM, WINDOW_SIZE_MS

from .client_quotas import THROTTLED_APIS, ClientQuotas
from .cluster import Cluster
from .connection import CLOSE_AFTER, Connection, FrameError
from .deadlines import CONNECTIONS_MAX_IDLE_MS, CONNECTIONS_MAX_UNAUTHENTICATED_MS, Deadlines
from .handler import Handler, HandlerTable
from .limits import (
    MAX_CONNECTIONS,
    MAX_CONNECTIONS_PER_IP,
    QUEUED_MAX_REQUEST_BYTES,
    ConnectionQuotas,
    RequestMemoryPool,
    raise_open_files_limit,
)

log = logging.getLogger("logan_ray.gateway")

API_VERSIONS_KEY = 18
#: Kafka's socket.request.max.bytes default: larger frames close the connection.
MAX_FRAME_BYTES = 100 * 1024 * 1024
#: After accept() fails for lack of descriptors, wait this long before trying again.
ACCEPT_RETRY_S = 0.1


def _handler_table() -> HandlerTable:
    from . import acl_api, admin, epochs, fetch, groups, leaders, meta, produce, quota_api, reassign, sasl_ops, txn

    table: HandlerTable = {}
    for module in (meta, produce, fetch, epochs, admin, leaders, reassign, groups, sasl_ops, acl_api, quota_api,
                   txn):  # groups after meta: its FindCoordinator wins
        for key, spec in module.HANDLERS.items():
            low, high, fn = spec
            codec_low, codec_high = protocol.ADVERTISED[key]
            table[key] = (max(low, codec_low), min(high, codec_high), fn)
    return table


def _frame_summary(frame: memoryview) -> str:
    """What a log line may tell of a frame that did not decode: its length, api key and version.

    Never its bytes: before login they may be a SaslAuthenticate whose PLAIN token holds a
    password, and after it they may hold records or SCRAM credentials.
    """
    if len(frame) < 4:
        return f"{len(frame)} bytes"
    api_key = int.from_bytes(frame[0:2], "big", signed=True)
    api_version = int.from_bytes(frame[2:4], "big", signed=True)
    return f"{len(frame)} bytes, api key {api_key} v{api_version}"


def _setting(given: int | None, broker_configs: list[dict[str, Any]], name: str, default: int) -> int:
    """A bound given as an argument, else as the broker described it (its DescribeConfigs entry), else ``default``.

    The broker hands every gateway its settings' DescribeConfigs entries; reading the
    pre-authentication bounds there keeps them configurable like the others without
    a new argument to carry through every way a gateway is started.
    """
    if given is not None:
        return int(given)
    for entry in broker_configs:
        if entry.get("name") == name and entry.get("value") not in (None, ""):
            return int(entry["value"])
    return default


class Gateway:
    """Serves the Kafka protocol for the partitions of one node (a :class:`.handler.GatewayContext` to its handlers)."""

    def __init__(self, router: Any, node_id: str, *, cluster_id: str = "logan-ray",
                 max_frame_bytes: int = MAX_FRAME_BYTES,
                 queued_max_request_bytes: int = QUEUED_MAX_REQUEST_BYTES,
                 max_connections: int = MAX_CONNECTIONS, max_connections_per_ip: int = MAX_CONNECTIONS_PER_IP,
                 max_connections_per_ip_overrides: Any = None,
                 connections_max_idle_ms: int | None = None,
                 connections_max_unauthenticated_ms: int | None = None,
                 max_failed_authentications_per_ip: int | None = None,
                 failed_authentications_per_ip_window_ms: int | None = None,
                 broker_configs: list[dict[str, Any]] | None = None) -> None:
        self.cluster = Cluster(router, node_id, cluster_id)
        #: DescribeConfigs entries of the broker's Kafka-named settings (broker_config.describe_entries)
        self.broker_configs = list(broker_configs or [])
        self.handlers = _handler_table()
        self.max_frame_bytes = max_frame_bytes
        self.pool = RequestMemoryPool(queued_max_request_bytes)
        self.quotas = ConnectionQuotas(max_connections, max_connections_per_ip, max_connections_per_ip_overrides)
        described = self.broker_configs
        self.deadlines = Deadlines(
            _setting(connections_max_idle_ms, described, "connections.max.idle.ms", CONNECTIONS_MAX_IDLE_MS),
            _setting(connections_max_unauthenticated_ms, described, "connections.max.unauthenticated.ms",
                     CONNECTIONS_MAX_UNAUTHENTICATED_MS))
        #: failed SASL logins per client address, shared by every listener of this gateway
        self.login_budget = FailedLoginBudget(
            _setting(max_failed_authentications_per_ip, described, "max.failed.authentications.per.ip",
                     MAX_FAILED_AUTHENTICATIONS_PER_IP),
            _setting(failed_authentications_per_ip_window_ms, described, "failed.authentications.per.ip.window.ms",
                     FAILED_AUTHENTICATIONS_WINDOW_MS))
        self.connections: set[Connection] = set()
        self.group_coordinator: Any = None  # the coordinator actor's handle, looked up by the groups handlers
        self.group_coordinator_node: str | None = None
        #: the listener whose addresses the router's plain gateway list holds (the first of ``listeners``)
        self.primary_listener: str | None = None
        #: the ACL authorizer (logan_ray.security.authorizer), None when authorizer.class.name is unset
        self.authorizer: Any = None
        #: produce and fetch byte-rate quotas (KIP-13), configured in the router's durable metadata
        self.client_quotas = ClientQuotas(
            self.cluster.router if router is not None else None, _setting(None, described, "quota.window.num", WINDOW_NUM),
            1000 * _setting(None, described, "quota.window.size.seconds", WINDOW_SIZE_MS // 1000))
        self.started = time.time()
        self.accepted = 0
        self.closed_bad_frames = 0
        self.accept_errors = 0
        #: listening sockets: fd -> (socket, its ListenerSecurity or None for plain PLAINTEXT)
        self._listeners: dict[int, tuple[socket.socket, Any]] = {}
        self._accepting = False
        self._accept_retry: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        protocol.precompile()

    # ------------------------------------------------------------ versions
    def api_versions(self) -> list[dict]:
        return [{"api_key": k, "min_version": low, "max_version": high}
                for k, (low, high, _) in sorted(self.handlers.items())]

    # ------------------------------------------------------------ listening
    def listen(self, host: str, port: int, security: Any = None) -> tuple[str, int]:
        """Bind and start accepting; returns the bound (host, port) (port 0 picks a free one).

        Called once per listener; ``security`` (logan_ray.security.session.ListenerSecurity)
        gives that listener's TLS context and SASL settings, None for plain PLAINTEXT.
        """
        self._loop = asyncio.get_running_loop()
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            sock.close()
            raise
        sock.listen(1024)
        sock.setblocking(False)
        if self._accepting:  # a new listener joins the ones being watched
            self._loop.add_reader(sock.fileno(), functools.partial(self._on_accept, sock.fileno()))
        self._listeners[sock.fileno()] = (sock, security)
        self.deadlines.start(lambda: self.connections)
        soft, _ = raise_open_files_limit()
        log.info("gateway: open files limit %d", soft)
        self._update_accepting()
        bound = sock.getsockname()
        name = security.listener.name if security is not None else "PLAINTEXT"
        log.info("gateway listening on %s:%d (%s)", bound[0], bound[1], name)
        return bound[0], bound[1]

    def _update_accepting(self) -> None:
        """Listen for new connections unless max.connections is reached or accept() just ran out of fds."""
        want = bool(self._listeners) and not self.quotas.full() and self._accept_retry is None
        if want and not self._accepting:
            for fd in self._listeners:
                self._loop.add_reader(fd, functools.partial(self._on_accept, fd))
            self._accepting = True
        elif not want and self._accepting:
            for fd in self._listeners:
                self._loop.remove_reader(fd)
            self._accepting = False

    def _retry_accept(self) -> None:
        self._accept_retry = None
        self._update_accepting()

    def _on_accept(self, fd: int) -> None:
        if fd not in self._listeners:
            return
        listener, security = self._listeners[fd]
        for _ in range(64):
            if self.quotas.full():
                break  # max.connections: the rest wait in the backlog until a connection closes
            try:
                sock, peer = listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:  # e.g. EMFILE: keep serving the connections we have, try again shortly
                self.accept_errors += 1
                if self.accept_errors == 1 or self.accept_errors % 1000 == 0:
                    log.warning("gateway: accept failed (%d times so far): %s", self.accept_errors, e)
                self._accept_retry = self._loop.call_later(ACCEPT_RETRY_S, self._retry_accept)
                break
            # an IPv4 client of a dual-stack listener as a.b.c.d, as ACL hosts and overrides name it
            peer = (client_host(peer[0]), *peer[1:])
            ip = peer[0]
            if not self.quotas.admit(ip):
                log.warning("gateway: rejected connection from %s: it already has the configured maximum of %d "
                            "connections (max.connections.per.ip)", ip, self.quotas.limit_for(ip))
                sock.close()
                continue
            if security is not None and security.listener.sasl and self.login_budget.wait_s(ip) > 0:
                # out of failed-login budget: its login would fail anyway; closing now costs no handshake
                self.quotas.release(ip)
                self.login_budget.refuse(ip)
                sock.close()
                continue
            self.accepted += 1
            try:
                if security is None:
                    conn = Connection(sock, peer, self.dispatch, self.max_frame_bytes, self._closed, self.pool)
                else:
                    session = security.new_session(ip, self.login_budget)
                    frame_limit = self.max_frame_bytes
                    if session.needs_sasl:  # sasl.server.max.receive.size until authenticated
                        frame_limit = min(frame_limit, security.max_receive)
                    conn = Connection(sock, peer, self.dispatch, frame_limit, self._closed, self.pool,
                                      tls=security.tls, session=session)
            except OSError as e:
                self.quotas.release(ip)
                sock.close()
                log.warning("gateway: cannot set up connection from %s: %s", peer, e)
                continue
            self.connections.add(conn)
        self._update_accepting()

    def _closed(self, conn: Connection) -> None:
        if conn in self.connections:
            self.connections.discard(conn)
            self.quotas.release(conn.peer[0])
            self._update_accepting()

    def close(self) -> None:
        self.deadlines.stop()
        if self._listeners and self._loop is not None:
            if self._accepting:
                for fd in self._listeners:
                    self._loop.remove_reader(fd)
                self._accepting = False
            if self._accept_retry is not None:
                self._accept_retry.cancel()
                self._accept_retry = None
            for sock, _security in self._listeners.values():
                sock.close()
            self._listeners = {}
        for conn in list(self.connections):
            conn.close("gateway stopping")
        self.cluster.close()

    # ------------------------------------------------------------ dispatch
    def dispatch(self, conn: Connection, frame: memoryview) -> Any:
        """Decode one frame; return the (future) response chunks, or None if none is owed."""
        try:
            header, body = decode_request(frame, allow_trailing=True)
        except UnsupportedVersionError as e:
            h = e.header
            if h is not None and h.api_key == API_VERSIONS_KEY:
                # KIP-511: answer in v0 with the supported ranges so the client can retry lower
                return [api_versions_fallback_response(h.correlation_id)]
            self.closed_bad_frames += 1
            raise FrameError(f"unsupported version {e.version} of api {e.api_key}") from None
        except UnknownApiKeyError as e:
            self.closed_bad_frames += 1
            raise FrameError(f"unknown api key {e.api_key}") from None
        except ProtocolDecodeError as e:
            self.closed_bad_frames += 1
            raise FrameError(f"malformed request: {e} ({_frame_summary(frame)})") from None
        session = conn.session
        if session is not None:
            refusal = session.refusal(header.api_key)
            if refusal is not None:  # e.g. a request before SASL authentication: Kafka closes the connection
                self.closed_bad_frames += 1
                raise FrameError(refusal)
        spec = self.handlers.get(header.api_key)
        if spec is None or not spec[0] <= header.api_version <= spec[1]:
            if header.api_key == API_VERSIONS_KEY:
                return [api_versions_fallback_response(header.correlation_id)]
            self.closed_bad_frames += 1
            name = protocol.APIS[header.api_key].name
            raise FrameError(f"{name} v{header.api_version} is not served by this gateway")
        # Returned even when no response is owed (acks=0): the request's bytes stay
        # counted until its handler is done, and later answers keep their order.
        return self._loop.create_task(self._run(spec[2], conn, header, body, len(frame)))

    async def _run(self, handler: Handler, conn: Connection, header: Any, body: dict,
                   request_bytes: int = 0) -> list[Any] | None:
        if conn.session is not None and conn.session.security.listener.name != self.primary_listener:
            set_other_listener(conn.session.security.listener.name)  # this task's context only
        try:
            post = None
            if self.authorizer is not None:  # ACLs: deny or narrow the request, fix up the answer
                from .authz import guard

                response, post = await guard(self, conn, header, body)
            if post is not None or self.authorizer is None or response is None:
                response = await handler(self, conn, header, body)
            if post is not None and response is not None:
                response = post(response)
        except Exception:
            log.exception("gateway: %s v%d from %s failed", protocol.APIS[header.api_key].name,
                          header.api_version, conn.peer)
            conn.close("request handler failed")
            return None
        chunks = None
        if response is not None:
            chunks = encode_response(header.api_key, header.api_version, header.correlation_id, response)
        if header.api_key in THROTTLED_APIS:  # byte-rate quotas: throttle_time_ms, muting or an empty fetch
            chunks = await self.client_quotas.apply(conn, header, response, chunks, request_bytes)
        if chunks is None:
            return None
        if conn.state.pop("close_after_response", False):
            chunks.append(CLOSE_AFTER)
        return chunks

    def stats(self) -> dict[str, Any]:
        import os

        return {"connections": len(self.connections), "accepted": self.accepted,
                "closed_bad_frames": self.closed_bad_frames, "uptime_s": time.time() - self.started,
                "pid": os.getpid(), "queued_request_bytes": self.pool.used,
                "queued_request_bytes_peak": self.pool.peak, "queued_max_request_bytes": self.pool.capacity,
                "memory_waits": self.pool.waits, "accept_errors": self.accept_errors, **self.quotas.stats(),
                **self.deadlines.stats(), "refused_logins": self.login_budget.refused,
                "quota_throttled_responses": self.client_quotas.throttled,
                **self.cluster.channel_stats()}
