"""Power loss and a failing disk under a broker: acks=all survives, acks=1 is lost only from the
unsynced tail, and an fsync error takes the partition offline until it is reopened.

The partition's folder is a FUSE file system that drops every write not yet
fsynced when it loses power (tests/tooling/volatile_fs.py). Kafka produce
requests with acks=all and acks=1 go through the real gateway, the node-local
channel and the partition actor; then the actor is frozen (SIGSTOP: it does no
more I/O), the file system loses power and is mounted again from what was
durable, and the frozen actor is SIGKILLed so Ray restarts it: it recovers from
the disk, and the gateway serves what survived.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import time

import pytest
import ray
from confluent_kafka import Consumer, TopicPartition

from logan_ray.actors.group_coordinator import OFFSETS_PARTITIONS, group_coordinator
from logan_ray.groups import OFFSETS_TOPIC
from logan_ray.groups.offsets_log import partition_for_group
from logan_ray.protocol import errors as codes
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_records
from wire_client import Wire, fetch_body, produce_body

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tooling"))
from power_loss_checks import check_recovered  # noqa: E402
from volatile_fs import VolatileMount  # noqa: E402

PRODUCE, FETCH = 0, 1


def _produce(w: Wire, topic: str, value: bytes, acks: int) -> dict:
    return w.call(PRODUCE, 9, produce_body(topic, 0, build_batch([value]), acks))["responses"][0][
        "partition_responses"][0]


def _fetch_everything(gateway: str, topic: str, timeout: float = 60.0) -> list[tuple[int, bytes]]:
    """All records from offset 0 once the restarted partition serves again."""
    deadline = time.monotonic() + timeout
    out: list[tuple[int, bytes]] = []
    while True:
        try:
            with Wire(gateway) as w:
                offset = len(out)
                while True:
                    p = w.call(FETCH, 12, fetch_body(topic, [(0, offset, 1 << 20)]))["responses"][0]["partitions"][0]
                    if p["error_code"] != 0:
                        raise RuntimeError(f"fetch error {p['error_code']}")
                    recs = [(r.offset, r.value) for r in decode_records(p["records"] or b"") if r.offset >= offset]
                    out += recs
                    offset = len(out)
                    if offset >= p["high_watermark"]:
                        return out
        except (RuntimeError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


@pytest.mark.slow
def test_power_loss_under_the_broker_keeps_every_acks_all_record(client, gateway, topic_name, broker_dir, tmp_path):
    folder = os.path.join(broker_dir, f"{topic_name}-0")
    fs = VolatileMount(str(tmp_path / "backing"), folder)
    fs.mount()
    try:
        client.create_topic(topic_name, 1, {"segment.bytes": "16384"})
        acked: dict[int, tuple[bytes, str]] = {}
        lock = threading.Lock()
        errors: list[BaseException] = []

        def producer(t: int, acks: int) -> None:
            try:
                with Wire(gateway) as w:
                    for i in range(50):
                        value = b"t%d-%d-" % (t, i) + b"x" * 300
                        r = _produce(w, topic_name, value, acks)
                        assert r["error_code"] == 0, r
                        with lock:
                            acked[r["base_offset"]] = (value, "all" if acks == -1 else "1")
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=producer, args=(t, -1 if t % 2 == 0 else 1)) for t in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        tail_at = time.time()
        with Wire(gateway) as w:  # an unsynced tail, acknowledged with acks=1
            for i in range(20):
                value = b"tail-%d-" % i + b"x" * 300
                r = _produce(w, topic_name, value, 1)
                assert r["error_code"] == 0
                acked[r["base_offset"]] = (value, "1")
        actor = client.partition_actor(topic_name, 0)
        pid = ray.get(actor.pid.remote())
        os.kill(pid, signal.SIGSTOP)  # the broker stops doing I/O at this instant...
        stopped_at = time.time()
        try:
            fs.power_loss()  # ...the power goes: every unsynced write is gone
            fs.mount()
        finally:
            os.kill(pid, signal.SIGKILL)  # Ray restarts the partition, which recovers from the disk
        recovered = _fetch_everything(gateway, topic_name)
        try:
            end = check_recovered(recovered, acked)
        except AssertionError as e:  # which fsync made the tail durable, if one did
            raise AssertionError(f"{e}\ntail produced at {tail_at:.3f}, broker stopped at {stopped_at:.3f}; "
                                 f"last fsyncs:\n{fs.fsync_journal()}") from e
        with Wire(gateway) as w:  # offsets continue after the recovered end: none is reused
            r = _produce(w, topic_name, b"after", -1)
            assert (r["error_code"], r["base_offset"]) == (0, end)
    finally:
        try:
            client.delete_topic(topic_name)
        except Exception:  # the folder is a mount point: deletion may not get rid of it; unmount anyway
            pass
        finally:
            fs.unmount()


def test_fsync_error_takes_the_partition_offline_until_it_is_reopened(client, gateway, topic_name, broker_dir, tmp_path):
    """A real EIO from the file system on fsync: produce and fetch answer KAFKA_STORAGE_ERROR until reopened."""
    folder = os.path.join(broker_dir, f"{topic_name}-0")
    fs = VolatileMount(str(tmp_path / "backing"), folder)
    fs.mount()
    try:
        client.create_topic(topic_name)
        with Wire(gateway) as w:
            assert _produce(w, topic_name, b"safe-0", -1)["error_code"] == 0
            assert _produce(w, topic_name, b"safe-1", -1)["error_code"] == 0
            fs.fail_fsync()
            assert _produce(w, topic_name, b"lost", -1)["error_code"] == codes.KAFKA_STORAGE_ERROR
            fs.fail_fsync(False)  # the disk answers again, but the pages that failed are gone
            for acks in (-1, 1):
                assert _produce(w, topic_name, b"refused", acks)["error_code"] == codes.KAFKA_STORAGE_ERROR
            p = w.call(FETCH, 12, fetch_body(topic_name, [(0, 0, 1 << 20)]))["responses"][0]["partitions"][0]
            assert p["error_code"] == codes.KAFKA_STORAGE_ERROR
        # The operator's action: reopen the log, which recovers from what the disk holds
        # (a restart of the partition does the same; see the power-loss test above).
        assert client.reopen_partition(topic_name, 0) == (0, 2)  # what `logan-ray partition reopen` runs
        assert [v for _, v in _fetch_everything(gateway, topic_name)] == [b"safe-0", b"safe-1"]
        with Wire(gateway) as w:
            r = _produce(w, topic_name, b"after", -1)
            assert (r["error_code"], r["base_offset"]) == (0, 2)
    finally:
        try:
            client.delete_topic(topic_name)
        except Exception:  # the folder is a mount point: deletion may not get rid of it; unmount anyway
            pass
        finally:
            fs.unmount()


def _copy_files(src: str, dst: str, durable: bool = False) -> None:
    for name in os.listdir(src):
        path = os.path.join(src, name)
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as f, open(os.path.join(dst, name), "wb") as g:
            shutil.copyfileobj(f, g)
            if durable:
                g.flush()
                os.fsync(g.fileno())
    if durable:
        fd = os.open(dst, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _restart(handle, pid: int) -> None:
    """SIGKILL a (stopped) actor process and wait until Ray's restarted actor answers."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:
        try:
            if ray.get(handle.pid.remote(), timeout=10) != pid:
                return
        except Exception:  # restarting
            if time.monotonic() > deadline:
                raise
        time.sleep(0.2)


def test_power_loss_keeps_every_acknowledged_offset_commit(client, gateway, topic_name, broker_dir, tmp_path):
    """OffsetCommit is answered only once its record of ``__consumer_offsets`` is on disk (Kafka writes
    commits with acks=-1): a power loss right after the answer, then a coordinator restart that
    replays the log, still finds the committed offset."""
    group = f"{topic_name}-group"
    folder = os.path.join(broker_dir, f"{OFFSETS_TOPIC}-{partition_for_group(group, OFFSETS_PARTITIONS)}")
    offsets_actor = client.partition_actor(OFFSETS_TOPIC, partition_for_group(group, OFFSETS_PARTITIONS))
    coordinator = group_coordinator(group)
    client.create_topic(topic_name, 1)
    snapshot, after = tmp_path / "before", tmp_path / "after"
    snapshot.mkdir()
    after.mkdir()
    fs = VolatileMount(str(tmp_path / "backing"), folder)
    pid = ray.get(offsets_actor.pid.remote())
    os.kill(pid, signal.SIGSTOP)  # quiet while its folder moves onto the volatile file system
    try:
        _copy_files(folder, str(snapshot))
        fs.mount()
        _copy_files(str(snapshot), folder, durable=True)
    finally:
        _restart(offsets_actor, pid)
    try:
        consumer = Consumer({"bootstrap.servers": gateway, "group.id": group, "enable.auto.commit": False})
        try:
            consumer.commit(offsets=[TopicPartition(topic_name, 0, 42)], asynchronous=False)
        finally:
            consumer.close()
        pid = ray.get(offsets_actor.pid.remote())
        os.kill(pid, signal.SIGSTOP)
        try:
            fs.power_loss()  # every write not yet fsynced is gone
            fs.mount()
        finally:
            _restart(offsets_actor, pid)
        _restart(coordinator, ray.get(coordinator.pid.remote()))  # forgets, then replays the log
        consumer = Consumer({"bootstrap.servers": gateway, "group.id": group})
        try:
            [committed] = consumer.committed([TopicPartition(topic_name, 0)], timeout=30)
        finally:
            consumer.close()
        assert committed.offset == 42, f"the acknowledged commit was lost: {committed}"
    finally:  # put the durable state back on the real folder and the partition on it
        pid = ray.get(offsets_actor.pid.remote())
        os.kill(pid, signal.SIGSTOP)
        try:
            _copy_files(folder, str(after))
            fs.unmount()
            for name in os.listdir(folder):
                os.unlink(os.path.join(folder, name))
            _copy_files(str(after), folder)
        finally:
            _restart(offsets_actor, pid)
