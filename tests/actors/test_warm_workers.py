"""Warm workers (issue 14): an activation takes a worker process the node's raylet started
before the request, so no cold Python start waits in front of the answer."""
from __future__ import annotations

import time

import psutil
import ray

from logan_ray.actors.names import NAMESPACE, ROUTER_NAME

REFILL_TIMEOUT_S = 30.0


def _idle_workers() -> set[int]:
    """Pids of this session's Ray workers (descendants of this process) that have registered and wait
    for work (``ray::IDLE``).

    Processes are told apart by pid, not by start time: psutil's create_time counts from the
    kernel's boot time, which /proc gives in whole seconds, so it can be off by up to a second
    against time.time().
    """
    out = set()
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.name().startswith("ray::IDLE"):
                out.add(proc.pid)
        except psutil.NoSuchProcess:
            continue
    return out


def test_each_activation_runs_in_a_process_started_before_its_request(client, topic_name):
    client.create_topic(topic_name, partitions=4, activate=False)
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    seen = _idle_workers()
    ray.get(router.activate.remote(topic_name, 0))  # whatever the pool held before: now it refills
    for p in range(1, 4):
        # the replacement the router asked for after the last activation is up and waiting
        deadline = time.monotonic() + REFILL_TIMEOUT_S
        while not (_idle_workers() - seen):
            assert time.monotonic() < deadline, f"the pool was not refilled within {REFILL_TIMEOUT_S} s"
            time.sleep(0.1)
        waiting = _idle_workers()
        handle = ray.get(router.activate.remote(topic_name, p))
        pid = ray.get(handle.pid.remote())
        assert pid in waiting, f"partition {p} started a new process ({pid}, none of the idle {sorted(waiting)})"
        seen = waiting | _idle_workers()
