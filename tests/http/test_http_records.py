"""POST /publish and POST /subscribe over real HTTP: bodies, encodings, positions, long-poll, errors."""
from __future__ import annotations

import base64
import json
import time

MAX_BODY = 1 << 20  # the body limit tests/http/conftest.py deploys the API with


def _error(r, status: int, code: int, name: str) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert (body["error_code"], body["error_name"]) == (code, name), body
    return body


def _topic(http, name: str, partitions: int = 1) -> str:
    assert http.post("/topic", json={"name": name, "partitions": partitions}).status_code == 201
    return name


def test_published_batch_comes_back_in_order_with_offsets(http, topic_name):
    _topic(http, topic_name)
    r = http.post("/publish", json={"topic": topic_name, "records": [{"value": f"v{i}"} for i in range(500)]})
    assert r.status_code == 200, r.text
    assert [m["offset"] for m in r.json()["records"]] == list(range(500))
    assert {m["partition"] for m in r.json()["records"]} == {0}
    got = http.post("/subscribe", json={"topic": topic_name, "partition": 0, "offset": 0}).json()
    assert [rec["value"] for rec in got["records"]] == [f"v{i}" for i in range(500)]
    assert got["next_offset"] == 500 and got["high_watermark"] == 500 and got["log_start_offset"] == 0


def test_keys_headers_partitions_timestamps_and_json_values_round_trip(http, topic_name):
    _topic(http, topic_name, partitions=3)
    records = [
        {"key": "user-1", "value": {"page": "/", "n": 1}, "headers": {"trace": "abc"}},
        {"value": "to two", "partition": 2, "timestamp": 1_700_000_000_000, "headers": [["h", "1"], ["h", None]]},
        {"key": "user-2", "value": None},
    ]
    r = http.post("/publish", json={"topic": topic_name, "records": records})
    assert r.status_code == 200, r.text
    meta = r.json()["records"]
    assert meta[1]["partition"] == 2 and meta[1]["timestamp"] == 1_700_000_000_000
    by_partition = {}
    for p in range(3):
        by_partition[p] = http.post("/subscribe", json={"topic": topic_name, "partition": p}).json()["records"]
    first = by_partition[meta[0]["partition"]][0]
    assert first["key"] == "user-1" and json.loads(first["value"]) == {"page": "/", "n": 1}
    assert first["headers"] == [["trace", "abc"]]
    second = next(x for x in by_partition[2] if x["value"] == "to two")
    assert second["headers"] == [["h", "1"], ["h", None]] and second["timestamp"] == 1_700_000_000_000
    third = next(x for x in by_partition[meta[2]["partition"]] if x["key"] == "user-2")
    assert third["value"] is None


def test_binary_values_travel_as_base64_and_refuse_utf8_reads(http, topic_name):
    _topic(http, topic_name)
    blob = bytes(range(256))
    r = http.post("/publish", json={"topic": topic_name, "encoding": "base64",
                                    "records": [{"key": base64.b64encode(b"\xff\x00").decode(),
                                                 "value": base64.b64encode(blob).decode()}]})
    assert r.status_code == 200, r.text
    got = http.post("/subscribe", json={"topic": topic_name, "encoding": "base64"}).json()["records"][0]
    assert base64.b64decode(got["value"]) == blob and base64.b64decode(got["key"]) == b"\xff\x00"
    _error(http.post("/subscribe", json={"topic": topic_name}), 422, 42, "INVALID_REQUEST")


def test_bad_base64_is_refused_and_nothing_of_the_request_is_written(http, topic_name):
    _topic(http, topic_name)
    r = http.post("/publish", json={"topic": topic_name, "encoding": "base64",
                                    "records": [{"value": "aGVsbG8="}, {"value": "not base64!"}]})
    _error(r, 400, 87, "INVALID_RECORD")
    assert http.get(f"/topic/{topic_name}").json()["partitions"][0]["log_end_offset"] == 0


def test_publish_errors_unknown_topic_partition_bad_json_wrong_types_oversized(http, topic_name):
    _error(http.post("/publish", json={"topic": topic_name, "records": [{"value": "x"}]}), 404, 3,
           "UNKNOWN_TOPIC_OR_PARTITION")
    assert topic_name not in http.get("/topic").json()["topics"]  # no auto-creation over HTTP
    _topic(http, topic_name)
    _error(http.post("/publish", json={"topic": topic_name, "records": [{"value": "x", "partition": 5}]}), 404, 3,
           "UNKNOWN_TOPIC_OR_PARTITION")
    _error(http.post("/publish", content=b'{"topic": "x", "records": [', headers={"content-type": "application/json"}),
           400, 42, "INVALID_REQUEST")
    for bad in ({"topic": topic_name, "records": [{"value": "x", "partition": "first"}]},
                {"topic": topic_name, "records": []},
                {"topic": topic_name, "records": [{"value": "x"}], "acks": 2},
                {"topic": topic_name, "records": "x"},
                {"records": [{"value": "x"}]}):
        _error(http.post("/publish", json=bad), 422, 42, "INVALID_REQUEST")
    big = {"topic": topic_name, "records": [{"value": "x" * (MAX_BODY + 10)}]}
    _error(http.post("/publish", json=big), 413, 10, "MESSAGE_TOO_LARGE")

    def chunked():  # no Content-Length: the limit is enforced while reading
        yield b'{"topic": "%s", "records": [{"value": "' % topic_name.encode()
        for _ in range(MAX_BODY // 65536 + 2):
            yield b"y" * 65536
        yield b'"}]}'

    _error(http.post("/publish", content=chunked(), headers={"content-type": "application/json"}), 413, 10,
           "MESSAGE_TOO_LARGE")
    assert http.get(f"/topic/{topic_name}").json()["partitions"][0]["log_end_offset"] == 0


def test_record_larger_than_max_message_bytes_is_413_record_too_large(http, topic_name):
    http.post("/topic", json={"name": topic_name, "config": {"max.message.bytes": 2000}})
    r = http.post("/publish", json={"topic": topic_name, "records": [{"value": "z" * 5000}]})
    _error(r, 413, 10, "MESSAGE_TOO_LARGE")


def test_acks_zero_answers_without_offsets_and_the_records_still_land(http, topic_name):
    _topic(http, topic_name)
    r = http.post("/publish", json={"topic": topic_name, "acks": 0, "records": [{"value": "a"}, {"value": "b"}]})
    assert r.status_code == 200 and [m["offset"] for m in r.json()["records"]] == [-1, -1]
    got = http.post("/subscribe", json={"topic": topic_name, "timeout_ms": 5000}).json()
    deadline = time.monotonic() + 10
    while got["high_watermark"] < 2 and time.monotonic() < deadline:
        got = http.post("/subscribe", json={"topic": topic_name, "timeout_ms": 1000}).json()
    assert got["high_watermark"] == 2


def test_subscribe_positions_offset_timestamp_latest_and_max_records(http, topic_name):
    _topic(http, topic_name)
    http.post("/publish", json={"topic": topic_name, "records": [
        {"value": f"old{i}", "timestamp": 1_000 + i} for i in range(5)] + [
        {"value": f"new{i}", "timestamp": 2_000 + i} for i in range(5)]})
    page = http.post("/subscribe", json={"topic": topic_name, "offset": 3, "max_records": 4}).json()
    assert [r["offset"] for r in page["records"]] == [3, 4, 5, 6] and page["next_offset"] == 7
    rest = http.post("/subscribe", json={"topic": topic_name, "offset": page["next_offset"]}).json()
    assert [r["value"] for r in rest["records"]] == ["new2", "new3", "new4"] and rest["next_offset"] == 10
    by_time = http.post("/subscribe", json={"topic": topic_name, "timestamp": 2_000}).json()
    assert by_time["records"][0]["value"] == "new0"
    latest = http.post("/subscribe", json={"topic": topic_name, "position": "latest"}).json()
    assert latest["records"] == [] and latest["next_offset"] == 10
    early = http.post("/subscribe", json={"topic": topic_name, "position": "earliest", "max_records": 1}).json()
    assert early["records"][0]["value"] == "old0"


def test_subscribe_long_polls_until_a_record_arrives(http, http_url, topic_name):
    import threading

    import httpx

    _topic(http, topic_name)
    threading.Timer(0.7, lambda: httpx.post(f"{http_url}/publish", json={
        "topic": topic_name, "records": [{"value": "late"}]})).start()
    started = time.monotonic()
    got = http.post("/subscribe", json={"topic": topic_name, "offset": 0, "timeout_ms": 20000}).json()
    assert [r["value"] for r in got["records"]] == ["late"]
    assert 0.5 < time.monotonic() - started < 15
    empty_started = time.monotonic()
    got = http.post("/subscribe", json={"topic": topic_name, "offset": 1, "timeout_ms": 300}).json()
    assert got["records"] == [] and got["next_offset"] == 1 and time.monotonic() - empty_started >= 0.25


def test_subscribe_errors(http, topic_name):
    _error(http.post("/subscribe", json={"topic": topic_name}), 404, 3, "UNKNOWN_TOPIC_OR_PARTITION")
    _topic(http, topic_name)
    _error(http.post("/subscribe", json={"topic": topic_name, "partition": 1}), 404, 3, "UNKNOWN_TOPIC_OR_PARTITION")
    _error(http.post("/subscribe", json={"topic": topic_name, "offset": 10}), 416, 1, "OFFSET_OUT_OF_RANGE")
    _error(http.post("/subscribe", json={"topic": topic_name, "offset": -1}), 422, 42, "INVALID_REQUEST")
    _error(http.post("/subscribe", json={"topic": topic_name, "position": "middle"}), 422, 42, "INVALID_REQUEST")
    _error(http.post("/subscribe", content=b"{", headers={"content-type": "application/json"}), 400, 42,
           "INVALID_REQUEST")
