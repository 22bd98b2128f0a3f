"""Topic administration: create, delete (recorded first, then carried out on each node),
add partitions, alter configs.

A mixin of RouterActor; the metadata it changes is saved before it answers.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from logan_ray.common.errors import (
    InvalidPartitionsError,
    TopicExistsError,
    UnknownTopicError,
)
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.partition_dir import claim, delete_partition_dir

from . import replica_placement
from .names import NAMESPACE, actor_name
from .topic_names import refuse_internal, validate_topic_name

from .router_hibernation import _name_released

log = logging.getLogger("logan_ray.router")
DELETE_TIMEOUT_S = 60.0


class TopicAdmin:
    # -------------------------------------------------------------- deletion
    async def _finish_deletions(self, name: str | None = None) -> None:
        """Carry out the recorded deletions (of ``name``, or all) whose node is up. Caller holds the lock."""
        todo = [e for e in self._meta["deleting"] if name is None or e["topic"] == name]
        if not todo:
            return
        done = await asyncio.gather(*(self._delete_partition(e) for e in todo), return_exceptions=True)
        finished = [e for e, ok in zip(todo, done) if ok is True]
        for e, ok in zip(todo, done):
            if isinstance(ok, BaseException):
                log.warning("deleting partition %s-%d failed (will retry): %s", e["topic"], e["partition"], ok)
        if finished:
            self._meta["deleting"] = [e for e in self._meta["deleting"] if e not in finished]
            self._save()

    async def _delete_partition(self, e: dict[str, Any]) -> bool:
        """Remove one deleted partition's actor and folder, on its node; False while the node is gone."""
        topic, p = e["topic"], e["partition"]
        name = actor_name(topic, p)
        self._offline.pop((topic, p), None)
        handle = self._handles.pop((topic, p), None)
        place = self._resolve_node(e)
        if place is None:
            return False
        if handle is None:
            try:
                handle = ray.get_actor(name, namespace=NAMESPACE)
            except ValueError:
                handle = None
        removed = False
        if handle is not None:
            try:
                topic_id, _node = await asyncio.wait_for(handle.identity.remote(), DELETE_TIMEOUT_S)
            except Exception:  # dead or stuck: its folder is removed below
                topic_id = e["topic_id"]
            if topic_id != e["topic_id"]:
                handle = None  # a newer topic of the same name: not ours to stop
            else:
                try:
                    await asyncio.wait_for(handle.delete.remote(), DELETE_TIMEOUT_S)
                    removed = True
                except Exception as exc:
                    log.info("partition %s-%d did not delete its folder itself (%s); removing it", topic, p, exc)
                ray.kill(handle, no_restart=True)
                await _name_released(name)
        if not removed:
            directory = os.path.join(self.data_dir, f"{topic}-{p}")
            await _remove_partition_dir.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(place["node_id"], soft=False),
            ).remote(directory, e["topic_id"])
        return True


    # ------------------------------------------------------------------ admin
    @staticmethod
    def _new_topic(partitions: int, overrides: dict[str, str]) -> dict[str, Any]:
        # A fresh random id, as Kafka assigns: a topic deleted and created again under the
        # same name is a different topic to clients that address it by id.
        return {"partitions": partitions, "config": overrides, "placement": {}, "created_ms": int(time.time() * 1000),
                "topic_id": str(uuid.uuid4())}

    async def create_topic(self, name: str, partitions: int | None = None, config: dict[str, Any] | None = None,
                           replication_factor: int = -1, validate_only: bool = False) -> dict[str, Any]:
        self._watching()
        validate_topic_name(name)
        partitions = self.num_partitions if partitions in (None, -1) else partitions
        if not isinstance(partitions, int) or partitions < 1:
            raise InvalidPartitionsError(f"number of partitions must be at least 1, got {partitions!r}")
        factor = replica_placement.resolve_factor(replication_factor, self.default_replication_factor,
                                                  len(self._refresh_nodes()))
        overrides = {k: str(v) for k, v in (config or {}).items()}
        TopicConfig.from_dict({**self.topic_defaults, **overrides})  # validate before touching anything
        async with self._lock:
            if name in self._meta["topics"]:
                raise TopicExistsError(f"topic {name!r} already exists")
            if validate_only:
                return {"name": name, "partitions": partitions, "config": overrides, "replication_factor": factor}
            await self._finish_deletions(name)  # an earlier topic of this name goes completely first
            self._refresh_nodes()
            factor = replica_placement.resolve_factor(factor, 1, len(self._alive))  # a node may have gone meanwhile
            t = self._new_topic(partitions, overrides)
            if factor > 1:
                t["replication_factor"] = factor
            self._meta["topics"][name] = t
            self._place_new(name, t, range(partitions))
            self._save()  # durable first; partitions start on first need (lazy activation)
            await self._make_folders(name, t, range(partitions))
        return self._describe(name)

    def _place_new(self, name: str, t: dict[str, Any], partitions: range) -> None:
        """Place new partitions: the leader (``_place``), then its followers on other nodes."""
        factor = replica_placement.replication_factor(t)
        load = replica_placement.replica_load(self._meta["topics"].values(), self._alive) if factor > 1 else {}
        for p in partitions:
            self._place(name, p, t)
            replica_placement.assign_replicas(self._leader(t, p), t["placement"][str(p)], factor, self._alive, load,
                                              self._draining)

    async def _make_folders(self, name: str, t: dict[str, Any], partitions: range) -> None:
        """Create the folders (with their topic id) of new partitions placed on this node; a partition
        on another node gets its folder when it first starts (its actor claims it then)."""
        here = ray.get_runtime_context().get_node_id()
        local = [p for p in partitions if t["placement"][str(p)]["node_id"] == here]

        def make() -> None:
            for p in local:
                stray = claim(self._dir(name, p), t["topic_id"])
                if stray is not None:
                    log.warning("topic %s partition %d: its folder held topic id %s; kept aside as %s", name, p,
                                *stray)
        await asyncio.to_thread(make)

    async def delete_topic(self, name: str) -> None:
        """Record the deletion durably, then remove each partition (rename to ``-delete``, then remove)
        on its node, all under the lock; a partition whose node is gone is removed when it returns."""
        refuse_internal(name, "delete")
        self._watching()
        async with self._lock:
            t = self._meta["topics"].get(name)
            if t is None:
                raise UnknownTopicError(f"topic {name!r} does not exist")
            del self._meta["topics"][name]
            self._meta["deleting"] += [{"topic": name, "partition": p, "topic_id": t["topic_id"],
                                        **t["placement"][str(p)]} for p in range(t["partitions"])]
            self._save()
            self._crash_point("deletion-recorded")
            await self._finish_deletions(name)

    async def create_partitions(self, name: str, total: int, validate_only: bool = False) -> dict[str, Any]:
        refuse_internal(name, "add partitions to")
        async with self._lock:
            t = self._topic(name)
            if not isinstance(total, int) or total <= t["partitions"]:
                raise InvalidPartitionsError(
                    f"topic {name!r} has {t['partitions']} partitions; the new count must be larger, got {total!r}")
            if not validate_only:
                self._refresh_nodes()
                old = t["partitions"]
                replica_placement.resolve_factor(replica_placement.replication_factor(t), 1, len(self._alive))
                self._place_new(name, t, range(old, total))
                t["partitions"] = total
                self._save()
                await self._make_folders(name, t, range(old, total))
        return self._describe(name)

    async def alter_config(self, name: str, changes: dict[str, Any], incremental: bool = True,
                           validate_only: bool = False) -> dict[str, str]:
        """Set (or with value None, remove) overrides; non-incremental replaces them all, as AlterConfigs does.

        Saved before the partitions hear of it: a partition that restarts meanwhile reads the new config.
        """
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
        handles = [self._handles[(name, p)] for p in range(t["partitions"]) if (name, p) in self._handles]
        await asyncio.gather(*(h.reconfigure.remote(effective.to_dict()) for h in handles), return_exceptions=True)
        if effective.compacts:
            for p in range(t["partitions"]):
                if (name, p) in self._handles:
                    self._ensure_cleaner(t["placement"][str(p)]["node_id"])
        return overrides


@ray.remote(num_cpus=0, max_retries=3)
def _remove_partition_dir(directory: str, topic_id: str) -> bool:
    """Runs on the partition's node: remove its folder if it still belongs to topic ``topic_id``."""
    return delete_partition_dir(directory, topic_id)
