"""The router keeps each partition's leader epoch durably and hands a new one to each new leader incarnation."""
from __future__ import annotations

import json
import os
import signal
import time
import uuid

import ray

from logan_ray.storage.batch_header import iter_headers


def wait_for(pred, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = pred()
            if value:
                return value
        except Exception:  # the actor or router is restarting
            if time.monotonic() >= deadline:
                raise
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


def restart_partition_actor(actor) -> None:
    """SIGKILL the actor's process; Ray starts it again (a new leader incarnation)."""
    pid = ray.get(actor.pid.remote())
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: ray.get(actor.pid.remote(), timeout=10) != pid)


def saved_epoch(broker_dir: str, topic: str, partition: int) -> int:
    with open(os.path.join(broker_dir, "cluster-metadata.json")) as f:
        return json.load(f)["topics"][topic]["leaders"][str(partition)]["epoch"]


def test_each_new_leader_incarnation_gets_a_larger_saved_epoch_and_stamps_it(client, broker_dir, topic_name):
    client.create_topic(topic_name, partitions=1)
    actor = client.partition_actor(topic_name, 0)
    assert ray.get(actor.leader_epoch.remote()) == 0  # a new partition's first leader: epoch 0
    producer = client.producer()
    for i in range(3):
        producer.send(topic_name, b"a%d" % i, partition=0).result(timeout=30)
    restart_partition_actor(actor)
    assert ray.get(actor.leader_epoch.remote()) == 1
    assert saved_epoch(broker_dir, topic_name, 0) == 1
    assert client.describe_topic(topic_name)["partitions"][0]["leader_epoch"] == 1
    for i in range(2):
        producer.send(topic_name, b"b%d" % i, partition=0).result(timeout=30)
    producer.close()
    data, _hw, _start = ray.get(actor.fetch.remote(0, 1 << 20))
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in iter_headers(data)] == [
        (0, 0), (1, 0), (2, 0), (3, 1), (4, 1)]
    assert ray.get(actor.end_offset_for_epoch.remote(0)) == (0, 3)
    assert ray.get(actor.end_offset_for_epoch.remote(1)) == (1, 5)


def test_epoch_survives_a_router_crash_and_open_partition_is_idempotent(client, broker_dir, topic_name):
    client.create_topic(topic_name, partitions=1)
    actor = client.partition_actor(topic_name, 0)
    restart_partition_actor(actor)
    assert ray.get(actor.leader_epoch.remote()) == 1
    topic_id = client.describe_topic(topic_name)["topic_id"]

    os.kill(ray.get(client.router.__ray_call__.remote(lambda self: os.getpid())), signal.SIGKILL)
    # Ray restarts the router from its saved metadata; the partition actor outlived it (same leader, same epoch)
    wait_for(lambda: client.describe_topic(topic_name)["partitions"][0]["leader_epoch"] == 1)
    assert ray.get(actor.leader_epoch.remote()) == 1

    # A control call retried by Ray (same incarnation) gets the same epoch; a new incarnation the next one.
    again = uuid.uuid4().hex
    first = ray.get(client.router.open_partition.remote(topic_name, 0, topic_id, again, -1))
    assert first["leader_epoch"] == 2
    assert ray.get(client.router.open_partition.remote(topic_name, 0, topic_id, again, -1))["leader_epoch"] == 2
    assert saved_epoch(broker_dir, topic_name, 0) == 2
    # an epoch the partition's files already hold is never handed out again
    assert ray.get(client.router.open_partition.remote(topic_name, 0, topic_id, uuid.uuid4().hex, 7))[
        "leader_epoch"] == 8
