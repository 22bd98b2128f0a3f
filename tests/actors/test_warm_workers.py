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
    answered = time.time()
    ray.get(router.activate.remote(topic_name, 0))  # whatever the pool held before: now it refills
    for p in range(1, 4):
        deadline = time.monotonic() + REFILL_TIMEOUT_S  # the replacement the router asked for is up
        while not _idle_worker_started_after(answered) and time.monotonic() < deadline:
            time.sleep(0.1)
        requested = time.time()
        handle = ray.get(router.activate.remote(topic_name, p))
        answered = time.time()
        pid = ray.get(handle.pid.remote())
        assert psutil.Process(pid).create_time() < requested, f"partition {p} started a new process"
