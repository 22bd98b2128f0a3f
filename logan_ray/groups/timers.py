"""Keyed one-shot timers for the group coordinator, driven by its host.

Heartbeat, join, sync and pending-member deadlines live in one heap; the host
(a Ray actor, or a test with a fake clock) calls ``Coordinator.tick`` to fire the
ones that are due, so no thread or event loop hides inside the state machine.
"""
from __future__ import annotations

import heapq
import itertools
from typing import Any, Callable


class Timers:
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

    def cancel_where(self, pred: Callable[[Any], bool]) -> int:
        """Cancel every timer whose key satisfies ``pred`` (groups handed to another coordinator)."""
        keys = [k for k in self._live if pred(k)]
        for k in keys:
            del self._live[k]
        return len(keys)

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
