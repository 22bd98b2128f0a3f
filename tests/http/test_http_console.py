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


def test_console_in_headless_chromium_shows_the_topic_and_its_record_count(http, http_url, topic_name, tmp_path):
    assert http.post("/topic", json={"name": topic_name, "partitions": 2}).status_code == 201
    for p, n in ((0, 30), (1, 12)):
        r = http.post("/publish", json={"topic": topic_name, "records": [{"value": "x", "partition": p}] * n})
        assert r.status_code == 200
    url = f"{http_url}/console"
    dom = _chromium(["--dump-dom", url], str(tmp_path / "profile-dom"))
    assert dom.returncode == 0, dom.stderr[-2000:]
    section = re.search(r'<section class="topic" data-topic="%s">.*?</section>' % re.escape(topic_name), dom.stdout, re.S)
    assert section, f"topic {topic_name} not on the page: {dom.stdout[:3000]}"
    assert re.search(r'class="topic-records">42<', section.group(0))
    assert section.group(0).count("<tr>") == 3  # header row + two partitions
    assert "<svg" in section.group(0)  # the rate charts

    os.makedirs(ARTIFACTS, exist_ok=True)
    shot = os.path.join(ARTIFACTS, "console.png")
    if os.path.exists(shot):
        os.unlink(shot)
    r = _chromium([f"--screenshot={shot}", url], str(tmp_path / "profile-shot"))
    assert r.returncode == 0, r.stderr[-2000:]
    with open(shot, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    shutil.copy(shot, tmp_path / "console.png")


def test_console_state_lists_partitions_with_offsets_and_sizes(http, topic_name):
    http.post("/topic", json={"name": topic_name})
    http.post("/publish", json={"topic": topic_name, "records": [{"value": "abc"}] * 7})
    state = http.get("/console/state").json()
    t = next(t for t in state["topics"] if t["name"] == topic_name)
    p = t["partitions"][0]
    assert (p["log_start_offset"], p["log_end_offset"]) == (0, 7) and p["size_bytes"] > 0 and p["node_id"]
    assert isinstance(state["groups"], list)


@pytest.mark.parametrize("path", ["/console", "/console/console.js"])
def test_console_assets_are_served_by_the_app_without_any_cdn(http, path):
    r = http.get(path)
    assert r.status_code == 200
    assert "http://" not in r.text and "https://" not in r.text
