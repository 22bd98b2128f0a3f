"""The per-batch logic of logan_ray.stream without Ray: the record-by-record fallback, dead letters,
commit offsets, worker placement and the lag policy."""
from __future__ import annotations

import pyarrow as pa
import pytest

from logan_ray.data.arrow_records import RECORD_SCHEMA
from logan_ray.stream import Autoscale, FunctionFailedError
from logan_ray.stream.autoscale import Scaler
from logan_ray.stream.batches import DLQ_ERROR, DLQ_OFFSET, DLQ_PARTITION, DLQ_TOPIC, apply, next_offsets
from logan_ray.stream.placement import worker_nodes


def _batch(values: list[bytes], partition: int = 0, first: int = 10) -> pa.RecordBatch:
    rows = [{"topic": "t", "partition": partition, "offset": first + i, "timestamp": 0, "timestamp_type": 0,
             "key": None, "value": v, "headers": [{"key": "h", "value": b"x"}]} for i, v in enumerate(values)]
    return pa.Table.from_pylist(rows, schema=RECORD_SCHEMA).to_batches()[0]


def _picky(batch: pa.RecordBatch) -> pa.Table:
    vals = batch.column("value").to_pylist()
    if b"bad" in vals:
        raise KeyError("bad one")
    return pa.table({"value": vals})


def test_a_good_batch_is_one_call_and_one_output():
    calls = []

    def fn(b):
        calls.append(b.num_rows)
        return _picky(b)

    out = apply(fn, _batch([b"a", b"b", b"c"]), want_output=True, dead_letters=True)
    assert calls == [3] and out.rows == 3 and out.output_rows == 3 and not out.dead_letters


def test_a_failed_batch_goes_record_by_record_and_only_the_bad_one_is_a_dead_letter():
    out = apply(_picky, _batch([b"a", b"bad", b"c"]), want_output=True, dead_letters=True)
    assert [t.column("value").to_pylist() for t in out.outputs] == [[b"a"], [b"c"]]
    [letter] = out.dead_letters
    headers = dict(letter.headers)
    assert letter.value == b"bad" and headers["h"] == b"x"  # its own headers kept
    assert (headers[DLQ_TOPIC], headers[DLQ_PARTITION], headers[DLQ_OFFSET]) == (b"t", b"0", b"11")
    assert headers[DLQ_ERROR] == b"KeyError: 'bad one'"


def test_without_a_dead_letter_topic_a_failing_record_stops_with_its_offset():
    with pytest.raises(FunctionFailedError, match="t-0 offset 11"):
        apply(_picky, _batch([b"a", b"bad"]), want_output=True, dead_letters=False)


def test_an_output_without_a_value_column_counts_as_a_failure():
    out = apply(lambda b: pa.table({"v": [b"x"] * b.num_rows}), _batch([b"a"]), want_output=True, dead_letters=True)
    assert len(out.dead_letters) == 1 and b"'value' column" in dict(out.dead_letters[0].headers)[DLQ_ERROR]


def test_next_offsets_are_the_last_offset_plus_one_per_partition():
    table = pa.concat_tables([pa.Table.from_batches([_batch([b"a", b"b"], 0, 5)]),
                              pa.Table.from_batches([_batch([b"c"], 2, 40)])])
    assert next_offsets(table) == {("t", 0): 7, ("t", 2): 41}


def test_workers_go_to_the_nodes_of_their_range_of_partitions():
    nodes = ["n1", "n1", "n2", "n2"]
    assert worker_nodes(nodes, 2) == ["n1", "n2"]
    assert worker_nodes(nodes, 4) == nodes
    assert worker_nodes([None, None], 2) == [None, None]


def test_autoscale_adds_one_at_a_time_and_removes_after_calm_checks():
    s = Scaler(Autoscale(min_workers=1, max_workers=3, lag_per_worker=100, calm_checks=2))
    assert s.target(1, 1_000, partitions=8) == 2
    assert s.target(2, 1_000, partitions=8) == 3
    assert s.target(3, 1_000, partitions=8) == 3  # max_workers
    assert s.target(3, 0, partitions=8) == 3  # one calm check is not enough
    assert s.target(3, 0, partitions=8) == 2
    assert Scaler(Autoscale(1, 8, 100)).target(2, 10_000, partitions=2) == 2  # never more than partitions
