"""A Produce the partition cannot take in time is answered REQUEST_TIMED_OUT, as Kafka answers.

The partition's actor is held in its activation (a real stop of its process at a fault
point, ``actors/fault_points.py``), the way a slow start on a loaded node holds it. The
client still gets its answer at the request's ``timeout_ms``, on a connection that stays
usable; once the actor is up, the batch it had was appended (as with Kafka, a timed-out
request may still be written) and the next produce follows it at the next offset.
"""
from __future__ import annotations

import os
import time

from logan_ray.actors.fault_points import pause_file
from logan_ray.protocol import errors as codes
from logan_ray.storage.record_builder import build_batch
from wire_client import Wire, metadata_body, produce_body


def _wait_paused(armed: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not os.path.exists(armed + ".paused"):
        assert time.monotonic() < deadline, f"no actor stopped at {armed}"
        time.sleep(0.02)


def test_produce_to_a_partition_stuck_in_activation_is_answered_request_timed_out_at_its_timeout(
        client, gateway, broker_dir, topic_name):
    client.create_topic(topic_name, partitions=1, activate=False)  # the first produce starts it
    armed = pause_file(os.path.join(broker_dir, f"{topic_name}-0"), "activate-config")
    os.makedirs(os.path.dirname(armed), exist_ok=True)
    open(armed, "w").close()
    try:
        with Wire(gateway, timeout=30) as w:
            body = produce_body(topic_name, 0, build_batch([b"first"]), acks=-1)
            body["timeout_ms"] = 1500
            t0 = time.monotonic()
            answer = w.call(0, 9, body)["responses"][0]["partition_responses"][0]
            waited = time.monotonic() - t0
            assert answer["error_code"] == codes.REQUEST_TIMED_OUT, answer
            assert 1.4 <= waited < 10, waited
            _wait_paused(armed)  # it timed out because the actor really was held
            assert w.call(3, 1, metadata_body([topic_name]))["topics"][0]["error_code"] == 0  # connection kept
            os.unlink(armed + ".paused")  # the actor finishes starting
            body = produce_body(topic_name, 0, build_batch([b"second"]), acks=-1)
            body["timeout_ms"] = 30000
            answer = w.call(0, 9, body)["responses"][0]["partition_responses"][0]
            assert answer["error_code"] == 0, answer
            assert answer["base_offset"] == 1  # the timed-out batch went in first, at offset 0
    finally:
        for path in (armed, armed + ".paused"):
            if os.path.exists(path):
                os.unlink(path)
    consumer = client.consumer(auto_offset_reset="earliest")
    consumer.assign([(topic_name, 0)])
    got, deadline = [], time.monotonic() + 30
    while len(got) < 2 and time.monotonic() < deadline:
        got += [(r.offset, r.value) for r in consumer.poll(500)]
    assert got == [(0, b"first"), (1, b"second")]
