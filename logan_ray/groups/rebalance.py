"""Membership and the rebalance protocol of classic groups, as Kafka's classic GroupCoordinator runs them:

- states Empty -> PreparingRebalance -> CompletingRebalance -> Stable (and back);
- JoinGroup parks the request until every known member has rejoined (or the
  rebalance timeout expires, dropping the stragglers); a new group waits
  ``initial_rebalance_delay_ms`` (extended while members keep arriving, bounded by
  the rebalance timeout) so a group starting together rebalances once;
- JoinGroup v4+ without a member id gets MEMBER_ID_REQUIRED and a fresh id (the
  two-step join), the pending id expiring after the session timeout;
- the leader receives every member's metadata for the selected protocol (the one
  all members support that most members prefer), computes the assignment and
  sends it in SyncGroup; the coordinator hands each member its bytes;
- heartbeats keep a member alive for ``session_timeout_ms``; missing them removes
  the member and rebalances; a member that got its JoinGroup answer but never
  syncs within the rebalance timeout is removed too;
- generation and member id fence stale members (ILLEGAL_GENERATION,
  UNKNOWN_MEMBER_ID); static members (``group.instance.id``) keep their place
  across restarts, and an old instance is told FENCED_INSTANCE_ID.

Waiting requests are answered through ``respond`` callbacks; timers live in a
small heap that the host drives with :meth:`~.core.CoordinatorCore.tick`.
"""
from __future__ import annotations

import uuid

from logan_ray.protocol import errors as E

from .core import CoordinatorCore
from .group import COMPLETING, DEAD, EMPTY, PREPARING, STABLE, Group
from .member import Member, Respond


def _join_error(code: int, member_id: str = "") -> dict:
    return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None, "leader": "",
            "skip_assignment": False, "member_id": member_id, "members": []}


def _sync_result(code: int, assignment: bytes = b"", group: Group | None = None) -> dict:
    return {"error_code": code, "protocol_type": group.protocol_type if group else None,
            "protocol_name": group.protocol_name if group else None, "assignment": assignment}


class Rebalance(CoordinatorCore):
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup over the coordinator's groups."""

    # ============================================================ sessions
    def _schedule_heartbeat(self, g: Group, m: Member, timeout_ms: float | None = None) -> None:
        m.last_heartbeat = self.clock()
        timeout = m.session_timeout_ms if timeout_ms is None else timeout_ms
        gid, mid = g.group_id, m.member_id
        self.timers.schedule(("hb", gid, mid), m.last_heartbeat + timeout, lambda now: self._expire_member(gid, mid, now))

    def _keep_alive(self, m: Member, now: float) -> bool:
        if m.join_cb is not None:
            return not m.is_new or m.last_heartbeat + self.config.new_member_join_timeout_ms > now
        return m.sync_cb is not None or m.last_heartbeat + m.session_timeout_ms > now

    def _expire_member(self, group_id: str, member_id: str, now: float) -> None:
        g = self.groups.get(group_id)
        if g is None or member_id not in g.members:
            return
        m = g.members[member_id]
        if not self._keep_alive(m, now):
            self._remove_member_and_update(g, m)

    def _expire_pending(self, group_id: str, member_id: str, now: float) -> None:
        g = self.groups.get(group_id)
        if g is not None and member_id in g.pending_members:
            g.pending_members.discard(member_id)
            if g.state == PREPARING:
                self._try_complete_join(g)

    # ============================================================ JoinGroup
    def join_group(self, req: dict, respond: Respond, *, version: int = 9, client_id: str = "",
                   client_host: str = "") -> None:
        """Answer now (errors, MEMBER_ID_REQUIRED, current generation) or when the rebalance completes."""
        gid = req["group_id"]
        mid = req.get("member_id") or ""
        iid = req.get("group_instance_id")
        session = int(req["session_timeout_ms"])
        rebalance = int(req.get("rebalance_timeout_ms", -1))
        if rebalance <= 0:
            rebalance = session  # JoinGroup v0 has no rebalance timeout
        ptype = req["protocol_type"]
        protocols = [(p["name"], bytes(p["metadata"])) for p in req["protocols"]]

        def reply(resp: dict) -> None:
            respond(self._versioned_join(resp, version))

        if not gid:
            return reply(_join_error(E.INVALID_GROUP_ID, mid))
        if not self.config.min_session_timeout_ms <= session <= self.config.max_session_timeout_ms:
            return reply(_join_error(E.INVALID_SESSION_TIMEOUT, mid))
        g = self.groups.get(gid)
        if g is None:
            if mid:
                return reply(_join_error(E.UNKNOWN_MEMBER_ID, mid))
            g = self._group(gid)
            fresh = True
        else:
            fresh = False
        if not mid and len(g.members) >= self.config.max_group_size:
            return reply(_join_error(E.GROUP_MAX_SIZE_REACHED, ""))
        args = (g, iid, client_id, client_host, rebalance, session, ptype, protocols, reply, version)
        if not mid:
            self._join_unknown(*args, require_known=version >= 4)
        else:
            self._join_known(mid, *args)
        if fresh and not g.members and not g.offsets and not g.pending_members:
            del self.groups[gid]  # the first join failed: no trace of a group
        elif g.state == PREPARING:
            self._try_complete_join(g)

    @staticmethod
    def _versioned_join(resp: dict, version: int) -> dict:
        if version < 7 and resp.get("protocol_name") is None:
            resp = {**resp, "protocol_name": ""}
        return resp

    def _join_unknown(self, g: Group, iid: str | None, client_id: str, client_host: str, rebalance: int, session: int,
                      ptype: str, protocols: list[tuple[str, bytes]], reply: Respond, version: int, *,
                      require_known: bool) -> None:
        if g.state == DEAD:
            return reply(_join_error(E.COORDINATOR_NOT_AVAILABLE))
        if not g.supports_protocols(ptype, {p for p, _ in protocols}):
            return reply(_join_error(E.INCONSISTENT_GROUP_PROTOCOL))
        new_id = f"{iid if iid is not None else client_id}-{uuid.uuid4()}"
        if iid is not None and iid in g.static_members:
            self._replace_static(g, iid, new_id, client_id, client_host, rebalance, session, protocols, reply, version)
        elif iid is None and require_known:
            g.pending_members.add(new_id)
            gid = g.group_id
            self.timers.schedule(("pending", gid, new_id), self.clock() + session,
                                 lambda now: self._expire_pending(gid, new_id, now))
            reply(_join_error(E.MEMBER_ID_REQUIRED, new_id))
        else:
            self._add_member_and_rebalance(g, new_id, iid, client_id, client_host, rebalance, session, ptype,
                                           protocols, reply, version)

    def _join_known(self, mid: str, g: Group, iid: str | None, client_id: str, client_host: str, rebalance: int,
                    session: int, ptype: str, protocols: list[tuple[str, bytes]], reply: Respond,
                    version: int) -> None:
        if g.state == DEAD:
            return reply(_join_error(E.COORDINATOR_NOT_AVAILABLE, mid))
        if not g.supports_protocols(ptype, {p for p, _ in protocols}):
            return reply(_join_error(E.INCONSISTENT_GROUP_PROTOCOL, mid))
        if mid in g.pending_members:
            self.timers.cancel(("pending", g.group_id, mid))
            return self._add_member_and_rebalance(g, mid, iid, client_id, client_host, rebalance, session, ptype,
                                                  protocols, reply, version)
        if g.is_static_fenced(mid, iid):
            return reply(_join_error(E.FENCED_INSTANCE_ID, mid))
        if mid not in g.members or (iid is not None and iid not in g.static_members):
            return reply(_join_error(E.UNKNOWN_MEMBER_ID, mid))
        m = g.members[mid]
        if g.state in (EMPTY, DEAD):
            return reply(_join_error(E.UNKNOWN_MEMBER_ID, mid))
        if g.state == PREPARING:
            return self._update_member_and_rebalance(g, m, protocols, rebalance, session, reply, version)
        if g.state == COMPLETING:
            if m.matches(protocols):
                # a retry of a JoinGroup whose answer was lost: the current generation again
                return reply(self._current_generation(g, mid, with_members=g.leader == mid))
            return self._update_member_and_rebalance(g, m, protocols, rebalance, session, reply, version)
        # Stable: the leader's JoinGroup or changed metadata rebalances (the leader uses it to react
        # to topic metadata changes); a follower with the same metadata just gets the generation again.
        if g.leader == mid or not m.matches(protocols):
            return self._update_member_and_rebalance(g, m, protocols, rebalance, session, reply, version)
        reply(self._current_generation(g, mid, with_members=False))

    def _current_generation(self, g: Group, mid: str, *, with_members: bool, skip: bool = False) -> dict:
        return {"error_code": E.NONE, "generation_id": g.generation, "protocol_type": g.protocol_type,
                "protocol_name": g.protocol_name, "leader": g.leader or "", "skip_assignment": skip,
                "member_id": mid, "members": g.member_list() if with_members else []}

    def _add_member_and_rebalance(self, g: Group, mid: str, iid: str | None, client_id: str, client_host: str,
                                  rebalance: int, session: int, ptype: str, protocols: list[tuple[str, bytes]],
                                  reply: Respond, version: int) -> None:
        m = Member(mid, iid, client_id, client_host, rebalance, session, ptype, protocols)
        m.is_new = True
        m.join_cb, m.join_version = reply, version
        if g.state == PREPARING and g.generation == 0:
            g.new_member_added = True
        if not g.members:
            g.protocol_type = ptype
        g.members[mid] = m
        if g.leader is None:
            g.leader = mid
        if iid is not None:
            g.static_members[iid] = mid
        g.pending_members.discard(mid)
        # A new member cannot heartbeat until it has joined; it may wait for the whole rebalance.
        self._schedule_heartbeat(g, m, self.config.new_member_join_timeout_ms)
        self._maybe_prepare_rebalance(g)

    def _update_member_and_rebalance(self, g: Group, m: Member, protocols: list[tuple[str, bytes]], rebalance: int,
                                     session: int, reply: Respond, version: int) -> None:
        if m.join_cb is not None:  # a duplicate JoinGroup: the older request is answered and dropped
            m.join_cb(_join_error(E.REBALANCE_IN_PROGRESS, m.member_id))
        m.protocols = protocols
        m.rebalance_timeout_ms, m.session_timeout_ms = rebalance, session
        m.join_cb, m.join_version = reply, version
        self._maybe_prepare_rebalance(g)

    def _replace_static(self, g: Group, iid: str, new_id: str, client_id: str, client_host: str, rebalance: int,
                        session: int, protocols: list[tuple[str, bytes]], reply: Respond, version: int) -> None:
        """A static member restarted (new member id): it takes over its old place; the old id is fenced."""
        old_id = g.static_members[iid]
        m = g.members.pop(old_id)
        if m.join_cb is not None:
            m.join_cb(_join_error(E.FENCED_INSTANCE_ID, old_id))
        if m.sync_cb is not None:
            m.sync_cb(_sync_result(E.FENCED_INSTANCE_ID))
        m.join_cb = m.sync_cb = None
        self.timers.cancel(("hb", g.group_id, old_id))
        old_meta = m.metadata(g.protocol_name)
        m.member_id, m.client_id, m.client_host = new_id, client_id, client_host
        m.protocols, m.rebalance_timeout_ms, m.session_timeout_ms = protocols, rebalance, session
        g.members[new_id] = m
        g.static_members[iid] = new_id
        if g.leader == old_id:
            g.leader = new_id
        if old_id in g.pending_sync:
            g.pending_sync.discard(old_id)
            g.pending_sync.add(new_id)
        self._schedule_heartbeat(g, m)
        if g.state == STABLE and g.protocol_name == g.select_protocol() and m.metadata(g.protocol_name) == old_meta:
            # Nothing the assignment depends on changed: no rebalance, the member syncs to get its old share.
            self._persist_group(g)
            is_leader = g.leader == new_id
            resp = self._current_generation(g, new_id, with_members=is_leader, skip=is_leader)
            if version < 9 and is_leader:
                # before KIP-814 the old leader id was returned, so the new member does not reassign
                resp.update(leader=old_id, members=[], skip_assignment=False)
            return reply(resp)
        m.join_cb, m.join_version = reply, version
        if g.state != PREPARING:
            self._prepare_rebalance(g)

    # ------------------------------------------------------------ rebalance
    def _maybe_prepare_rebalance(self, g: Group) -> None:
        if g.state in (STABLE, COMPLETING, EMPTY):
            self._prepare_rebalance(g)

    def _prepare_rebalance(self, g: Group) -> None:
        if g.state == COMPLETING:
            self._propagate_error(g, E.REBALANCE_IN_PROGRESS)
        g.pending_sync.clear()
        self.timers.cancel(("sync", g.group_id))
        gid = g.group_id
        delay = self.config.initial_rebalance_delay_ms
        if g.state == EMPTY and delay > 0:
            g.initial_delay = True
            g.new_member_added = False
            remaining = max(g.rebalance_timeout_ms() - delay, 0)
            self.timers.schedule(("join", gid), self.clock() + delay,
                                 lambda now: self._initial_delay_expired(gid, delay, remaining))
        else:
            g.initial_delay = False
            self.timers.schedule(("join", gid), self.clock() + g.rebalance_timeout_ms(),
                                 lambda now: self._join_timeout(gid))
        self._transition(g, PREPARING)
        g.rebalances += 1
        self._try_complete_join(g)  # e.g. the last member left: nobody to wait for

    def _initial_delay_expired(self, gid: str, delay: int, remaining: int) -> None:
        g = self.groups.get(gid)
        if g is None or g.state != PREPARING:
            return
        if g.new_member_added and remaining > 0:
            g.new_member_added = False
            step = min(delay, remaining)
            self.timers.schedule(("join", gid), self.clock() + step,
                                 lambda now: self._initial_delay_expired(gid, delay, max(remaining - step, 0)))
            return
        g.initial_delay = False
        self._complete_join(g)

    def _join_timeout(self, gid: str) -> None:
        g = self.groups.get(gid)
        if g is not None and g.state == PREPARING:
            self._complete_join(g)

    def _try_complete_join(self, g: Group) -> None:
        if g.state == PREPARING and not g.initial_delay and g.all_joined():
            self._complete_join(g)

    def _complete_join(self, g: Group) -> None:
        self.timers.cancel(("join", g.group_id))
        g.initial_delay = False
        for mid, m in list(g.members.items()):
            if m.join_cb is None and m.instance_id is None:  # dynamic members that did not rejoin are out
                self.timers.cancel(("hb", g.group_id, mid))
                g.remove(mid)
        if g.members and not g.elect_joined_leader():
            # only static members that have not rejoined remain: wait for them or their session timeout
            gid = g.group_id
            self.timers.schedule(("join", gid), self.clock() + g.rebalance_timeout_ms(),
                                 lambda now: self._join_timeout(gid))
            return
        g.generation += 1
        if not g.members:
            g.protocol_name = None
            g.leader = None
            self._transition(g, EMPTY)
            self._persist_group(g)
            return
        g.protocol_name = g.select_protocol()
        self._transition(g, COMPLETING)
        for mid, m in g.members.items():
            if m.join_cb is not None:
                cb, version = m.join_cb, m.join_version
                m.join_cb = None
                cb(self._versioned_join(self._current_generation(g, mid, with_members=g.leader == mid), version))
                m.is_new = False
            self._schedule_heartbeat(g, m)
        g.pending_sync = set(g.members)
        gid, generation = g.group_id, g.generation
        self.timers.schedule(("sync", gid), self.clock() + g.rebalance_timeout_ms(),
                             lambda now: self._sync_timeout(gid, generation))

    def _sync_timeout(self, gid: str, generation: int) -> None:
        """Members that got their JoinGroup answer but never synced are removed (Kafka's pending sync)."""
        g = self.groups.get(gid)
        if g is None or g.generation != generation or g.state not in (COMPLETING, STABLE) or not g.pending_sync:
            return
        for mid in list(g.pending_sync):
            m = g.members.get(mid)
            if m is not None:
                self.timers.cancel(("hb", gid, mid))
                if m.sync_cb is not None:
                    m.sync_cb(_sync_result(E.UNKNOWN_MEMBER_ID))
                    m.sync_cb = None
                g.remove(mid)
        g.pending_sync.clear()
        self._maybe_prepare_rebalance(g)

    def _propagate_error(self, g: Group, code: int) -> None:
        for m in g.members.values():
            m.assignment = b""
            if m.sync_cb is not None:
                cb, m.sync_cb = m.sync_cb, None
                cb(_sync_result(code, b"", g))
                self._schedule_heartbeat(g, m)

    def _remove_member_and_update(self, g: Group, m: Member) -> None:
        if m.join_cb is not None:
            cb, m.join_cb = m.join_cb, None
            cb(self._versioned_join(_join_error(E.UNKNOWN_MEMBER_ID), m.join_version))
        if m.sync_cb is not None:
            cb, m.sync_cb = m.sync_cb, None
            cb(_sync_result(E.UNKNOWN_MEMBER_ID))
        self.timers.cancel(("hb", g.group_id, m.member_id))
        g.remove(m.member_id)
        if g.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(g)
        elif g.state == PREPARING:
            self._try_complete_join(g)

    # ============================================================ SyncGroup
    def sync_group(self, req: dict, respond: Respond, *, version: int = 5) -> None:
        gid = req["group_id"]
        mid = req.get("member_id") or ""
        iid = req.get("group_instance_id")
        if not gid:
            return respond(_sync_result(E.INVALID_GROUP_ID))
        g = self.groups.get(gid)
        if g is None:
            return respond(_sync_result(E.UNKNOWN_MEMBER_ID))
        if g.state == DEAD:
            return respond(_sync_result(E.COORDINATOR_NOT_AVAILABLE))
        if g.is_static_fenced(mid, iid):
            return respond(_sync_result(E.FENCED_INSTANCE_ID))
        if mid not in g.members:
            return respond(_sync_result(E.UNKNOWN_MEMBER_ID))
        if req["generation_id"] != g.generation:
            return respond(_sync_result(E.ILLEGAL_GENERATION))
        ptype, pname = req.get("protocol_type"), req.get("protocol_name")
        if (ptype is not None and ptype != g.protocol_type) or (pname is not None and pname != g.protocol_name):
            return respond(_sync_result(E.INCONSISTENT_GROUP_PROTOCOL))
        if g.state == EMPTY:
            return respond(_sync_result(E.UNKNOWN_MEMBER_ID))
        if g.state == PREPARING:
            return respond(_sync_result(E.REBALANCE_IN_PROGRESS))
        m = g.members[mid]
        self._synced(g, mid)
        if g.state == STABLE:
            respond(_sync_result(E.NONE, m.assignment, g))
            self._schedule_heartbeat(g, m)
            return
        # CompletingRebalance: wait for the leader's assignment
        if m.sync_cb is not None:
            m.sync_cb(_sync_result(E.REBALANCE_IN_PROGRESS, b"", g))
        m.sync_cb = respond
        if g.leader == mid:
            given = {a["member_id"]: bytes(a["assignment"]) for a in req.get("assignments") or ()}
            for member_id, member in g.members.items():
                member.assignment = given.get(member_id, b"")
            self._transition(g, STABLE)
            self._persist_group(g)
            for member in g.members.values():
                if member.sync_cb is not None:
                    cb, member.sync_cb = member.sync_cb, None
                    cb(_sync_result(E.NONE, member.assignment, g))
                    self._schedule_heartbeat(g, member)

    def _synced(self, g: Group, mid: str) -> None:
        g.pending_sync.discard(mid)
        if not g.pending_sync:
            self.timers.cancel(("sync", g.group_id))

    # ============================================================ Heartbeat
    def heartbeat(self, req: dict) -> dict:
        gid = req["group_id"]
        mid = req.get("member_id") or ""
        iid = req.get("group_instance_id")
        if not gid:
            return {"error_code": E.INVALID_GROUP_ID}
        g = self.groups.get(gid)
        if g is None:
            return {"error_code": E.UNKNOWN_MEMBER_ID}
        if g.state == DEAD:
            return {"error_code": E.COORDINATOR_NOT_AVAILABLE}
        if g.is_static_fenced(mid, iid):
            return {"error_code": E.FENCED_INSTANCE_ID}
        if mid not in g.members:
            return {"error_code": E.UNKNOWN_MEMBER_ID}
        if req["generation_id"] != g.generation:
            return {"error_code": E.ILLEGAL_GENERATION}
        if g.state == EMPTY:
            return {"error_code": E.UNKNOWN_MEMBER_ID}
        self._schedule_heartbeat(g, g.members[mid])
        return {"error_code": E.REBALANCE_IN_PROGRESS if g.state == PREPARING else E.NONE}

    # =========================================================== LeaveGroup
    def leave_group(self, req: dict, *, version: int = 5) -> dict:
        """v0-2 name one member; v3+ a batch, each with its own result (static members by instance id)."""
        gid = req["group_id"]
        if version >= 3:
            leaving = [{"member_id": x.get("member_id") or "", "group_instance_id": x.get("group_instance_id")}
                       for x in req.get("members") or ()]
        else:
            leaving = [{"member_id": req.get("member_id") or "", "group_instance_id": None}]
        if not gid:
            return self._leave_result(E.INVALID_GROUP_ID, [], version)
        g = self.groups.get(gid)
        if g is None:
            return self._leave_result(E.NONE, [{**x, "error_code": E.UNKNOWN_MEMBER_ID} for x in leaving], version)
        if g.state == DEAD:
            return self._leave_result(E.COORDINATOR_NOT_AVAILABLE, [], version)
        results = []
        for x in leaving:
            mid, iid = x["member_id"], x["group_instance_id"]
            if mid and g.is_static_fenced(mid, iid):
                code = E.FENCED_INSTANCE_ID
            elif mid in g.pending_members:
                g.pending_members.discard(mid)
                self.timers.cancel(("pending", gid, mid))
                if g.state == PREPARING:
                    self._try_complete_join(g)
                code = E.NONE
            elif mid not in g.members and (iid is None or iid not in g.static_members):
                code = E.UNKNOWN_MEMBER_ID
            else:
                target = g.members[g.static_members[iid]] if iid is not None and iid in g.static_members \
                    else g.members[mid]
                self._remove_member_and_update(g, target)
                code = E.NONE
            results.append({**x, "error_code": code})
        return self._leave_result(E.NONE, results, version)

    @staticmethod
    def _leave_result(code: int, members: list[dict], version: int) -> dict:
        if version < 3 and code == E.NONE and members:
            code = members[0]["error_code"]
        return {"error_code": code, "members": members}
