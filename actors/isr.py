"""The leader's view of its followers: fetch positions, high watermark, ISR shrink and expansion.

Kafka's rules (``Partition.scala``, KIP-841 aside), as pure bookkeeping the
partition actor drives; the actor persists every ISR change through the
controller (the router) *before* it takes effect, so this class only proposes:

* A follower's fetch offset is its log end offset (LEO): it has every record
  below it. Fetching at or past the leader's LEO as it was at the fetch marks
  the follower caught up now (``lastCaughtUpTimeMs``); fetching at or past the
  leader's LEO as it was at the follower's *previous* fetch marks it caught up
  as of that previous fetch (``lastFetchLeaderLogEndOffset``), so a follower
  keeps up with a leader whose log end moves between every fetch.
* A claimed position is validated, as a Kafka leader reads before it records:
  a fetch offset past the leader's LEO is OFFSET_OUT_OF_RANGE and recorded
  nowhere (a forged or confused fetch could otherwise raise the high watermark
  over records no follower holds).
* High watermark = the smallest LEO over the ISR (the leader included), and it
  never moves back while this leader leads. A restarted leader does not know
  its followers' positions yet: they count at the HW it starts with (Kafka
  reads it from its ``replication-offset-checkpoint``; here the caller passes
  the log start while followers are in the ISR, the log end when the ISR is the
  leader alone, so consumers never see records not yet on every ISR member).
* Shrink: a follower in the ISR not caught up for ``replica.lag.time.max.ms``
  leaves it. Expand: a follower outside whose LEO reached the high watermark
  (and the current epoch's start offset) joins it.
* The maximal ISR (Kafka's ``PendingExpandIsr``, KIP-497): a follower whose joining
  was asked and not answered (in flight, or the answer lost) may be in the
  controller's ISR, so the controller may elect it: the high watermark waits for it
  too (``pending``) until an answer says what the controller holds. With that, an
  ``acks=all`` write the high watermark passed is on every replica the controller
  could elect, whatever this leader's lease says (``actors/partition.py``).
"""
from __future__ import annotations

from typing import Iterable

from logan_ray.storage.errors import OffsetOutOfRangeError

DEFAULT_REPLICA_LAG_TIME_MAX_MS = 30_000  # Kafka's replica.lag.time.max.ms


class FollowerStates:
    def __init__(self, leader: str, replicas: Iterable[str], isr: Iterable[str], *, high_watermark: int,
                 epoch_start_offset: int, now_ms: int, lag_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS) -> None:
        self.leader = leader
        self.replicas = list(replicas)
        self.isr = [n for n in isr]
        self.lag_max_ms = lag_max_ms
        self.epoch_start_offset = epoch_start_offset
        self.high_watermark = high_watermark
        #: followers asked into the ISR with no answer yet: counted by the high watermark (the maximal ISR)
        self.pending: set[str] = set()
        followers = [n for n in self.replicas if n != leader]
        self.leo = {n: high_watermark if n in self.isr else -1 for n in followers}
        self.caught_up_ms = {n: now_ms for n in followers}
        # the leader's LEO and the time at each follower's previous fetch (None: no fetch yet)
        self.last_fetch: dict[str, tuple[int, int] | None] = {n: None for n in followers}

    @property
    def followers(self) -> list[str]:
        return list(self.leo)

    @property
    def maximal_isr(self) -> list[str]:
        """The ISR and the followers that may have joined it without this leader knowing yet."""
        return [*self.isr, *sorted(self.pending - set(self.isr))]

    def asking(self, isr: Iterable[str]) -> None:
        """An ISR change goes to the controller: who it adds counts for the high watermark from now on."""
        self.pending |= {n for n in isr if n in self.leo and n not in self.isr}

    def fetched(self, node: str, fetch_offset: int, leader_leo: int, now_ms: int) -> bool:
        """A follower fetched at ``fetch_offset``; True when the high watermark moved."""
        if node not in self.leo:
            raise KeyError(f"{node} is not a follower of this partition")
        if fetch_offset > leader_leo:
            raise OffsetOutOfRangeError(f"follower {node[:8]} fetches at {fetch_offset}, past the leader's log end "
                                        f"{leader_leo}")
        self.leo[node] = fetch_offset
        previous = self.last_fetch.get(node)
        if fetch_offset >= leader_leo:
            self.caught_up_ms[node] = max(self.caught_up_ms[node], now_ms)
        elif previous is not None and fetch_offset >= previous[0]:
            self.caught_up_ms[node] = max(self.caught_up_ms[node], previous[1])
        self.last_fetch[node] = (leader_leo, now_ms)
        return self.advance(leader_leo)

    def advance(self, leader_leo: int) -> bool:
        """Recompute the high watermark from the ISR's LEOs; it only moves forward."""
        hw = leader_leo
        for n in self.maximal_isr:
            if n != self.leader:
                hw = min(hw, self.leo.get(n, -1))
        if hw > self.high_watermark:
            self.high_watermark = hw
            return True
        return False

    def stalled(self, ms: int) -> None:
        """The leader itself did not run for ``ms`` (a stopped process, a starved machine): its followers'
        fetches waited for it, so that time does not count as their lag. Only ever delays a shrink."""
        for n in self.caught_up_ms:
            self.caught_up_ms[n] += ms

    def to_shrink(self, now_ms: int) -> list[str] | None:
        """The ISR without followers lagging over ``replica.lag.time.max.ms``; None when nobody lags."""
        lagging = [n for n in self.maximal_isr
                   if n != self.leader and now_ms - self.caught_up_ms.get(n, now_ms) > self.lag_max_ms]
        if not lagging:
            return None
        # a lagging pending follower alone asks for the ISR as it is: the answer says whether it joined
        return [n for n in self.isr if n not in lagging]

    def to_expand(self, node: str) -> list[str] | None:
        """The ISR with ``node`` added if it has caught up (LEO >= HW and >= the epoch's start); else None."""
        if node in self.isr or node not in self.leo:
            return None
        leo = self.leo[node]
        if leo >= self.high_watermark and leo >= self.epoch_start_offset:
            return [*self.isr, node]
        return None

    def set_replicas(self, replicas: Iterable[str], isr: Iterable[str], leader_leo: int, now_ms: int) -> None:
        """Adopt a replica set the controller changed (a reassignment): a new follower starts unknown
        (LEO -1, outside the ISR until it catches up), a removed one is forgotten."""
        self.replicas = list(replicas)
        followers = [n for n in self.replicas if n != self.leader]
        self.leo = {n: self.leo.get(n, -1) for n in followers}
        self.caught_up_ms = {n: self.caught_up_ms.get(n, now_ms) for n in followers}
        self.last_fetch = {n: self.last_fetch.get(n) for n in followers}
        self.pending &= set(followers)
        self.set_isr([n for n in isr if n == self.leader or n in self.leo], leader_leo)

    def set_isr(self, isr: Iterable[str], leader_leo: int, answered: bool = False) -> None:
        """Adopt an ISR the controller has persisted. ``answered``: it is the answer to this leader's own
        change (the controller's state after it), so nothing is pending any more; a change the controller
        made on its own (a dead follower left) may predate a pending one, which stays pending."""
        self.isr = list(isr)
        self.pending = set() if answered else self.pending - set(self.isr)
        self.advance(leader_leo)
