"""The compiled record codec and the pure-Python one give identical results (hypothesis).

Every public codec function is run under both implementations on random
records (null/empty keys and values, headers, timestamp spreads, every
compression, control batches) and must agree with each other and with an
independent client's decoder as the oracle (kafka-python; aiokafka for snappy,
which kafka-python reads only with python-snappy); corrupted input must be
rejected by both, compressed or not.
"""
from __future__ import annotations

import struct

import crc32c
import kafka.record.default_records as kp
from aiokafka.record import default_records as ak
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logan_ray.storage import codec_choice, records
from logan_ray.storage.batch_header import HEADER_SIZE, set_base_offset
from logan_ray.storage.errors import CorruptRecordError
from logan_ray.storage.raw_records import scan_batch_raw, scan_records
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import Column, decode_batch, decode_columns, decode_records, decode_tagged

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

blobs = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=100, max_size=400))
header_lists = st.one_of(
    st.none(), st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=10))), max_size=3))
record = st.tuples(blobs, blobs, header_lists, st.integers(-10**6, 10**9))
batch_specs = st.lists(st.tuples(st.lists(record, min_size=1, max_size=40), st.sampled_from(CODECS),
                                 st.booleans()), min_size=1, max_size=4)


def both(fn):
    """fn() under the compiled codec, then under the pure one; both results."""
    prev = records.use_compiled(True)
    try:
        a = fn()
        records.use_compiled(False)
        b = fn()
    finally:
        records.use_compiled(prev)
    return a, b


def both_raise(fn) -> None:
    for flag in (True, False):
        prev = records.use_compiled(flag)
        try:
            with pytest.raises(CorruptRecordError):
                fn()
        finally:
            records.use_compiled(prev)


def make_log(specs) -> tuple[bytes, list[bytes]]:
    out, batches, base = [], [], 0
    for recs, codec, control in specs:
        keys = [k for k, _, _, _ in recs]
        values = [v for _, v, _, _ in recs]
        headers = [h for _, _, h, _ in recs]
        ts = [t for _, _, _, t in recs]
        b = bytearray(build_batch(values, keys, headers=headers, timestamps=ts, compression=codec,
                                  is_control=control))
        set_base_offset(b, base)
        base += len(recs)
        batches.append(bytes(b))
        out.append(bytes(b))
    return b"".join(out), batches


def oracle(batches, specs) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of the data records, read by another client's decoder."""
    out = []
    for b, (_, codec, control) in zip(batches, specs):
        if control:
            continue
        reader = ak.DefaultRecordBatch(b) if codec == "snappy" else kp.DefaultRecordBatch(b)
        assert reader.validate_crc()
        out.extend((r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers)) for r in reader)
    return out


def test_compiled_codec_is_built_and_serves_by_default():
    # CI builds the extension (pip install); the pure codec is only a fallback.
    assert codec_choice._compiled is not None
    assert records.compiled()


@SETTINGS
@given(batch_specs)
def test_both_codecs_build_the_same_bytes_and_decode_alike(specs):
    (log_c, batches_c), (log_p, batches_p) = both(lambda: make_log(specs))
    assert batches_c == batches_p
    dc, dp = both(lambda: decode_records(log_c, include_control=True))
    assert dc == dp
    data_c, data_p = both(lambda: decode_records(log_c))
    assert data_c == data_p
    expected = [r for b, (_, _, control) in zip(batches_c, specs) if not control for r in decode_batch(b)[1]]
    assert data_c == expected
    # another client's decoder as an independent oracle, for every codec
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in data_c] == oracle(batches_c, specs)


@SETTINGS
@given(batch_specs, st.integers(0, 60))
def test_consumer_and_columnar_decoders_of_both_codecs_match_the_oracle(specs, start):
    """What poll (decode_tagged) and poll_arrow / read_topic (decode_columns) return, under both codecs,
    is what another client reads: every codec, headers, null keys and values, control batches skipped."""
    log, batches = make_log(specs)
    want = [r for r in oracle(batches, specs) if r[0] >= start]
    tc, tp = both(lambda: decode_tagged(log, Rec, "t", 3, start))
    assert [tuple(r[2:]) for r in tc] == want
    assert [tuple(r[2:]) for r in tp] == want
    for cols in both(lambda: decode_columns(log, start)):
        assert cols.rows == len(want)
        assert list(np.frombuffer(cols.offsets, np.int64)) == [r[0] for r in want]
        assert list(np.frombuffer(cols.timestamps, np.int64)) == [r[1] for r in want]
        for field, col in ((2, cols.key), (3, cols.value)):
            offsets, data, valid, nulls = col
            ends = np.frombuffer(offsets, np.int64 if cols.wide else np.int32)
            got = [bytes(data[ends[i]:ends[i + 1]]) if valid[i] else None for i in range(cols.rows)]
            assert got == [r[field] for r in want]
            assert nulls == sum(r[field] is None for r in want)
        assert [(row, tuple(h)) for row, h in cols.headers] == [(i, r[4]) for i, r in enumerate(want) if r[4]]


class Rec(tuple):
    """A 7-field tuple subclass, as the consumer's ConsumerRecord is."""

    __slots__ = ()

    def __new__(cls, *fields):
        return tuple.__new__(cls, fields)


def _as_bytes(cols):
    def one(x):
        return tuple(one(v) for v in x) if isinstance(x, tuple) else x if isinstance(x, (int, list)) else bytes(x)
    return type(cols)(*(one(v) if v is not None else None for v in cols))


@SETTINGS
@given(batch_specs, st.integers(0, 60), st.one_of(st.none(), st.integers(0, 80)))
def test_tagged_columns_and_raw_scans_agree(specs, start, end):
    log, batches = make_log(specs)
    tc, tp = both(lambda: decode_tagged(log, Rec, "t", 3, start))
    assert tc == tp
    assert all(type(r) is Rec for r in tc)
    assert [tuple(r) for r in tc] == [("t", 3, r.offset, r.timestamp, r.key, r.value, r.headers)
                                      for r in decode_records(log) if r.offset >= start]
    cc, cp = both(lambda: decode_columns(log, start, end))
    assert cc == cp
    pooled = decode_columns(log, start, end, alloc=lambda n: pa.allocate_buffer(n, resizable=True))
    assert _as_bytes(pooled) == cc  # output buffers from a pool: the same bytes
    window = [r for r in decode_records(log) if r.offset >= start and (end is None or r.offset < end)]
    assert cc.rows == len(window)
    assert list(np.frombuffer(cc.offsets, np.int64)) == [r.offset for r in window]
    assert list(np.frombuffer(cc.timestamps, np.int64)) == [r.timestamp for r in window]
    for b in batches:
        rc, rp = both(lambda: scan_batch_raw(b))
        assert rc == rp


@SETTINGS
@given(st.lists(st.tuples(blobs, blobs), min_size=1, max_size=50))
def test_column_input_builds_what_lists_build(rows):
    keys = [k for k, _ in rows]
    values = [v for _, v in rows]

    def column(items):
        lengths = np.array([-1 if x is None else len(x) for x in items], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(np.maximum(lengths, 0))[:-1]]).astype(np.int64)
        return Column(starts, lengths, b"".join(x for x in items if x is not None))

    from_lists = build_batch(values, keys, timestamps=5)
    bc, bp = both(lambda: build_batch(column(values), column(keys), timestamps=5))
    assert bc == bp
    assert decode_batch(bc)[1] == decode_batch(from_lists)[1]


@SETTINGS
@given(st.lists(record, min_size=1, max_size=20), st.sampled_from(CODECS), st.data())
def test_corrupt_records_are_rejected_by_both(recs, codec, data):
    batch = bytearray(build_batch([v for _, v, _, _ in recs], [k for k, _, _, _ in recs],
                                  headers=[h for _, _, h, _ in recs], timestamps=[t for *_, t in recs],
                                  compression=codec))
    # a flipped bit anywhere after the CRC field fails the CRC check, on every decoding path
    i = data.draw(st.integers(21, len(batch) - 1))
    bad = bytearray(batch)
    bad[i] ^= 1 << data.draw(st.integers(0, 7))
    both_raise(lambda: decode_records(bytes(bad)))
    both_raise(lambda: decode_columns(bytes(bad)))
    both_raise(lambda: decode_tagged(bytes(bad), Rec, "t", 0))
    # with the CRC fixed up, both codecs agree: same records or both reject
    if i >= HEADER_SIZE and codec == "none":
        struct.pack_into(">I", bad, 17, crc32c.crc32c(bytes(bad[21:])))
        outcome = []
        for flag in (True, False):
            prev = records.use_compiled(flag)
            try:
                outcome.append(("ok", decode_records(bytes(bad))))
            except CorruptRecordError:
                outcome.append(("corrupt", None))
            finally:
                records.use_compiled(prev)
        assert outcome[0] == outcome[1]


def test_truncated_records_blob_is_rejected_by_both():
    batch = build_batch([b"abc"] * 5, [b"k"] * 5, timestamps=1)
    blob = batch[HEADER_SIZE:]
    both_raise(lambda: scan_records(blob[:-3], 0, len(blob) - 3, 5))
    both_raise(lambda: scan_records(blob + b"\x00", 0, len(blob) + 1, 5))


# Kafka's own expectations (UtilsTest.testMurmur2), as signed 32-bit values.
KAFKA_MURMUR2 = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536,
                 b"a-little-bit-longer-string": -1486304829,
                 b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971, b"abc": 479470107}


@SETTINGS
@given(st.lists(st.binary(max_size=70), max_size=50))
def test_murmur2_of_both_codecs_is_kafkas(keys):
    from logan_ray.common.partitioner import murmur2, partition_for_key

    signed = lambda h: h - (1 << 32) if h >= 1 << 31 else h  # noqa: E731
    hc, hp = both(lambda: {k: signed(murmur2(k)) for k in KAFKA_MURMUR2})
    assert hc == hp == KAFKA_MURMUR2
    pc, pp = both(lambda: [(murmur2(k), partition_for_key(k, 7), murmur2(bytearray(k))) for k in keys])
    assert pc == pp
