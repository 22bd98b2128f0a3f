"""Hot paths: Produce request decode and Fetch response encode never copy record batches."""
from __future__ import annotations

import time

from logan_ray.protocol import decode_request, encode_request, encode_response


def _produce_frame(records: bytes, version: int) -> bytes:
    body = {"acks": -1, "timeout_ms": 30000, "transactional_id": None,
            "topic_data": [{"name": "events", "partition_data": [{"index": 0, "records": records}]}]}
    return encode_request(0, version, 1, "rdkafka", body)[4:]


def _best_time(fn, repeat: int = 5, number: int = 100) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def test_produce_records_are_memoryview_slices_of_the_frame():
    for version in (3, 9, 11):
        frame = _produce_frame(b"R" * (1 << 20), version)
        _, body = decode_request(frame)
        records = body["topic_data"][0]["partition_data"][0]["records"]
        assert isinstance(records, memoryview)
        assert records.obj is frame  # a view into the caller's buffer, not a copy
        assert records.nbytes == 1 << 20 and records[:1] == b"R"


def test_produce_decode_time_does_not_depend_on_records_size():
    small = _produce_frame(b"x" * 1024, 9)
    huge = _produce_frame(b"x" * (16 << 20), 9)
    t_small = _best_time(lambda: decode_request(small))
    t_huge = _best_time(lambda: decode_request(huge))
    # copying 16 MiB alone takes milliseconds; a zero-copy decode stays in microseconds
    assert t_huge < 3 * t_small + 50e-6, (t_small, t_huge)
    assert _best_time(lambda: decode_request(_MIB_FRAME), number=200) < 200e-6


_MIB_FRAME = _produce_frame(b"y" * (1 << 20), 9)


def test_fetch_response_encode_passes_records_through():
    records = b"z" * (1 << 20)
    for version in (4, 11, 12, 16):
        body = {"responses": [{"topic": "events", "partitions": [
            {"partition_index": 0, "high_watermark": 10, "records": records}]}]}
        chunks = encode_response(1, version, 1, body)
        assert any(c is records for c in chunks)
        t = _best_time(lambda: encode_response(1, version, 1, body), number=200)
        assert t < 200e-6, (version, t)
