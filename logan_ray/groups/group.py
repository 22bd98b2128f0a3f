"""One classic group: its state, generation, protocol, leader, members and committed offsets.

The states are Kafka's classic group states: Empty -> PreparingRebalance ->
CompletingRebalance -> Stable (and back), Dead once deleted. This module holds
the group's data and the queries on it; the transitions are the rebalance
protocol's (:mod:`.rebalance`).
"""
from __future__ import annotations

from .consumer_protocol import subscribed_topics
from .member import Member
from .offsets_log import OffsetEntry

EMPTY = "Empty"
PREPARING = "PreparingRebalance"
COMPLETING = "CompletingRebalance"
STABLE = "Stable"
DEAD = "Dead"
STATES = (EMPTY, PREPARING, COMPLETING, STABLE, DEAD)


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
