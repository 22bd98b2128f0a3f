"""A coordinator's start reads the folders of the idle ``__consumer_offsets`` partitions it leads with
one router call, not one each.

Why: each ``closed_stats`` call is a Ray task on the partitions' node, and eight at once made Ray
start a worker process for each, at every broker start (eight ``_folder_stats`` workers in the
session logs, about a second of CPU apiece on a 2-core machine). Driven here with a fake router: the
coordinator's own takeover logic, no Ray runtime.
"""
from __future__ import annotations

import asyncio
from typing import Any, Callable
from unittest import mock

from logan_ray.actors import group_coordinator as gc
from logan_ray.groups import OFFSETS_TOPIC

ME, OTHER = "node-me", "node-other"


class _Method:
    def __init__(self, fn: Callable[..., Any]) -> None:
        self._fn = fn

    async def remote(self, *args: Any, **kwargs: Any) -> Any:
        return self._fn(*args, **kwargs)


class FakeRouter:
    """Eight partitions, all inactive; this node leads 1-3 and 5-7. Partition 6 holds records."""

    def __init__(self) -> None:
        self.closed_calls: list[list[tuple[str, int]]] = []
        self.activated: list[int] = []
        self.route = {"partitions": [[None, OTHER if p % 4 == 0 else ME] for p in range(8)],
                      "leader_epochs": [3] * 8}
        self.route_with_ids = _Method(lambda names, *a: {OFFSETS_TOPIC: self.route})
        self.closed_stats = _Method(self._closed)
        self.activate = _Method(self._activate)

    def _closed(self, keys: list[tuple[str, int]]) -> dict:
        self.closed_calls.append(list(keys))
        return {k: {"log_start_offset": 0, "log_end_offset": 5 if k[1] == 6 else 0} for k in keys}

    def _activate(self, topic: str, part: int) -> Any:
        self.activated.append(part)
        return FakePartition()


class FakePartition:
    def __init__(self) -> None:
        self.offsets = _Method(lambda: (0, 0))
        self.fetch_to_log_end = _Method(lambda pos, size: (b"", 0, 0))


def _coordinator(router: FakeRouter) -> gc.GroupCoordinatorActor:
    with mock.patch.object(gc, "ray") as fake_ray:
        context = fake_ray.get_runtime_context.return_value
        context.get_node_id.return_value = ME
        context.was_current_actor_reconstructed = False
        coord = gc.GroupCoordinatorActor(metrics_interval_s=3600)

    async def router_handle() -> FakeRouter:
        return router
    coord._router = router_handle  # type: ignore[method-assign]
    return coord


async def _ready(coord: gc.GroupCoordinatorActor) -> None:
    try:
        await coord._take_all()
    finally:
        for task in coord._tasks:
            task.cancel()
        await asyncio.gather(*coord._tasks, return_exceptions=True)


def test_a_starting_coordinator_reads_its_idle_partitions_folders_in_one_call():
    router = FakeRouter()
    coord = _coordinator(router)
    asyncio.run(_ready(coord))
    assert router.closed_calls == [[(OFFSETS_TOPIC, p) for p in (1, 2, 3, 5, 6, 7)]]
    assert sorted(coord._owned) == [1, 2, 3, 5, 6, 7]
    assert router.activated == [6]  # only the one with records is started to be replayed; empty ones stay closed
    assert coord._closed_read == {}  # nothing read ahead is left to answer a later takeover


def test_a_later_takeover_of_one_partition_reads_its_folder_again():
    router = FakeRouter()
    coord = _coordinator(router)
    asyncio.run(_ready(coord))
    del coord._owned[2]  # it moved away and back: figures read at the start must not be reused

    async def again() -> None:
        await coord._take_over(2)
    asyncio.run(again())
    assert router.closed_calls[1:] == [[(OFFSETS_TOPIC, 2)]]
    assert 2 in coord._owned
