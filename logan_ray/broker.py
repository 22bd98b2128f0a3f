"""Running a logan-ray broker: the process behind ``logan-ray start``.

The foreground process owns the embedded Ray runtime (or attaches to a cluster),
creates the router (which re-creates partitions from disk), and publishes where
it can be reached in its runtime file (``<data-dir>/broker.json`` and a per-user
copy, see logan_ray.runtime_file) so other processes (CLI, apps) find it: first as
starting, before Ray, then each time it can serve more, always before it listens
for it. On SIGTERM/SIGINT, at any moment of start-up too (logan_ray.stop_signals), it
flushes and closes every partition, so the next start skips recovery, and stops
every process it started.
"""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import ray

from . import client as _client
from . import runtime_file
from ._ray import get
from .errors import LoganError
from . import ray_notices
from .stop_signals import StopSignals
from .storage.file_modes import close_dir, private_opener

if TYPE_CHECKING:
    from .broker_config import BrokerSettings


log = logging.getLogger("logan_ray.broker")

GATEWAY_SYNC_S = 2.0  # how often the broker looks for nodes that joined (or left) the Ray cluster


class AlreadyRunningError(LoganError):
    """A broker already serves this data dir."""


@dataclass
class BrokerOptions:
    data_dir: str = field(default_factory=_client.default_data_dir)
    address: str | None = None
    auto_create_topics: bool = True
    num_partitions: int = 1
    # Kafka gateway: one per Ray node, listening on host:port, advertised to clients as
    # advertised_host:advertised_port (defaults: the bound address). host "node-ip": each
    # node's own Ray address (multi-host clusters); nodes that join later get one too.
    gateway: bool = True
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    # HTTP API and console (Ray Serve): "off" or "[HOST]:PORT[/PREFIX]"; None: $LOGAN_RAY_HTTP or 127.0.0.1:8000.
    http: str | None = None
    # Host names the HTTP API answers to besides its listen address; None: $LOGAN_RAY_HTTP_ALLOWED_HOSTS.
    http_allowed_hosts: str | None = None
    # Serve the HTTP API beyond loopback although no listener authenticates (refused otherwise).
    http_insecure: bool = False
    # Broker settings by Kafka's names (``--config``/``--config-file``); they win over the fields above.
    config: dict[str, str] = field(default_factory=dict)

    def http_settings(self):
        """The HTTP API's settings (logan_ray.http.settings.HttpSettings), None when off; ValueError when bad."""
        from .http.settings import parse_http_setting

        return parse_http_setting(self.http, self.http_allowed_hosts)

    def check_http_exposure(self, http) -> str | None:
        """Refuse (ValueError) an HTTP API beyond loopback that nobody logs in to, unless ``http_insecure``;
        returns the warning line to show when it is allowed that way."""
        from .http.security import http_security
        from .http.settings import check_exposure

        security = None
        if http is not None and uses_listeners(self.config):
            from .security.config import gateway_security

            security = http_security(gateway_security(self.resolve()))
        return check_exposure(http, security is not None and security.authenticate, self.http_insecure)

    def kafka_settings(self) -> dict[str, str]:
        """The fields above as Kafka-named settings, overridden by ``config``."""
        given: dict[str, str] = {}
        if not self.auto_create_topics:
            given["auto.create.topics.enable"] = "false"
        if self.num_partitions != 1:
            given["num.partitions"] = str(self.num_partitions)
        given.update(self.config)
        return given

    def resolve(self) -> "BrokerSettings":
        from .broker_config import resolve

        return resolve(self.kafka_settings())


#: Settings that switch the gateways from the plain --host/--port listener to Kafka's listeners.
_LISTENER_KEYS = ("listeners", "advertised.listeners", "listener.security.protocol.map", "authorizer.class.name",
                  "super.users", "allow.everyone.if.no.acl.found", "sasl.", "ssl.", "listener.name.",
                  "connections.max.reauth.ms")


def uses_listeners(config: dict[str, str]) -> bool:
    return any(k == p or (p.endswith(".") and k.startswith(p)) for k in config for p in _LISTENER_KEYS)


def _described(o: BrokerOptions, settings: "BrokerSettings") -> list[dict[str, Any]]:
    """DescribeConfigs entries of the broker's settings; without ``listeners`` the --host/--port
    flags are the one PLAINTEXT listener, shown as given when they differ from the default."""
    from .broker_config import describe_entries

    flags: dict[str, str] = {}
    if not uses_listeners(o.config):
        host = f"[{o.host}]" if ":" in o.host else o.host
        if (o.host, o.port) != ("127.0.0.1", 9092):
            flags["listeners"] = f"PLAINTEXT://{host}:{o.port}"
        if o.advertised_host or o.advertised_port:
            adv = o.advertised_host or o.host
            flags["advertised.listeners"] = f"PLAINTEXT://{adv}:{o.advertised_port or o.port}"
    return describe_entries(settings, skip=("log.dir",), given=flags)


@dataclass
class Broker:
    options: BrokerOptions
    owns_ray: bool = False
    router: Any = None
    gateways: dict[str, str] = field(default_factory=dict)
    http_running: bool = False
    endpoints: dict[str, Any] = field(default_factory=dict)
    _gateway_args: tuple = field(default=((), {"security": None}), repr=False)  # start_gateways' arguments
    _log_handler: logging.Handler | None = field(default=None, repr=False)

    @property
    def broker_file(self) -> str:
        return os.path.join(self.options.data_dir, _client.BROKER_FILE)

    def start(self, signals: StopSignals | None = None) -> dict[str, Any]:
        """Start everything and return the endpoints. With ``signals``, a stop requested meanwhile
        raises StopRequested between steps (the caller then calls ``stop``, which undoes them)."""
        checkpoint = signals.raise_if_requested if signals is not None else (lambda: None)
        o = self.options
        settings = o.resolve()  # unknown or bad settings fail before anything starts
        security = None
        if uses_listeners(o.config):  # also without gateways: the HTTP API takes the same security
            from .security.config import gateway_security

            security = gateway_security(settings)
        o.check_http_exposure(o.http_settings())  # an open HTTP API beyond loopback only when asked for
        # Everything this process and the Ray it starts create (segments, checkpoints, Ray's session
        # files and token) is the broker user's only; explicit modes at each creation cover nodes
        # whose Ray was started by hand.
        os.umask(0o077)
        close_dir(o.data_dir)  # 0700, also a data dir an older version left open
        checkpoint()  # a signal that came while Python and Ray were importing
        existing = _client.read_broker_file(o.data_dir)
        if existing is not None and existing.get("pid") != os.getpid():
            raise AlreadyRunningError(
                f"a logan-ray broker (pid {existing.get('pid')}) already serves {o.data_dir}; stop it first")
        self._log_handler = _log_ray_notices(o.data_dir)
        # Announced before anything listens: a command started now waits for the Ray address below
        # instead of finding no broker, and a second broker on this data dir is refused.
        self.endpoints = {"pid": os.getpid(), "data_dir": o.data_dir, "state": runtime_file.STARTING}
        runtime_file.publish(self.endpoints)
        checkpoint()
        self.owns_ray = _client.init_ray(o.address, o.data_dir)
        if signals is not None:
            signals.install()  # again: Ray's core worker took SIGINT's C handler over (SIGTERM is kept from it)
        checkpoint()
        self.router = _client.ensure_router(o.data_dir, auto_create_topics=settings.get("auto.create.topics.enable"),
                                            num_partitions=settings.get("num.partitions"),
                                            default_replication_factor=settings.get("default.replication.factor"),
                                            replica_lag_time_max_ms=settings.get("replica.lag.time.max.ms"),
                                            offsets_topic_replication_factor=settings.get(
                                                "offsets.topic.replication.factor"),
                                            broker_session_timeout_ms=settings.get("broker.session.timeout.ms"),
                                            broker_heartbeat_interval_ms=settings.get("broker.heartbeat.interval.ms"),
                                            auto_leader_rebalance_enable=settings.get("auto.leader.rebalance.enable"),
                                            leader_imbalance_check_interval_seconds=settings.get(
                                                "leader.imbalance.check.interval.seconds"),
                                            leader_imbalance_per_broker_percentage=settings.get(
                                                "leader.imbalance.per.broker.percentage"),
                                            topic_defaults=settings.topic_defaults,
                                            partition_idle_ms=settings.get("partition.idle.ms"),
                                            max_active_partitions=settings.get("max.active.partitions"),
                                            producer_id_expiration_ms=settings.get("producer.id.expiration.ms"),
                                            producer_id_expiration_check_interval_ms=settings.get(
                                                "producer.id.expiration.check.interval.ms"))
        from logan_ray.actors.group_coordinator import ensure_group_coordinator

        ensure_group_coordinator()  # replays committed offsets before clients arrive
        self.endpoints.update(ray_address=ray.get_runtime_context().gcs_address, dashboard=_client.dashboard_url())
        runtime_file.publish(self.endpoints)  # commands attach through Ray from now on
        checkpoint()
        if o.gateway:
            from .gateway import start_gateways

            limits = {"queued_max_request_bytes": settings.get("queued.max.request.bytes"),
                      "max_connections": settings.get("max.connections"),
                      "max_connections_per_ip": settings.get("max.connections.per.ip"),
                      "max_connections_per_ip_overrides": settings.get("max.connections.per.ip.overrides") or None,
                      "broker_configs": _described(o, settings)}
            # kept for the gateways of nodes that join later (sync_gateways)
            self._gateway_args = ((o.host, o.port, o.advertised_host, o.advertised_port),
                                  dict(max_frame_bytes=settings.get("socket.request.max.bytes"), limits=limits,
                                       security=security))
            args, kwargs = self._gateway_args
            self.gateways = start_gateways(*args, **kwargs)
            self._publish_gateways()
            runtime_file.publish(self.endpoints)
            checkpoint()
        http = o.http_settings()
        if http is not None:
            from .http import start_http

            from .http.security import http_security

            self.http_running = True
            http_sec = http_security(security)
            self.endpoints["http"] = start_http(http, http_sec)
            if http_sec is not None and http_sec.authenticate:
                self.endpoints["http_auth"] = "basic"  # HTTP Basic with the Kafka SCRAM users
            checkpoint()
        self.endpoints["state"] = runtime_file.READY
        runtime_file.publish(self.endpoints)
        return self.endpoints

    def _publish_gateways(self) -> None:
        """The gateways in the endpoints (bootstrap.servers, this node's gateway first; per listener)."""
        here = ray.get_runtime_context().get_node_id()
        ordered = [self.gateways[here]] if here in self.gateways else []
        ordered += [ep for node, ep in sorted(self.gateways.items()) if node != here]
        self.endpoints["kafka"] = ",".join(ordered)
        security = self._gateway_args[1]["security"]
        if security is not None and len(security["listeners"]) > 1:
            self.endpoints["listeners"] = _listener_endpoints(list(self.gateways))

    def sync_gateways(self) -> None:
        """Start the gateways of nodes that joined, drop those of nodes that left (and say so in the
        runtime file). Failures are logged and retried at the next round."""
        if not self.options.gateway or not self.gateways:
            return
        from .gateway import sync_gateways

        args, kwargs = self._gateway_args
        try:
            gateways = sync_gateways(self.gateways, *args, timeout=60, **kwargs)
            if gateways != self.gateways:
                self.gateways = gateways
                self._publish_gateways()
                runtime_file.publish(self.endpoints)
        except Exception as e:
            log.warning("logan-ray: could not give every node a gateway yet: %s", e)

    def stop(self) -> None:
        # What Ray reports while its actors are torn down (Serve's controller killed under a retried
        # call...) is expected: into broker.log with the other notices, not onto the terminal.
        if ray.is_initialized():
            ray_notices.divert(ray_notices.every_notice)
        try:
            if self.http_running:
                from .http import stop_http

                stop_http()
                self.http_running = False
            if self.gateways:
                from .gateway import stop_gateways

                stop_gateways(list(self.gateways))
                self.gateways = {}
            if self.router is not None:
                from logan_ray.actors.group_coordinator import stop_group_coordinator

                stop_group_coordinator()  # before the partitions close: no commit lands on a closed log
                get(self.router.shutdown.remote(), timeout=120)
                ray.kill(self.router, no_restart=True)
        finally:
            runtime_file.withdraw(self.options.data_dir, os.getpid())
            if self.owns_ray:
                ray.shutdown()
                self.owns_ray = False
            if self._log_handler is not None:
                ray_notices.log.removeHandler(self._log_handler)
                self._log_handler.close()
                self._log_handler = None


def _log_ray_notices(data_dir: str) -> logging.Handler:
    """Ray's notices kept off the terminal (logan_ray.ray_notices) go to ``<data-dir>/broker.log``
    (0600: it names clients), also in the foreground, whose terminal is not a log."""
    stream = open(os.path.join(data_dir, "broker.log"), "a", opener=private_opener)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    ray_notices.log.addHandler(handler)
    ray_notices.log.setLevel(logging.INFO)
    ray_notices.log.propagate = False  # no second copy through the root logger (the terminal)
    return handler


def _listener_endpoints(nodes: list[str]) -> dict[str, str]:
    """{listener name: "host:port,..."} over the gateways of ``nodes``."""
    from .gateway import gateway_name
    from ._ray import NAMESPACE

    out: dict[str, list[str]] = {}
    for node in nodes:
        actor = ray.get_actor(gateway_name(node), namespace=NAMESPACE)
        for name, ep in get(actor.listener_endpoints.remote(), timeout=30).items():
            out.setdefault(name, []).append(ep)
    return {name: ",".join(eps) for name, eps in out.items()}


def run_foreground(options: BrokerOptions, on_ready: Callable[[dict[str, Any]], None] | None = None,
                   signals: StopSignals | None = None) -> int:
    """Start, report endpoints, block until SIGTERM/SIGINT, then shut down cleanly; returns the
    exit status (``StopSignals.exit_status``).

    ``signals``: handlers the caller installed already (as early as it could, before
    importing Ray), else installed here. A signal during start-up stops the start at
    its next step and shuts down what it had started.
    """
    if signals is None:
        signals = StopSignals().install()
    signals.keep_from_ray()
    broker = Broker(options)
    try:
        try:
            endpoints = broker.start(signals)
        except KeyboardInterrupt:  # StopRequested, or Ray's wait interrupted by a second signal
            if not signals.requested:
                raise
            return signals.exit_status
        if on_ready is not None:
            on_ready(endpoints)
        synced = time.monotonic()
        while not signals.wait(1.0):
            if time.monotonic() - synced >= GATEWAY_SYNC_S:
                broker.sync_gateways()  # a node that joined gets its gateway
                synced = time.monotonic()
        return signals.exit_status
    finally:
        broker.stop()
        signals.restore()
