"""RouterActor: the cluster's topic registry and the map from partitions to actors.

One detached, named actor per logan-ray cluster. Its metadata (topics, partition
counts, config overrides, placement) is written atomically under the data dir,
so a restarted broker re-creates every partition actor on the node that holds
its files, and each partition recovers its own log from disk.
"""
from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import time
import uuid
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from logan_ray.errors import (
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    TopicExistsError,
    UnknownPartitionError,
    UnknownTopicError,
)
from logan_ray.storage.atomic import atomic_write
from logan_ray.storage.config import TopicConfig

from .partition import NAMESPACE, actor_name, partition_actor_class
from .topic_names import refuse_internal, validate_topic_name

log = logging.getLogger("logan_ray.router")

ROUTER_NAME = "router"
METADATA_FILE = "cluster-metadata.json"
PRODUCER_ID_BLOCK = 1000
#: Topics created before ids were stored got uuid5(namespace, name); kept for them so
#: clients that cached those ids keep working.
LEGACY_TOPIC_ID_NAMESPACE = uuid.UUID("6c6f6761-6e2d-7261-792d-746f70696373")


class RouterActor:
    def __init__(self, data_dir: str, *, auto_create_topics: bool = True, num_partitions: int = 1,
                 topic_defaults: dict[str, Any] | None = None, maintenance_interval_s: float = 300.0,
                 cleaner_interval_s: float = 15.0) -> None:
        self.data_dir = os.path.abspath(os.path.expanduser(data_dir))
        os.makedirs(self.data_dir, exist_ok=True)
        self.auto_create_topics = auto_create_topics
        self.num_partitions = num_partitions
        self.topic_defaults = TopicConfig.from_dict(topic_defaults or {}).to_dict()
        self.maintenance_interval_s = maintenance_interval_s
        self._path = os.path.join(self.data_dir, METADATA_FILE)
        self._meta = self._load()
        if self._assign_missing_topic_ids():
            self._save()
        self._handles: dict[tuple[str, int], Any] = {}
        self._gateways: dict[str, tuple[str, int]] = {}
        self._cleaners: dict[str, Any] = {}  # node id -> CleanerActor, started with the first compacted partition
        self.cleaner_interval_s = cleaner_interval_s
        self._lock = asyncio.Lock()
        self._producer_id_next = self._meta.get("producer_id_next", 0)
        self._producer_id_limit = self._producer_id_next
        for topic, t in self._meta["topics"].items():
            for p in range(t["partitions"]):
                self._spawn(topic, p, t)
        log.info("router up: %d topics from %s", len(self._meta["topics"]), self._path)

    # ---------------------------------------------------------------- storage
    def _load(self) -> dict[str, Any]:
        try:
            with open(self._path, "rb") as f:
                return json.loads(f.read())
        except FileNotFoundError:
            return {"version": 1, "topics": {}, "producer_id_next": 0}

    def _assign_missing_topic_ids(self) -> bool:
        missing = [n for n, t in self._meta["topics"].items() if not t.get("topic_id")]
        for name in missing:
            self._meta["topics"][name]["topic_id"] = str(uuid.uuid5(LEGACY_TOPIC_ID_NAMESPACE, name))
        return bool(missing)

    def _save(self) -> None:
        self._meta["producer_id_next"] = self._producer_id_limit
        atomic_write(self._path, json.dumps(self._meta, indent=1, sort_keys=True).encode())

    # -------------------------------------------------------------- placement
    def _choose_node(self) -> dict[str, str]:
        """Least-loaded alive node (by partitions placed), ties broken by node order."""
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        load = {n["NodeID"]: 0 for n in nodes}
        for t in self._meta["topics"].values():
            for place in t.get("placement", {}).values():
                if place.get("node_id") in load:
                    load[place["node_id"]] += 1
        best = min(nodes, key=lambda n: load[n["NodeID"]])
        return {"node_id": best["NodeID"], "node_ip": best["NodeManagerAddress"]}

    def _resolve_node(self, place: dict[str, str] | None) -> dict[str, str]:
        """The node that holds a partition's files: same id, else same address, else least loaded."""
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        if place:
            for n in nodes:
                if n["NodeID"] == place.get("node_id"):
                    return place
            for n in nodes:
                if n["NodeManagerAddress"] == place.get("node_ip"):
                    return {"node_id": n["NodeID"], "node_ip": n["NodeManagerAddress"]}
        return self._choose_node()

    def _spawn(self, topic: str, partition: int, t: dict[str, Any]):
        place = self._resolve_node(t.setdefault("placement", {}).get(str(partition)))
        t["placement"][str(partition)] = place
        config = {**self.topic_defaults, **t.get("config", {})}
        handle = partition_actor_class().options(
            name=actor_name(topic, partition), namespace=NAMESPACE, lifetime="detached", get_if_exists=True,
            scheduling_strategy=NodeAffinitySchedulingStrategy(place["node_id"], soft=False),
        ).remote(topic, partition, os.path.join(self.data_dir, f"{topic}-{partition}"), config,
                 self.maintenance_interval_s)
        self._handles[(topic, partition)] = handle
        if "compact" in str(config.get("cleanup.policy", "")):
            self._ensure_cleaner(place["node_id"])
        return handle

    # -------------------------------------------------------------- cleaners
    def _ensure_cleaner(self, node_id: str):
        """The log cleaner of a node (one per node: it reads that node's segment files)."""
        handle = self._cleaners.get(node_id)
        if handle is None:
            from .cleaner import cleaner_actor_class, cleaner_name

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
            if not TopicConfig.from_dict({**self.topic_defaults, **t.get("config", {})}).compacts:
                continue
            for p in range(t["partitions"]):
                if t["placement"][str(p)]["node_id"] == node_id and (topic, p) in self._handles:
                    out.append((topic, p, self._handles[(topic, p)]))
        return out

    async def compact(self, name: str, roll: bool = False) -> list[dict[str, Any]]:
        """Clean every partition of a compacted topic now, each by the cleaner of its node."""
        t = self._topic(name)
        effective = TopicConfig.from_dict({**self.topic_defaults, **t.get("config", {})})
        if not effective.compacts:
            raise InvalidConfigError(f"topic {name!r} has cleanup.policy={effective.cleanup_policy}; "
                                     "compaction needs 'compact' in it")
        calls = [self._ensure_cleaner(t["placement"][str(p)]["node_id"]).compact.remote(
                 name, p, self._handles[(name, p)], roll) for p in range(t["partitions"])]
        return list(await asyncio.gather(*calls))

    async def cleaners(self) -> dict[str, Any]:
        return dict(self._cleaners)

    # ------------------------------------------------------------------ admin
    async def create_topic(self, name: str, partitions: int | None = None, config: dict[str, Any] | None = None,
                           replication_factor: int = -1, validate_only: bool = False) -> dict[str, Any]:
        validate_topic_name(name)
        partitions = self.num_partitions if partitions in (None, -1) else partitions
        if not isinstance(partitions, int) or partitions < 1:
            raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions!r}")
        if replication_factor not in (-1, 1):
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} is not supported; logan-ray keeps one copy (use -1 or 1)")
        overrides = {k: str(v) for k, v in (config or {}).items()}
        TopicConfig.from_dict({**self.topic_defaults, **overrides})  # validate before touching anything
        async with self._lock:
            if name in self._meta["topics"]:
                raise TopicExistsError(f"topic {name!r} already exists")
            if validate_only:
                return {"name": name, "partitions": partitions, "config": overrides}
            # A fresh random id, as Kafka assigns: a topic deleted and created again under the
            # same name is a different topic to clients that address it by id.
            t = {"partitions": partitions, "config": overrides, "placement": {}, "created_ms": int(time.time() * 1000),
                 "topic_id": str(uuid.uuid4())}
            self._meta["topics"][name] = t
            for p in range(partitions):
                self._spawn(name, p, t)
            self._save()
        await asyncio.gather(*(self._handles[(name, p)].offsets.remote() for p in range(partitions)))
        return self._describe(name)

    async def delete_topic(self, name: str) -> None:
        refuse_internal(name, "delete")
        async with self._lock:
            t = self._meta["topics"].get(name)
            if t is None:
                raise UnknownTopicError(f"topic {name!r} does not exist")
            handles = [self._handles.pop((name, p)) for p in range(t["partitions"])]
            del self._meta["topics"][name]
            self._save()
        await asyncio.gather(*(h.delete.remote() for h in handles), return_exceptions=True)
        for p, h in enumerate(handles):
            ray.kill(h, no_restart=True)
            shutil.rmtree(os.path.join(self.data_dir, f"{name}-{p}"), ignore_errors=True)

    async def create_partitions(self, name: str, total: int, validate_only: bool = False) -> dict[str, Any]:
        refuse_internal(name, "add partitions to")
        async with self._lock:
            t = self._topic(name)
            if not isinstance(total, int) or total <= t["partitions"]:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {t['partitions']} partitions; the new count must be larger, got {total!r}")
            if not validate_only:
                for p in range(t["partitions"], total):
                    self._spawn(name, p, t)
                t["partitions"] = total
                self._save()
        return self._describe(name)

    async def alter_config(self, name: str, changes: dict[str, Any], incremental: bool = True,
                           validate_only: bool = False) -> dict[str, str]:
        """Set (or with value None, remove) overrides; non-incremental replaces them all, as AlterConfigs does."""
        refuse_internal(name, "alter the configs of")
        async with self._lock:
            t = self._topic(name)
            overrides = dict(t.get("config", {})) if incremental else {}
            for k, v in changes.items():
                if v is None:
                    overrides.pop(k, None)
                else:
                    overrides[k] = str(v)
            effective = TopicConfig.from_dict({**self.topic_defaults, **overrides})
            if validate_only:
                return overrides
            t["config"] = overrides
            self._save()
        await asyncio.gather(*(self._handles[(name, p)].reconfigure.remote(effective.to_dict())
                               for p in range(t["partitions"])))
        if effective.compacts:
            for p in range(t["partitions"]):
                self._ensure_cleaner(t["placement"][str(p)]["node_id"])
        return overrides

    # ---------------------------------------------------------------- lookups
    def _topic(self, name: str) -> dict[str, Any]:
        t = self._meta["topics"].get(name)
        if t is None:
            raise UnknownTopicError(f"topic {name!r} does not exist")
        return t

    def _describe(self, name: str) -> dict[str, Any]:
        t = self._topic(name)
        return {
            "name": name,
            "topic_id": t["topic_id"],
            "partitions": [
                {"partition": p, "node_id": t["placement"][str(p)]["node_id"],
                 "node_ip": t["placement"][str(p)]["node_ip"], "actor": actor_name(name, p)}
                for p in range(t["partitions"])
            ],
            "config": dict(t.get("config", {})),
        }

    async def describe_topic(self, name: str) -> dict[str, Any]:
        return self._describe(name)

    async def topic_config(self, name: str) -> list[tuple[str, str, bool]]:
        """(name, value, is_default) for every config key, as DescribeConfigs reports it."""
        t = self._topic(name)
        merged = {**self.topic_defaults, **t.get("config", {})}
        cfg = TopicConfig.from_dict(merged)
        return [(k, v, k not in t.get("config", {})) for k, v in cfg.to_dict().items()]

    async def list_topics(self) -> list[str]:
        return sorted(self._meta["topics"])

    async def route(self, topics: list[str] | None = None, auto_create: bool = False) -> dict[str, Any]:
        """Partition handles and nodes for ``topics`` (all when None); auto-creates when allowed.

        Unknown topics map to None so one call answers a whole Metadata request.
        """
        routes = await self.route_with_ids(topics, auto_create)
        return {name: (r["partitions"] if r is not None else None) for name, r in routes.items()}

    async def topic_ids(self) -> dict[str, str]:
        """{topic name: topic id} of every topic."""
        return {name: t["topic_id"] for name, t in self._meta["topics"].items()}

    async def route_with_ids(self, topics: list[str] | None = None, auto_create: bool = False) -> dict[str, Any]:
        """Like ``route``, each topic as {"topic_id", "partitions"} (what a Kafka gateway needs)."""
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
            out[name] = {"topic_id": t["topic_id"],
                         "partitions": [(self._handles[(name, p)], t["placement"][str(p)]["node_id"])
                                        for p in range(t["partitions"])]}
        return out

    async def partition(self, topic: str, partition: int, auto_create: bool = False):
        routes = await self.route([topic], auto_create=auto_create)
        parts = routes[topic]
        if parts is None:
            raise UnknownTopicError(f"topic {topic!r} does not exist")
        if not 0 <= partition < len(parts):
            raise UnknownPartitionError(f"topic {topic!r} has no partition {partition} (it has {len(parts)})")
        return parts[partition][0]

    async def offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        t = self._topic(topic)
        res = await asyncio.gather(*(self._handles[(topic, p)].offsets.remote() for p in range(t["partitions"])))
        return {p: tuple(r) for p, r in enumerate(res)}

    async def status(self) -> list[dict[str, Any]]:
        rows = []
        for topic, t in sorted(self._meta["topics"].items()):
            stats = await asyncio.gather(*(self._handles[(topic, p)].stats.remote() for p in range(t["partitions"])))
            rows.extend(stats)
        return rows

    # --------------------------------------------------------------- gateways
    async def register_gateway(self, node_id: str, host: str, port: int) -> None:
        self._gateways[node_id] = (host, port)

    async def unregister_gateway(self, node_id: str) -> None:
        self._gateways.pop(node_id, None)

    async def gateways(self) -> dict[str, tuple[str, int]]:
        return dict(self._gateways)

    async def settings(self) -> dict[str, Any]:
        return {"data_dir": self.data_dir, "auto_create_topics": self.auto_create_topics,
                "num_partitions": self.num_partitions}

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


def router_actor_class():
    return ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=3, max_concurrency=1000)(RouterActor)
