"""Cross-check the record codec against real Kafka client libraries.

kafka-python and aiokafka (both its Cython and pure-Python record classes)
serve as independent implementations of the v2 format: batches they build
must decode identically with ours, and batches we build must decode in them.
kafka-python's snappy needs python-snappy, which is not a dependency here, so
snappy interop is covered by aiokafka (which writes xerial-framed snappy, the
Java client's form).
"""
import random

import kafka.record.default_records as kp
import kafka.record.memory_records as kp_mem
import pytest
from aiokafka.record import default_records as ak
from aiokafka.record import memory_records as ak_mem

from logan_ray.storage.batch_header import validate_batch
from logan_ray.storage.compression import XERIAL_MAGIC
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import Record, decode_batch, decode_records
from logan_ray.storage import records

@pytest.fixture(params=["compiled", "pure"], autouse=True)
def codec_impl(request):
    """Every test here runs under the compiled record codec and the pure-Python one."""
    prev = records.use_compiled(request.param == "compiled")
    yield request.param
    records.use_compiled(prev)


HEADER_SIZE = 61

# (name, builder class, reader class, codecs it supports)
IMPLS = [
    ("kafka-python", kp.DefaultRecordBatchBuilder, kp.DefaultRecordBatch, (0, 1, 3, 4)),
    ("aiokafka-cython", ak.DefaultRecordBatchBuilder, ak.DefaultRecordBatch, (0, 1, 2, 3, 4)),
    ("aiokafka-py", ak._DefaultRecordBatchBuilderPy, ak._DefaultRecordBatchPy, (0, 1, 2, 3, 4)),
]
CASES = [(name, b, r, c) for name, b, r, codecs in IMPLS for c in codecs]
IDS = [f"{name}-codec{c}" for name, _, _, c in CASES]


def test_aiokafka_cython_classes_are_really_cython():
    # otherwise the two aiokafka cases would test the same code twice
    assert ak.DefaultRecordBatch is not ak._DefaultRecordBatchPy
    assert ak.DefaultRecordBatchBuilder is not ak._DefaultRecordBatchBuilderPy


def sample(n: int = 300, seed: int = 1):
    """Compressible records with every shape: null/empty keys, values, headers."""
    rnd = random.Random(seed)
    out = []
    t0 = 1_700_000_000_000
    for i in range(n):
        key = rnd.choice([None, b"", b"key-%d" % (i % 17), b"k" * rnd.randrange(1, 300)])
        value = rnd.choice([None, b"", b"value-%d " % i * rnd.randrange(1, 40), bytes([i % 256]) * 200])
        headers = rnd.choice(
            [[], [("trace", b"abc")], [("a", None), ("b", b""), ("\u00fcnicode", b"\x00\x01")]]
        )
        ts = t0 + rnd.randrange(-5000, 10**7)
        out.append((key, value, headers, ts))
    return out


def foreign_batch(builder_cls, codec, records, offsets, *, pid=-1, epoch=-1, seq=-1, txn=False):
    builder = builder_cls(2, codec, txn, pid, epoch, seq, 10**8)
    for off, (k, v, h, ts) in zip(offsets, records):
        meta = builder.append(off, ts, k, v, h)
        assert meta is not None
    return bytes(builder.build())


def read_foreign(reader_cls, batch: bytes):
    rb = reader_cls(batch)
    assert rb.validate_crc()
    recs = [(r.offset, r.timestamp, r.key, r.value, [tuple(h) for h in r.headers]) for r in rb]
    return rb, recs


@pytest.mark.parametrize("name,builder_cls,reader_cls,codec", CASES, ids=IDS)
def test_we_decode_their_batches(name, builder_cls, reader_cls, codec):
    records = sample()
    offsets = [i + i // 10 for i in range(len(records))]  # gaps, as after compaction
    batch = foreign_batch(builder_cls, codec, records, offsets, pid=123, epoch=4, seq=1000, txn=True)
    h, got = decode_batch(batch)
    assert h.compression == codec, "the client must really have compressed (data is compressible)"
    if codec == 2 and name.startswith("aiokafka"):
        assert batch[HEADER_SIZE:].startswith(XERIAL_MAGIC)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (123, 4, 1000, True)
    assert h.base_timestamp == records[0][3] and h.max_timestamp == max(r[3] for r in records)
    assert h.last_offset_delta == offsets[-1] and h.record_count == len(records)
    assert got == [
        Record(off, ts, k, v, tuple(hs)) for off, (k, v, hs, ts) in zip(offsets, records)
    ]


@pytest.mark.parametrize("name,builder_cls,reader_cls,codec", CASES, ids=IDS)
def test_they_decode_our_batches(name, builder_cls, reader_cls, codec):
    records = sample(seed=codec + 7)
    keys = [r[0] for r in records]
    values = [r[1] for r in records]
    headers = [r[2] for r in records]
    ts = [r[3] for r in records]
    batch = build_batch(
        values, keys, headers=headers, timestamps=ts, base_offset=5000, compression=codec,
        producer_id=9, producer_epoch=2, base_sequence=77,
    )
    rb, got = read_foreign(reader_cls, batch)
    assert rb.compression_type == codec
    assert (rb.base_offset, rb.producer_id, rb.producer_epoch, rb.base_sequence) == (5000, 9, 2, 77)
    assert rb.first_timestamp == ts[0] and rb.max_timestamp == max(ts)
    assert rb.next_offset == 5000 + len(records)
    assert got == [(5000 + i, ts[i], keys[i], values[i], list(headers[i])) for i in range(len(records))]


@pytest.mark.parametrize("name,builder_cls,reader_cls,codec", CASES, ids=IDS)
def test_they_decode_our_fast_path(name, builder_cls, reader_cls, codec):
    values = [b"payload-%06d" % i + b"x" * 88 for i in range(5000)]
    batch = build_batch(values, timestamps=1_234_567, base_offset=10, compression=codec)
    rb, got = read_foreign(reader_cls, batch)
    assert rb.compression_type == codec
    assert got == [(10 + i, 1_234_567, None, v, []) for i, v in enumerate(values)]


@pytest.mark.parametrize("name,builder_cls,reader_cls,codecs", IMPLS, ids=[i[0] for i in IMPLS])
def test_byte_identical_uncompressed_encoding(name, builder_cls, reader_cls, codecs):
    """Record bytes are canonical, so both sides must produce the same blob."""
    records = sample(50, seed=3)
    theirs = foreign_batch(builder_cls, 0, records, range(len(records)))
    ours = build_batch(
        [r[1] for r in records], [r[0] for r in records], headers=[r[2] for r in records],
        timestamps=[r[3] for r in records],
    )
    assert ours[HEADER_SIZE:] == theirs[HEADER_SIZE:]
    validate_batch(theirs)
    # keyed and unkeyed fast paths (one timestamp, no headers, no nulls)
    for keyed in (True, False):
        plain = [((b"key%d" % i) if keyed else None, b"val" * (i % 60), [], 1000) for i in range(3000)]
        theirs = foreign_batch(builder_cls, 0, plain, range(len(plain)))
        ours = build_batch([r[1] for r in plain], [r[0] for r in plain] if keyed else None, timestamps=1000)
        assert ours[HEADER_SIZE:] == theirs[HEADER_SIZE:]


def test_log_append_time_matches_clients():
    batch = build_batch([b"a", b"b"], timestamps=[10, 30], log_append_time=True)
    for _, _, reader_cls, _ in IMPLS:
        rb, got = read_foreign(reader_cls, batch)
        assert rb.timestamp_type == 1
        assert [r[1] for r in got] == [30, 30]
    assert [r.timestamp for r in decode_batch(batch)[1]] == [30, 30]


@pytest.mark.parametrize("mem_cls", [kp_mem.MemoryRecords, ak_mem.MemoryRecords, ak_mem._MemoryRecordsPy])
def test_concatenated_batches_through_memory_records(mem_cls):
    b1 = build_batch([b"a" * 100] * 3, [b"k1", None, b"k3"], timestamps=5, base_offset=0, compression="gzip")
    b2 = build_batch([b"b" * 100] * 2, timestamps=[6, 7], base_offset=3, compression="zstd")
    b3 = build_batch([b"c"], timestamps=8, base_offset=5)
    mr = mem_cls(b1 + b2 + b3)
    seen = []
    while True:
        batch = mr.next_batch()
        if batch is None:
            break
        seen.extend((r.offset, r.timestamp, r.key, r.value) for r in batch)
    ours = decode_records(b1 + b2 + b3)
    assert seen == [(r.offset, r.timestamp, r.key, r.value) for r in ours]
    assert [s[0] for s in seen] == [0, 1, 2, 3, 4, 5]
