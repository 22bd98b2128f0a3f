"""The gateway as a Ray actor: one per node, pinned there, serving that node's partitions.

Why an async actor rather than a separate server process: it shares the node's
Ray worker machinery (actor handles to the partitions, restarts by Ray), and its
event loop carries both the client sockets and the awaits on partition actors.
On a restart after a crash the constructor asks the actor itself to serve
again, so a gateway comes back on the same port without anyone calling it.
"""
from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from logan_ray._ray import NAMESPACE, get
from logan_ray.actors.heap_settle import settle_heap
from logan_ray.actors.broker_lease import DEFAULT_BROKER_HEARTBEAT_INTERVAL_MS, DEFAULT_BROKER_SESSION_TIMEOUT_MS
from logan_ray.actors.names import gateway_name

from .heartbeat import Heartbeat
from .partition_gauges import PartitionGauges
from .broker_link import InterBrokerListener
from .replica_fetcher import ReplicaFetcher
from .server import MAX_FRAME_BYTES, Gateway

log = logging.getLogger("logan_ray.gateway")

REGISTER_INTERVAL_S = 10.0  # re-register, so a restarted router learns the gateways again
#: Listen-host value meaning "this node's Ray address": on a multi-host cluster every gateway
#: binds (and advertises) its own host's IP, the one Ray itself uses, and nothing else.
NODE_IP = "node-ip"


class GatewayActor:
    def __init__(self, host: str, port: int, advertised_host: str | None, advertised_port: int | None,
                 max_frame_bytes: int = MAX_FRAME_BYTES, cluster_id: str = "logan-ray",
                 limits: dict[str, Any] | None = None, security: dict[str, Any] | None = None) -> None:
        if host == NODE_IP:
            host = ray.util.get_node_ip_address()  # in a Ray worker: the address of the node it runs on
        self.host, self.port = host, port
        #: listeners and their security (logan_ray.security.config.gateway_security); None: one PLAINTEXT
        self.security = security
        self._listener_bound: dict[str, tuple[str, int]] = {}
        self.limits = dict(limits or {})  # Gateway keyword arguments: queued_max_request_bytes, max_connections...
        self.advertised_host, self.advertised_port = advertised_host, advertised_port
        self.max_frame_bytes = max_frame_bytes
        self.cluster_id = cluster_id
        self.node_id = ray.get_runtime_context().get_node_id()
        self._gateway: Gateway | None = None
        self._router: Any = None
        self._bound: tuple[str, int] | None = None
        self._register_task: asyncio.Task | None = None
        self._fetcher: ReplicaFetcher | None = None
        self._heartbeat: Heartbeat | None = None
        self._gauges: PartitionGauges | None = None
        logging.getLogger("logan_ray").setLevel(logging.INFO)
        self._serving = asyncio.Lock()  # serve() awaits between its checks: one at a time
        self._restarted = ray.get_runtime_context().was_current_actor_reconstructed
        self._coming_back: asyncio.Task | None = None
        if self._restarted:
            # Come back up by ourselves after a crash. Not a call to our own handle: Ray fails a call
            # submitted while it still sees this actor as restarting (max_task_retries=0), and the
            # gateway then stayed down. An async actor's constructor runs on its event loop.
            self._coming_back = asyncio.get_running_loop().create_task(self._come_back())

    async def _come_back(self) -> None:
        """Serve again after a restart, retrying while the router is unreachable (it may be restarting too)."""
        delay = 0.2
        while True:
            try:
                endpoint = await self.serve()
            except Exception as e:
                log.warning("gateway: serving again after a restart failed (%s); retrying in %.1f s", e, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
            else:
                log.info("gateway: back after a restart on %s", endpoint)
                return

    async def serve(self) -> str:
        """Start listening (idempotent); returns the advertised "host:port"."""
        async with self._serving:
            return await self._serve()

    async def _serve(self) -> str:
        # Each step is done once and skipped when a retry after a failure comes back to it.
        if self._gateway is None:
            from logan_ray.actors.router import ROUTER_NAME

            router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
            gateway = Gateway(router, self.node_id, cluster_id=self.cluster_id, max_frame_bytes=self.max_frame_bytes,
                              **self.limits)
            bound = None
            if self._restarted and self.port == 0:
                # started on a free port: come back on the port clients already know, as registered
                # (not as the metadata shows it: the node may be fenced by now, no heartbeat while down)
                previous = await router.registered_gateway.remote(self.node_id)
                if previous is not None:
                    try:
                        bound = gateway.listen(self.host, previous[1])
                    except OSError:
                        bound = None
            if bound is None:
                bound = gateway.listen(self.host, self.port, **self._primary_security(gateway))
            self._bound = bound
            if self.security is not None:
                self._listen_secondaries(gateway)
            self._gateway, self._router = gateway, router
            self.port = bound[1]  # a restart re-binds the same port
            gateway.cluster.own_endpoint = self._advertised()
        gateway = self._gateway
        if self._register_task is None:
            await self._register()
            self._register_task = asyncio.get_running_loop().create_task(self._keep_registered())
        if self._heartbeat is None:
            settings = await gateway.cluster.settings()
            heartbeat = Heartbeat(gateway.cluster, self.node_id,
                                  settings.get("broker_session_timeout_ms", DEFAULT_BROKER_SESSION_TIMEOUT_MS),
                                  settings.get("broker_heartbeat_interval_ms", DEFAULT_BROKER_HEARTBEAT_INTERVAL_MS),
                                  on_new_epoch=self._register)
            gateway.cluster.lease = heartbeat.lease
            try:
                await heartbeat.beat()  # a lease before the first produce
            except Exception as e:
                log.warning("gateway: first broker heartbeat failed: %s", e)
            heartbeat.start()
            self._heartbeat = heartbeat
        if self._fetcher is None:
            # this node's follower replicas; through the proxy that finds a replaced router again
            self._fetcher = ReplicaFetcher(gateway.cluster.router, self.node_id, self._inter_broker())
            self._fetcher.start()
        if self._gauges is None:
            # also of its inactive partitions; through the proxy that finds a replaced router again
            self._gauges = PartitionGauges(gateway.cluster.router, self.node_id)
            self._gauges.start()
            settle_heap()  # started: its objects stay; the collector sees only what serving makes
        return self.endpoint()

    def _primary_security(self, gateway: Gateway) -> dict[str, Any]:
        """Set up listener security on ``gateway``; the keyword arguments of its first listen()."""
        if self.security is None:
            return {}
        from logan_ray.security.config import listener_securities

        self._securities = listener_securities(self.security)
        first = self._securities[0]
        gateway.primary_listener = first.listener.name
        auth = self.security.get("authorizer") or {}
        if auth.get("enabled"):
            from logan_ray.security.authorizer import Authorizer

            gateway.authorizer = Authorizer(gateway.cluster.router, auth.get("super_users", ()),
                                            auth.get("allow_if_no_acl", False))
        return {"security": first}

    def _inter_broker(self) -> InterBrokerListener:
        """The listener this node's replica fetcher reaches leaders on, and its TLS."""
        if self.security is None:
            return InterBrokerListener()
        from logan_ray.security.config import inter_broker_tls

        name, tls = inter_broker_tls(self.security)
        return InterBrokerListener(None if name == self.security["listeners"][0]["name"] else name, tls)

    def _listen_secondaries(self, gateway: Gateway) -> None:
        assert self._bound is not None
        self._listener_bound[self._securities[0].listener.name] = self._bound
        for sec in self._securities[1:]:
            ln = sec.listener
            try:
                self._listener_bound[ln.name] = gateway.listen(ln.host, ln.port, security=sec)
            except OSError:
                gateway.close()
                raise

    def _listener_advertised(self) -> dict[str, tuple[str, int]]:
        out = {}
        for sec in getattr(self, "_securities", []):
            ln = sec.listener
            bound = self._listener_bound.get(ln.name)
            if bound is None:
                continue
            host = ln.advertised_host or bound[0]
            if host in ("0.0.0.0", "::", ""):
                host = ray.util.get_node_ip_address()
            out[ln.name] = (host, ln.advertised_port or bound[1])
        return out

    def _advertised(self) -> tuple[str, int]:
        assert self._bound is not None
        host = self.advertised_host
        if not host:
            host = self._bound[0]
            if host in ("0.0.0.0", "::", ""):
                host = ray.util.get_node_ip_address()
        return host, self.advertised_port or self._bound[1]

    def endpoint(self) -> str:
        host, port = self._advertised()
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    async def _register(self) -> None:
        host, port = self._advertised()
        assert self._gateway is not None
        await self._gateway.cluster.router.register_gateway.remote(self.node_id, host, port)
        if self.security is not None:
            await self._gateway.cluster.router.register_listeners.remote(self.node_id, self._listener_advertised())

    async def _keep_registered(self) -> None:
        while True:
            await asyncio.sleep(REGISTER_INTERVAL_S)
            try:
                await self._register()
            except Exception as e:  # the router may be restarting: try again next round
                log.warning("gateway: re-registering failed: %s", e)

    async def listener_endpoints(self) -> dict[str, str]:
        """{listener name: advertised "host:port"} of this gateway."""
        return {n: f"{h}:{p}" for n, (h, p) in self._listener_advertised().items()}

    async def stats(self) -> dict[str, Any]:
        s = self._gateway.stats() if self._gateway else {}
        s.update(node_id=self.node_id, endpoint=self.endpoint() if self._bound else None, pid=os.getpid(),
                 listeners={n: f"{h}:{p}" for n, (h, p) in self._listener_advertised().items()})
        return s

    async def publish_gauges(self) -> int:
        """Publish the log gauges of this node's partitions now (else every 10 s); returns how many."""
        return await self._gauges.publish() if self._gauges is not None else 0

    async def replica_state(self) -> dict[str, dict[str, Any]]:
        """This node's follower replicas: log end, high watermark, leader and epoch of each."""
        return self._fetcher.state() if self._fetcher is not None else {}

    async def stop_following(self, topic: str, partition: int, leader_epoch: int) -> bool:
        """Close this node's follower log of a partition it is about to lead (the router's election)."""
        return await self._fetcher.release(topic, partition, leader_epoch) if self._fetcher is not None else False

    async def assignments_changed(self) -> None:
        """The router changed a leadership this node follows or led: re-read the assignments now, not at
        the fetcher's next round (a leader that handed over follows the new one at once)."""
        if self._fetcher is not None:
            self._fetcher.refresh_soon()

    async def stop(self) -> None:
        """Stop listening, close connections and leave the router's broker list."""
        if self._coming_back is not None:
            self._coming_back.cancel()
            self._coming_back = None
        if self._register_task is not None:
            self._register_task.cancel()
            self._register_task = None
        if self._heartbeat is not None:
            self._heartbeat.stop()
            self._heartbeat.board.retire()  # stopped on purpose: the session ends without fencing
            self._heartbeat = None
        if self._fetcher is not None:
            await self._fetcher.stop()
            self._fetcher = None
        if self._gauges is not None:
            self._gauges.stop()
            self._gauges = None
        if self._gateway is not None:
            self._gateway.close()
            try:
                await self._gateway.cluster.router.unregister_gateway.remote(self.node_id)
            except Exception:
                pass
            self._gateway = None


def gateway_actor_class():
    return ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0, max_concurrency=1000)(GatewayActor)


def _alive_nodes() -> list[dict]:
    return [n for n in ray.nodes() if n.get("Alive")]


def start_gateways(host: str = "127.0.0.1", port: int = 9092, advertised_host: str | None = None,
                   advertised_port: int | None = None, *, max_frame_bytes: int = MAX_FRAME_BYTES,
                   cluster_id: str = "logan-ray", nodes: list[str] | None = None,
                   timeout: float = 120, limits: dict[str, Any] | None = None,
                   security: dict[str, Any] | None = None) -> dict[str, str]:
    """Start (or find) one gateway per alive node; returns {node id: advertised "host:port"}.

    Port 0 lets each gateway pick a free port. With several nodes and an explicit
    port, every node listens on the same port number on its own address.
    ``limits``: Kafka's socket-server bounds, as keyword arguments of :class:`Gateway`
    (``queued_max_request_bytes``, ``max_connections``, ``max_connections_per_ip``,
    ``max_connections_per_ip_overrides``). ``security``: listeners with TLS/SASL/ACLs
    (logan_ray.security.config.gateway_security); the first listener is the one
    ``host``/``port`` and the returned endpoints describe.
    """
    if security is not None:
        first = security["listeners"][0]
        host, port = first["host"], first["port"]
        advertised_host, advertised_port = first["advertised_host"], first["advertised_port"]
    node_ids = nodes or [n["NodeID"] for n in _alive_nodes()]
    actors = {}
    for node in node_ids:
        actors[node] = gateway_actor_class().options(
            name=gateway_name(node), namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        ).remote(host, port, advertised_host, advertised_port, max_frame_bytes, cluster_id, limits, security)
    refs = {node: a.serve.remote() for node, a in actors.items()}
    out = {}
    for node, ref in refs.items():
        try:
            out[node] = get(ref, timeout=timeout)
        except ray.exceptions.RayTaskError as e:
            cause = getattr(e, "cause", None) or e
            ray.kill(actors[node], no_restart=True)
            if isinstance(cause, OSError):
                raise OSError(cause.errno, f"gateway cannot listen on {host}:{port}: {cause.strerror}") from None
            raise
    return out


def sync_gateways(current: dict[str, str], host: str = "127.0.0.1", port: int = 9092,
                  advertised_host: str | None = None, advertised_port: int | None = None,
                  **kwargs: Any) -> dict[str, str]:
    """Give every alive node a gateway and forget those of nodes that are gone.

    ``current`` is {node id: endpoint} as ``start_gateways`` returned it; the result is the
    new map. A node that joins the Ray cluster after the broker started gets its gateway
    here (so it can lead partitions clients reach), without restarting anything. A gone
    node's gateway actor is killed so it does not wait forever to be restarted there.
    """
    alive = {n["NodeID"] for n in _alive_nodes()}
    out = {node: ep for node, ep in current.items() if node in alive}
    for node in set(current) - alive:
        try:
            ray.kill(ray.get_actor(gateway_name(node), namespace=NAMESPACE), no_restart=True)
        except (ValueError, ray.exceptions.RayError):
            pass
        log.info("gateway of node %s is gone with its node", node[:8])
    new = sorted(alive - set(out))
    if new:
        started = start_gateways(host, port, advertised_host, advertised_port, nodes=new, **kwargs)
        for node, ep in started.items():
            log.info("node %s joined: its gateway serves %s", node[:8], ep)
        out.update(started)
    return out


def stop_gateways(nodes: list[str] | None = None, timeout: float = 30) -> None:
    """Stop and remove the gateway actors (of ``nodes``, default all alive nodes)."""
    node_ids = nodes or [n["NodeID"] for n in _alive_nodes()]
    for node in node_ids:
        try:
            actor = ray.get_actor(gateway_name(node), namespace=NAMESPACE)
        except ValueError:
            continue
        try:
            get(actor.stop.remote(), timeout=timeout)
        except Exception as e:
            log.warning("gateway on %s did not stop cleanly: %s", node[:8], e)
        ray.kill(actor, no_restart=True)


def free_port(host: str = "127.0.0.1") -> int:
    """A currently free TCP port on ``host`` (for tests and benchmarks)."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
