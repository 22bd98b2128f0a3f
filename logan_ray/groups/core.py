"""The group coordinator's shared state: its settings, groups, clock, timers and outbox.

The coordinator is built in layers, one module each, so a reader finds a rule
by the part of the protocol it belongs to:

- :mod:`.core` (this module) — settings, the groups, the clock, the timers, the outbox;
- :mod:`.rebalance` — membership and the rebalance protocol (JoinGroup, SyncGroup,
  Heartbeat, LeaveGroup, session and rebalance timeouts);
- :mod:`.offsets` — committed offsets (OffsetCommit, OffsetFetch, OffsetDelete),
  checked against the membership;
- :mod:`.coordinator` — the whole :class:`~.coordinator.Coordinator`: listing,
  describing and deleting groups, and replaying ``__consumer_offsets``.

Why plain Python with callbacks and a clock instead of an asyncio actor: every
rule of the protocol is then testable in microseconds with a fake clock, and the
Ray actor around it (``logan_ray.actors.group_coordinator``) only moves requests
in and writes records out. Writes that must be durable come back to the host as
records (offset commits, deletes) or are queued in :attr:`CoordinatorCore.outbox`
(group metadata, written after each generation).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from . import offsets_log
from .group import Group
from .timers import Timers


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


def _ms() -> float:
    return time.monotonic() * 1000.0


class CoordinatorCore:
    """Every group of one coordinator, and the clock and timers that drive them."""

    def __init__(self, config: GroupConfig | None = None, clock: Callable[[], float] = _ms,
                 wall_clock: Callable[[], int] = lambda: int(time.time() * 1000)) -> None:
        self.config = config or GroupConfig()
        self.clock = clock
        self.wall_clock = wall_clock
        self.groups: dict[str, Group] = {}
        self.timers = Timers()
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
