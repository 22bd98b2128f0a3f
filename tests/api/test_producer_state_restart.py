"""Idempotent-producer state across a SIGKILLed partition actor: snapshot plus tail replay, no rescan."""
from __future__ import annotations

import os
import signal
import time

import ray

from logan_ray.storage.record_builder import build_batch


def _batch(pid: int, seq: int) -> bytes:
    return build_batch([b"s%d-%d" % (seq, i) + b"v" * 400 for i in range(2)],
                       producer_id=pid, producer_epoch=0, base_sequence=seq)


def _restarted(actor, old_pid: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if ray.get(actor.pid.remote(), timeout=10) != old_pid:
                return
        except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError, ray.exceptions.GetTimeoutError):
            pass
        time.sleep(0.2)
    raise AssertionError("the partition actor did not come back")


def _active_base(directory: str) -> int:
    return max(int(name[:20]) for name in os.listdir(directory) if name.endswith(".log"))


def test_sigkill_keeps_duplicate_detection_from_the_snapshot_and_the_tail(client, topic_name):
    client.create_topic(topic_name, partitions=1, config={"segment.bytes": "20000"})
    actor = client.partition_actor(topic_name, 0)
    pid = 1_000_000 + os.getpid()  # a producer id of our own; the broker only checks sequences
    acked: dict[int, int] = {}
    seq = 0
    directory = None
    # Stop two batches after a roll: the newest segment then holds fewer than five batches.
    for _ in range(1000):
        acked[seq] = ray.get(actor.append.remote(_batch(pid, seq)))[0]
        seq += 2
        if directory is None:
            directory = os.path.dirname(ray.get(actor.locate.remote(0, 1))[0][0][0])
        base = _active_base(directory)
        end = acked[seq - 2] + 2
        if base > 0 and end - base == 4:
            break
    else:
        raise AssertionError(f"no roll seen in {directory}")
    old = ray.get(actor.pid.remote())
    os.kill(old, signal.SIGKILL)
    _restarted(actor, old)

    stats = ray.get(actor.stats.remote())
    assert stats["producer_snapshot_offset"] == base  # loaded the snapshot of the last roll
    assert stats["producer_batches_replayed"] == 2  # and read only the two batches after it
    started = time.monotonic()
    for s in sorted(acked)[-5:]:  # three of these live only in the snapshot
        assert ray.get(actor.append.remote(_batch(pid, s)))[0] == acked[s]
    assert ray.get(actor.offsets.remote())[1] == end  # nothing written twice
    assert ray.get(actor.append.remote(_batch(pid, seq)))[0] == end  # the next sequence goes straight in
    assert time.monotonic() - started < 4.0
