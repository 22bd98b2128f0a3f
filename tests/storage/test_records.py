import dataclasses
import struct
import time

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logan_ray.storage.batch_header import HEADER_SIZE, parse_header, validate_batch
from logan_ray.storage.compression import compress
from logan_ray.storage.errors import CorruptRecordError, InvalidRecordError, UnsupportedCompressionError
from logan_ray.storage.raw_records import RawRecord, iter_batch_records_raw, rebuild_batch, scan_batch_raw
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import Record, decode_batch, decode_records
from logan_ray.storage.varint import encode_varint
from logan_ray.storage import records

@pytest.fixture(params=["compiled", "pure"], autouse=True)
def codec_impl(request):
    """Every test here runs under the compiled record codec and the pure-Python one."""
    prev = records.use_compiled(request.param == "compiled")
    yield request.param
    records.use_compiled(prev)


CODECS = [0, 1, 2, 3, 4]


def recrc(batch: bytes | bytearray) -> bytes:
    """Fix the CRC after deliberately corrupting the content."""
    b = bytearray(batch)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


def with_records(batch: bytes, records: bytes) -> bytes:
    """Replace a batch's records blob, fixing length and CRC."""
    b = bytearray(batch[:HEADER_SIZE]) + records
    struct.pack_into(">i", b, 8, len(b) - 12)
    return recrc(b)


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_everything(codec):
    values = [b"v0", None, b"", b"x" * 300, b"\x00\xff" * 70_000]
    keys = [None, b"k1", b"", b"k" * 200, b"big"]
    headers = [[], [("a", b"1")], [("", None), ("\u00e9t\u00e9", b"")], [("h", b"v" * 200)] * 3, []]
    ts = [1_700_000_000_000, 1_699_999_999_000, 1_700_000_000_000 + 10**9, 0, 1_700_000_000_005]
    batch = build_batch(values, keys, headers=headers, timestamps=ts, base_offset=1234, compression=codec)
    h = validate_batch(batch)
    assert h.compression == codec and h.size == len(batch)
    h2, recs = decode_batch(batch)
    assert h2 == h
    assert h.base_offset == 1234 and h.last_offset_delta == 4 and h.record_count == 5
    assert h.base_timestamp == ts[0] and h.max_timestamp == max(ts)
    assert recs == [
        Record(1234 + i, ts[i], keys[i], values[i], tuple(tuple(x) for x in headers[i])) for i in range(5)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_fast_path_round_trip(codec):
    values = [bytes([i % 251]) * (i % 300) for i in range(20_000)]  # offset deltas up to 3-byte varints
    batch = build_batch(values, timestamps=42, compression=codec)
    h, recs = decode_batch(batch)
    assert h.compression == codec and h.record_count == 20_000
    assert [r.value for r in recs] == values
    assert [r.offset for r in recs] == list(range(20_000))
    assert {r.timestamp for r in recs} == {42}
    assert all(r.key is None and r.headers == () for r in recs)


def test_fast_and_general_paths_agree():
    values = [b"a" * (i * 37 % 500) for i in range(3000)]
    fast = build_batch(values, timestamps=7)
    general = build_batch(values, timestamps=[7] * 3000, keys=[None] * 3000, headers=[[]] * 3000)
    assert fast == general
    general2 = build_batch(values, [b"k"] + [None] * 2999, timestamps=7)
    assert decode_batch(general2)[1][1:] == decode_batch(fast)[1][1:]


def test_keyed_fast_path_matches_general_encoder():
    from logan_ray.storage import record_builder as mod

    values = [b"v" * (i % 400) for i in range(2000)]
    keys = [b"k" * (i % 150) for i in range(2000)]
    fast = mod._records_fast_keyed(values, keys)
    assert fast is not None
    assert fast == mod._records_general(values, keys, None, None)
    assert mod._records_fast_keyed(values, [None] + keys[1:]) is None  # null key -> general path
    assert mod._records_fast(values) == mod._records_general(values, None, None, None)
    batch = build_batch(values, keys, timestamps=9, base_offset=3)
    assert [(r.offset, r.key, r.value) for r in decode_batch(batch)[1]] == [
        (3 + i, keys[i], values[i]) for i in range(2000)
    ]


def test_more_records_than_the_varint_tables():
    n = 70_000  # offset deltas past the 65536-entry tables take the general path
    batch = build_batch([b"%d" % i for i in range(n)], timestamps=1, compression="lz4")
    h, recs = decode_batch(batch)
    assert h.last_offset_delta == n - 1 and len(recs) == n
    assert recs[-1] == Record(n - 1, 1, None, b"%d" % (n - 1))


def test_decode_from_offset_in_bytearray_and_memoryview():
    b1 = build_batch([b"a"], timestamps=1)
    b2 = build_batch([b"b", b"c"], [b"k", None], timestamps=2, base_offset=1, compression="snappy")
    buf = bytearray(b1 + b2)
    for view in (buf, memoryview(buf), bytes(buf)):
        h, recs = decode_batch(view, len(b1))
        assert h.base_offset == 1 and [r.value for r in recs] == [b"b", b"c"]
        assert isinstance(recs[0].value, bytes) and isinstance(recs[0].key, bytes)


def test_exact_wire_bytes_of_one_record():
    batch = build_batch([b"hi"], [b"k"], headers=[[("h", None)]], timestamps=1000, base_offset=7)
    rec = batch[HEADER_SIZE:]
    body = (
        b"\x00"  # attributes
        + b"\x00"  # timestamp delta 0
        + b"\x00"  # offset delta 0
        + b"\x02k"  # key length 1
        + b"\x04hi"  # value length 2
        + b"\x02"  # 1 header
        + b"\x02h"  # header key
        + b"\x01"  # null header value
    )
    assert rec == encode_varint(len(body)) + body
    (base, length, epoch, magic, crc) = struct.unpack_from(">qiibI", batch)
    assert (base, length, epoch, magic) == (7, len(batch) - 12, -1, 2)
    assert crc == crc32c.crc32c(batch[21:])
    attrs, lod, bts, mts, pid, pep, bseq, cnt = struct.unpack_from(">hiqqqhii", batch, 21)
    assert (attrs, lod, bts, mts, pid, pep, bseq, cnt) == (0, 0, 1000, 1000, -1, -1, -1, 1)


def test_header_fields():
    batch = build_batch(
        [b"a", b"b"],
        timestamps=[10, 5],
        base_offset=99,
        compression="lz4",
        producer_id=77,
        producer_epoch=3,
        base_sequence=40,
        is_transactional=True,
        partition_leader_epoch=9,
    )
    h = validate_batch(batch)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 3, 40)
    assert h.is_transactional and not h.is_control and not h.is_log_append_time
    assert h.partition_leader_epoch == 9 and h.compression == 3
    assert h.last_sequence == 41
    assert [(r.offset, r.timestamp) for r in decode_batch(batch)[1]] == [(99, 10), (100, 5)]


def test_log_append_time_reports_max_timestamp():
    batch = build_batch([b"a", b"b"], timestamps=[10, 20], log_append_time=True)
    h, recs = decode_batch(batch)
    assert h.is_log_append_time
    assert [r.timestamp for r in recs] == [20, 20]


def test_default_timestamp_is_now():
    before = int(time.time() * 1000)
    h, recs = decode_batch(build_batch([b"a"]))
    after = int(time.time() * 1000)
    assert before <= recs[0].timestamp <= after and h.max_timestamp == recs[0].timestamp


def test_empty_and_mismatched_inputs():
    with pytest.raises(InvalidRecordError):
        build_batch([])
    with pytest.raises(ValueError):
        build_batch([b"a", b"b"], [b"k"])
    with pytest.raises(ValueError):
        build_batch([b"a"], timestamps=[1, 2])
    with pytest.raises(ValueError):
        build_batch([b"a"], headers=[[], []])
    with pytest.raises(UnsupportedCompressionError):
        build_batch([b"a"], compression=9)
    with pytest.raises(UnsupportedCompressionError):
        build_batch([b"a"], compression="brotli")


def test_record_is_frozen_value_object():
    r = Record(1, 2, b"k", b"v")
    assert r.headers == ()
    assert r == Record(1, 2, b"k", b"v", ()) and hash(r) == hash(Record(1, 2, b"k", b"v"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.offset = 5  # type: ignore[misc]
    assert dataclasses.replace(r, offset=9).offset == 9


# ------------------------------------------------------------------ corruption


def test_flipped_crc_byte_detected():
    batch = bytearray(build_batch([b"hello"] * 10, timestamps=1))
    batch[-3] ^= 0x01  # inside the last value: framing stays intact
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(batch)
    # without verification the (still well-framed) batch decodes
    h, recs = decode_batch(batch, verify_crc=False)
    assert len(recs) == 10 and recs[-1].value == b"helmo"
    batch[17] ^= 0x80  # the stored CRC itself
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_batch(batch)


def test_wrong_magic():
    batch = bytearray(build_batch([b"hello"]))
    batch[16] = 1
    with pytest.raises(InvalidRecordError, match="magic"):
        decode_batch(batch)
    with pytest.raises(InvalidRecordError, match="magic"):
        decode_batch(batch, verify_crc=False)


@pytest.mark.parametrize("codec", CODECS)
def test_truncated(codec):
    batch = build_batch([b"hello"] * 10, timestamps=1, compression=codec)
    for cut in (0, 10, HEADER_SIZE - 1, HEADER_SIZE + 1, len(batch) - 1):
        with pytest.raises(CorruptRecordError, match="truncated"):
            decode_batch(batch[:cut])
        with pytest.raises(CorruptRecordError):
            decode_batch(batch[:cut], verify_crc=False)


def test_bad_record_framing_with_valid_crc():
    good = build_batch([b"abc", b"def"], [b"k1", b"k2"], timestamps=1)
    recs = good[HEADER_SIZE:]
    # record count says 2 but only one record present
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_batch(with_records(good, recs[: len(recs) // 2 + 1]))
    # trailing junk after the last record
    with pytest.raises(CorruptRecordError, match="trailing"):
        decode_batch(with_records(good, recs + b"\x00\x00"))
    # record length one larger than its fields
    bad = bytearray(recs)
    bad[0] += 2
    with pytest.raises(CorruptRecordError, match="length"):
        decode_batch(with_records(good, bytes(bad)))
    # key length -5
    body = b"\x00\x00\x00" + encode_varint(-5) + b"\x02v\x00"
    one = build_batch([b"v"], timestamps=1)
    with pytest.raises(CorruptRecordError, match="key length"):
        decode_batch(with_records(one, encode_varint(len(body)) + body))
    # value length overrunning the blob
    body = b"\x00\x00\x00\x01" + encode_varint(500) + b"v\x00"
    with pytest.raises(CorruptRecordError):
        decode_batch(with_records(one, encode_varint(len(body)) + body))
    # over-long varint in record length
    with pytest.raises(CorruptRecordError, match="too long"):
        decode_batch(with_records(one, b"\xff" * 6 + b"\x00" * 10))
    # header key that is not UTF-8
    body = b"\x00\x00\x00\x01\x02v" + b"\x02" + b"\x02\xff" + b"\x01"
    with pytest.raises(CorruptRecordError, match="UTF-8"):
        decode_batch(with_records(one, encode_varint(len(body)) + body))


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_undecompressable_records_with_valid_crc(codec):
    batch = build_batch([b"abc"] * 50, timestamps=1, compression=codec)
    with pytest.raises(CorruptRecordError, match="decompress"):
        decode_batch(with_records(batch, b"\x07not compressed data at all\x99" * 4))


def test_compressed_blob_with_bad_records_inside():
    batch = build_batch([b"abc"] * 5, timestamps=1, compression="zstd")
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_batch(with_records(batch, compress("zstd", b"\x0a\x00\x00")))


# ------------------------------------------------------------ multiple batches


def test_decode_records_concatenated_partial_and_control():
    b1 = build_batch([b"a", b"b"], timestamps=1, base_offset=0)
    ctrl = build_batch([b"\x00\x00\x00\x00\x00\x00"], [b"\x00\x00\x00\x01"], timestamps=2, base_offset=2, is_control=True)
    b2 = build_batch([b"c"], timestamps=3, base_offset=3, compression="gzip")
    b3 = build_batch([b"d"], timestamps=4, base_offset=4)
    stream = b1 + ctrl + b2 + b3[:-3]  # fetch responses may end in a partial batch
    got = decode_records(stream)
    assert [(r.offset, r.value) for r in got] == [(0, b"a"), (1, b"b"), (3, b"c")]
    got = decode_records(memoryview(stream), include_control=True)
    assert [r.offset for r in got] == [0, 1, 2, 3]
    assert decode_records(b"") == [] and decode_records(b1[:30]) == []
    bad = bytearray(b1 + b2)
    bad[len(b1) + 30] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(bad))
    assert len(decode_batch(stream, len(b1) + len(ctrl))[1]) == 1


# ------------------------------------------------------------------- properties

header_st = st.tuples(st.text(max_size=10), st.none() | st.binary(max_size=20))
record_st = st.tuples(
    st.none() | st.binary(max_size=40),  # key
    st.none() | st.binary(max_size=200),  # value
    st.lists(header_st, max_size=3),
    st.integers(0, 2**42),  # timestamp
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(record_st, min_size=1, max_size=40),
    st.sampled_from(CODECS),
    st.integers(0, 2**62),
    st.booleans(),
)
def test_property_round_trip(records, codec, base_offset, same_ts):
    keys = [r[0] for r in records]
    values = [r[1] for r in records]
    headers = [r[2] for r in records]
    ts = records[0][3] if same_ts else [r[3] for r in records]
    batch = build_batch(values, keys, headers=headers, timestamps=ts, base_offset=base_offset, compression=codec)
    h, got = decode_batch(batch)
    assert h == validate_batch(batch) and h.size == len(batch)
    expect_ts = [ts] * len(records) if same_ts else ts
    assert got == [
        Record(base_offset + i, expect_ts[i], keys[i], values[i], tuple(headers[i])) for i in range(len(records))
    ]
    assert decode_records(batch + batch) == got + got


# ------------------------------------------------------------------ raw / compaction


@pytest.mark.parametrize("codec", CODECS)
def test_scan_and_rebuild(codec):
    keys = [b"a", b"b", None, b"a", b"c"]
    values = [b"1", None, b"x", b"2", b"3"]
    headers = [[], [("h", b"v")], [], [], [("z", None)]]
    ts = [100, 50, 300, 120, 110]
    batch = build_batch(
        values, keys, headers=headers, timestamps=ts, base_offset=10, compression=codec, producer_id=5,
        producer_epoch=1, base_sequence=0,
    )
    raw = scan_batch_raw(batch)
    assert [r.offset for r in raw.records] == [10, 11, 12, 13, 14]
    assert [r.key for r in raw.records] == keys
    assert [r.value_is_null for r in raw.records] == [v is None for v in values]
    assert [r.timestamp for r in raw.records] == ts
    assert list(iter_batch_records_raw(batch)) == raw.records
    assert all(isinstance(r, RawRecord) for r in raw.records)
    assert raw.records[-1].end == len(raw.blob)

    keep = [raw.records[1], raw.records[3]]
    out = rebuild_batch(raw.header, raw.blob, keep)
    h, recs = decode_batch(out)
    assert h.base_offset == 10 and h.record_count == 2 and h.last_offset_delta == 3
    assert h.max_timestamp == 120 and h.compression == codec and h.producer_id == 5
    assert recs == [Record(11, 50, b"b", None, (("h", b"v"),)), Record(13, 120, b"a", b"2")]

    kept_last = rebuild_batch(raw.header, raw.blob, keep, keep_last_offset_delta=True, compression="none")
    h = validate_batch(kept_last)
    assert h.last_offset_delta == 4 and h.compression == 0 and h.last_sequence == 4
    assert decode_batch(kept_last)[1] == recs

    empty = rebuild_batch(raw.header, raw.blob, [])
    h, recs = decode_batch(empty)
    assert recs == [] and h.record_count == 0 and h.last_offset_delta == 4 and h.producer_id == 5


def test_scan_raw_rejects_bad_framing():
    one = build_batch([b"v"], timestamps=1)
    body = b"\x00\x00\x00\x01" + encode_varint(500) + b"v\x00"
    with pytest.raises(CorruptRecordError):
        scan_batch_raw(with_records(one, encode_varint(len(body)) + body))
    with pytest.raises(CorruptRecordError, match="CRC"):
        b = bytearray(one)
        b[-1] ^= 1
        scan_batch_raw(b)
    assert parse_header(one).record_count == 1
