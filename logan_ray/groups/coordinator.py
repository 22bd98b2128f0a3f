"""The classic group coordinator's state machine, as plain Python: every part assembled.

:class:`Coordinator` is the rebalance protocol (:mod:`.rebalance`) and committed
offsets (:mod:`.offsets`) over the shared state (:mod:`.core`), plus what an
administrator and a restart need: listing, describing and deleting groups, and
replaying ``__consumer_offsets``. ``logan_ray.actors.group_coordinator`` hosts it.
"""
from __future__ import annotations

from typing import Iterable

from logan_ray.protocol import errors as E

from . import offsets_log
from .group import DEAD, EMPTY, STABLE
from .member import Member
from .offsets import OffsetCommits
from .rebalance import _join_error, _sync_result


class Coordinator(OffsetCommits):
    """Every group of one coordinator: membership, generations, offsets."""

    # ================================================================ admin
    def list_groups(self, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[dict]:
        want_states = {s.lower() for s in states}
        want_types = {t.lower() for t in types}
        if want_types and "classic" not in want_types:
            return []
        return [{"group_id": g.group_id, "protocol_type": g.protocol_type or "", "group_state": g.state,
                 "group_type": "classic"}
                for g in sorted(self.groups.values(), key=lambda g: g.group_id)
                if g.state != DEAD and (not want_states or g.state.lower() in want_states)]

    def describe_group(self, group_id: str) -> dict | None:
        """Kafka's group summary (metadata and assignments only while Stable); None if there is no group."""
        g = self.groups.get(group_id)
        if g is None or g.state == DEAD:
            return None
        stable = g.state == STABLE
        return {
            "group_id": g.group_id, "group_state": g.state, "protocol_type": g.protocol_type or "",
            "protocol_data": (g.protocol_name or "") if stable else "", "generation": g.generation,
            "leader": g.leader or "",
            "members": [{"member_id": m.member_id, "group_instance_id": m.instance_id, "client_id": m.client_id,
                         "client_host": m.client_host,
                         "member_metadata": m.metadata(g.protocol_name) if stable else b"",
                         "member_assignment": m.assignment if stable else b""} for m in g.members.values()],
        }

    def delete_groups(self, group_ids: Iterable[str]) -> tuple[dict[str, int], list[tuple[str, bytes, None]]]:
        """Remove empty groups and their offsets; returns ({group: error}, tombstones to append)."""
        results: dict[str, int] = {}
        tombstones: list[tuple[str, bytes, None]] = []
        for gid in group_ids:
            g = self.groups.get(gid)
            if g is None or g.state == DEAD:
                results[gid] = E.GROUP_ID_NOT_FOUND
            elif g.state != EMPTY:
                results[gid] = E.NON_EMPTY_GROUP
            else:
                for t, p in sorted(g.offsets):
                    tombstones.append((gid, offsets_log.offset_key(gid, t, p), None))
                tombstones.append((gid, offsets_log.group_key(gid), None))
                self._transition(g, DEAD)
                del self.groups[gid]
                results[gid] = E.NONE
        return results, tombstones

    # ============================================================== loading
    def load(self, key: bytes, value: bytes | None) -> None:
        """Apply one record of __consumer_offsets, in log order (replay on start)."""
        kind = offsets_log.decode_key(key)
        if kind is None:
            return
        if kind[0] == "offset":
            _, gid, topic, partition = kind
            if value is None:
                g = self.groups.get(gid)
                if g is not None:
                    g.offsets.pop((topic, partition), None)
            else:
                self._group(gid).offsets[(topic, partition)] = offsets_log.decode_offset(value)
            return
        _, gid = kind
        if value is None:
            self.groups.pop(gid, None)
            return
        offsets_log.load_group(self._group(gid), value, Member)

    def finish_loading(self, only: Iterable[str] | None = None) -> None:
        """After replay: loaded members must heartbeat within their session timeout.

        ``only``: the groups just replayed (one ``__consumer_offsets`` partition taken over
        while the coordinator serves the groups of others, which must not be touched)."""
        wanted = None if only is None else set(only)
        for g in self.groups.values():
            if wanted is not None and g.group_id not in wanted:
                continue
            if g.members and g.state == STABLE:
                for m in g.members.values():
                    self._schedule_heartbeat(g, m)
            elif g.state != EMPTY:
                self._transition(g, EMPTY)

    def unload(self, group_ids: Iterable[str]) -> list[str]:
        """Give groups up: their ``__consumer_offsets`` partition is led elsewhere now, and the
        coordinator there rebuilds them from the log (Kafka's ``onResignation``).

        A JoinGroup or SyncGroup waiting here is answered NOT_COORDINATOR, so its client finds
        the new coordinator at once; timers and unwritten group metadata go (what was written
        is in the log: the new coordinator replays it). Returns the groups dropped."""
        gone = []
        for gid in list(group_ids):
            g = self.groups.pop(gid, None)
            if g is None:
                continue
            for m in g.members.values():
                if m.join_cb is not None:
                    cb, m.join_cb = m.join_cb, None
                    cb(_join_error(E.NOT_COORDINATOR, m.member_id))
                if m.sync_cb is not None:
                    cb, m.sync_cb = m.sync_cb, None
                    cb(_sync_result(E.NOT_COORDINATOR))
            gone.append(gid)
        dropped = set(gone)
        self.timers.cancel_where(lambda key: isinstance(key, tuple) and len(key) > 1 and key[1] in dropped)
        self.outbox = [r for r in self.outbox if r[0] not in dropped]
        return gone

    # =============================================================== export
    def overview(self) -> list[dict]:
        """Per group: state, generation, members, offsets (for metrics and the CLI)."""
        return [{"group_id": g.group_id, "state": g.state, "generation": g.generation, "members": len(g.members),
                 "protocol_type": g.protocol_type or "", "protocol": g.protocol_name or "",
                 "rebalances": g.rebalances,
                 "offsets": {f"{t}:{p}": e.offset for (t, p), e in g.offsets.items()}}
                for g in self.groups.values()]
