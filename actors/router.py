"""RouterActor: the cluster's topic registry and the map from partitions to actors.

One detached, named actor per logan-ray cluster. Its metadata (topics, partition
counts, config overrides, placement) is written atomically under the data dir and
to the GCS's key-value store (``metadata_store.py``: Redis-backed with Ray's GCS
fault tolerance, so no single disk holds it), so a restarted broker re-creates every
partition actor on the node that holds its files, and each partition recovers its
own log from disk.

A partition lives where its files are, and only there: when its node is gone the
partition is offline (LEADER_NOT_AVAILABLE, naming the node it waits for) until a
node with that id or address is back; it is never re-created empty elsewhere.
Each partition has a leader epoch in the metadata (Kafka's): 0 at creation, one more
for every new leader incarnation (a partition actor started again by Ray, re-placed
after its node came back, or reopened), saved before the actor is told it; the
actor stamps it on every batch it appends (see ``storage/leader_epochs.py``).
Topic deletion is recorded in the metadata first and then carried out on each
partition's node (rename to ``-delete``, then remove), under the router's lock,
so a crash at any step finishes the deletion later and never resurrects records.
The router holds an exclusive lock on the data dir for as long as it runs.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import os
import signal
import time
import uuid
from collections import OrderedDict
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from logan_ray.common.errors import (
    LeaderNotAvailableError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.dir_lock import DataDirLock
from logan_ray.storage.errors import InvalidConfigError
from logan_ray.storage.file_modes import close_dir
from logan_ray.storage.partition_dir import claim, sweep_deleted

from . import replica_placement
from .broker_dynamic import DynamicConfigs
from .broker_lease import (DEFAULT_BROKER_HEARTBEAT_INTERVAL_MS, DEFAULT_BROKER_SESSION_TIMEOUT_MS, BrokerSessions,
                           lease_ms)
from .metadata_store import GcsKeyValue, MetadataStore, kv_key
from .names import NAMESPACE, ROUTER_NAME, actor_name, cleaner_name
from .partition import DEFAULT_IDLE_MS, partition_actor_class
from .partition_feed import PartitionFeed
from .router_admin import TopicAdmin
from .router_hibernation import PartitionHibernation, _name_released
from .isr import DEFAULT_REPLICA_LAG_TIME_MAX_MS
from .router_leaders import LeaderControl
from .router_drain import NodeDrain
from .router_rebalance import LeaderRebalance
from .router_reassign import PartitionReassignment
from .router_watch import NodeWatch
from .topic_names import INTERNAL_TOPICS
from .security_meta import SecurityMetadata
from .warm_workers import WarmWorkers

log = logging.getLogger("logan_ray.router")

METADATA_FILE = "cluster-metadata.json"
PRODUCER_ID_BLOCK = 1000
LOCK_WAIT_S = 5.0  # a router restarted after SIGKILL waits this long for its predecessor's lock to drop
ADOPT_CHECK_S = 10.0  # a restarted router waits this long to learn which running actors had hibernated
#: Topics created before ids were stored got uuid5(namespace, name); kept for them so
#: clients that cached those ids keep working.
LEGACY_TOPIC_ID_NAMESPACE = uuid.UUID("6c6f6761-6e2d-7261-792d-746f70696373")
#: how long an activation waits for a partition actor that Ray restarts while it starts
RESTARTING_WAIT_S = 60.0
STATUS_STOP_WAIT_S = 5.0  # status waits this long for hibernations under way to end (see status)


async def _identity(handle: Any) -> tuple[str, str]:
    """The started actor's (topic id, node id). A process that died while starting (a crash in
    its constructor) is restarted by Ray, and a call sent meanwhile may be refused with "the actor
    is restarting" instead of waiting for it (max_task_retries=0): ask again until it answers."""
    deadline = time.monotonic() + RESTARTING_WAIT_S
    while True:
        try:
            return await handle.identity.remote()
        except ray.exceptions.ActorUnavailableError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


class RouterActor(TopicAdmin, LeaderControl, LeaderRebalance, NodeDrain, PartitionReassignment, PartitionHibernation, NodeWatch, SecurityMetadata, DynamicConfigs):
    def __init__(self, data_dir: str, *, auto_create_topics: bool = True, num_partitions: int = 1,
                 topic_defaults: dict[str, Any] | None = None, maintenance_interval_s: float = 300.0,
                 cleaner_interval_s: float = 15.0, partition_idle_ms: int | None = None,
                 max_active_partitions: int | None = None, default_replication_factor: int = 1,
                 replica_lag_time_max_ms: int | None = None,
                 broker_session_timeout_ms: int | None = None, broker_heartbeat_interval_ms: int | None = None,
                 auto_leader_rebalance_enable: bool | None = None,
                 leader_imbalance_check_interval_seconds: int | None = None,
                 leader_imbalance_per_broker_percentage: int | None = None,
                 producer_id_expiration_ms: int | None = None,
                 producer_id_expiration_check_interval_ms: int | None = None,
                 offsets_topic_replication_factor: int | None = None) -> None:
        self.data_dir = os.path.abspath(os.path.expanduser(data_dir))
        close_dir(self.data_dir)  # 0700: it holds every record, the SCRAM credentials and the ACLs
        self._dir_lock = DataDirLock(self.data_dir).acquire(wait_s=LOCK_WAIT_S)
        sweep_deleted(self.data_dir)
        self.auto_create_topics = auto_create_topics
        self.num_partitions = num_partitions
        self.default_replication_factor = default_replication_factor or 1
        #: Kafka's offsets.topic.replication.factor: replicas of __consumer_offsets (at most the alive nodes)
        self.offsets_topic_replication_factor = (offsets_topic_replication_factor
                                                 or replica_placement.DEFAULT_OFFSETS_TOPIC_REPLICATION_FACTOR)
        #: Kafka's replica.lag.time.max.ms: a follower not caught up this long leaves the ISR
        self.replica_lag_time_max_ms = replica_lag_time_max_ms or DEFAULT_REPLICA_LAG_TIME_MAX_MS
        #: Kafka's broker.session.timeout.ms / broker.heartbeat.interval.ms (actors/broker_lease.py)
        self.broker_session_timeout_ms = broker_session_timeout_ms or DEFAULT_BROKER_SESSION_TIMEOUT_MS
        self.broker_heartbeat_interval_ms = broker_heartbeat_interval_ms or DEFAULT_BROKER_HEARTBEAT_INTERVAL_MS
        lease_ms(self.broker_session_timeout_ms, self.broker_heartbeat_interval_ms)  # refuses a bad pair
        #: Ray restarted this router after a crash (its predecessor's actors, leases and registrations live on)
        reconstructed = ray.get_runtime_context().was_current_actor_reconstructed
        self._sessions = BrokerSessions(self.broker_session_timeout_ms, self.broker_heartbeat_interval_ms,
                                        restarted=reconstructed)
        self._init_rebalance(auto_leader_rebalance_enable, leader_imbalance_check_interval_seconds,
                             leader_imbalance_per_broker_percentage)
        self._init_drain()
        self._init_reassign()
        self.topic_defaults = TopicConfig.from_dict(topic_defaults or {}).to_dict()
        self.maintenance_interval_s = maintenance_interval_s
        self.partition_idle_ms = partition_idle_ms or DEFAULT_IDLE_MS
        self._derived_caps: dict[str, int] = {}
        self.max_active_partitions = max_active_partitions if max_active_partitions and max_active_partitions > 0 else None
        self._path = os.path.join(self.data_dir, METADATA_FILE)
        self._store = MetadataStore(self._path, kv_key(self.data_dir), GcsKeyValue())
        self._meta = self._load()
        self._init_dynamic({"producer.id.expiration.ms": producer_id_expiration_ms,
                            "producer.id.expiration.check.interval.ms": producer_id_expiration_check_interval_ms})
        self._handles: dict[tuple[str, int], Any] = {}  # active partitions only (lazy activation)
        self._activating: dict[tuple[str, int], asyncio.Future] = {}
        #: partitions whose actor is being stopped or replaced (hibernation, a leader move, an election):
        #: done once the old actor is gone and the new placement holds; activations wait for it
        self._stopping: dict[tuple[str, int], asyncio.Future] = {}
        self._hibernated_ids: OrderedDict[str, None] = OrderedDict()
        self._feed = PartitionFeed()  # starts and hibernations, for the gateways (reads of inactive partitions)
        self._offline: dict[tuple[str, int], dict[str, str]] = {}  # partition -> the node it waits for
        self._alive: dict[str, str] = {}  # node id -> address of every alive Ray node
        self._gateways: dict[str, tuple[str, int]] = {}
        self._cleaners: dict[str, Any] = {}  # node id -> CleanerActor, started with the first compacted partition
        self.cleaner_interval_s = cleaner_interval_s
        self._lock = asyncio.Lock()
        self._watch: asyncio.Task | None = None
        self._retention: asyncio.Task | None = None
        self._crash_at: str | None = None
        ctx = ray.get_runtime_context()  # partition actors run in the router's job and runtime env
        self._warm = WarmWorkers(ctx.get_job_id(), ctx.get_runtime_env_string())
        self._pending_save: asyncio.Future | None = None
        self._refresh_nodes()
        changed = self._assign_missing_topic_ids() | self._add_internal_topics() | self._ensure_broker_secret()
        self._producer_id_next = self._meta.get("producer_id_next", 0)
        self._producer_id_limit = self._producer_id_next
        for topic, t in self._meta["topics"].items():
            for p in range(t["partitions"]):
                changed |= self._place(topic, p, t)
        if changed:
            self._save()
        here = ray.get_runtime_context().get_node_id()
        for node in self._alive:
            if reconstructed:
                # the predecessor's prestarted workers wait in the raylets (kept a day): starting more
                # now would load every node while the gateways wait for this router to answer
                self._warm.assume_full(node)
            else:
                self._warm.fill(node)  # activations there take a warm process, not a cold start
        running = self._running_actor_names() if reconstructed else set()
        for topic, t in self._meta["topics"].items():
            for p in range(t["partitions"]):
                if reconstructed:
                    if actor_name(topic, p) in running:
                        self._adopt(topic, p)  # partitions that outlived the router keep running
                elif t["placement"][str(p)]["node_id"] != here or _has_data(self._dir(topic, p)):
                    self._spawn(topic, p, t)  # its retention and compaction run in its actor
        self._claim_internal_folders(here)
        if reconstructed:
            self._restore_brokers()
            self._stop_hibernated()  # a crash may have come between an actor's hibernation and its stop
            self._push_configs()  # a crash may have come between saving an alter and telling the partitions
        log.info("router up: %d topics from the %s (%s, revision %d)", len(self._meta["topics"]),
                 self._store.source, self._path, self._store.revision)

    # ---------------------------------------------------------------- storage
    def _load(self) -> dict[str, Any]:
        meta = self._store.load() or {"version": 1, "topics": {}, "producer_id_next": 0}
        meta.setdefault("deleting", [])
        return meta

    def _assign_missing_topic_ids(self) -> bool:
        missing = [n for n, t in self._meta["topics"].items() if not t.get("topic_id")]
        for name in missing:
            self._meta["topics"][name]["topic_id"] = str(uuid.uuid5(LEGACY_TOPIC_ID_NAMESPACE, name))
        return bool(missing)

    def _add_internal_topics(self) -> bool:
        """Create ``__consumer_offsets`` and ``__transaction_state`` with the broker, not when the first
        group or transactional producer asks for them: starting their partitions takes seconds of CPU
        that would otherwise stall live traffic. On several nodes they are replicated like a user topic
        (``offsets.topic.replication.factor``, at most the alive nodes): their writes are acks=all, so
        on every ISR member before answered."""
        from .group_coordinator import OFFSETS_PARTITIONS, OFFSETS_TOPIC, OFFSETS_TOPIC_CONFIG
        from .txn_coordinator import TXN_PARTITIONS, TXN_TOPIC, TXN_TOPIC_CONFIG

        added = False
        for name, count, config in ((OFFSETS_TOPIC, OFFSETS_PARTITIONS, OFFSETS_TOPIC_CONFIG),
                                    (TXN_TOPIC, TXN_PARTITIONS, TXN_TOPIC_CONFIG)):
            if name in self._meta["topics"]:
                continue
            t = self._meta["topics"][name] = self._new_topic(count, dict(config))
            factor = replica_placement.internal_topic_factor(self.offsets_topic_replication_factor, len(self._alive))
            if factor > 1:
                t["replication_factor"] = factor
                self._place_new(name, t, range(count))
            added = True
        return added

    def _claim_internal_folders(self, here: str) -> None:
        """Give this node's partitions of internal topics their folders now, as CreateTopics does for
        a user topic: the group coordinator then reads an empty ``__consumer_offsets`` partition from
        its folder instead of starting its actor, and an idle broker runs no partition process (each
        idle Ray worker costs about 0.7 % of a core: docs/benchmarks.md, idle broker)."""
        for name in sorted(INTERNAL_TOPICS & self._meta["topics"].keys()):
            t = self._meta["topics"][name]
            for p in range(t["partitions"]):
                directory = self._dir(name, p)
                if t["placement"][str(p)]["node_id"] == here and not os.path.isdir(directory):
                    claim(directory, t["topic_id"])

    def _submit_save(self) -> "concurrent.futures.Future":
        """The metadata as of now, encoded here and written on the store's thread (``MetadataStore``)."""
        self._meta["producer_id_next"] = self._producer_id_limit
        return self._store.submit(self._meta)

    def _save(self) -> None:
        self._submit_save().result()

    def _save_later(self) -> None:
        """Save soon without waiting for it (a change nobody is answered on, such as a registration)."""
        def logged(f: asyncio.Future) -> None:
            if not f.cancelled() and f.exception() is not None:
                log.warning("router: saving the metadata failed: %s", f.exception())
        asyncio.ensure_future(self._save_soon()).add_done_callback(logged)

    def _restore_brokers(self) -> None:
        """A router Ray restarted takes over its predecessor's broker registrations and gateway addresses
        (as a KRaft controller reads them from the metadata log): gateways that heartbeat under their
        epoch keep it, and Metadata and the replica fetchers know every gateway at once, not after
        each registers again (``BrokerSessions.restore``)."""
        self._sessions.restore(self._meta.get("brokers") or {})
        for node, ep in (self._meta.get("gateways") or {}).items():
            self._gateways.setdefault(node, (ep[0], int(ep[1])))
        listeners = self.__dict__.setdefault("_listener_endpoints", {})
        for node, eps in (self._meta.get("listener_endpoints") or {}).items():
            listeners.setdefault(node, {name: (ep[0], int(ep[1])) for name, ep in eps.items()})

    def _brokers_to_meta(self) -> bool:
        """Put the broker registrations into the metadata (saved with the next save); True if they changed.
        Called right after a fence, before any election acts on it, so every save that carries an election
        carries the fence too (a successor must not continue a fenced registration)."""
        registered = self._sessions.registrations()
        if self._meta.get("brokers") == registered:
            return False
        self._meta["brokers"] = registered
        return True

    def _remember_endpoint(self, key: str, node_id: str, value: Any) -> None:
        """A gateway's address(es) into the metadata, for a restarted router (``_restore_brokers``)."""
        known = self._meta.setdefault(key, {})
        if value is None:
            if known.pop(node_id, None) is not None:
                self._save_later()
        elif known.get(node_id) != value:
            known[node_id] = value
            self._save_later()

    def _save_beside_loop(self) -> asyncio.Future:
        """The save as of now, written beside the event loop (``_save_soon``'s group commit)."""
        return asyncio.wrap_future(self._submit_save())

    def _crash_point(self, step: str) -> None:
        """Test hook: die here by SIGKILL when a test asked for it (``set_crash_point``)."""
        if self._crash_at == step:
            os.kill(os.getpid(), signal.SIGKILL)

    async def set_crash_point(self, step: str | None) -> None:
        """Tests only: SIGKILL this router at ``step`` ("deletion-recorded") to prove crash safety."""
        self._crash_at = step

    # -------------------------------------------------------------- placement
    def _refresh_nodes(self) -> dict[str, str]:
        self._alive = {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive")}
        return self._alive

    def _choose_node(self, topic: dict[str, Any] | None = None) -> dict[str, str]:
        """The alive node with the fewest partitions of ``topic``, then the fewest partitions in all,
        ties broken by node order; a draining node only when every node drains.

        Each topic spreads over every node first (as Kafka spreads a topic's partitions over
        its brokers), so a node that joined late, or the head holding ``__consumer_offsets``,
        still gets its share of a new topic; the total only breaks ties.
        """
        load = {node: 0 for node in replica_placement.placeable(self._alive, self._draining)}
        mine = dict(load)
        for t in self._meta["topics"].values():
            for place in t.get("placement", {}).values():
                if place.get("node_id") in load:
                    load[place["node_id"]] += 1
                    if t is topic:
                        mine[place["node_id"]] += 1
        best = min(load, key=lambda node: (mine[node], load[node]))
        return {"node_id": best, "node_ip": self._alive[best]}

    def _resolve_node(self, place: dict[str, str]) -> dict[str, str] | None:
        """The alive node that holds a partition's files: the same node, else a node at the same
        address (the node restarted: new id, same disk); None while neither is up."""
        if place["node_id"] in self._alive:
            return place
        for node, ip in sorted(self._alive.items()):
            if ip == place.get("node_ip"):
                return {"node_id": node, "node_ip": ip}
        return None

    def _place(self, topic: str, partition: int, t: dict[str, Any]) -> bool:
        """Fix where a partition lives; True when its recorded placement changed (save it).

        A new partition goes to the node with the fewest of its topic (``_choose_node``); an existing one follows its
        files only (a restarted node at the same address), never to another machine; a replicated one never moves
        here.
        """
        placement = t.setdefault("placement", {})
        place = placement.get(str(partition))
        if place is None:
            placement[str(partition)] = self._choose_node(t)
            return True
        if replica_placement.replicated(t, partition):
            # its leader changes by election only, or by its machine's return (_adopt_returned_replicas):
            # another alive node at the gone leader's address (Ray nodes sharing a host) is not its files,
            # and starting the partition there would make a second leader in the old epoch
            return False
        resolved = self._resolve_node(place)
        if resolved is not None and resolved != place:
            placement[str(partition)] = resolved
            return True
        return False

    def _spawn(self, topic: str, partition: int, t: dict[str, Any]):
        """Start (or find) the partition's actor on its node; None (offline) while that node is gone."""
        place = self._placeable(topic, partition, t)
        if place is None:
            return None
        handle = self._register(topic, partition, t, self._new_actor(topic, partition, t, place))
        self._warm.took(place["node_id"])
        handle.identity.remote()  # starts its idle clock: a partition started without a request hibernates too
        return handle

    async def _spawn_async(self, topic: str, partition: int, t: dict[str, Any]):
        """:meth:`_spawn` with Ray's actor creation off the event loop.

        Creating a named actor is a blocking round trip to the GCS (0.25-0.6 s each
        on a loaded 2-core machine, measured with asyncio's slow-callback log); done
        on the loop, a burst of activations stalled every other router call
        (routing, gateways, metadata) for seconds.
        """
        place = self._placeable(topic, partition, t)
        if place is None:
            return None
        handle = await asyncio.to_thread(self._new_actor, topic, partition, t, place)
        self._warm.took(place["node_id"])
        return self._register(topic, partition, t, handle)

    def _placeable(self, topic: str, partition: int, t: dict[str, Any]) -> dict[str, Any] | None:
        """The partition's placement if its node is alive, else None (and the partition is marked offline)."""
        key = (topic, partition)
        place = t["placement"][str(partition)]
        if place["node_id"] not in self._alive:
            self._handles.pop(key, None)
            if key not in self._offline:
                log.warning("partition %s-%d is offline: its node %s (%s) is gone; waiting for it", topic,
                            partition, place["node_id"], place.get("node_ip"))
            self._offline[key] = place
            return None
        self._offline.pop(key, None)
        return place

    def _new_actor(self, topic: str, partition: int, t: dict[str, Any], place: dict[str, Any]):
        """Ray's call that creates (or finds) the partition's named actor on its node; touches no router state."""
        return partition_actor_class().options(
            name=actor_name(topic, partition), namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
            scheduling_strategy=NodeAffinitySchedulingStrategy(place["node_id"], soft=False),
        ).remote(topic, partition, self._dir(topic, partition), t["topic_id"], ROUTER_NAME,
                 self.maintenance_interval_s, idle_ms=self.partition_idle_ms)

    def _register(self, topic: str, partition: int, t: dict[str, Any], handle: Any):
        self._handles[(topic, partition)] = handle
        self._feed.publish(t["placement"][str(partition)]["node_id"], topic, partition, handle)
        if self._effective(t).compacts:
            self._ensure_cleaner(t["placement"][str(partition)]["node_id"])
        return handle

    def _dir(self, topic: str, partition: int) -> str:
        """The leader's folder: ``<data-dir>/<topic>-<partition>``, or the follower folder of a replica
        elected leader after a failover (``_elect``)."""
        t = self._meta["topics"].get(topic, {})
        return t.get("leaders", {}).get(str(partition), {}).get("directory") \
            or os.path.join(self.data_dir, f"{topic}-{partition}")

    @staticmethod
    def _running_actor_names() -> set[str]:
        """Names of the actors alive in the broker's namespace, in one call to the GCS: a restarted router
        looks up only those, not every partition of every topic (most are not running), while the
        gateways' leases run out (the router's restart is a write gap: docs/benchmarks.md)."""
        return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a.get("namespace") == NAMESPACE}

    def _adopt(self, topic: str, partition: int) -> None:
        """Take over a partition actor that is already running (the router was restarted)."""
        try:
            self._handles[(topic, partition)] = ray.get_actor(actor_name(topic, partition), namespace=NAMESPACE)
        except ValueError:
            pass

    def _stop_hibernated(self) -> None:
        """Stop adopted actors that had closed their log to hibernate when the previous router died."""
        adopted = list(self._handles.items())
        refs = [h.state.remote() for _k, h in adopted]
        ready = set(ray.wait(refs, num_returns=len(refs), timeout=ADOPT_CHECK_S)[0]) if refs else set()
        for (key, handle), ref in zip(adopted, refs):
            try:
                state = ray.get(ref) if ref in ready else None
            except Exception:  # dead or restarting: Ray brings it back with its log reopened
                continue
            if state == "hibernated":
                del self._handles[key]
                ray.kill(handle, no_restart=True)
                self._hibernated_ids[handle._actor_id.hex()] = None
                log.info("partition %s-%d: stopped its actor, which had hibernated", *key)

    @contextlib.contextmanager
    def _replacing(self, key: tuple[str, int]):
        """While a partition's actor is stopped and (maybe) replaced, activations of it wait.

        Between killing the old actor and recording the new placement, the partition has no
        handle and still names its old node: an activation then would start an actor there,
        at the old leader epoch (a zombie leader the next spawn would even reuse by name).
        Enter it with no ``await`` between checking ``key`` is free and entering.
        """
        assert key not in self._stopping, key
        done = self._stopping[key] = asyncio.get_running_loop().create_future()
        try:
            yield
        finally:
            del self._stopping[key]
            done.set_result(None)

    async def _stopped(self, key: tuple[str, int]) -> None:
        """Wait until no stop or replacement of the partition's actor is under way (:meth:`_replacing`)."""
        while key in self._stopping:
            await asyncio.shield(self._stopping[key])

    async def _activate(self, topic: str, partition: int):
        """The partition's actor, started on first need; concurrent first requests start it once.

        The router is the one place that activates: an inactive partition has
        durable metadata and a folder, and no process until something needs it.
        A partition that is hibernating (or whose leadership moves) is started once its old actor
        is gone and its new placement holds.
        """
        key = (topic, partition)
        await self._stopped(key)
        fut = self._activating.get(key)
        if fut is None:
            handle = self._handles.get(key)
            if handle is not None:
                return handle
            fut = self._activating[key] = asyncio.ensure_future(self._start(topic, partition))
            fut.add_done_callback(lambda _f: self._activating.pop(key, None))
        return await asyncio.shield(fut)

    async def _start(self, topic: str, partition: int):
        t = self._topic(topic)
        if self._place(topic, partition, t):  # its node restarted at the same address
            self._save()
        await self._make_room(t["placement"][str(partition)]["node_id"])
        handle = await self._spawn_async(topic, partition, t)
        if handle is None:
            self._live(topic, partition)  # raises LeaderNotAvailableError naming the node it waits for
        try:
            topic_id, _node = await _identity(handle)
        except BaseException:  # it did not start (e.g. the topic was deleted meanwhile): not active
            if self._handles.get((topic, partition)) is handle:
                del self._handles[(topic, partition)]
            raise
        if topic_id != t["topic_id"]:  # an actor of an earlier topic of this name outlived a crash
            log.warning("partition %s-%d: stopping a leftover actor of topic id %s", topic, partition, topic_id)
            ray.kill(self._handles.pop((topic, partition)), no_restart=True)
            await _name_released(actor_name(topic, partition))
            handle = await self._spawn_async(topic, partition, t)
            await _identity(handle)
        # after the answer, not before: starting a process takes CPU the activation needs
        asyncio.get_running_loop().run_in_executor(None, self._warm.fill, t["placement"][str(partition)]["node_id"])
        return handle

    async def activate(self, topic: str, partition: int):
        """The actor of ``topic``-``partition``, started if inactive (the requester waits for it)."""
        t = self._topic(topic)
        if not 0 <= partition < t["partitions"]:
            raise UnknownPartitionError(f"topic {topic!r} has no partition {partition} (it has {t['partitions']})")
        return await self._activate(topic, partition)

    async def reactivate(self, topic: str, partition: int, stale_actor_id: str | None = None) -> tuple[Any, bool]:
        """After a call to an actor failed: (the partition's actor now, whether the failed one ended by
        hibernating). A hibernated actor refused everything after its last call returned, so a call
        that failed on it did nothing and may be repeated as it is (an append too); after a crash
        the caller cannot know, as before."""
        handle = await self.activate(topic, partition)
        return handle, stale_actor_id in self._hibernated_ids

    def _is_offline(self, topic: str, partition: int) -> bool:
        if (topic, partition) in self._handles:
            return False
        return self._resolve_node(self._meta["topics"][topic]["placement"][str(partition)]) is None

    def _effective(self, t: dict[str, Any]) -> TopicConfig:
        return TopicConfig.from_dict({**self.topic_defaults, **t.get("config", {})})

    def _push_configs(self) -> None:
        for (topic, _p), handle in self._handles.items():
            handle.reconfigure.remote(self._effective(self._meta["topics"][topic]).to_dict())

    async def partition_config(self, topic: str, partition: int, topic_id: str) -> dict[str, str]:
        """The effective config a starting partition actor opens its log with (defaults + overrides)."""
        return self._effective(self._existing(topic, partition, topic_id)).to_dict()

    def _existing(self, topic: str, partition: int, topic_id: str) -> dict[str, Any]:
        t = self._meta["topics"].get(topic)
        if t is None or t["topic_id"] != topic_id or not 0 <= partition < t["partitions"]:
            raise UnknownTopicError(f"partition {topic}-{partition} of topic id {topic_id} does not exist "
                                    "(deleted, or another topic of that name)")
        return t

    # -------------------------------------------------------------- cleaners
    def _ensure_cleaner(self, node_id: str):
        """The log cleaner of a node (one per node: it reads that node's segment files)."""
        handle = self._cleaners.get(node_id)
        if handle is None:
            from .cleaner import cleaner_actor_class

            handle = cleaner_actor_class().options(
                name=cleaner_name(node_id), namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote(node_id, self.cleaner_interval_s)
            self._cleaners[node_id] = handle
        return handle

    async def cleaner_targets(self, node_id: str) -> list[tuple[str, int, Any]]:
        """(topic, partition, handle) of the compacted partitions placed on ``node_id``."""
        out = []
        for topic, t in self._meta["topics"].items():
            if not self._effective(t).compacts:
                continue
            for p in range(t["partitions"]):
                if t["placement"][str(p)]["node_id"] == node_id and (topic, p) in self._handles:
                    out.append((topic, p, self._handles[(topic, p)]))
        return out

    async def compact(self, name: str, roll: bool = False) -> list[dict[str, Any]]:
        """Clean every partition of a compacted topic now, each by the cleaner of its node."""
        t = self._topic(name)
        effective = self._effective(t)
        if not effective.compacts:
            raise InvalidConfigError(f"topic {name!r} has cleanup.policy={effective.cleanup_policy}; "
                                     "compaction needs 'compact' in it")
        calls = [self._ensure_cleaner(t["placement"][str(p)]["node_id"]).compact.remote(
                 name, p, await self._activate(name, p), roll) for p in range(t["partitions"])]
        return list(await asyncio.gather(*calls))

    async def cleaners(self) -> dict[str, Any]:
        return dict(self._cleaners)

    # ---------------------------------------------------------------- lookups
    def _topic(self, name: str) -> dict[str, Any]:
        t = self._meta["topics"].get(name)
        if t is None:
            raise UnknownTopicError(f"topic {name!r} does not exist")
        return t

    def _live(self, topic: str, partition: int):
        """The partition's actor, or LeaderNotAvailableError naming the node it waits for."""
        handle = self._handles.get((topic, partition))
        if handle is None:
            place = self._offline.get((topic, partition)) or self._meta["topics"][topic]["placement"][str(partition)]
            raise LeaderNotAvailableError(
                f"partition {topic}-{partition} is offline: its log is on node {place['node_id']} "
                f"({place.get('node_ip')}), which is gone; it is served again when that node returns",
                place["node_id"], place.get("node_ip"))
        return handle

    def _describe(self, name: str) -> dict[str, Any]:
        t = self._topic(name)
        return {
            "name": name,
            "topic_id": t["topic_id"],
            "partitions": [
                {"partition": p, "node_id": t["placement"][str(p)]["node_id"],
                 "node_ip": t["placement"][str(p)]["node_ip"], "actor": actor_name(name, p),
                 "online": not self._is_offline(name, p), "leader_epoch": self._epoch(t, p),
                 "replicas": replica_placement.replicas_of(t, p), "isr": replica_placement.isr_of(t, p)}
                for p in range(t["partitions"])
            ],
            "replication_factor": replica_placement.replication_factor(t),
            "config": dict(t.get("config", {})),
        }

    async def describe_topic(self, name: str) -> dict[str, Any]:
        return self._describe(name)

    async def topic_config(self, name: str) -> list[tuple[str, str, bool]]:
        """(name, value, is_default) for every config key, as DescribeConfigs reports it."""
        t = self._topic(name)
        cfg = self._effective(t)
        return [(k, v, k not in t.get("config", {})) for k, v in cfg.to_dict().items()]

    async def list_topics(self) -> list[str]:
        self._watching()
        return sorted(self._meta["topics"])

    async def route(self, topics: list[str] | None = None, auto_create: bool = False,
                    activate: bool = True) -> dict[str, Any]:
        """Partition handles and nodes for ``topics`` (all when None); auto-creates when allowed.

        Unknown topics map to None so one call answers a whole Metadata request. An offline
        partition's handle is None and its node is the one it waits for. ``activate``: start the
        inactive partitions of these topics (Python callers use the handles); without it an
        inactive partition's handle is None too.
        """
        routes = await self.route_with_ids(topics, auto_create)
        if activate:
            for name, r in routes.items():
                if r is None:
                    continue
                offline = set(r["offline"])
                handles = await asyncio.gather(*(self._activate(name, p) for p in range(len(r["partitions"]))
                                                 if p not in offline), return_exceptions=True)
                live = iter(handles)
                r["partitions"] = [(None, n) if p in offline else _handle_or_none(next(live), n)
                                   for p, (_h, n) in enumerate(r["partitions"])]
        return {name: (r["partitions"] if r is not None else None) for name, r in routes.items()}

    async def topic_ids(self) -> dict[str, str]:
        """{topic name: topic id} of every topic."""
        return {name: t["topic_id"] for name, t in self._meta["topics"].items()}

    async def route_with_ids(self, topics: list[str] | None = None, auto_create: bool = False) -> dict[str, Any]:
        """Like ``route`` without activating, each topic as {"topic_id", "partitions", "offline"}: what a
        Kafka gateway needs. An inactive partition's handle is None; "offline" lists the partitions
        whose node is gone (the node id given is the one they wait for)."""
        self._watching()
        names = list(self._meta["topics"]) if topics is None else topics
        out: dict[str, Any] = {}
        for name in names:
            if name not in self._meta["topics"] and auto_create and self.auto_create_topics:
                try:
                    await self.create_topic(name)
                except TopicExistsError:
                    pass
            t = self._meta["topics"].get(name)
            if t is None:
                out[name] = None
                continue
            replicated = any(replica_placement.replicated(t, p) for p in range(t["partitions"]))
            out[name] = {"topic_id": t["topic_id"],
                         "partitions": [(self._handles.get((name, p)), t["placement"][str(p)]["node_id"])
                                        for p in range(t["partitions"])],
                         "offline": [p for p in range(t["partitions"]) if self._is_offline(name, p)],
                         "leader_epochs": [self._epoch(t, p) for p in range(t["partitions"])],
                         # None when no partition has more than the leader (replication factor 1, none
                         # reassigned): routes of big topics stay as small as before
                         "replicas": [replica_placement.replicas_of(t, p) for p in range(t["partitions"])]
                         if replicated else None,
                         "isr": [replica_placement.isr_of(t, p) for p in range(t["partitions"])]
                         if replicated else None,
                         # the leaders' folders where not <data-dir>/<topic>-<p> (moved or elected leaders)
                         "directories": [self._dir(name, p) for p in range(t["partitions"])]
                         if replicated else None}
        return out

    async def partition(self, topic: str, partition: int, auto_create: bool = False):
        """The partition's actor (activated if inactive)."""
        routes = await self.route_with_ids([topic], auto_create=auto_create)
        if routes[topic] is None:
            raise UnknownTopicError(f"topic {topic!r} does not exist")
        return await self.activate(topic, partition)

    async def offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """{partition: (log start, log end)}; inactive partitions are read from their folders, not started."""
        t = self._topic(topic)
        closed = await self.closed_stats([(topic, p) for p in range(t["partitions"])
                                          if (topic, p) not in self._handles])
        rest = [p for p in range(t["partitions"]) if (topic, p) not in closed]
        handles = await asyncio.gather(*(self._activate(topic, p) for p in rest))
        res = await asyncio.gather(*(h.offsets.remote() for h in handles))
        out = {p: (st["log_start_offset"], st["log_end_offset"]) for (_t, p), st in closed.items()}
        out.update((p, tuple(r)) for p, r in zip(rest, res))
        return dict(sorted(out.items()))

    async def node_log_stats(self, node_id: str) -> list[dict[str, Any]]:
        """The partitions led on ``node_id``, for the gauges its gateway publishes
        (``logan_ray/gateway/partition_gauges.py``), each with its replica and ISR counts: an active one
        with its log start/end offset, size
        and segment count (a passive call to its actor: not traffic), an inactive one with its folder,
        which the gateway reads on its node (nothing is started). A partition whose actor does not
        answer now (starting, stopping) or that is offline is left out."""
        self._watching()
        keys = [(topic, p) for topic, t in self._meta["topics"].items() for p in range(t["partitions"])
                if t["placement"][str(p)]["node_id"] == node_id and not self._is_offline(topic, p)]
        active = [k for k in keys if k in self._handles]
        stats = await asyncio.gather(*(self._handles[k].log_gauges.remote() for k in active), return_exceptions=True)
        rows = [{"topic": k[0], "partition": k[1], "active": True, **s}
                for k, s in zip(active, stats) if isinstance(s, dict)]
        rows += [{"topic": k[0], "partition": k[1], "active": False, "directory": self._dir(*k)}
                 for k in keys if k not in self._handles and k not in self._activating and k not in self._stopping]
        topics = self._meta["topics"]  # a topic deleted during the gather above is left out
        rows = [r for r in rows if r["topic"] in topics]
        for row in rows:
            row.update(replica_placement.replication_gauges(topics[row["topic"]], row["partition"]))
        return rows

    async def status(self) -> list[dict[str, Any]]:
        """One row per partition: its log's stats (an inactive one's read from its folder), or for an
        offline one the node it waits for.

        A partition whose hibernation (or move) is under way is neither active nor inactive yet: the
        attempt may still find it busy and keep it. So the answer waits for those to end (they take
        milliseconds: a close and fsync) and, past ``STATUS_STOP_WAIT_S``, names such a partition
        active and ``stopping``, never inactive while its actor still owns its files."""
        self._watching()
        if self._stopping:
            await asyncio.wait([asyncio.shield(f) for f in list(self._stopping.values())], timeout=STATUS_STOP_WAIT_S)
        rows = []
        closed = await self.closed_stats([(topic, p) for topic, t in self._meta["topics"].items()
                                          for p in range(t["partitions"]) if (topic, p) not in self._handles])
        for topic, t in sorted(self._meta["topics"].items()):
            keys = [(topic, p) for p in range(t["partitions"])]
            active = [k for k in keys if k in self._handles]  # partitions may start or hibernate meanwhile
            stats = await asyncio.gather(*(self._handles[k].stats.remote() for k in active),
                                         return_exceptions=True)
            got = dict(zip(active, stats))
            for k in keys:
                s = got.get(k)
                place = t["placement"][str(k[1])]
                if isinstance(s, dict):
                    rows.append({**s, "active": True})
                    continue
                if k in self._stopping:
                    rows.append({"topic": topic, "partition": k[1], "node_id": place["node_id"],
                                 "node_ip": place.get("node_ip"), "active": True, "stopping": True,
                                 "log_start_offset": None, "log_end_offset": None, "size_bytes": None,
                                 "segment_count": None})
                    continue
                if isinstance(s, BaseException):  # not (yet) known to be offline: say what failed
                    rows.append({"topic": topic, "partition": k[1], "node_id": place["node_id"],
                                 "node_ip": place.get("node_ip"), "error": str(s).splitlines()[0],
                                 "log_start_offset": None, "log_end_offset": None, "size_bytes": None,
                                 "segment_count": None})
                    continue
                if not self._is_offline(*k):
                    unknown = {"log_start_offset": None, "log_end_offset": None, "size_bytes": None,
                               "segment_count": None}
                    rows.append({"topic": topic, "partition": k[1], "node_id": place["node_id"],
                                 "node_ip": place.get("node_ip"), "active": False, **closed.get(k, unknown)})
                    continue
                rows.append({"topic": topic, "partition": k[1], "node_id": place["node_id"],
                             "node_ip": place.get("node_ip"), "offline": True,
                             "waiting_for": f"node {place['node_id']} ({place.get('node_ip')})",
                             "log_start_offset": None, "log_end_offset": None, "size_bytes": None,
                             "segment_count": None})
        return rows

    # --------------------------------------------------------------- gateways
    async def register_gateway(self, node_id: str, host: str, port: int) -> None:
        self._watching()
        self._rebalancing()  # leaders move only with gateways: followers fetch through them
        self._gateways[node_id] = (host, port)
        self._remember_endpoint("gateways", node_id, [host, port])

    async def unregister_gateway(self, node_id: str) -> None:
        """A gateway stopped on purpose: its node's broker session ends without fencing the node."""
        self._gateways.pop(node_id, None)
        self._sessions.forget(node_id)
        self._remember_endpoint("gateways", node_id, None)
        if self._brokers_to_meta():
            self._save_later()

    async def registered_gateway(self, node_id: str) -> tuple[str, int] | None:
        """A node's gateway endpoint as it registered, fenced or not: the port a restarted gateway
        that picked a free one takes again, since clients know it."""
        return self._gateways.get(node_id)

    async def gateways(self) -> dict[str, tuple[str, int]]:
        """The gateways of alive nodes (a node that died took its gateway with it), fenced ones included.

        KRaft leaves a fenced broker out of Metadata; here a fenced node whose node Ray still counts
        alive stays in (it leads nothing: its partitions were given new leaders, so no client is sent
        to it). Each gateway caches this list for ``GATEWAYS_TTL_S``, so a broker left out and taken in
        again is missing from one gateway's answer while another's lists it, and librdkafka (2.x)
        decommissions a broker missing from any Metadata answer, dropping the requests it had in
        flight there: a consumer whose subscription metadata was among them waited for the next
        ``topic.metadata.refresh.interval.ms`` (5 minutes) before joining its group
        (tests/gateway/test_gw_failover_faults.py, (a)). As ``listener_gateways`` already does."""
        self._watching()
        return {node: ep for node, ep in self._gateways.items() if node in self._alive}

    async def settings(self) -> dict[str, Any]:
        return {"data_dir": self.data_dir, "auto_create_topics": self.auto_create_topics,
                "num_partitions": self.num_partitions, "default_replication_factor": self.default_replication_factor,
                "replica_lag_time_max_ms": self.replica_lag_time_max_ms,
                "offsets_topic_replication_factor": self.offsets_topic_replication_factor,
                "broker_session_timeout_ms": self.broker_session_timeout_ms,
                "broker_heartbeat_interval_ms": self.broker_heartbeat_interval_ms,
                "auto_leader_rebalance_enable": self.auto_leader_rebalance_enable,
                "leader_imbalance_check_interval_seconds": self.leader_imbalance_check_interval_s,
                "leader_imbalance_per_broker_percentage": self.leader_imbalance_per_broker_percentage}

    # -------------------------------------------------------------- producers
    async def allocate_producer_id(self) -> int:
        """Unique producer ids across restarts: blocks of ids are reserved durably before use."""
        async with self._lock:
            if self._producer_id_next >= self._producer_id_limit:
                self._producer_id_limit = self._producer_id_next + PRODUCER_ID_BLOCK
                self._save()
            pid = self._producer_id_next
            self._producer_id_next += 1
            return pid

    # --------------------------------------------------------------- shutdown
    async def shutdown(self) -> None:
        """Flush and close every partition (clean-shutdown marker), then stop their actors."""
        cleaners = list(self._cleaners.values())
        await asyncio.gather(*(c.stop.remote() for c in cleaners), return_exceptions=True)
        for c in cleaners:
            ray.kill(c, no_restart=True)
        self._cleaners.clear()
        handles = list(self._handles.values())
        await asyncio.gather(*(h.close.remote() for h in handles), return_exceptions=True)
        for h in handles:
            ray.kill(h, no_restart=True)
        self._handles.clear()
        for task in (self._watch, self._retention, self._rebalance_task, self._reassign_task):
            if task is not None:
                task.cancel()
        self._dir_lock.release()  # the next broker on this data dir may start now


def _has_data(directory: str) -> bool:
    """True when a partition folder holds a non-empty segment (it has records to keep or expire)."""
    try:
        with os.scandir(directory) as entries:
            return any(e.name.endswith(".log") and e.stat().st_size > 0 for e in entries)
    except FileNotFoundError:
        return False


def _handle_or_none(result: Any, node_id: str) -> tuple[Any, str]:
    return (None, node_id) if isinstance(result, BaseException) else (result, node_id)


def router_actor_class():
    return ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=3, max_concurrency=1000)(RouterActor)
