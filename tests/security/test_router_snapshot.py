"""A gateway's copy of the router's ACLs and quotas never makes a request wait long on a stalled router,
and a change made elsewhere holds from REFRESH_S after it.

These snapshots sit on the path of every produce and fetch (quotas on every gateway, ACLs
under an authorizer). A router that is busy with an election, restarting or stopped must
not stall the cluster's traffic: a refresh is waited for at most WAIT_S.
"""
from __future__ import annotations

import asyncio
import time

import pytest

from logan_ray.security import router_snapshot
from logan_ray.security.router_snapshot import RouterSnapshot


class StallingRouter:
    """Answers its ``version`` and data "v<version>" until ``stall`` is set, then never answers."""

    def __init__(self) -> None:
        self.stall = asyncio.Event()
        self.calls = 0
        self.current = 1

    async def version(self) -> int:
        self.calls += 1
        if self.stall.is_set():
            await asyncio.Event().wait()
        return self.current

    async def fetch(self) -> tuple[int, str]:
        return self.current, f"v{self.current}"


def _snapshot(router: StallingRouter, strict: bool) -> RouterSnapshot:
    return RouterSnapshot(router.version, router.fetch, lambda data: data, "initial", strict=strict)


def test_a_loaded_snapshot_answers_at_once_while_the_router_stalls(monkeypatch):
    monkeypatch.setattr(router_snapshot, "REFRESH_S", 0.01)

    async def run() -> None:
        router = StallingRouter()
        snap = _snapshot(router, strict=True)
        assert await snap.get() == "v1"  # the first load is waited for (ACLs fail closed until known)
        router.stall.set()
        await asyncio.sleep(0.05)  # stale now: the next requests start a refresh that never ends
        started = time.monotonic()
        for _ in range(20):
            assert await asyncio.wait_for(snap.get(), 1.0) == "v1"
            await asyncio.sleep(0.02)
        assert time.monotonic() - started < 0.5 + 20 * 0.02 + 0.5  # WAIT_S once, then the copy at once
        assert router.calls == 2  # one refresh in flight at a time, not one per request

    asyncio.run(run())


def test_a_non_strict_snapshot_answers_its_initial_value_before_the_first_load(monkeypatch):
    async def run() -> None:
        router = StallingRouter()
        router.stall.set()
        snap = _snapshot(router, strict=False)
        assert await asyncio.wait_for(snap.get(), 1.0) == "initial"

    asyncio.run(run())


def test_a_strict_snapshot_waits_for_its_first_load():
    async def run() -> None:
        router = StallingRouter()
        router.stall.set()
        snap = _snapshot(router, strict=True)
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(snap.get(), 0.2)

    asyncio.run(run())


def test_after_its_own_change_a_gateway_waits_for_the_new_version(monkeypatch):
    async def run() -> None:
        router = StallingRouter()
        snap = _snapshot(router, strict=False)
        await snap.get()
        snap.invalidate()
        assert await snap.get() == "v1"  # awaited: the change this gateway made applies at once
        assert router.calls >= 1

    asyncio.run(run())


def test_a_change_made_elsewhere_holds_for_the_first_request_after_refresh_s(monkeypatch):
    monkeypatch.setattr(router_snapshot, "REFRESH_S", 0.05)

    async def run() -> None:
        router = StallingRouter()
        snap = _snapshot(router, strict=True)
        assert await snap.get() == "v1"
        router.current = 2  # an ACL granted on another gateway
        await asyncio.sleep(0.1)
        assert await snap.get() == "v2"

    asyncio.run(run())
