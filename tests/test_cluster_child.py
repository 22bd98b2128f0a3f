"""The child-cluster runner leaves nothing behind: a child killed at its timeout takes every process it
started with it (a Ray cluster's agents outlived a killed child before, slowing the rest of the suite)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.tooling.cluster_child import run_in_group

# A child that starts a grandchild (as a Ray node starts its agents), says its pid, and outlives any timeout.
SPAWNER = ("import subprocess, sys, time; "
           "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'], "
           "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
           "print(g.pid, flush=True); time.sleep(120)")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_child_killed_at_its_timeout_leaves_no_process_it_started():
    with pytest.raises(subprocess.TimeoutExpired) as e:
        run_in_group([sys.executable, "-c", SPAWNER], 3)
    grandchild = int(e.value.stdout.split()[0])
    deadline = time.monotonic() + 5
    while _alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(grandchild), f"pid {grandchild} outlived its killed parent"


def test_a_child_that_ends_is_answered_like_subprocess_run():
    out = run_in_group([sys.executable, "-c", "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"], 30)
    assert (out.returncode, out.stdout, out.stderr) == (3, "out\n", "err\n")
