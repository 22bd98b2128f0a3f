"""Columnar decode of record batches, value formats and the vectorised murmur2 (no Ray).

The object decoder in storage.records is the oracle: every column must equal
what it yields, record for record.
"""
from __future__ import annotations

import json
import random

import msgpack
import numpy as np
import pyarrow as pa
import pytest

from logan_ray.data.arrow_records import RECORD_SCHEMA, decode_to_table
from logan_ray.data.murmur import murmur2_column, partitions_for_keys
from logan_ray.data.values import decode_values, encode_column, expand, frame
from logan_ray.partitioner import murmur2, partition_for_key
from logan_ray.storage.batch_header import set_base_offset
from logan_ray.storage.errors import CorruptRecordError
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_records
from logan_ray.storage import records

@pytest.fixture(params=["compiled", "pure"], autouse=True)
def codec_impl(request):
    """Every test here runs under the compiled record codec and the pure-Python one."""
    prev = records.use_compiled(request.param == "compiled")
    yield request.param
    records.use_compiled(prev)



def batches(n: int, per_batch: int, *, compression="none", seed=0, big_every=0, base=0) -> bytes:
    rng = random.Random(seed)
    out = []
    for start in range(0, n, per_batch):
        count = min(per_batch, n - start)
        values, keys, headers, ts = [], [], [], []
        for i in range(start, start + count):
            size = 20_000 if big_every and i % big_every == 0 else rng.randint(0, 300)
            values.append(None if i % 11 == 3 else bytes(rng.getrandbits(8) for _ in range(size)))
            keys.append(None if i % 7 == 0 else f"key-{i % 50}".encode())
            headers.append([("h", str(i).encode()), ("h", None)] if i % 13 == 0 else None)
            ts.append(1_700_000_000_000 + i * 10 - (i % 3) * 1000)  # deltas go negative too
        batch = build_batch(values, keys, headers=headers, timestamps=ts, compression=compression)
        out.append(bytearray(batch))
        set_base_offset(out[-1], base + start)
    return b"".join(bytes(b) for b in out)


def assert_same(table: pa.Table, data: bytes, start: int = 0, end: int | None = None) -> None:
    expected = [r for r in decode_records(data) if r.offset >= start and (end is None or r.offset < end)]
    assert table.num_rows == len(expected)
    assert table.column("offset").to_pylist() == [r.offset for r in expected]
    assert table.column("timestamp").to_pylist() == [r.timestamp for r in expected]
    assert table.column("key").to_pylist() == [r.key for r in expected]
    assert table.column("value").to_pylist() == [r.value for r in expected]
    assert table.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r.headers] for r in expected]


@pytest.mark.parametrize("compression", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_columns_equal_the_object_decoder(compression):
    data = batches(3000, 700, compression=compression, big_every=97)
    table = decode_to_table(data, topic="t", partition=5)
    assert table.schema == RECORD_SCHEMA
    assert_same(table, data)
    assert set(table.column("topic").to_pylist()) == {"t"}
    assert set(table.column("partition").to_pylist()) == {5}
    assert set(table.column("timestamp_type").to_pylist()) == {0}


def test_offset_window_cuts_inside_batches():
    data = batches(1000, 300, base=100)
    for start, end in [(100, 1100), (250, 251), (399, 401), (700, None), (1099, 1100), (50, 120)]:
        assert_same(decode_to_table(data, topic="t", partition=0, start=start, end=end), data, start, end)
    assert decode_to_table(data, topic="t", partition=0, start=1100).num_rows == 0


def test_column_subset_and_empty_input():
    data = batches(50, 50)
    t = decode_to_table(data, topic="t", partition=0, columns=["offset", "value"])
    assert t.column_names == ["offset", "value"]
    assert decode_to_table(b"", topic="t", partition=0).schema == RECORD_SCHEMA
    with pytest.raises(ValueError):
        decode_to_table(data, topic="t", partition=0, columns=["nope"])


def test_log_append_time_control_batches_and_partial_tail():
    lat = build_batch([b"a", b"b"], timestamps=[1, 2], log_append_time=True)
    lat = bytearray(lat)
    # LogAppendTime batches report maxTimestamp for every record
    control = bytearray(build_batch([b"\x00\x00\x00\x00"], [b"\x00\x00\x00\x00"], is_control=True))
    set_base_offset(control, 2)
    plain = bytearray(build_batch([b"c"], timestamps=[5]))
    set_base_offset(plain, 3)
    data = bytes(lat) + bytes(control) + bytes(plain)
    t = decode_to_table(data + bytes(plain)[:30], topic="t", partition=0)
    assert t.column("offset").to_pylist() == [0, 1, 3]
    assert t.column("timestamp").to_pylist() == [2, 2, 5]
    assert t.column("timestamp_type").to_pylist() == [1, 1, 0]


def test_corruption_is_detected():
    data = bytearray(batches(100, 100))
    data[200] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decode_to_table(bytes(data), topic="t", partition=0)


def test_large_values_need_three_byte_lengths():
    vals = [b"x" * 70_000, b"", b"y" * 9000]
    data = build_batch(vals, [b"k" * 9000, None, b""], timestamps=[1, 1, 1])
    t = decode_to_table(data, topic="t", partition=0)
    assert t.column("value").to_pylist() == vals
    assert t.column("key").to_pylist() == [b"k" * 9000, None, b""]


# ------------------------------------------------------------------- values


def test_json_values_become_typed_columns():
    docs = [{"a": i, "b": f"s{i}", "c": [i, i + 1]} for i in range(5)]
    raw = [json.dumps(d).encode() for d in docs] + [None, json.dumps({"a": 9}, indent=2).encode()]
    arr = pa.array(raw, pa.binary())
    out = decode_values(arr, "json")
    assert out.to_pylist()[:5] == docs
    assert out.to_pylist()[5] is None  # tombstone
    assert out.to_pylist()[6] == {"a": 9, "b": None, "c": None}  # pretty-printed JSON is fine
    table = expand(pa.table({"offset": list(range(7)), "value": out}))
    assert table.column_names == ["offset", "a", "b", "c"]
    assert table.column("a").to_pylist() == [0, 1, 2, 3, 4, None, 9]
    typed = decode_values(arr.slice(1, 3), "json", pa.struct([("a", pa.float64())]))
    assert typed.to_pylist() == [{"a": 1.0}, {"a": 2.0}, {"a": 3.0}]
    assert decode_values(pa.array([b"1", b"22"], pa.binary()), "json").to_pylist() == [1, 22]  # any JSON value
    with pytest.raises(ValueError):
        decode_values(pa.array([b"{not json"], pa.binary()), "json")


def test_msgpack_and_str_values():
    objs = [{"k": i, "v": [1, 2]} for i in range(4)]
    arr = pa.array([msgpack.packb(o) for o in objs] + [None], pa.binary())
    assert decode_values(arr, "msgpack").to_pylist() == objs + [None]
    assert decode_values(pa.array([b"h\xc3\xa9", None]), "str").to_pylist() == ["hé", None]
    with pytest.raises(ValueError):
        decode_values(pa.array([b"\xff"]), "str")


def test_frame_honours_slices_and_nulls():
    arr = pa.array([b"aa", None, b"", b"bbb", b"c"], pa.binary()).slice(1, 4)
    assert frame(arr, b"<", b">", b"N") == b"<N><><bbb><c>"


def test_encode_columns():
    assert encode_column(pa.array(["x", None]), None).to_pylist() == [b"x", None]
    assert encode_column(pa.array([1, 22]), None).to_pylist() == [b"1", b"22"]
    enc = encode_column(pa.array([{"a": 1}, None]), None)
    assert [None if v is None else json.loads(v) for v in enc.to_pylist()] == [{"a": 1}, None]
    assert msgpack.unpackb(encode_column(pa.array([{"a": 1}]), "msgpack")[0].as_py()) == {"a": 1}


# ------------------------------------------------------------------ murmur2


def test_vectorised_murmur2_matches_the_producer():
    rng = random.Random(7)
    keys = [bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 70))) for _ in range(3000)]
    keys += [b"", b"a", b"ab", b"abc", b"abcd", b"abcde"]
    arr = pa.array(keys, pa.binary())
    assert murmur2_column(arr).tolist() == [murmur2(k) for k in keys]
    for n in (1, 3, 16):
        assert partitions_for_keys(arr.slice(10), n).tolist() == [partition_for_key(k, n) for k in keys[10:]]
    strings = pa.array([f"user-{i}" for i in range(100)])
    assert partitions_for_keys(strings, 6).tolist() == [partition_for_key(f"user-{i}".encode(), 6) for i in range(100)]
    assert murmur2_column(pa.array([], pa.binary())).dtype == np.uint32
