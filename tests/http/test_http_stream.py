"""GET /stream/{topic}/{partition}: chunked NDJSON and Server-Sent Events that follow the log live."""
from __future__ import annotations

import json
import threading
import time

import httpx


def _publish(url: str, topic: str, values: list[str]) -> None:
    r = httpx.post(f"{url}/publish", json={"topic": topic, "records": [{"value": v} for v in values]}, timeout=30)
    assert r.status_code == 200, r.text


def test_ndjson_stream_returns_the_backlog_then_follows_new_records_live(http, http_url, topic_name):
    http.post("/topic", json={"name": topic_name})
    _publish(http_url, topic_name, [f"old{i}" for i in range(3)])
    threading.Timer(1.0, _publish, (http_url, topic_name, ["live0", "live1"])).start()
    got, started = [], time.monotonic()
    with http.stream("GET", f"/stream/{topic_name}/0", params={"position": "earliest", "max_records": 5}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/x-ndjson")
        for line in r.iter_lines():
            if line:
                got.append(json.loads(line))
    assert [g["value"] for g in got] == ["old0", "old1", "old2", "live0", "live1"]
    assert [g["offset"] for g in got] == [0, 1, 2, 3, 4]
    assert time.monotonic() - started >= 0.8  # the last two arrived while the stream was open


def test_stream_from_latest_ends_after_idle_timeout_without_records(http, topic_name):
    http.post("/topic", json={"name": topic_name})
    http.post("/publish", json={"topic": topic_name, "records": [{"value": "before"}]})
    started = time.monotonic()
    r = http.get(f"/stream/{topic_name}/0", params={"position": "latest", "idle_timeout_ms": 500})
    assert r.status_code == 200 and r.text == "" and 0.4 < time.monotonic() - started < 15


def test_sse_events_carry_batches_and_resume_from_last_event_id(http, http_url, topic_name):
    http.post("/topic", json={"name": topic_name})
    _publish(http_url, topic_name, [f"v{i}" for i in range(4)])
    r = http.get(f"/stream/{topic_name}/0", params={"format": "sse", "offset": 1, "max_records": 3})
    assert r.headers["content-type"].startswith("text/event-stream")
    events = [e for e in r.text.split("\n\n") if e.startswith("id:")]
    ids = [int(e.split("\n")[0][3:]) for e in events]
    data = [json.loads(e.split("\n")[1][5:]) for e in events]
    assert [rec["value"] for d in data for rec in d["records"]] == ["v1", "v2", "v3"]
    assert ids[-1] == data[-1]["next_offset"] == 4
    _publish(http_url, topic_name, ["v4"])
    again = http.get(f"/stream/{topic_name}/0", params={"format": "sse", "max_records": 1},
                     headers={"Last-Event-ID": str(ids[-1])})
    assert '"value":"v4"' in again.text


def test_stream_errors_are_json_before_the_stream_starts(http, topic_name):
    r = http.get(f"/stream/{topic_name}/0")
    assert r.status_code == 404 and r.json()["error_name"] == "UNKNOWN_TOPIC_OR_PARTITION"
    http.post("/topic", json={"name": topic_name})
    r = http.get(f"/stream/{topic_name}/0", params={"offset": 99})
    assert r.status_code == 416 and r.json()["error_code"] == 1
    r = http.get(f"/stream/{topic_name}/0", params={"format": "xml"})
    assert r.status_code == 422 and r.json()["error_name"] == "INVALID_REQUEST"


def test_stream_follows_its_partition_across_a_hibernation(client, http, http_url, topic_name):
    """The partition hibernates under a live stream (its actor stops); the stream looks it up again
    and goes on from its position with the records published after."""
    import ray

    from logan_ray.actors.names import NAMESPACE, ROUTER_NAME

    http.post("/topic", json={"name": topic_name})
    _publish(http_url, topic_name, ["before0", "before1"])
    router = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
    got = []
    with http.stream("GET", f"/stream/{topic_name}/0", params={"position": "earliest", "max_records": 4}) as r:
        lines = r.iter_lines()
        while len(got) < 2:
            line = next(lines)
            if line:
                got.append(json.loads(line))
        deadline = time.monotonic() + 30  # between two of the stream's long polls
        while not ray.get(router.hibernate.remote(topic_name, 0, idle_only=False)):
            assert time.monotonic() < deadline, "the partition never hibernated"
        _publish(http_url, topic_name, ["after0", "after1"])  # starts the partition again
        for line in lines:
            if line:
                got.append(json.loads(line))
    assert [g["value"] for g in got] == ["before0", "before1", "after0", "after1"]
    assert [g["offset"] for g in got] == [0, 1, 2, 3]
