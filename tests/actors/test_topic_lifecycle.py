"""A topic's config and its folders across crashes: restarts keep the altered config, deletion is
atomic (a crash at any step never brings old records back to a topic re-created with the name),
and a data dir serves one broker only."""
from __future__ import annotations

import filecmp
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import ray

from logan_ray.errors import LoganError

DAY_MS = 86_400_000


def _wait_for(call, timeout: float = 60.0):
    """Poll a Ray call until the actor behind it answers again (Ray restarts it after SIGKILL)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return ray.get(call(), timeout=10)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError, ray.exceptions.ActorUnavailableError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_altered_config_survives_partition_sigkill_and_retention_keeps_old_segments(client, topic_name):
    client.create_topic(topic_name, partitions=1, config={"segment.bytes": "4096"})  # retention: 7 days
    producer = client.producer(linger_ms=0)
    month_ago = int(time.time() * 1000) - 30 * DAY_MS
    for i in range(40):
        producer.send(topic_name, b"x" * 400, timestamp_ms=month_ago + i, partition=0)
        producer.flush()
    producer.close()
    client.alter_topic(topic_name, {"retention.ms": "-1"})
    actor = client.partition_actor(topic_name, 0)
    assert ray.get(actor.stats.remote())["segment_count"] > 2

    os.kill(ray.get(actor.pid.remote()), signal.SIGKILL)
    config = _wait_for(actor.config.remote)

    assert config["retention.ms"] == "-1"  # from the metadata, not the creation-time arguments
    assert ray.get(actor.apply_retention.remote()) == 0
    assert ray.get(actor.offsets.remote()) == (0, 40)


def test_router_sigkilled_mid_deletion_then_recreate_brings_back_no_old_record(client, broker_dir, topic_name):
    client.create_topic(topic_name, partitions=2)
    producer = client.producer()
    for p in (0, 1):
        for i in range(5):
            producer.send(topic_name, b"old-%d" % i, partition=p)
    producer.flush()
    producer.close()
    leftover = os.path.join(broker_dir, f"{topic_name}-9.0123456789abcdef-delete")  # an earlier crash's remains
    os.makedirs(leftover)
    router_pid = ray.get(client.router.__ray_call__.remote(lambda self: os.getpid()))

    ray.get(client.router.set_crash_point.remote("deletion-recorded"))
    with pytest.raises((LoganError, ray.exceptions.RayActorError)):
        client.delete_topic(topic_name)  # the router dies after recording the deletion (Ray retries: gone)
    assert _wait_for(lambda: client.router.__ray_call__.remote(lambda self: os.getpid())) != router_pid
    assert topic_name not in client.list_topics()

    client.create_topic(topic_name, partitions=2)
    assert client.partition_offsets(topic_name) == {0: (0, 0), 1: (0, 0)}
    for p in (0, 1):
        assert ray.get(client.partition_actor(topic_name, p).read_records.remote(0)) == []
    with open(os.path.join(broker_dir, "cluster-metadata.json")) as f:
        assert json.load(f)["deleting"] == []
    assert glob.glob(os.path.join(broker_dir, f"{glob.escape(topic_name)}-*-delete")) == []


def test_folder_of_another_topic_id_is_not_served_to_the_recreated_topic_and_is_kept_aside(
        client, broker_dir, topic_name, tmp_path):
    """A cut-short deletion leaves it, but so does lost metadata (issue 33): never served, never removed."""
    client.create_topic(topic_name, partitions=1)
    producer = client.producer()
    for i in range(20):
        producer.send(topic_name, b"old-%d" % i, partition=0)
    producer.close()
    folder = os.path.join(broker_dir, f"{topic_name}-0")
    ray.get(client.partition_actor(topic_name, 0).flush.remote())
    shutil.copytree(folder, tmp_path / "kept")

    client.delete_topic(topic_name)
    assert not os.path.exists(folder)
    shutil.copytree(tmp_path / "kept", folder)  # as if the removal never happened (crash, node down)
    client.create_topic(topic_name, partitions=1)

    assert client.partition_offsets(topic_name) == {0: (0, 0)}
    assert ray.get(client.partition_actor(topic_name, 0).read_records.remote(0)) == []
    strays = glob.glob(os.path.join(broker_dir, f"{glob.escape(topic_name)}-0.*-stray"))
    assert len(strays) == 1, os.listdir(broker_dir)  # the old data, intact, for an operator to judge
    kept = sorted(n for n in os.listdir(tmp_path / "kept") if n.endswith(".log"))
    assert kept and all(filecmp.cmp(tmp_path / "kept" / n, os.path.join(strays[0], n), shallow=False) for n in kept)
    producer = client.producer()
    assert producer.send(topic_name, b"new", partition=0).result(timeout=30).offset == 0
    producer.close()
    client.delete_topic(topic_name)  # deleting the topic leaves the stray alone
    assert glob.glob(os.path.join(broker_dir, f"{glob.escape(topic_name)}-0.*-stray")) == strays
    shutil.rmtree(strays[0])


def test_partition_folder_names_its_topic_id_and_deletion_leaves_nothing(client, broker_dir, topic_name):
    info = client.create_topic(topic_name, partitions=1)
    folder = os.path.join(broker_dir, f"{topic_name}-0")
    from logan_ray.storage.partition_dir import read_topic_id

    with open(os.path.join(folder, "partition.metadata")) as f:
        assert f.read().startswith("version: 0\ntopic_id: ")  # Kafka's file and format
    assert read_topic_id(folder) == info["topic_id"]
    client.delete_topic(topic_name)
    assert glob.glob(os.path.join(broker_dir, f"{glob.escape(topic_name)}-0*")) == []


def test_second_broker_on_the_same_data_dir_fails_with_a_clear_error(client, broker_dir):
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "logan_ray.cli", "--data-dir", broker_dir, "start", "--foreground",
                          "--no-gateway"], capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "in use by another logan-ray broker" in out.stderr, out.stderr[-2000:]
    assert time.monotonic() - started < 120
    assert client.list_topics() is not None  # the running broker is untouched


def test_data_dir_lock_is_held_while_the_broker_runs(client, broker_dir):
    from logan_ray.storage.dir_lock import DataDirLock, DataDirLockedError

    with pytest.raises(DataDirLockedError, match="in use by another logan-ray broker"):
        DataDirLock(broker_dir).acquire()
