"""The live console in a real browser: headless Chromium (Debian's package) loads /console and shows
a topic this test created with its record count, hosts by address and internal topics folded; its
record browser decodes text, JSON and binary records, starts at a timestamp and finds a key. The
screenshots are kept as test artifacts. Each browser test starts Chromium once (DOM and screenshot
in one run)."""
from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
from html import unescape

import pytest

ARTIFACTS = os.path.join(os.path.dirname(__file__), "..", "..", "artifacts", "http")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--window-size=1280,900", "--virtual-time-budget=8000"]


def _chromium(args: list[str], profile: str, timeout: float = 90) -> subprocess.CompletedProcess:
    exe = shutil.which("chromium")
    assert exe, "chromium is not installed (scripts/setup.sh --test installs it)"
    return subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=timeout)


def test_console_in_headless_chromium_shows_the_topic_and_its_record_count(client, http, http_url, topic_name,
                                                                           tmp_path):
    assert http.post("/topic", json={"name": topic_name, "partitions": 2}).status_code == 201
    for p, n in ((0, 30), (1, 12)):
        r = http.post("/publish", json={"topic": topic_name, "records": [{"value": "x", "partition": p}] * n})
        assert r.status_code == 200
    group = f"{topic_name}-readers"
    client.groups.reset_offsets(group, topic_name, to=10)  # lag 20 + 2
    try:
        _check_page(f"{http_url}/console", topic_name, group, tmp_path)
    finally:
        client.groups.delete(group)


def _page(url: str, tmp_path, shot_name: str) -> str:
    """The page's DOM once its scripts ran, and its screenshot (kept in artifacts/http), from one Chromium."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, shot_name)
    if os.path.exists(shot):
        os.unlink(shot)
    dom = _chromium(["--dump-dom", f"--screenshot={shot}", url], str(tmp_path / "profile"))
    assert dom.returncode == 0, dom.stderr[-2000:]
    with open(shot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    shutil.copy(shot, tmp_path / shot_name)
    return dom.stdout


def _check_page(url: str, topic_name: str, group: str, tmp_path) -> None:
    dom = _page(url, tmp_path, "console.png")
    section = re.search(r'<section class="topic" data-topic="%s">.*?</section>' % re.escape(topic_name), dom, re.S)
    assert section, f"topic {topic_name} not on the page: {dom[:3000]}"
    assert re.search(r'class="topic-records">42<', section.group(0))
    assert section.group(0).count("<tr>") == 3  # header row + two partitions
    assert "<svg" in section.group(0)  # the rate charts
    assert re.search(r"group %s <small>.*?lag 22<" % re.escape(group), dom, re.S), "group lag not shown"
    # hosts by address (a gateway's host:port, or the node's IP), the Ray node id only in the tooltip
    hosts = re.findall(r'<td class="l host" title="Ray node ([0-9a-f]+)">([^<]*)<', section.group(0))
    assert len(hosts) == 2 and all(re.fullmatch(r"[\d.]+(:\d+)?", h) and h != n for n, h in hosts), hosts
    # internal topics folded: named in the toggle, no section of their own
    assert 'data-topic="__consumer_offsets"' not in dom
    assert re.search(r'id="internal-count">\d+ internal topic\(s\): [^<]*__consumer_offsets', dom)


def test_record_browser_in_headless_chromium_decodes_records_starts_at_a_timestamp_and_finds_a_key(
        http, http_url, topic_name, tmp_path):
    assert http.post("/topic", json={"name": topic_name}).status_code == 201
    t = 1_700_000_000_000
    early = [{"key": f"early-{i}", "value": "before", "timestamp": t - 1000 + i} for i in range(3)]  # offsets 0-2
    later = [{"key": "order-7", "value": "plain words", "headers": {"trace": "abc-123"}, "timestamp": t},  # 3
             {"key": "needle", "value": {"page": "/cart", "n": 2}, "timestamp": t + 1},  # 4: stored as JSON text
             {"key": "order-8", "value": "more words", "timestamp": t + 2}]  # 5
    assert http.post("/publish", json={"topic": topic_name, "records": early + later}).status_code == 200
    binary = {"key": base64.b64encode(b"bin").decode(), "value": base64.b64encode(b"\x00\x01\xfe\xff").decode(),
              "headers": [["raw", base64.b64encode(b"\xc3\x28").decode()]], "timestamp": t + 3}  # 6
    assert http.post("/publish", json={"topic": topic_name, "encoding": "base64", "records": [binary]}).status_code == 200

    # the view a link opens: from a timestamp, key search "needle", internal topics unfolded
    dom = _page(f"{http_url}/console#topic={topic_name}&partition=0&timestamp={t}&key=needle&internal=1",
                tmp_path, "console-records.png")
    rows = dict(re.findall(r'<tr class="record[^"]*" data-offset="(\d+)">(.*?)</tr>', dom, re.S))
    assert sorted(rows, key=int) == ["3", "4", "5", "6"], dom[:3000]  # the timestamp start landed on offset 3

    def cells(offset: str) -> list[tuple[str, str]]:
        return [(kind, unescape(text)) for kind, text in re.findall(r'<pre data-kind="(\w+)">(.*?)</pre>', rows[offset], re.S)]

    assert cells("3") == [("text", "order-7"), ("text", "plain words"), ("text", "abc-123")]  # key, value, header
    assert cells("4")[1] == ("json", '{\n  "page": "/cart",\n  "n": 2\n}')  # pretty-printed
    assert cells("6") == [("text", "bin"), ("hex", "00 01 fe ff"), ("hex", "c3 28")]  # not UTF-8: hex
    assert re.findall(r'<tr class="record match" data-offset="(\d+)">', dom) == ["4"]
    assert re.search(r'id="b-matches">1 of 4 read records have a key containing “needle”: offset\(s\) 4<', dom)
    assert 'data-topic="__consumer_offsets"' in dom  # unfolded by the toggle's state in the link


def test_console_state_lists_partitions_and_group_lag_per_partition(client, http, topic_name):
    http.post("/topic", json={"name": topic_name})
    http.post("/publish", json={"topic": topic_name, "records": [{"value": "abc"}] * 7})
    group = f"{topic_name}-group"
    client.groups.reset_offsets(group, topic_name, to=3)  # a group that has read 3 of 7
    try:
        state = http.get("/console/state").json()
        t = next(t for t in state["topics"] if t["name"] == topic_name)
        p = t["partitions"][0]
        assert (p["log_start_offset"], p["log_end_offset"]) == (0, 7) and p["size_bytes"] > 0 and p["node_id"]
        g = next(g for g in state["groups"] if g["group_id"] == group)
        assert g["offsets"] == [{"topic": topic_name, "partition": 0, "committed": 3, "end": 7, "lag": 4}]
        assert t["internal"] is False
        assert next(t for t in state["topics"] if t["name"] == "__consumer_offsets")["internal"] is True
    finally:
        client.groups.delete(group)


def test_console_state_names_each_partitions_host_by_its_gateway_address_else_the_node_ip(client, http, topic_name):
    import ray

    from logan_ray.gateway import start_gateways, stop_gateways
    from logan_ray.http.console import node_addresses

    http.post("/topic", json={"name": topic_name})
    node = ray.get_runtime_context().get_node_id()
    ip = next(n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == node)

    def host() -> str:
        t = next(t for t in http.get("/console/state").json()["topics"] if t["name"] == topic_name)
        assert t["partitions"][0]["node_id"] == node
        return t["partitions"][0]["host"]

    class _RouterOfNoGateway:
        class gateways:  # noqa: N801 - stands in for the actor method
            @staticmethod
            def remote():
                return ray.put({})

    class _NoGateways:
        router = _RouterOfNoGateway

    assert node_addresses(_NoGateways(), {node}) == {node: ip}  # no gateway: Ray's address of the node
    registered = ray.get(client.router.gateways.remote())
    if node in registered:  # the session's gateway already runs on this node (the whole suite)
        gw_host, gw_port = registered[node]
        assert host() == f"{gw_host}:{gw_port}"
        return
    assert host() == ip
    endpoint = start_gateways("127.0.0.1", 0, nodes=[node])[node]
    try:
        assert host() == endpoint  # what Kafka clients connect to, e.g. 127.0.0.1:40123
    finally:
        stop_gateways([node])


def test_docs_page_loads_swagger_ui_from_the_app_not_a_cdn(http):
    page = http.get("/docs")
    assert page.status_code == 200
    assert "http://" not in page.text and "https://" not in page.text and "//cdn" not in page.text
    urls = re.findall(r'(?:src|href)="([^"]+)"', page.text)
    assert {u.rsplit("/", 1)[-1] for u in urls} == {"swagger-ui-bundle.js", "swagger-ui.css", "favicon-32x32.png"}
    for url in urls:
        r = http.get(url)
        assert r.status_code == 200 and len(r.content) > 100, url
    assert "SwaggerUIBundle" in http.get(next(u for u in urls if u.endswith(".js"))).text
    assert http.get("/docs/..%2F__init__.py").status_code == 404  # only the named files


@pytest.mark.parametrize("path", ["/console", "/console/console.js", "/console/records.js"])
def test_console_assets_are_served_by_the_app_without_any_cdn(http, path):
    r = http.get(path)
    assert r.status_code == 200
    assert "http://" not in r.text and "https://" not in r.text
