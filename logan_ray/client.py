"""``logan_ray.connect``: find (or start) logan-ray on Ray and hand back an admin client.

Resolution order: an already initialised Ray runtime; ``address``; the runtime
file a running ``logan-ray start`` published (see logan_ray.runtime_file);
``RAY_ADDRESS``; otherwise an embedded single-node Ray bound to 127.0.0.1 is
started in-process. Ray's loopback and token-auth settings are applied here,
before Ray starts or attaches, so no environment variable is needed by hand.
"""
from __future__ import annotations

import logging
import os
import socket
from typing import Any, Iterable

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from . import runtime_file
from .actors.topic_names import is_internal
from ._ray import NAMESPACE, get
from .errors import NotRunningError, PartitionHibernatedError, UnknownTopicError
from .ray_notices import divert as divert_worker_pool_notices
from .ray_token import protect_token
from .storage.file_modes import close_dir

log = logging.getLogger("logan_ray")

BROKER_FILE = runtime_file.FILE_NAME
_LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def default_data_dir() -> str:
    return runtime_file.default_data_dir()


def read_broker_file(data_dir: str) -> dict[str, Any] | None:
    """The runtime file of the broker serving ``data_dir``, or None when none runs there."""
    return runtime_file.read(runtime_file.data_dir_path(data_dir))


_context: Any = None  # the RayContext of an embedded Ray started here (dashboard URL)


def dashboard_url() -> str | None:
    url = getattr(_context, "dashboard_url", None)
    return f"http://{url}" if url and not url.startswith("http") else url


#: Every Ray worker of an embedded broker imports the partition actor's module when its process starts,
#: so a prestarted worker (actors/warm_workers.py) that becomes a partition has nothing left to import.
#: Nodes started with ``ray start`` get the same with RAY_preload_python_modules=logan_ray.actors.partition.
PRELOAD_CONFIG = {"preload_python_modules": ["logan_ray.actors.partition"]}


def _enable_token_auth() -> None:
    """Keep Ray token auth on, also when attaching by address.

    Ray 2.60 turns token auth on for clusters ``ray.init()`` starts, but a process
    attaching by address only sends the token (~/.ray/auth_token) when
    RAY_AUTH_MODE=token is in force; Ray reads that setting at import, so setting
    the variable alone is too late here. An explicit RAY_AUTH_MODE is respected.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    from ray._raylet import Config  # refresh the config Ray cached at import

    Config.initialize("")


def _bind_loopback() -> None:
    """Every Ray listener of this process (and of the Ray it starts) on 127.0.0.1.

    Ray's single-node switch is RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, read once at
    import: without it a process attaching to a loopback broker looks for its raylet
    at the machine's external address and waits forever. The variable is set for
    the child processes Ray starts, and Ray's cached constant is updated for this
    one. An explicit setting is respected.
    """
    from ray._private import ray_constants

    os.environ.setdefault(_LOOPBACK_ENV, "0")
    ray_constants.ENABLE_RAY_CLUSTER = os.environ[_LOOPBACK_ENV].lower() in ("1", "true")


def _is_loopback(address: str) -> bool:
    host = address.rsplit(":", 1)[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def _check_reachable(address: str, timeout: float = 3.0) -> None:
    """Fail in seconds, not minutes, when nothing listens at a Ray GCS address ("host:port").

    ``ray.init`` retries an unreachable GCS for a long time, logging as it goes.
    """
    if address == "auto" or "://" in address or ":" not in address:
        return
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except (OSError, ValueError) as e:
        raise NotRunningError(f"cannot reach Ray at {address} ({e.strerror or e})") from None


def init_ray(address: str | None = None, data_dir: str | None = None, *, embedded: bool = True,
             **ray_kwargs: Any) -> bool:
    """Attach to or start Ray; returns True when this call started an embedded Ray.

    Resolution: ``address``; the runtime file of a running broker (``data_dir`` or
    $LOGAN_RAY_DATA_DIR if given, else the per-user one, then the default data dir);
    ``RAY_ADDRESS``; otherwise (only with ``embedded``) an embedded single-node Ray
    bound to 127.0.0.1. With ``embedded=False`` it only attaches, raising
    NotRunningError (with what it tried) when no broker is found.
    """
    global _context
    divert_worker_pool_notices()  # also for a Ray the application started itself: logan-ray's actors cause them
    if ray.is_initialized():
        return False
    lookup = None
    if address is None:
        # A broker that is starting has no Ray address yet: wait for it rather than start another.
        lookup = runtime_file.await_reachable(data_dir, on_wait=lambda found: log.warning(
            runtime_file.waiting_message(found)))
        if lookup.info is not None and lookup.info.get("pid") == os.getpid():
            lookup.info = None  # this process is the broker, starting: it starts Ray below
        elif lookup.info is not None and not runtime_file.reachable(lookup.info):
            raise NotRunningError(runtime_file.still_starting_message(lookup))
        if lookup.info is not None:
            address = lookup.info["ray_address"]
    if address is None and os.environ.get("RAY_ADDRESS"):
        address = os.environ["RAY_ADDRESS"]
    if address is None and not embedded:
        raise NotRunningError(runtime_file.not_found_message(lookup or runtime_file.Lookup()))
    for stale in lookup.stale if lookup is not None else ():
        log.warning("logan-ray: ignoring stale runtime file %s", stale)
    if address is None or _is_loopback(address):
        _bind_loopback()
    _enable_token_auth()
    protect_token()  # before Ray may write a new token, and again once it has
    common = dict(namespace=NAMESPACE, logging_level=logging.WARNING, configure_logging=False,
                  log_to_driver=False)
    if address is not None:
        _check_reachable(address)
        ray.init(address=address, **common)
        protect_token()
        return False
    # address="local": Ray's default (None) would join the cluster a `ray start` on this machine
    # left in /tmp/ray/ray_current_cluster, which is no logan-ray broker (and refuses _system_config).
    preloading = {**ray_kwargs, "_system_config": {**PRELOAD_CONFIG, **ray_kwargs.get("_system_config", {})}}
    _context = ray.init(address="local", include_dashboard=True, dashboard_host="127.0.0.1",
                        **{**common, **preloading})
    protect_token()
    return True


#: Ray's resource of the head node (Ray Serve pins its controller with it): the router follows the head
HEAD_RESOURCE = "node:__internal_head__"


def ensure_router(data_dir: str | None = None, **router_kwargs: Any):
    """The cluster's router actor, created (detached, on this node) if absent.

    On the head node (the usual case: ``logan-ray start`` runs there) the router asks for a sliver
    of Ray's ``node:__internal_head__`` resource, as Ray Serve's controller does: it runs on the
    head, Ray restarts a crashed router there, and once the head is lost (GCS fault tolerance on)
    the restarted router runs on the new head, where it resumes from the metadata in the GCS's
    store (``actors/metadata_store.py``). A hard node affinity left the router pending forever on
    the dead node; a soft one placed it on another node half the time (measured: 4 of 8 actors),
    where it died with that node. Elsewhere than on the head, the affinity to this node is hard."""
    from logan_ray.actors.router import ROUTER_NAME, router_actor_class

    try:
        return ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    except ValueError:
        pass
    from logan_ray.actors.router import LOCK_WAIT_S
    from logan_ray.storage.dir_lock import DataDirLock

    data_dir = os.path.abspath(os.path.expanduser(data_dir or default_data_dir()))
    close_dir(data_dir)
    # The router (created on this node) holds the data dir's lock; asking for it here first
    # turns "another broker has it" into a clear DataDirLockedError instead of a dead actor.
    DataDirLock(data_dir).acquire(wait_s=LOCK_WAIT_S).release()
    node = ray.get_runtime_context().get_node_id()
    on_head = any(n["NodeID"] == node and HEAD_RESOURCE in n.get("Resources", {}) for n in ray.nodes())
    placement: dict[str, Any] = {"resources": {HEAD_RESOURCE: 0.001}} if on_head else {
        "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False)}
    router = router_actor_class().options(
        name=ROUTER_NAME, namespace=NAMESPACE, lifetime="detached", get_if_exists=True, **placement,
    ).remote(data_dir, **router_kwargs)
    get(router.list_topics.remote())  # wait until it is up (and has re-created partitions)
    from logan_ray.actors.group_coordinator import ensure_group_coordinator

    # With the broker, not with the first consumer group: the coordinator replays
    # __consumer_offsets now, while no traffic waits behind it.
    ensure_group_coordinator()
    return router


def connect(address: str | None = None, data_dir: str | None = None, *, embedded: bool = True,
            **router_kwargs: Any) -> "Client":
    """Attach to a running logan-ray, or start an embedded one (Ray + router) when none runs.

    ``router_kwargs`` (``auto_create_topics``, ``num_partitions``, ``topic_defaults``)
    apply only when this call creates the router. ``embedded=False`` never starts
    anything: it attaches or raises NotRunningError.
    """
    owns_ray = init_ray(address, data_dir, embedded=embedded)
    if not embedded:
        from logan_ray.actors.router import ROUTER_NAME

        try:
            return Client(ray.get_actor(ROUTER_NAME, namespace=NAMESPACE))
        except ValueError:
            raise NotRunningError("Ray is running but logan-ray is not; start it with `logan-ray start`") from None
    try:
        router = ensure_router(data_dir, **router_kwargs)
    except BaseException:
        if owns_ray:  # e.g. the data dir is another broker's: leave no Ray behind
            ray.shutdown()
        raise
    return Client(router, owns_ray=owns_ray)


class Client:
    """Admin calls plus factories for producers and consumers."""

    def __init__(self, router, owns_ray: bool = False) -> None:
        self.router = router
        self._owns_ray = owns_ray
        self._routes: dict[str, list] = {}
        self._local = None

    # ------------------------------------------------------------------ admin
    def create_topic(self, name: str, partitions: int = 1, config: dict[str, Any] | None = None, *,
                     activate: bool = True, replication_factor: int = -1) -> dict[str, Any]:
        """Create a topic. ``activate`` (the default for the Python API, whose callers use the
        partitions at once): return once its partition actors run, so the first produce or
        fetch does not wait for them; with False (as Kafka's CreateTopics and `logan-ray topic
        create` do) only the metadata and folders are written and partitions start on first use.
        ``replication_factor``: replicas on distinct Ray nodes (-1: the broker's
        ``default.replication.factor``); more than the alive nodes raises InvalidReplicationFactorError."""
        info = get(self.router.create_topic.remote(name, partitions, config, replication_factor))
        if activate:
            self.partitions(name, activate=True)
        return info

    def delete_topic(self, name: str) -> None:
        try:
            get(self.router.delete_topic.remote(name))
        finally:  # also when the call failed: the topic may be gone anyway
            self._routes.pop(name, None)

    def describe_topic(self, name: str) -> dict[str, Any]:
        return get(self.router.describe_topic.remote(name))

    def topic_config(self, name: str) -> dict[str, str]:
        return {k: v for k, v, _ in get(self.router.topic_config.remote(name))}

    def alter_topic(self, name: str, config: dict[str, Any], incremental: bool = True) -> dict[str, str]:
        return get(self.router.alter_config.remote(name, config, incremental))

    def add_partitions(self, name: str, total: int) -> dict[str, Any]:
        self._routes.pop(name, None)
        return get(self.router.create_partitions.remote(name, total))

    def list_topics(self, internal: bool = False) -> list[str]:
        """Topic names; internal ones (``__consumer_offsets``) only with ``internal=True``, as Kafka's
        AdminClient lists them only when asked."""
        names = get(self.router.list_topics.remote())
        return names if internal else [n for n in names if not is_internal(n)]

    def partition_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """{partition: (log start offset, log end offset)}."""
        return get(self.router.offsets.remote(topic))

    def delete_records(self, topic: str, offsets: dict[int, int]) -> dict[int, int]:
        """Kafka DeleteRecords: move each partition's log start to the given offset."""
        return {p: get(self.partition_actor(topic, p).delete_records.remote(o)) for p, o in offsets.items()}

    def status(self) -> list[dict[str, Any]]:
        return get(self.router.status.remote())

    def reopen_partition(self, topic: str, partition: int) -> tuple[int, int]:
        """The operator's recovery of a partition a disk error took offline (KAFKA_STORAGE_ERROR): its log
        is closed and opened again from what the disk holds, in a new leader epoch. Returns its
        (log start, log end) offsets."""
        return tuple(get(self.partition_actor(topic, partition).reopen.remote()))

    def compact(self, topic: str, roll: bool = True) -> list[dict[str, Any]]:
        """Compact a topic now (its cleanup.policy must contain ``compact``); one summary per partition.

        The node's cleaner actor rewrites the closed segments while the partition keeps serving.
        ``roll`` first closes each active segment, which is never cleaned, so that every record
        produced so far is covered.
        """
        return get(self.router.compact.remote(topic, roll))

    def reassign_partitions(self, reassignments: dict[tuple[str, int], list[int | str] | None],
                            allow_replication_factor_change: bool = True) -> None:
        """Kafka's AlterPartitionReassignments: move each (topic, partition) to its target replicas (broker ids
        or Ray node ids, the first the preferred leader), or cancel its ongoing reassignment (None).

        Returns once every target is saved; the data moves afterwards (follow it with
        :meth:`list_reassignments`): the replicas being added fetch from the leader, and once all are in
        sync the target becomes the replica set (docs/replication.md). Raises the typed error of the
        first partition refused (``InvalidReplicaAssignmentError``, ``NoReassignmentInProgressError``,
        ``UnknownPartitionError``, ...); the others were still carried out.
        """
        from .errors import (InvalidReplicaAssignmentError, InvalidReplicationFactorError, LoganError,
                             NoReassignmentInProgressError, UnknownPartitionError)

        asked = [(t, p, None if r is None else list(r)) for (t, p), r in reassignments.items()]
        results = get(self.router.alter_partition_reassignments.remote(asked, allow_replication_factor_change))
        for (topic, p), (code, message) in sorted(results.items()):
            if code:
                cls = {3: UnknownPartitionError, 38: InvalidReplicationFactorError, 39: InvalidReplicaAssignmentError,
                       85: NoReassignmentInProgressError}.get(code, LoganError)
                err = cls(f"{topic}-{p}: {message}")
                err.code = code
                raise err

    def list_reassignments(self, partitions: Iterable[tuple[str, int]] | None = None
                           ) -> dict[tuple[str, int], dict[str, list[str]]]:
        """Kafka's ListPartitionReassignments: {(topic, partition): {"replicas", "adding", "removing"}} (Ray node
        ids) of the reassignments under way, among ``partitions`` (all when None)."""
        return get(self.router.list_partition_reassignments.remote(None if partitions is None else list(partitions)))

    def rebalance_replicas(self, dry_run: bool = False) -> dict[tuple[str, int], dict[str, Any]]:
        """Spread the replicas of replicated topics evenly over the alive nodes (e.g. after a node joined) by
        reassignments: {(topic, partition): {"from", "to", "error_code", "error_message"}} of those moved."""
        return get(self.router.rebalance_replicas.remote(dry_run))

    # ---------------------------------------------------------------- routing
    def partitions(self, topic: str, auto_create: bool = False, refresh: bool = False,
                   activate: bool = False) -> list:
        """[(actor handle, node id)] per partition, cached until ``refresh``.

        Starts nothing by default (a process per partition only while it is in use): the handle of
        an inactive partition is None, as is an offline one's (its node id is then the node it
        waits for). ``partition_actor`` starts one partition; ``activate=True`` starts them all.
        """
        if refresh or activate or topic not in self._routes:
            routes = get(self.router.route.remote([topic], auto_create, activate))
            if routes[topic] is None:
                raise UnknownTopicError(f"topic {topic!r} does not exist")
            self._routes[topic] = routes[topic]
        return self._routes[topic]

    @property
    def routes(self) -> dict[str, list]:
        """The cached route list of each topic (read only): a refresh replaces a topic's list, so a
        producer that keeps the list it computed from sees by identity when to look again."""
        return self._routes

    def partition_actor(self, topic: str, partition: int):
        """The Ray actor handle of one partition, for apps that call it directly."""
        return self.partition_route(topic, partition)[0]

    def partition_route(self, topic: str, partition: int) -> tuple[Any, str]:
        """(actor handle, node id) of one partition; raises when it is unknown or offline."""
        from .errors import UnknownPartitionError

        parts = self.partitions(topic)
        if not 0 <= partition < len(parts) or parts[partition][0] is None:
            parts = self.partitions(topic, refresh=True)
            if not 0 <= partition < len(parts):
                raise UnknownPartitionError(f"topic {topic!r} has no partition {partition} (it has {len(parts)})")
        if parts[partition][0] is None:  # inactive (or offline: the router's LeaderNotAvailableError names its node)
            handle = get(self.router.activate.remote(topic, partition))
            parts[partition] = (handle, parts[partition][1])
        return parts[partition][0], parts[partition][1]

    def call(self, topic: str, partition: int, method: str, *args: Any, timeout: float | None = None) -> Any:
        """A read-only call to a partition's actor by Ray, looking the actor up again when it is gone
        (hibernated, or replaced): what ``Consumer`` and the admin calls use for offsets and lookups."""
        for attempt in range(3):
            handle, _node = self.partition_route(topic, partition)
            try:
                return get(getattr(handle, method).remote(*args), timeout)
            except (PartitionHibernatedError, NotRunningError):
                if attempt == 2:
                    raise
                self.reroute(topic, partition, handle)

    def reroute(self, topic: str, partition: int, stale: Any) -> tuple[Any, str, bool]:
        """After a call to ``stale`` (this partition's actor) failed: (the current actor, its node, whether
        ``stale`` ended by hibernating, so the failed call did nothing and may be repeated as it is).

        The Python client's one way back to a partition whose actor is gone: the router names
        (and if needed starts) the current one, as the gateway's ``Partition.call`` does.
        """
        handle, hibernated = get(self.router.reactivate.remote(topic, partition, stale._actor_id.hex()))
        parts = self._routes.get(topic)
        if parts is not None and 0 <= partition < len(parts) and parts[partition][0] is stale:
            parts[partition] = (handle, parts[partition][1])
        node = parts[partition][1] if parts is not None and 0 <= partition < len(parts) else None
        return handle, node, hibernated

    @property
    def local_path(self):
        """This process's channels to partitions on its node (see ``logan_ray.local_path``)."""
        if self._local is None:
            from .local_path import LocalPath

            self._local = LocalPath()
        return self._local

    # -------------------------------------------------------------- factories
    def producer(self, *, transactional_id: str | None = None, **kwargs: Any):
        """A Producer; with ``transactional_id="..."`` a TransactionalProducer (Kafka's transactions:
        ``begin_transaction``, ``commit_transaction``, ``abort_transaction``,
        ``send_offsets_to_transaction``; see logan_ray.txn_producer)."""
        if transactional_id is not None:
            from .txn_producer import TransactionalProducer

            return TransactionalProducer(self, transactional_id, **kwargs)
        from .producer import Producer

        return Producer(self, **kwargs)

    def consumer(self, *topics: str, **kwargs: Any):
        """A Consumer; with ``group="..."`` a member of that consumer group, with
        ``isolation_level="read_committed"`` it returns committed transactional records only
        (see logan_ray.consumer)."""
        from .consumer import Consumer

        return Consumer(self, *topics, **kwargs)

    @property
    def groups(self):
        """Consumer-group admin: ``list()``, ``describe(g)``, ``delete(g)``, ``reset_offsets(g, topic, to=...)``."""
        from .group_admin import GroupAdmin

        return GroupAdmin(self)

    # -------------------------------------------------------------- lifecycle
    def close(self) -> None:
        """Embedded mode: flush and close every partition, then stop Ray. Attached: just detach."""
        if self._local is not None:
            self._local.close()
            self._local = None
        if self._owns_ray and ray.is_initialized():
            try:
                get(self.router.shutdown.remote(), timeout=60)
                ray.kill(self.router, no_restart=True)
            finally:
                ray.shutdown()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Iterable[Any]) -> None:
        self.close()
