"""Hibernation (issue 14): a partition with no traffic for ``partition.idle.ms`` closes its log
cleanly and its actor exits; the next use, through any handle or route cached before, starts it
again with every acknowledged record at its offset."""
from __future__ import annotations

import glob
import os
import signal
import time
import uuid

import pytest
import ray
from ray.util.state import list_actors

from logan_ray.actors.names import NAMESPACE, ROUTER_NAME

IDLE_MS = 300  # as the short_partition_idle fixture (tests/conftest.py) sets it


@pytest.fixture(autouse=True)
def short_idle(short_partition_idle):
    """Every test here runs with ``partition.idle.ms`` of 300 ms (tests/conftest.py)."""
    return short_partition_idle


def live_partition_actors(topic: str) -> set[str]:
    """Names of this topic's live PartitionActor processes, from Ray's state API."""
    return {a.name for a in list_actors(filters=[("state", "=", "ALIVE"), ("class_name", "=", "PartitionActor")],
                                        limit=10_000)
            if a.name.startswith(f"{topic}-") and a.name[len(topic) + 1:].isdigit()}


def active_partitions(client, topic: str) -> set[int]:
    return {r["partition"] for r in client.status() if r["topic"] == topic and r.get("active")}


def wait_hibernated(client, topic: str, partitions: set[int], timeout: float = 30.0) -> None:
    """Until none of ``partitions`` is active by the router's account and by Ray's."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not active_partitions(client, topic) & partitions and not {
                int(n.rsplit("-", 1)[1]) for n in live_partition_actors(topic)} & partitions:
            return
        time.sleep(0.1)
    raise AssertionError(f"{topic} partitions {sorted(partitions)} still active: "
                         f"{sorted(active_partitions(client, topic))}, actors {sorted(live_partition_actors(topic))}")


def test_idle_partition_hibernates_cleanly_and_the_next_produce_through_an_old_handle_continues_its_offsets(
        client, broker_dir, topic_name):
    client.create_topic(topic_name, partitions=2, activate=False)
    with client.producer(acks=-1, linger_ms=0) as producer:  # idempotent: producer state must survive
        first = [producer.send(topic_name, f"a{i}".encode(), partition=0).result(30) for i in range(20)]
        assert [m.offset for m in first] == list(range(20))
        stale = client.partition_actor(topic_name, 0)
        epoch = ray.get(stale.leader_epoch.remote())
        wait_hibernated(client, topic_name, {0})
        folder = os.path.join(broker_dir, f"{topic_name}-0")
        assert os.path.exists(os.path.join(folder, ".clean-shutdown"))  # closed cleanly: no scan on reopen
        assert glob.glob(os.path.join(folder, f"{20:020d}.snapshot"))  # producer state written at the log end
        # a hibernated partition's offsets and size are read from its folder, without waking it
        row = next(r for r in client.status() if r["topic"] == topic_name and r["partition"] == 0)
        assert not row["active"] and (row["log_start_offset"], row["log_end_offset"]) == (0, 20)
        assert row["size_bytes"] > 0 and row["segment_count"] == 1
        assert client.partition_offsets(topic_name)[0] == (0, 20)
        assert active_partitions(client, topic_name) == set()
        # the same producer, whose cached route points at the stopped actor, keeps going
        more = [producer.send(topic_name, f"b{i}".encode(), partition=0).result(30) for i in range(5)]
    assert [m.offset for m in more] == list(range(20, 25))
    assert client.partition_actor(topic_name, 0)._actor_id != stale._actor_id
    # the same leader woke on its cleanly closed files: same leader epoch, clients are not fenced
    assert ray.get(client.partition_actor(topic_name, 0).leader_epoch.remote()) == epoch
    assert client.describe_topic(topic_name)["partitions"][0]["leader_epoch"] == epoch
    assert active_partitions(client, topic_name) == {0}
    consumer = client.consumer(auto_offset_reset="earliest")
    consumer.assign([(topic_name, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 25 and time.monotonic() < deadline:
        got += consumer.poll(500)
    assert [(r.offset, r.value) for r in got] == [(i, f"a{i}".encode()) for i in range(20)] + [
        (20 + i, f"b{i}".encode()) for i in range(5)]
    stats = ray.get(client.partition_actor(topic_name, 0).stats.remote())
    # the producer's state came back from the snapshot written at hibernation (one producer, not two)
    assert (stats["producers"], stats["producer_snapshot_offset"]) == (1, 20)


def test_a_waiting_long_poll_keeps_its_partition_awake_and_it_hibernates_after(client, topic_name,
                                                                               short_partition_idle):
    # partition.idle.ms of 1.5 s here, not 300 ms: the poll reaches the actor one Ray call after its start,
    # which in a loaded full run took more than 300 ms once (stop 49), and the partition had hibernated
    ray.get(short_partition_idle.set_partition_idle_ms.remote(1500))
    client.create_topic(topic_name, partitions=1, activate=False)
    handle = client.partition_actor(topic_name, 0)
    polling = handle.fetch.remote(0, 1 << 20, 6000, 1)  # waits for data that never comes
    time.sleep(4.5)  # three idle periods
    assert active_partitions(client, topic_name) == {0} and live_partition_actors(topic_name)
    data, high_watermark, _ = ray.get(polling)
    assert (data, high_watermark) == (b"", 0)
    wait_hibernated(client, topic_name, {0})


def test_monitoring_reads_of_its_offsets_do_not_keep_a_partition_awake(client, topic_name):
    # the consumer-lag gauges of every group ask each partition its offsets every 10 s: as traffic,
    # that kept every partition a group reads awake (42 of 50 in bench/partitions.py's run)
    client.create_topic(topic_name, partitions=1, activate=False)
    with client.producer(linger_ms=0) as producer:
        producer.send(topic_name, b"x", partition=0).result(30)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and (active_partitions(client, topic_name) or live_partition_actors(topic_name)):
        assert client.partition_offsets(topic_name)[0] == (0, 1)  # more often than partition.idle.ms
        time.sleep(0.1)
    assert not active_partitions(client, topic_name) and not live_partition_actors(topic_name)


def test_kafka_clients_keep_producing_and_consuming_across_hibernation(client, gateway, topic_name):
    from confluent_kafka import Consumer, Producer, TopicPartition

    client.create_topic(topic_name, partitions=1, activate=False)
    producer = Producer({"bootstrap.servers": gateway, "linger.ms": 0, "enable.idempotence": True})
    errors = []

    def produce(values):
        for v in values:
            producer.produce(topic_name, v, partition=0,
                             on_delivery=lambda err, msg: errors.append(err) if err is not None else None)
        assert producer.flush(60) == 0

    produce([b"x0", b"x1"])
    wait_hibernated(client, topic_name, {0})  # the gateway's route still names the stopped actor
    produce([b"x2", b"x3"])
    assert errors == []
    consumer = Consumer({"bootstrap.servers": gateway, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 4 and time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            got.append((m.offset(), m.value()))
    assert got == [(0, b"x0"), (1, b"x1"), (2, b"x2"), (3, b"x3")]
    # a consumer idle at the log end does not keep the partition awake (its long-polls go on from
    # the closed files); the partition hibernates and a fresh start has everything in place
    consumer.close()
    producer.flush(5)
    wait_hibernated(client, topic_name, {0})
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    handle = ray.get(router.activate.remote(topic_name, 0))
    assert ray.get(handle.offsets.remote()) == (0, 4)


def test_activating_beyond_max_active_partitions_hibernates_the_least_recently_used_idle_partition(
        client, topic_name):
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    ray.get(router.set_partition_idle_ms.remote(600_000))  # only the cap hibernates here
    client.create_topic(topic_name, partitions=3, activate=False)
    first, second = (ray.get(router.activate.remote(topic_name, p)) for p in (0, 1))
    ray.get(second.read_records.remote(0))  # a Python handle's read is use (offsets are monitoring, not use)
    ray.get(first.read_records.remote(0))  # partition 1 is now used less recently than partition 0
    active = {(r["topic"], r["partition"]) for r in client.status() if r.get("active")}
    previous = ray.get(router.set_max_active_partitions.remote(len(active)))
    try:
        usage = {k: ray.get(router.activate.remote(*k)).usage.remote() for k in active}
        idle = sorted((u[1], k) for k, u in ((k, ray.get(ref)) for k, ref in usage.items()) if u[0] == 0)
        least_recent = idle[0][1]
        ray.get(router.activate.remote(topic_name, 2))  # one over the cap
        now = {(r["topic"], r["partition"]) for r in client.status() if r.get("active")}
    finally:
        ray.get(router.set_max_active_partitions.remote(previous))
    assert now == active - {least_recent} | {(topic_name, 2)}
    assert (topic_name, 0) in now  # used after partition 1: kept


def test_retention_runs_for_hibernated_partitions_waking_only_those_with_segments_to_delete(
        client, broker_dir, topic_name):
    client.create_topic(topic_name, partitions=2, activate=False,
                        config={"retention.ms": "60000", "segment.bytes": "1024"})
    day_ago = int(time.time() * 1000) - 86_400_000
    with client.producer(linger_ms=0) as producer:
        for i in range(30):  # about 4 segments each
            producer.send(topic_name, b"o" * 100, partition=0, timestamp_ms=day_ago + i).result(30)
            producer.send(topic_name, b"n" * 100, partition=1).result(30)
    wait_hibernated(client, topic_name, {0, 1})
    folders = [os.path.join(broker_dir, f"{topic_name}-{p}") for p in (0, 1)]
    before = [sorted(glob.glob(os.path.join(f, "*.log"))) for f in folders]
    assert all(len(logs) > 2 for logs in before)

    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    assert ray.get(router.retention_pass.remote()) == [(topic_name, 0)]  # partition 1 was not woken
    after = [sorted(glob.glob(os.path.join(f, "*.log"))) for f in folders]
    assert after[0] == before[0][-1:] and after[1] == before[1]  # old segments gone, the active one kept
    assert not active_partitions(client, topic_name)  # hibernated again
    start, end = client.call(topic_name, 0, "offsets")
    assert start == int(os.path.basename(before[0][-1])[:-4]) and end == 30


def test_group_commits_reach_hibernated_consumer_offsets_partitions(client, gateway, topic_name):
    from confluent_kafka import Consumer, TopicPartition

    client.create_topic(topic_name, partitions=1, activate=False)
    wait_hibernated(client, "__consumer_offsets", set(range(8)))  # the coordinator's handles are stale now
    group = f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": gateway, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic_name, 0, 7)], asynchronous=False)
        assert [tp.offset for tp in consumer.committed([TopicPartition(topic_name, 0)], timeout=30)] == [7]
    finally:
        consumer.close()


def test_partitions_a_restarted_broker_starts_for_their_data_hibernate_when_idle(client, restart_router, topic_name):
    client.create_topic(topic_name, partitions=2, activate=False)
    assert produce_one(client, topic_name, 0) == 0
    restart_router(partition_idle_ms=IDLE_MS)  # starts partition 0: it holds data
    wait_hibernated(client, topic_name, {0})
    assert produce_one(client, topic_name, 0) == 1


def test_a_partition_ray_restarted_after_a_crash_hibernates_when_idle(client, topic_name, short_idle):
    """Ray restarts a crashed partition actor by itself (no router call follows): its idle
    watch must run from the start, or a restarted partition nobody uses stays a process
    forever (a test that SIGKILLed ``__consumer_offsets`` left one active for the session)."""
    router = short_idle
    ray.get(router.set_partition_idle_ms.remote(600_000))  # awake until killed
    client.create_topic(topic_name, partitions=1, activate=False)
    assert produce_one(client, topic_name, 0) == 0
    actor = client.partition_actor(topic_name, 0)
    pid = ray.get(actor.pid.remote())
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:  # ``pid`` is not traffic: asking it does not start anything in the new process
        try:
            if ray.get(actor.pid.remote(), timeout=10) != pid:
                break
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            pass
        assert time.monotonic() < deadline, "Ray did not restart the partition actor"
        time.sleep(0.2)
    ray.get(router.set_partition_idle_ms.remote(IDLE_MS))
    wait_hibernated(client, topic_name, {0})
    assert produce_one(client, topic_name, 0) == 1


def produce_one(client, topic: str, partition: int) -> int:
    with client.producer(linger_ms=0) as producer:
        return producer.send(topic, b"r", partition=partition).result(60).offset
