"""Committed offsets of a group: OffsetCommit, OffsetFetch and OffsetDelete.

A commit is checked against the membership (generation, member id, static
instance, rebalance state) as Kafka's classic coordinator does, so this layer
sits on the rebalance protocol; accepted entries go back to the host, which
appends them to ``__consumer_offsets`` (:mod:`.offsets_log`) before applying them.
"""
from __future__ import annotations

from typing import Iterable

from logan_ray.protocol import errors as E

from . import offsets_log
from .group import COMPLETING, DEAD, EMPTY
from .offsets_log import OffsetEntry
from .rebalance import Rebalance


class OffsetCommits(Rebalance):
    """Validate, apply, fetch and delete committed offsets."""

    def validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                        partitions: Iterable[tuple[str, int, int, int, str | None]],
                        unknown: set[tuple[str, int]] = frozenset(),
                        transactional: bool = False) -> tuple[dict[tuple[str, int], int], list]:
        """Check an OffsetCommit; returns ({(topic, partition): error}, accepted entries to write).

        ``transactional``: a TxnOffsetCommit. Its versions 0-2 carry no member id or
        generation (aiokafka still sends v0), so, as Kafka's ClassicGroup.validateOffsetCommit,
        one without them is accepted even while the group has members, and a member's is not
        refused during a rebalance's completing phase (the transaction's marker applies it later).

        Entries are ``(topic, partition, OffsetEntry)``; the host appends them to the log
        and then calls :meth:`apply_commit`, so an acknowledged commit is durable.
        """
        parts = list(partitions)
        errors: dict[tuple[str, int], int] = {}

        def all_fail(code: int) -> tuple[dict[tuple[str, int], int], list]:
            return {(t, p): code for t, p, *_ in parts}, []

        g = self.groups.get(group_id)
        if g is None:
            if generation >= 0:
                return all_fail(E.ILLEGAL_GENERATION)
            g = self._group(group_id)  # a group that only stores offsets (no group management)
        if g.state == DEAD:
            return all_fail(E.COORDINATOR_NOT_AVAILABLE)
        if generation >= 0 or member_id or instance_id is not None:
            if g.is_static_fenced(member_id, instance_id):
                return all_fail(E.FENCED_INSTANCE_ID)
            if member_id not in g.members:
                return all_fail(E.UNKNOWN_MEMBER_ID)
            if generation != g.generation:
                return all_fail(E.ILLEGAL_GENERATION)
            if g.state == COMPLETING and not transactional:
                return all_fail(E.REBALANCE_IN_PROGRESS)
            self._schedule_heartbeat(g, g.members[member_id])
        elif g.state != EMPTY and not transactional:
            return all_fail(E.UNKNOWN_MEMBER_ID)  # only members may commit to a group with members
        now = self.wall_clock()
        accepted = []
        for topic, partition, offset, epoch, metadata in parts:
            if (topic, partition) in unknown:
                errors[(topic, partition)] = E.UNKNOWN_TOPIC_OR_PARTITION
            elif metadata is not None and len(metadata.encode()) > self.config.max_metadata_bytes:
                errors[(topic, partition)] = E.OFFSET_METADATA_TOO_LARGE
            else:
                errors[(topic, partition)] = E.NONE
                accepted.append((topic, partition, OffsetEntry(offset, epoch, metadata, now)))
        return errors, accepted

    def apply_commit(self, group_id: str, entries: Iterable[tuple[str, int, OffsetEntry]]) -> None:
        g = self._group(group_id)
        for topic, partition, entry in entries:
            g.offsets[(topic, partition)] = entry

    def fetch_offsets(self, group_id: str, topics: list[tuple[str, list[int]]] | None
                      ) -> dict[str, list[tuple[int, OffsetEntry | None]]]:
        """{topic: [(partition, entry or None)]}; ``topics=None`` means every committed offset."""
        g = self.groups.get(group_id)
        offsets = g.offsets if g is not None else {}
        if topics is None:
            out: dict[str, list[tuple[int, OffsetEntry | None]]] = {}
            for (t, p), e in sorted(offsets.items()):
                out.setdefault(t, []).append((p, e))
            return out
        return {t: [(p, offsets.get((t, p))) for p in parts] for t, parts in topics}

    def delete_offsets(self, group_id: str, partitions: Iterable[tuple[str, int]]
                       ) -> tuple[int, dict[tuple[str, int], int], list[tuple[str, bytes, None]]]:
        """OffsetDelete: (top-level error, {(topic, partition): error}, tombstones)."""
        parts = list(partitions)
        g = self.groups.get(group_id)
        if g is None or g.state == DEAD:
            return E.GROUP_ID_NOT_FOUND, {}, []
        if g.state == EMPTY:
            subscribed: set[str] | None = set()
        elif g.protocol_type == "consumer":
            subscribed = g.subscribed_topics()
        else:
            return E.NON_EMPTY_GROUP, {}, []
        errors: dict[tuple[str, int], int] = {}
        tombstones = []
        for t, p in parts:
            if subscribed is None or t in subscribed:
                errors[(t, p)] = E.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            errors[(t, p)] = E.NONE
            if g.offsets.pop((t, p), None) is not None:
                tombstones.append((group_id, offsets_log.offset_key(group_id, t, p), None))
        return E.NONE, errors, tombstones
