"""write_topic's appends stay inside the broker's duplicate window and its batches inside max.message.bytes."""
from __future__ import annotations

import pyarrow as pa
import pytest
import ray

from logan_ray.data.sink import TopicDatasink
from logan_ray.errors import RecordTooLargeError
from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.producer_state import RETAINED_BATCHES


@ray.remote(num_cpus=0)
class AppendRecorder:
    """Stands in for a partition actor: remembers the batch sizes of every append call."""

    def __init__(self) -> None:
        self.calls: list[list[int]] = []
        self.durable: list[bool] = []

    def append(self, data: bytes) -> tuple[int, int, int]:
        self.calls.append([h.size for _, h in iter_headers(data)])
        self.durable.append(False)
        return 0, -1, 0

    def append_durable(self, data: bytes) -> tuple[int, int, int]:
        self.append(data)
        self.durable[-1] = True
        return 0, -1, 0

    def how(self) -> list[bool]:
        return self.durable

    def seen(self) -> list[list[int]]:
        return self.calls


def _sink(actor, **kw) -> TopicDatasink:
    return TopicDatasink("t", [actor], None, key=None, value="value", partition=None, timestamp=None,
                         headers=None, key_format=None, value_format=None, partitioner=None, **kw)


def test_appends_carry_at_most_the_duplicate_window_and_batches_fit_the_topic(client):
    actor = AppendRecorder.remote()
    sink = _sink(actor, compression=0, batch_bytes=512 << 10, max_message_bytes=20_000)
    table = pa.table({"value": [b"v" * 3000] * 200})  # ~600 KB: dozens of 20 KB batches
    assert sink._write_table(table, 1, {}) == {0: 200}
    calls = ray.get(actor.seen.remote())
    assert len(calls) > 1
    assert all(1 <= len(c) <= RETAINED_BATCHES for c in calls)
    assert all(size <= 20_000 for c in calls for size in c)


def test_a_record_over_the_topic_limit_fails_the_write(client):
    actor = AppendRecorder.remote()
    sink = _sink(actor, compression=0, batch_bytes=512 << 10, max_message_bytes=20_000)
    with pytest.raises(RecordTooLargeError):
        sink._write_table(pa.table({"value": [b"v" * 30_000]}), 1, {})
    assert ray.get(actor.seen.remote()) == []


def test_writes_wait_for_fsync_unless_asked_for_acks_1(client):
    """write_topic defaults to acks=all like Kafka's producer: each append is answered once fsynced."""
    table = pa.table({"value": [b"v" * 100] * 10})
    for durable in (True, False):
        actor = AppendRecorder.remote()
        sink = _sink(actor, compression=0, batch_bytes=512 << 10, durable=durable)
        sink._write_table(table, 1, {})
        assert ray.get(actor.how.remote()) == [durable]
