"""acks on the wire: acks=all answered only once fsynced; a full disk answers KAFKA_STORAGE_ERROR (56).

The full disk is real: the partition's folder is a 1 MiB tmpfs, filled to the brim.
"""
from __future__ import annotations

import errno
import os
import subprocess

import ray

from logan_ray.protocol import errors as codes
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_records
from wire_client import Wire, fetch_body, produce_body

PRODUCE, FETCH = 0, 1


def _produce(w: Wire, topic: str, records: bytes, acks: int) -> dict:
    return w.call(PRODUCE, 9, produce_body(topic, 0, records, acks))["responses"][0]["partition_responses"][0]


def _fetch_all(w: Wire, topic: str) -> tuple[int, list[bytes]]:
    p = w.call(FETCH, 12, fetch_body(topic, [(0, 0, 8 << 20)]))["responses"][0]["partitions"][0]
    return p["error_code"], [r.value for r in decode_records(p["records"] or b"")]


def test_acks_all_is_fsynced_before_the_answer_and_acks_1_is_not(client, gateway, topic_name):
    client.create_topic(topic_name)
    actor = client.partition_actor(topic_name, 0)
    with Wire(gateway) as w:
        assert _produce(w, topic_name, build_batch([b"a", b"b"]), acks=1)["error_code"] == 0
        s = ray.get(actor.stats.remote())
        assert (s["log_end_offset"], s["recovery_point"]) == (2, 0)
        r = _produce(w, topic_name, build_batch([b"c"]), acks=-1)
        assert (r["error_code"], r["base_offset"]) == (0, 2)
        s = ray.get(actor.stats.remote())
        assert s["recovery_point"] == s["log_end_offset"] == 3


def _fill(path: str, keep_free: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        while True:
            try:
                os.write(fd, b"\1" * 4096)
            except OSError as e:
                assert e.errno == errno.ENOSPC
                break
    finally:
        os.close(fd)
    os.truncate(path, max(0, os.path.getsize(path) - keep_free))


def test_full_disk_answers_storage_error_and_produce_resumes_at_the_right_offset(client, gateway, topic_name,
                                                                                 broker_dir):
    folder = os.path.join(broker_dir, f"{topic_name}-0")
    os.makedirs(folder)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", folder], check=True)
    filler = os.path.join(folder, "filler")
    try:
        client.create_topic(topic_name)
        value = b"x" * 1000
        with Wire(gateway) as w:
            acked = []
            for i in range(3):
                assert _produce(w, topic_name, build_batch([value + b"%d" % i]), acks=-1)["error_code"] == 0
                acked.append(value + b"%d" % i)
            _fill(filler, keep_free=8 * 1024)
            codes_seen = []
            i = len(acked)
            while len(codes_seen) < 3:
                r = _produce(w, topic_name, build_batch([value + b"%d" % i]), acks=-1)
                if r["error_code"] == 0:
                    assert not codes_seen and r["base_offset"] == len(acked)
                    acked.append(value + b"%d" % i)
                    i += 1
                else:
                    codes_seen.append(r["error_code"])
            assert set(codes_seen) == {codes.KAFKA_STORAGE_ERROR}
            assert _fetch_all(w, topic_name) == (0, acked)  # nothing acknowledged is lost; reads still work
            os.remove(filler)  # space returns
            r = _produce(w, topic_name, build_batch([b"after"]), acks=-1)
            assert (r["error_code"], r["base_offset"]) == (0, len(acked))
            assert _fetch_all(w, topic_name) == (0, acked + [b"after"])
    finally:
        try:
            client.delete_topic(topic_name)
        except Exception:  # the folder is a mount point: deletion may not get rid of it; unmount anyway
            pass
        finally:
            subprocess.run(["umount", "-l", folder], check=False)
