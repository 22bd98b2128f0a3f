"""What a web page can make a browser send is refused: non-JSON bodies, rebound Host names, foreign Origins.

Most tests run the FastAPI app in process (Starlette's TestClient) with a recording
stand-in for the logan-ray client, so they show that nothing reaches the broker; the
last ones go through Ray Serve's proxy to the real broker (the session's HTTP API),
to prove the replica applies the same checks.
"""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from logan_ray.http import backend as backend_module
from logan_ray.http.app import build_app
from logan_ray.http.backend import Backend
from logan_ray.http.guard import HostGuard


class RecordingClient:
    """The calls of the routes used here, recorded; topics live in a dict."""

    def __init__(self) -> None:
        self.topics: dict[str, int] = {"orders": 1}
        self.calls: list[tuple] = []
        self._routes: dict = {}  # the route cache the backend drops after a delete

    def list_topics(self) -> list[str]:
        return sorted(self.topics)

    def create_topic(self, name: str, partitions: int, config) -> None:
        self.calls.append(("create", name))
        self.topics[name] = partitions or 1

    def delete_topic(self, name: str) -> None:
        self.calls.append(("delete", name))
        self.topics.pop(name)

    def describe_topic(self, name: str) -> dict:
        return {"name": name, "topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "config": {},
                "partitions": [{"partition": p, "node_id": "node-0"} for p in range(self.topics[name])]}

    def partition_offsets(self, name: str) -> dict:
        return {p: (0, 0) for p in range(self.topics[name])}

    def topic_config(self, name: str) -> dict:
        return {}


@pytest.fixture
def served(request):
    """(TestClient factory, RecordingClient): the app with a backend listening where the test says."""
    fake = RecordingClient()
    before = backend_module._current

    def make(bind: str = "127.0.0.1", allowed: tuple[str, ...] = (), base: str = "http://127.0.0.1:8000"):
        backend_module.install(Backend(fake, 1 << 20, None, HostGuard(bind, allowed)))
        return TestClient(build_app(), base_url=base)

    yield make, fake
    backend_module._current = before


def _is_error(r, status: int) -> None:
    body = r.json()
    assert r.status_code == status, (r.status_code, body)
    assert set(body) >= {"error_code", "error_name", "message"} and body["error_name"] == "INVALID_REQUEST"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; "
                                          "boundary=x", None])
def test_a_body_that_is_not_declared_json_is_415_and_nothing_happens(served, content_type):
    make, fake = served
    http = make()
    headers = {"content-type": content_type} if content_type else {}
    for path in ("/topic", "/publish", "/subscribe"):
        r = http.post(path, content=b'{"name": "evil", "topic": "orders", "records": [{"value": "x"}]}',
                      headers=headers)
        _is_error(r, 415)
    r = http.patch("/topic/orders", content=b'{"config": {}}', headers=headers)
    _is_error(r, 415)
    assert fake.calls == [] and "evil" not in fake.topics


def test_json_with_a_charset_is_still_json(served):
    make, fake = served
    r = make().post("/topic", content=b'{"name": "clicks"}', headers={"content-type": "Application/JSON; charset=utf-8"})
    assert r.status_code == 201 and fake.calls == [("create", "clicks")]


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:8000", "127.0.0.1.nip.io:8000", "10.0.0.5:8000"])
def test_a_loopback_server_refuses_a_foreign_host_name_dns_rebinding(served, host):
    make, fake = served
    http = make()
    r = http.get("/topic", headers={"host": host})
    _is_error(r, 421)
    r = http.post("/topic", json={"name": "evil"}, headers={"host": host})
    _is_error(r, 421)
    assert fake.calls == []


@pytest.mark.parametrize("host", ["127.0.0.1:8000", "localhost:8000", "LOCALHOST", "[::1]:8000", "127.0.0.1"])
def test_a_loopback_server_answers_to_its_loopback_names(served, host):
    make, _ = served
    r = make().get("/topic", headers={"host": host})
    assert r.status_code == 200 and r.json() == {"topics": ["orders"]}


def test_a_server_on_every_interface_answers_to_addresses_and_allow_listed_names_only(served):
    make, _ = served
    http = make(bind="0.0.0.0", allowed=("broker1.example.com",))
    for host in ("10.0.0.5:8000", "[fd00::5]:8000", "localhost:8000", "broker1.example.com:8000",
                 "BROKER1.example.com"):
        assert http.get("/topic", headers={"host": host}).status_code == 200, host
    _is_error(http.get("/topic", headers={"host": "rebound.attacker.example:8000"}), 421)


def test_a_server_on_one_address_answers_to_that_address(served):
    make, _ = served
    http = make(bind="10.0.0.5")
    assert http.get("/topic", headers={"host": "10.0.0.5:8000"}).status_code == 200
    _is_error(http.get("/topic", headers={"host": "10.0.0.6:8000"}), 421)
    _is_error(http.get("/topic", headers={"host": "attacker.example"}), 421)


@pytest.mark.parametrize("origin", ["https://evil.example.com", "http://127.0.0.1:9999", "null", "http://localhost:8000"])
def test_a_state_changing_request_from_a_foreign_origin_is_403(served, origin):
    make, fake = served
    http = make()
    _is_error(http.post("/topic", json={"name": "evil"}, headers={"origin": origin}), 403)
    _is_error(http.delete("/topic/orders", headers={"origin": origin}), 403)
    assert fake.calls == [] and "orders" in fake.topics
    # reading is not refused for an Origin: the browser keeps a cross-origin answer from the page
    assert http.get("/topic", headers={"origin": origin}).status_code == 200


def test_the_servers_own_origin_and_allow_listed_origins_may_write(served):
    make, fake = served
    http = make(allowed=("console.example.com",))
    assert http.post("/topic", json={"name": "a"}, headers={"origin": "http://127.0.0.1:8000"}).status_code == 201
    assert http.post("/topic", json={"name": "b"}, headers={"origin": "https://console.example.com"}).status_code == 201
    assert http.delete("/topic/a", headers={"origin": "http://127.0.0.1:8000"}).status_code == 204
    assert fake.calls == [("create", "a"), ("create", "b"), ("delete", "a")]


def test_through_serve_a_text_plain_post_is_415_and_creates_no_topic(client, http, topic_name):
    r = http.post("/topic", content=f'{{"name": "{topic_name}"}}'.encode(), headers={"content-type": "text/plain"})
    _is_error(r, 415)
    assert topic_name not in client.list_topics()


def test_through_serve_a_rebound_host_name_is_421(http):
    _is_error(http.get("/topic", headers={"host": "rebound.attacker.example"}), 421)
    assert http.get("/topic").status_code == 200
