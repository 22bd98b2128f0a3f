"""Warm workers (issue 14): an activation takes a worker process the node's raylet started
before the request, so no cold Python start waits in front of the answer."""
from __future__ import annotations

import time

import psutil
import ray

from logan_ray.actors.names import NAMESPACE, ROUTER_NAME

REFILL_TIMEOUT_S = 30.0


def _idle_worker_started_after(moment: float) -> bool:
    """A worker of this session's Ray (a descendant of this process) that has registered and waits for
    work (``ray::IDLE``), started after ``moment``."""
    for proc in psutil.Process().children(recursive=True):
        try:
            if proc.name().startswith("ray::IDLE") and proc.create_time() > moment:
                return True
        except psutil.NoSuchProcess:
            continue
    return False


def test_each_activation_runs_in_a_process_started_before_its_request(client, topic_name):
    client.create_topic(topic_name, partitions=4, activate=False)
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    requested = time.time()
    ray.get(router.activate.remote(topic_name, 0))  # whatever the pool held before: now it refills
    for p in range(1, 4):
        # The replacement the router asked for is up. It is asked for as the activation is
        # answered, so its process may start before the answer reaches this driver: count
        # from the request, not from the answer.
        deadline = time.monotonic() + REFILL_TIMEOUT_S
        while not _idle_worker_started_after(requested):
            assert time.monotonic() < deadline, f"the pool was not refilled within {REFILL_TIMEOUT_S} s"
            time.sleep(0.1)
        requested = time.time()
        handle = ray.get(router.activate.remote(topic_name, p))
        pid = ray.get(handle.pid.remote())
        assert psutil.Process(pid).create_time() < requested, f"partition {p} started a new process"
