"""The multi-host test bed (tests/tooling/netns_hosts.py) as a fixture: hosts are Linux namespaces.

Root only (CI runs as root). The bed is removed in ``finally`` even when a test fails,
and any leftover of a crashed earlier run is removed before building.
"""
from __future__ import annotations

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tests", "tooling"))

from netns_hosts import TestBed  # noqa: E402


def host_env() -> dict[str, str]:
    """What every host's sessions get: this Python's scripts (ray, logan-ray) first on PATH, and this
    clone on PYTHONPATH: "logan-ray is installed on every host" (the hosts share this file system)."""
    return {"PATH": f"{os.path.dirname(sys.executable)}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "PYTHONPATH": REPO}


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
