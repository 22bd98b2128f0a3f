"""write_topic(..., exactly_once=True) and read_topic(isolation_level="read_committed") (issue 35 item 4):
one transaction per write task attempt under a deterministic transactional id, committed by the driver."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

import pyarrow as pa
import pytest
import ray
from ray.data.datasource.datasink import WriteResult

from logan_ray.data import read_topic, write_topic
from logan_ray.data.sink import BATCH_BYTES, TopicDatasink
from logan_ray.data.source import ReadOptions, plan_ranges, read_range
from logan_ray.errors import ExactlyOnceCommitError, ProducerFencedError
from logan_ray.prepared_txn import commit_prepared_transaction

ROWS = 120


def _table(lo: int, hi: int) -> pa.Table:
    return pa.table({"key": [f"k{i}".encode() for i in range(lo, hi)],
                     "value": [f"v{i}".encode() for i in range(lo, hi)]})


def _values(client, topic: str, isolation: str) -> list[bytes]:
    rows = read_topic(topic, client=client, isolation_level=isolation, columns=["value"]).take_all()
    return sorted(r["value"] for r in rows)


def _sink(client, topic: str, prefix: str) -> TopicDatasink:
    """The datasink write_topic(..., exactly_once=True) builds, to run its task function by hand."""
    routes = client.partitions(topic, activate=True)
    return TopicDatasink(topic, [a for a, _node in routes], client.router, key="key", value="value",
                         partition=None, timestamp=None, headers=None, key_format=None, value_format=None,
                         partitioner=None, compression=0, batch_bytes=BATCH_BYTES,
                         transactional_id_prefix=prefix, transaction_timeout_ms=60_000)


def _committed_rows_up_to_log_end(client, topic: str) -> int:
    """Rows a read_committed read of every partition up to its log end returns now."""
    opts = ReadOptions(("value",), None, None, False, True, read_committed=True)
    ranges = plan_ranges(client, topic)  # read_uncommitted bounds: up to the log end
    assert ranges, "the records are in the log"
    return sum(t.num_rows for r in ranges for t in read_range(r, opts))


def test_exactly_once_write_reads_back_each_row_once(client, topic_name):
    client.create_topic(topic_name, 3)
    expected = sorted(f"v{i}".encode() for i in range(ROWS))
    ds = ray.data.from_arrow(_table(0, ROWS)).repartition(3)
    written = write_topic(ds, topic_name, client=client, exactly_once=True)
    assert sum(written.values()) == ROWS
    assert _values(client, topic_name, "read_committed") == expected
    # the markers are no records: read_uncommitted sees the same rows
    assert _values(client, topic_name, "read_uncommitted") == expected
    with pytest.raises(ValueError):
        write_topic(ds, topic_name, client=client, exactly_once=True, acks=1)


def test_a_retried_task_attempt_is_aborted_and_never_seen_twice(client, topic_name):
    client.create_topic(topic_name, 2)
    prefix = f"eo-{uuid.uuid4().hex[:8]}"
    sink = _sink(client, topic_name, prefix)
    ctx = SimpleNamespace(task_idx=0)
    # attempt 1 produced its rows, then its worker died: its transaction stays open
    _counts, first = sink.write([_table(0, ROWS)], ctx)
    assert first.transactional_id == f"{prefix}-0" and first.partitions
    # Ray runs the task again: the same transactional id fences attempt 1 and aborts its records
    counts, second = sink.write([_table(0, ROWS)], ctx)
    assert second.transactional_id == first.transactional_id
    assert second.producer_epoch > first.producer_epoch
    with pytest.raises(ProducerFencedError):
        commit_prepared_transaction(first)  # the superseded attempt can never be committed
    sink.on_write_complete(WriteResult(num_rows=ROWS, size_bytes=0, write_returns=[(counts, second)]))
    assert sink.committed == [second.transactional_id]
    expected = sorted(f"v{i}".encode() for i in range(ROWS))
    assert _values(client, topic_name, "read_committed") == expected
    # both attempts' records are in the log; read_committed drops attempt 1's as aborted
    assert _values(client, topic_name, "read_uncommitted") == sorted(expected * 2)
    # a commit that fails names the transaction
    with pytest.raises(ExactlyOnceCommitError) as info:
        sink.commit([first])
    assert set(info.value.failed) == {first.transactional_id}
    assert isinstance(info.value.failed[first.transactional_id], ProducerFencedError)


def test_nothing_is_visible_to_read_committed_before_the_driver_commits(client, topic_name, monkeypatch):
    client.create_topic(topic_name, 2)
    seen: list[tuple[int, list]] = []
    commit = TopicDatasink.commit

    def look_then_commit(self, txns):
        # on the driver, every task has returned and nothing is committed yet
        seen.append((_committed_rows_up_to_log_end(client, topic_name),
                     plan_ranges(client, topic_name, read_committed=True)))
        commit(self, txns)

    monkeypatch.setattr(TopicDatasink, "commit", look_then_commit)
    ds = ray.data.from_arrow(_table(0, ROWS)).repartition(2)
    write_topic(ds, topic_name, client=client, exactly_once=True)
    assert seen == [(0, [])]
    assert _committed_rows_up_to_log_end(client, topic_name) == ROWS
    assert len(_values(client, topic_name, "read_committed")) == ROWS


def test_read_committed_infers_value_types_from_committed_records_only(client, topic_name):
    client.create_topic(topic_name, 1)
    p = client.producer(transactional_id=f"tx-{topic_name}")
    p.begin_transaction()
    p.send(topic_name, b'{"a": 1, "aborted": "x"}', partition=0)
    p.abort_transaction()
    p.begin_transaction()
    p.send(topic_name, b'{"a": 2}', partition=0)
    p.commit_transaction()
    p.close()
    ds = read_topic(topic_name, client=client, isolation_level="read_committed", value_format="json",
                    expand_value=True, columns=["offset", "value"])
    assert ds.take_all() == [{"offset": 2, "a": 2}]  # 0 aborted, 1 its marker
    assert ds.schema().names == ["offset", "a"]
    with pytest.raises(ValueError):
        read_topic(topic_name, client=client, isolation_level="committed")
