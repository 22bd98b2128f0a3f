"""When a stream worker commits (logan_ray/stream/worker.py), without Ray: processed offsets wait
for the commit interval, revoked partitions' offsets are never committed later, and the counts
follow the commits."""
from __future__ import annotations

import pyarrow as pa

from logan_ray.stream.worker import StreamWorker, WorkerSpec


class _Consumer:
    def __init__(self) -> None:
        self.commits: list[dict] = []

    def commit(self, offsets: dict) -> None:
        self.commits.append(dict(offsets))


def _table(partition: int, offsets: list[int]) -> pa.Table:
    n = len(offsets)
    return pa.table({"topic": ["in"] * n, "partition": pa.array([partition] * n, pa.int32()),
                     "offset": pa.array(offsets, pa.int64()), "timestamp": pa.array([0] * n, pa.int64()),
                     "timestamp_type": pa.array([0] * n, pa.int8()), "key": pa.array([None] * n, pa.binary()),
                     "value": pa.array([b"v"] * n, pa.binary()),
                     "headers": pa.array([[]] * n, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))})


def _worker() -> StreamWorker:
    return StreamWorker(WorkerSpec(topics=("in",), group="g", fn=lambda batch: None), "w0")


def test_processed_offsets_are_committed_together_and_counted_once_committed():
    w, consumer = _worker(), _Consumer()
    w._process(_table(0, [5, 6]), consumer, None)
    w._process(_table(1, [9]), consumer, None)
    assert consumer.commits == [] and w.stats()["records"] == 0  # not committed yet: not counted
    w._commit(consumer)
    assert consumer.commits == [{("in", 0): 7, ("in", 1): 10}]
    assert w.stats()["records"] == 3 and w.stats()["batches"] == 2


def test_offsets_of_revoked_partitions_are_never_committed_after_the_rebalance():
    w, consumer = _worker(), _Consumer()
    w._process(_table(0, [5, 6]), consumer, None)
    w._on_revoke([])  # the group moves the partitions: another worker starts from the last commit
    w._process(_table(1, [9]), consumer, None)  # a partition it got back afterwards
    w._commit(consumer)
    assert consumer.commits == [{("in", 1): 10}]  # partition 0's 7 would overwrite its new owner's progress
    assert w.stats()["records"] == 1
