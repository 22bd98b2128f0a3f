"""The classic group protocol's coordinator state machine, as plain Python.

Why plain Python with callbacks and a clock instead of an asyncio actor: every
rule of the protocol (who is fenced, when a rebalance completes, who expires) is
then testable in microseconds with a fake clock, and the Ray actor around it only
moves requests in and writes records out. The rules follow Kafka's classic
GroupCoordinator:

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
small heap that the host drives with :meth:`Coordinator.tick`. Writes that must be
durable come back to the host as records (offset commits, deletes) or are queued
in :attr:`Coordinator.outbox` (group metadata, written after each generation).
"""
from __future__ import annotations

import heapq
import itertools
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from logan_ray.protocol import errors as E

from . import offsets_log
from .consumer_protocol import subscribed_topics
from .offsets_log import OffsetEntry

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"
STATES = (EMPTY, PREPARING, COMPLETING, STABLE, DEAD)

Respond = Callable[[dict], None]


@dataclass
class GroupConfig:
    """Kafka's broker settings for groups, with Kafka's defaults."""

    min_session_timeout_ms: int = 6000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    new_member_join_timeout_ms: int = 300_000  # how long a brand-new member may wait in a rebalance
    max_metadata_bytes: int = 4096  # offset.metadata.max.bytes
    max_group_size: int = 2**31 - 1  # group.max.size

    @classmethod
    def fields(cls) -> set[str]:
        return set(cls.__dataclass_fields__)


class Member:
    __slots__ = ("member_id", "instance_id", "client_id", "client_host", "rebalance_timeout_ms",
                 "session_timeout_ms", "protocol_type", "protocols", "assignment", "join_cb", "join_version",
                 "sync_cb", "is_new", "last_heartbeat")

    def __init__(self, member_id: str, instance_id: str | None, client_id: str, client_host: str,
                 rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                 protocols: list[tuple[str, bytes]]) -> None:
        self.member_id = member_id
        self.instance_id = instance_id
        self.client_id = client_id
        self.client_host = client_host
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.session_timeout_ms = session_timeout_ms
        self.protocol_type = protocol_type
        self.protocols = protocols
        self.assignment = b""
        self.join_cb: Respond | None = None
        self.join_version = 9
        self.sync_cb: Respond | None = None
        self.is_new = False
        self.last_heartbeat = 0.0

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


class Group:
    def __init__(self, group_id: str, now: float) -> None:
        self.group_id = group_id
        self.state = EMPTY
        self.state_since = now
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # instance id -> member id
        self.pending_members: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()  # members that got their JoinGroup answer but have not synced
        self.new_member_added = False
        self.initial_delay = False  # an initial rebalance delay is running: no early completion
        self.offsets: dict[tuple[str, int], OffsetEntry] = {}
        self.rebalances = 0

    # ------------------------------------------------------------- queries
    def is_static_fenced(self, member_id: str, instance_id: str | None) -> bool:
        if instance_id is None:
            return False
        current = self.static_members.get(instance_id)
        return current is not None and current != member_id

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        return any(all(n in {p for p, _ in m.protocols} for m in self.members.values()) for n in names)

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the first member's order of preference."""
        members = list(self.members.values())
        common = set.intersection(*({p for p, _ in m.protocols} for m in members))
        return [p for p, _ in members[0].protocols if p in common]

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common protocol; most votes wins (ties: first member's order)."""
        candidates = self.candidate_protocols()
        votes = {c: 0 for c in candidates}
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in votes:
                    votes[name] += 1
                    break
        return max(candidates, key=lambda c: (votes[c], -candidates.index(c)))

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def all_joined(self) -> bool:
        return all(m.join_cb is not None for m in self.members.values()) and not self.pending_members

    def member_list(self) -> list[dict]:
        """What the leader receives: every member with its metadata for the selected protocol."""
        return [{"member_id": m.member_id, "group_instance_id": m.instance_id,
                 "metadata": m.metadata(self.protocol_name)} for m in self.members.values()]

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol), or None when unknown."""
        if self.protocol_type != "consumer" or not self.members:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            meta = m.metadata(self.protocol_name) if self.protocol_name else (m.protocols[0][1] if m.protocols else b"")
            got = subscribed_topics(meta)
            if got is None:
                return None
            topics |= got
        return topics

    # ----------------------------------------------------------- mutations
    def remove(self, member_id: str) -> Member | None:
        m = self.members.pop(member_id, None)
        if m is None:
            return None
        if m.instance_id is not None and self.static_members.get(m.instance_id) == member_id:
            del self.static_members[m.instance_id]
        self.pending_sync.discard(member_id)
        if self.leader == member_id:
            joined = [mid for mid, x in self.members.items() if x.join_cb is not None]
            self.leader = joined[0] if joined else next(iter(self.members), None)
        return m

    def elect_joined_leader(self) -> bool:
        """Keep the leader if it rejoined, else pick any member that did; False if none did."""
        leader = self.members.get(self.leader) if self.leader is not None else None
        if leader is None and not self.members:
            return False
        if leader is not None and leader.join_cb is not None:
            return True
        for mid, m in self.members.items():
            if m.join_cb is not None:
                self.leader = mid
                return True
        return False


class _Timers:
    """Keyed one-shot timers; rescheduling a key replaces its previous deadline."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Any]] = []
        self._live: dict[Any, tuple[float, int, Callable[[float], None]]] = {}
        self._seq = itertools.count()

    def schedule(self, key: Any, deadline: float, fn: Callable[[float], None]) -> None:
        seq = next(self._seq)
        self._live[key] = (deadline, seq, fn)
        heapq.heappush(self._heap, (deadline, seq, key))

    def cancel(self, key: Any) -> None:
        self._live.pop(key, None)

    def has(self, key: Any) -> bool:
        return key in self._live

    def next_deadline(self) -> float | None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                return deadline
            heapq.heappop(self._heap)
        return None

    def pop_due(self, now: float) -> tuple[float, Callable[[float], None]] | None:
        while self._heap and self._heap[0][0] <= now:
            deadline, seq, key = heapq.heappop(self._heap)
            live = self._live.get(key)
            if live is not None and live[1] == seq:
                del self._live[key]
                return deadline, live[2]
        return None

    def __len__(self) -> int:
        return len(self._live)


def _ms() -> float:
    return time.monotonic() * 1000.0


def _join_error(code: int, member_id: str = "") -> dict:
    return {"error_code": code, "generation_id": -1, "protocol_type": None, "protocol_name": None, "leader": "",
            "skip_assignment": False, "member_id": member_id, "members": []}


def _sync_result(code: int, assignment: bytes = b"", group: Group | None = None) -> dict:
    return {"error_code": code, "protocol_type": group.protocol_type if group else None,
            "protocol_name": group.protocol_name if group else None, "assignment": assignment}


class Coordinator:
    """Every group of one coordinator: membership, generations, offsets."""

    def __init__(self, config: GroupConfig | None = None, clock: Callable[[], float] = _ms,
                 wall_clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.config = config or GroupConfig()
        self.clock = clock
        self.wall_clock = wall_clock
        self.groups: dict[str, Group] = {}
        self.timers = _Timers()
        #: (group id, key, value) records the host must append to __consumer_offsets (group metadata).
        self.outbox: list[tuple[str, bytes, bytes | None]] = []

    # ================================================================ timers
    def tick(self, now: float | None = None) -> int:
        """Fire every timer due by ``now``; returns how many fired."""
        now = self.clock() if now is None else now
        fired = 0
        while True:
            due = self.timers.pop_due(now)
            if due is None:
                return fired
            deadline, fn = due
            fn(deadline)
            fired += 1

    def next_deadline(self) -> float | None:
        return self.timers.next_deadline()

    # ================================================================ groups
    def _group(self, group_id: str) -> Group:
        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = Group(group_id, self.clock())
        return g

    def _transition(self, g: Group, state: str) -> None:
        g.state = state
        g.state_since = self.clock()

    def _persist_group(self, g: Group) -> None:
        self.outbox.append((g.group_id, offsets_log.group_key(g.group_id), offsets_log.encode_group(g, self.wall_clock())))

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

    # ============================================================== offsets
    def validate_commit(self, group_id: str, generation: int, member_id: str, instance_id: str | None,
                        partitions: Iterable[tuple[str, int, int, int, str | None]],
                        unknown: set[tuple[str, int]] = frozenset()) -> tuple[dict[tuple[str, int], int], list]:
        """Check an OffsetCommit; returns ({(topic, partition): error}, accepted entries to write).

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
            if g.state == COMPLETING:
                return all_fail(E.REBALANCE_IN_PROGRESS)
            self._schedule_heartbeat(g, g.members[member_id])
        elif g.state != EMPTY:
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

    def finish_loading(self) -> None:
        """After replay: loaded members must heartbeat within their session timeout."""
        for g in self.groups.values():
            if g.members and g.state == STABLE:
                for m in g.members.values():
                    self._schedule_heartbeat(g, m)
            elif g.state != EMPTY:
                self._transition(g, EMPTY)

    # =============================================================== export
    def overview(self) -> list[dict]:
        """Per group: state, generation, members, offsets (for metrics and the CLI)."""
        return [{"group_id": g.group_id, "state": g.state, "generation": g.generation, "members": len(g.members),
                 "protocol_type": g.protocol_type or "", "protocol": g.protocol_name or "",
                 "rebalances": g.rebalances,
                 "offsets": {f"{t}:{p}": e.offset for (t, p), e in g.offsets.items()}}
                for g in self.groups.values()]
