"""GET/POST/PUT/PATCH/DELETE /topic over real HTTP against the session's broker."""
from __future__ import annotations


def _error(r, status: int, code: int, name: str) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert (body["error_code"], body["error_name"]) == (code, name), body
    assert body["message"]
    return body


def test_create_then_get_shows_partitions_offsets_and_effective_config(http, topic_name):
    r = http.post("/topic", json={"name": topic_name, "partitions": 2, "config": {"retention.ms": 3600000}})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["name"] == topic_name and [p["partition"] for p in body["partitions"]] == [0, 1]
    assert r.headers["location"].endswith(f"topic/{topic_name}")
    got = http.get(f"/topic/{topic_name}").json()
    assert got["config"]["retention.ms"] == "3600000"
    assert got["overrides"] == {"retention.ms": "3600000"}
    assert got["config"]["cleanup.policy"] == "delete"  # defaults are shown too
    assert all(p["log_start_offset"] == 0 and p["log_end_offset"] == 0 for p in got["partitions"])
    assert topic_name in http.get("/topic").json()["topics"]


def test_creating_an_existing_topic_is_409_unless_rename_is_asked_for(http, topic_name):
    assert http.post("/topic", json={"name": topic_name}).status_code == 201
    _error(http.post("/topic", json={"name": topic_name}), 409, 36, "TOPIC_ALREADY_EXISTS")
    r = http.post("/topic", params={"if_exists": "rename"}, json={"name": topic_name})
    assert r.status_code == 201 and r.json()["name"] == f"{topic_name}__0"


def test_put_resets_unnamed_settings_to_defaults_and_patch_changes_only_named_ones(http, topic_name):
    http.post("/topic", json={"name": topic_name, "config": {"retention.ms": 1000000, "segment.bytes": 2000000}})
    r = http.patch(f"/topic/{topic_name}", json={"config": {"retention.ms": 2000000}})
    assert r.status_code == 200, r.text
    assert r.json()["overrides"] == {"retention.ms": "2000000", "segment.bytes": "2000000"}
    r = http.put(f"/topic/{topic_name}", json={"config": {"max.message.bytes": 500000}})
    assert r.status_code == 200, r.text
    assert r.json()["overrides"] == {"max.message.bytes": "500000"}
    default_retention = http.get(f"/topic/{topic_name}").json()["config"]["retention.ms"]
    assert default_retention == "604800000"
    r = http.patch(f"/topic/{topic_name}", json={"config": {"max.message.bytes": None}, "partitions": 3})
    assert r.json()["overrides"] == {} and len(r.json()["partitions"]) == 3


def test_delete_removes_the_topic_and_later_calls_get_404(http, topic_name):
    http.post("/topic", json={"name": topic_name})
    assert http.delete(f"/topic/{topic_name}").status_code == 204
    assert topic_name not in http.get("/topic").json()["topics"]
    for r in (http.get(f"/topic/{topic_name}"), http.delete(f"/topic/{topic_name}"),
              http.patch(f"/topic/{topic_name}", json={"config": {}}),
              http.put(f"/topic/{topic_name}", json={"config": {}})):
        _error(r, 404, 3, "UNKNOWN_TOPIC_OR_PARTITION")


def test_bad_topic_requests_get_kafka_codes(http, topic_name):
    _error(http.post("/topic", json={"name": "bad name!"}), 400, 17, "INVALID_TOPIC_EXCEPTION")
    _error(http.post("/topic", json={"name": topic_name, "partitions": 0}), 400, 37, "INVALID_PARTITIONS")
    _error(http.post("/topic", json={"name": topic_name, "config": {"retention.ms": "soon"}}), 400, 40, "INVALID_CONFIG")
    _error(http.post("/topic", json={"name": topic_name, "config": {"no.such.setting": 1}}), 400, 40, "INVALID_CONFIG")
    http.post("/topic", json={"name": topic_name, "partitions": 2})
    _error(http.patch(f"/topic/{topic_name}", json={"partitions": 1}), 400, 37, "INVALID_PARTITIONS")  # never shrinks


def test_bad_json_is_400_and_wrong_types_are_422(http, topic_name):
    headers = {"content-type": "application/json"}
    for path, method in (("/topic", "POST"), (f"/topic/{topic_name}", "PUT"), (f"/topic/{topic_name}", "PATCH")):
        _error(http.request(method, path, content=b'{"name": ', headers=headers), 400, 42, "INVALID_REQUEST")
    body = _error(http.post("/topic", json={"name": topic_name, "partitions": "many"}), 422, 42, "INVALID_REQUEST")
    assert body["detail"][0]["loc"][-1] == "partitions"
    _error(http.post("/topic", json={"partitions": 1}), 422, 42, "INVALID_REQUEST")
    _error(http.patch(f"/topic/{topic_name}", json={"config": "retention.ms=1"}), 422, 42, "INVALID_REQUEST")
    assert topic_name not in http.get("/topic").json()["topics"]


def test_openapi_describes_every_endpoint(http):
    spec = http.get("/openapi.json").json()
    paths = spec["paths"]
    assert {"/topic", "/topic/{name}", "/publish", "/subscribe", "/stream/{topic}/{partition}"} <= set(paths)
    assert {"get", "put", "patch", "delete"} <= set(paths["/topic/{name}"])
    assert "records" in str(paths["/publish"]["post"]["requestBody"])
    assert http.get("/docs").status_code == 200
