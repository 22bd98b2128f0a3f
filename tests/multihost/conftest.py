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


def host_env(bin_dir: str) -> dict[str, str]:
    """What every host's sessions get: ``bin_dir`` (this Python's ``ray``, see ``python_scripts``) and this
    Python's scripts (logan-ray) first on PATH, and this clone on PYTHONPATH: "logan-ray is installed on
    every host" (the hosts share this file system)."""
    return {"PATH": f"{bin_dir}:{os.path.dirname(sys.executable)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:"
                    "/usr/bin:/sbin:/bin",
            "PYTHONPATH": REPO}


def python_scripts(bin_dir: str) -> None:
    """A ``ray`` command that runs this very Python (``sys.executable``).

    Why: a virtualenv that sees Ray through its base interpreter's site-packages has no ``ray``
    script of its own, so PATH found the base interpreter's; Ray then started every worker (router,
    gateways, partitions) with that interpreter, which imports logan_ray's subpackages from whatever
    checkout is installed there, not from this clone. Ray workers run ``sys.executable`` of ``ray start``.
    """
    os.makedirs(bin_dir, exist_ok=True)
    path = os.path.join(bin_dir, "ray")
    with open(path, "w") as f:
        f.write(f"#!{sys.executable}\nimport sys\nfrom ray.scripts.scripts import main\nsys.exit(main())\n")
    os.chmod(path, 0o755)


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
        bed = TestBed(n)
        bin_dir = os.path.join(bed.base, "bin")  # removed with the bed
        bed.env = host_env(bin_dir)
        beds.append(bed)
        bed.up()
        python_scripts(bin_dir)  # after up(): it starts by removing whatever is under its base
        return bed

    try:
        yield build
    finally:
        for bed in beds:
            bed.down()
