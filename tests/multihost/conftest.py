"""The multi-host test bed (tests/tooling/netns_hosts.py) as a fixture: hosts are Linux namespaces.

Root only (CI runs as root). The bed is removed in ``finally`` even when a test fails,
and any leftover of a crashed earlier run is removed before building.
"""
from __future__ import annotations

import os
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "tooling"))

from netns_hosts import TestBed  # noqa: E402


def host_env() -> dict[str, str]:
    """What every host's sessions get: this Python's scripts (ray, logan-ray) first on PATH, and this
    clone on PYTHONPATH: "logan-ray is installed on every host" (the hosts share this file system)."""
    return {"PATH": f"{os.path.dirname(sys.executable)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "PYTHONPATH": REPO}


@pytest.fixture(scope="module", autouse=True)
def quiet_session_broker():
    """Hibernate every partition the session's broker still has active before a bed starts.

    The beds run three more Ray clusters on this machine's two cores. Partitions that
    earlier tests left active (up to ``max.active.partitions`` processes, each with
    Ray threads that wake on timers) made the load average reach 130 and a bed's
    produce time out; hibernated partitions cost nothing.
    """
    import ray

    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME

    if not ray.is_initialized():
        yield
        return
    try:
        router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    except ValueError:  # no broker in this session yet
        yield
        return
    previous = ray.get(router.set_partition_idle_ms.remote(100))
    try:
        deadline = time.monotonic() + 30  # a partition that cannot hibernate (offline) must not stall the bed
        while time.monotonic() < deadline and any(r.get("active") for r in ray.get(router.status.remote())):
            time.sleep(1)
    finally:
        ray.get(router.set_partition_idle_ms.remote(previous))
    yield


@pytest.fixture
def make_bed():
    """Build a bed of N hosts (``make_bed(3)``); every bed built is removed afterwards."""
    beds = []

    def build(n: int = 3) -> TestBed:
        bed = TestBed(n, env=host_env())
        beds.append(bed)
        return bed.up()

    try:
        yield build
    finally:
        for bed in beds:
            bed.down()
