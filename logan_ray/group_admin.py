"""Consumer-group administration for the Python API and ``logan-ray groups``.

What ``kafka-consumer-groups`` shows and does: list groups, describe one (members
with their assigned partitions; per partition the committed offset, the log end
offset and the lag), delete an empty group, and reset an inactive group's
offsets to the earliest, the latest or a given offset.
"""
from __future__ import annotations

from typing import Any, Iterable

from logan_ray.groups.consumer_protocol import decode_assignment
from logan_ray.protocol import errors as E

from ._ray import get
from .errors import GroupError, GroupIdNotFoundError, NonEmptyGroupError


class GroupAdmin:
    def __init__(self, client: Any) -> None:
        self._client = client

    def _coord(self, group_id: str = ""):
        from logan_ray.actors.group_coordinator import group_coordinator

        return group_coordinator(group_id)

    def list(self) -> list[dict[str, Any]]:
        """[{group_id, protocol_type, group_state, group_type}] sorted by group id, from every node's
        coordinator (each holds the groups of the __consumer_offsets partitions its node leads)."""
        from logan_ray.actors.group_coordinator import coordinator_nodes, coordinator_on

        answers = get([coordinator_on(n).list_groups.remote({}) for n in coordinator_nodes()])
        return sorted((g for a in answers for g in a["groups"]), key=lambda g: g["group_id"])

    def describe(self, group_id: str) -> dict[str, Any]:
        """State, generation, protocol, members (with decoded assignments) and per-partition lag."""
        d = get(self._coord(group_id).describe.remote(group_id))
        if d is None:
            raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
        for m in d["members"]:
            m["assignment"] = []
            if d["protocol_type"] == "consumer" and m["member_assignment"]:
                try:
                    m["assignment"] = decode_assignment(m["member_assignment"]).topic_partitions()
                except ValueError:
                    pass
        return d

    def delete(self, group_id: str) -> None:
        res = get(self._coord(group_id).delete_groups.remote({"groups_names": [group_id]}))
        code = res["results"][0]["error_code"]
        if code == E.GROUP_ID_NOT_FOUND:
            raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
        if code == E.NON_EMPTY_GROUP:
            raise NonEmptyGroupError(f"consumer group {group_id!r} still has members; stop them first")
        if code != E.NONE:
            raise GroupError(f"deleting group {group_id!r} failed: {E.ERROR_NAMES.get(code, code)}", code)

    def reset_offsets(self, group_id: str, topic: str, to: str | int = "earliest",
                      partitions: Iterable[int] | None = None, dry_run: bool = False) -> dict[int, tuple[int | None, int]]:
        """Move an inactive group's committed offsets; returns {partition: (old, new)}.

        ``to``: "earliest", "latest", or an offset (clamped into each partition's
        [log start, log end], as kafka-consumer-groups does).
        """
        offsets = self._client.partition_offsets(topic)
        parts = sorted(offsets) if partitions is None else sorted(partitions)
        target: dict[int, int] = {}
        for p in parts:
            if p not in offsets:
                raise GroupError(f"topic {topic!r} has no partition {p}", E.UNKNOWN_TOPIC_OR_PARTITION)
            start, end = offsets[p]
            if to == "earliest":
                target[p] = start
            elif to == "latest":
                target[p] = end
            else:
                target[p] = min(max(int(to), start), end)
        coord = self._coord(group_id)
        state = next((g["group_state"] for g in self.list() if g["group_id"] == group_id), None)
        if state not in (None, "Empty"):
            raise NonEmptyGroupError(f"consumer group {group_id!r} is {state}; offsets can only be reset while it "
                                     f"has no members")
        old = get(coord.offset_fetch.remote({"group_id": group_id,
                                             "topics": [{"name": topic, "partition_indexes": parts}]}, 7))
        before = {p["partition_index"]: (p["committed_offset"] if p["committed_offset"] >= 0 else None)
                  for t in old["topics"] for p in t["partitions"]}
        if not dry_run:
            body = {"group_id": group_id, "generation_id_or_member_epoch": -1, "member_id": "",
                    "group_instance_id": None,
                    "topics": [{"name": topic, "partitions": [
                        {"partition_index": p, "committed_offset": o, "committed_leader_epoch": -1,
                         "committed_metadata": ""} for p, o in target.items()]}]}
            res = get(coord.offset_commit.remote(body, 9))
            codes = {p["error_code"] for t in res["topics"] for p in t["partitions"]} - {E.NONE}
            if E.UNKNOWN_MEMBER_ID in codes:
                raise NonEmptyGroupError(f"consumer group {group_id!r} has members; offsets were not reset")
            if codes:
                raise GroupError(f"resetting offsets of {group_id!r} failed: "
                                 f"{', '.join(E.ERROR_NAMES.get(c, str(c)) for c in sorted(codes))}", min(codes))
        return {p: (before.get(p), target[p]) for p in parts}

    def delete_offsets(self, group_id: str, topic: str, partitions: Iterable[int] | None = None) -> None:
        parts = sorted(self._client.partition_offsets(topic)) if partitions is None else sorted(partitions)
        res = get(self._coord(group_id).offset_delete.remote(
            {"group_id": group_id, "topics": [{"name": topic, "partitions": [{"partition_index": p} for p in parts]}]}))
        if res["error_code"] == E.GROUP_ID_NOT_FOUND:
            raise GroupIdNotFoundError(f"consumer group {group_id!r} does not exist")
        codes = {p["error_code"] for t in res["topics"] for p in t["partitions"]} | {res["error_code"]}
        codes.discard(E.NONE)
        if codes:
            raise GroupError(f"deleting offsets of {group_id!r} failed: "
                             f"{', '.join(E.ERROR_NAMES.get(c, str(c)) for c in sorted(codes))}", min(codes))
