"""logan_ray.stream on the session's Ray: records flow, stops resume, poison records are dead-lettered,
and a SIGKILLed worker loses nothing.

The functions handed to ``run`` are defined inside the tests: they travel to the worker
actors by value (a test module is not importable from a Ray worker process).
"""
from __future__ import annotations

import os
import signal
import time
from collections import Counter

import pyarrow as pa
import pytest
import ray

from logan_ray import stream


def _values(client, topic: str, want: int, timeout: float = 20.0, settle: float = 0.0) -> list[bytes]:
    """Every value of ``topic`` from the beginning: until ``want`` are read (then ``settle`` s more, for
    duplicates to show) or ``timeout``."""
    c = client.consumer(topic, auto_offset_reset="earliest")
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < want and time.monotonic() < deadline:
            got.extend(r.value for r in c.poll(300))
        end = time.monotonic() + settle
        while time.monotonic() < end:
            got.extend(r.value for r in c.poll(200))
    finally:
        c.close()
    return got


def _records(client, topic: str, want: int, timeout: float = 20.0) -> list:
    c = client.consumer(topic, auto_offset_reset="earliest")
    got: list = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < want and time.monotonic() < deadline:
            got.extend(c.poll(300))
    finally:
        c.close()
    return got


def _produce(client, topic: str, values: list[bytes], partitions: int = 1) -> None:
    """``values`` split evenly over the first ``partitions`` partitions, in order within each."""
    with client.producer() as p:
        for part in range(partitions):
            p.send_batch(topic, [bytes(v) for v in values[part::partitions]], partition=part)


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_records_flow_through_fn_into_output_topic(client, topic_name):
    source, out = topic_name, f"{topic_name}-out"
    client.create_topic(source, partitions=3)
    client.create_topic(out, partitions=1)
    values = [f"v{i}".encode() for i in range(3000)]
    _produce(client, source, values, partitions=3)

    def shout(batch: pa.RecordBatch) -> pa.Table:
        return pa.table({"value": pa.array([v + b"!" for v in batch.column("value").to_pylist()], pa.binary())})

    pipeline = stream.run(client, [source], group=f"{topic_name}-g", fn=shout, output_topic=out, workers=2)
    try:
        got = _values(client, out, len(values))
        assert Counter(got) == Counter(v + b"!" for v in values)
        _wait_for(lambda: pipeline.status().total_lag == 0, 10, "the group's commits to reach the log end")
        status = pipeline.status()
        assert status.state == "running" and status.workers == 2
        assert status.records_processed >= len(values)
        assert set(status.lag) == {(source, p) for p in range(3)}
        # the group split the three partitions between the two workers, once it settled: a worker that
        # joined late (its actor's start, in a loaded run) rebalances the group, and while that runs every
        # worker's assignment is empty (seen in a full run of stop 49)
        def owned() -> list:
            return sorted(tp for parts in pipeline.status().assignment.values() for tp in parts)

        _wait_for(lambda: owned() == [(source, p) for p in range(3)], 30, "every partition assigned to a worker")
    finally:
        final = pipeline.stop()
    assert final.state == "stopped" and final.workers == 0


def test_stop_then_run_again_continues_from_committed_offsets(client, topic_name):
    source, out, group = topic_name, f"{topic_name}-out", f"{topic_name}-g"
    client.create_topic(source, partitions=2)
    client.create_topic(out, partitions=1)

    def same(batch: pa.RecordBatch) -> pa.RecordBatch:
        return batch.select(["key", "value"])

    first = [f"a{i}".encode() for i in range(500)]
    _produce(client, source, first, partitions=2)
    pipeline = stream.run(client, source, group=group, fn=same, output_topic=out, workers=2)
    try:
        assert len(_values(client, out, len(first))) >= len(first)
    finally:
        pipeline.stop()
    second = [f"b{i}".encode() for i in range(500)]
    _produce(client, source, second, partitions=2)  # while no pipeline runs
    pipeline = stream.run(client, source, group=group, fn=same, output_topic=out, workers=1)
    try:
        got = _values(client, out, len(first) + len(second), settle=1.5)
    finally:
        pipeline.stop()
    # a clean stop committed everything it had processed: nothing twice, nothing missing
    assert Counter(got) == Counter(first + second)


def test_poison_record_goes_to_dead_letter_topic_and_the_pipeline_goes_on(client, topic_name):
    source, out, dlq = topic_name, f"{topic_name}-out", f"{topic_name}-dlq"
    for t in (source, out, dlq):
        client.create_topic(t, partitions=1)
    values = [f"r{i}".encode() for i in range(200)]
    values[137] = b"poison"
    _produce(client, source, values)

    def careful(batch: pa.RecordBatch) -> pa.Table:
        vals = batch.column("value").to_pylist()
        if b"poison" in vals:
            raise ValueError("cannot digest poison")
        return pa.table({"value": pa.array(vals, pa.binary())})

    pipeline = stream.run(client, source, group=f"{topic_name}-g", fn=careful, output_topic=out,
                          dead_letter_topic=dlq)
    try:
        got = _values(client, out, len(values) - 1)
        assert Counter(got) == Counter(v for v in values if v != b"poison")
        letters = _records(client, dlq, 1)
        assert len(letters) == 1
        letter = letters[0]
        assert letter.value == b"poison"
        headers = dict(letter.headers)
        assert headers[stream.DLQ_TOPIC] == source.encode()
        assert headers[stream.DLQ_PARTITION] == b"0"
        assert headers[stream.DLQ_OFFSET] == b"137"
        assert b"ValueError: cannot digest poison" in headers[stream.DLQ_ERROR]
        # the pipeline goes on past the poison record
        _produce(client, source, [b"after-1", b"after-2"])
        later = _values(client, out, len(values) + 1)
        assert {b"after-1", b"after-2"} <= set(later)
        status = pipeline.status()
        assert status.state == "running" and status.dead_letters == 1
    finally:
        pipeline.stop()


def test_sigkill_of_a_worker_loses_no_record(client, topic_name):
    source, out = topic_name, f"{topic_name}-out"
    client.create_topic(source, partitions=2)
    client.create_topic(out, partitions=1)
    before = [f"k{i}".encode() for i in range(1200)]
    _produce(client, source, before, partitions=2)

    def slow(batch: pa.RecordBatch) -> pa.RecordBatch:
        time.sleep(0.2)  # small batches, slowly: the kill lands mid-stream
        return batch.select(["value"])

    pipeline = stream.run(client, source, group=f"{topic_name}-g", fn=slow, output_topic=out, workers=2,
                          max_batch_records=50)
    try:
        _wait_for(lambda: pipeline.status().records_processed >= 150, 15, "the pipeline to get going")
        stats = [ray.get(w.stats.remote()) for w in pipeline.workers()]
        busy = [s for s in stats if s["records"] and s["assignment"]]
        assert busy and sum(s["records"] for s in stats) < len(before), "the kill must land mid-stream"
        os.kill(busy[0]["pid"], signal.SIGKILL)
        after = [f"m{i}".encode() for i in range(300)]
        _produce(client, source, after, partitions=2)
        got = _values(client, out, len(before) + len(after), timeout=40)
        missing = set(before + after) - set(got)
        assert not missing, f"{len(missing)} records lost, e.g. {sorted(missing)[:5]}"
        status = pipeline.status()
        assert status.state == "running" and status.worker_restarts >= 1 and status.workers == 2
    finally:
        pipeline.stop()


def test_adding_and_removing_workers_rebalances_the_partitions(client, topic_name):
    source, out = topic_name, f"{topic_name}-out"
    client.create_topic(source, partitions=3)
    client.create_topic(out, partitions=1)

    def same(batch: pa.RecordBatch) -> pa.RecordBatch:
        return batch.select(["value"])

    def owners(pipeline) -> list[int]:
        return sorted(len(parts) for parts in pipeline.status().assignment.values())

    pipeline = stream.run(client, source, group=f"{topic_name}-g", fn=same, output_topic=out, workers=1)
    try:
        _wait_for(lambda: owners(pipeline) == [3], 15, "one worker to own the three partitions")
        pipeline.scale(3)
        _wait_for(lambda: owners(pipeline) == [1, 1, 1], 15, "three workers to own one partition each")
        pipeline.scale(1)
        _wait_for(lambda: owners(pipeline) == [3], 15, "the last worker to own all three again")
        values = [f"s{i}".encode() for i in range(300)]
        _produce(client, source, values, partitions=3)
        assert Counter(_values(client, out, len(values))) == Counter(values)
    finally:
        pipeline.stop()


def test_without_a_dead_letter_topic_a_poison_record_fails_the_pipeline(client, topic_name):
    source, out = topic_name, f"{topic_name}-out"
    client.create_topic(source, partitions=1)
    client.create_topic(out, partitions=1)
    _produce(client, source, [b"ok-0", b"ok-1", b"poison", b"ok-3"])

    def careful(batch: pa.RecordBatch) -> pa.Table:
        vals = batch.column("value").to_pylist()
        if b"poison" in vals:
            raise ValueError("cannot digest poison")
        return pa.table({"value": pa.array(vals, pa.binary())})

    pipeline = stream.run(client, source, group=f"{topic_name}-g", fn=careful, output_topic=out)
    try:
        with pytest.raises(stream.PipelineFailedError, match=f"{source}-0 offset 2"):
            pipeline.wait(timeout=20)
        status = pipeline.status()
        assert status.state == "failed" and status.workers == 0 and status.worker_restarts == 0
        assert status.lag == {(source, 0): 4}  # nothing committed: a fixed function starts over here
    finally:
        pipeline.stop()
