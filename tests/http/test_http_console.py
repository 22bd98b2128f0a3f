"""The live console in a real browser: headless Chromium (Debian's package) loads /console and shows
a topic this test created with its record count; the screenshot is kept as a test artifact."""
from __future__ import annotations

import os
import re
import shutil
import subprocess

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


def _check_page(url: str, topic_name: str, group: str, tmp_path) -> None:
    dom = _chromium(["--dump-dom", url], str(tmp_path / "profile-dom"))
    assert dom.returncode == 0, dom.stderr[-2000:]
    section = re.search(r'<section class="topic" data-topic="%s">.*?</section>' % re.escape(topic_name), dom.stdout, re.S)
    assert section, f"topic {topic_name} not on the page: {dom.stdout[:3000]}"
    assert re.search(r'class="topic-records">42<', section.group(0))
    assert section.group(0).count("<tr>") == 3  # header row + two partitions
    assert "<svg" in section.group(0)  # the rate charts
    assert re.search(r"group %s <small>.*?lag 22<" % re.escape(group), dom.stdout, re.S), "group lag not shown"

    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "console.png")
    if os.path.exists(shot):
        os.unlink(shot)
    r = _chromium([f"--screenshot={shot}", url], str(tmp_path / "profile-shot"))
    assert r.returncode == 0, r.stderr[-2000:]
    with open(shot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    shutil.copy(shot, tmp_path / "console.png")


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
    finally:
        client.groups.delete(group)


@pytest.mark.parametrize("path", ["/console", "/console/console.js"])
def test_console_assets_are_served_by_the_app_without_any_cdn(http, path):
    r = http.get(path)
    assert r.status_code == 200
    assert "http://" not in r.text and "https://" not in r.text
