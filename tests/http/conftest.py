"""The HTTP API on Ray Serve, deployed once per test session next to the shared broker.

Only tests that ask for ``http_url``/``http`` pay Serve's start-up; Serve is shut
down at the end of the session, even when tests fail.
"""
from __future__ import annotations

import time

import httpx
import pytest


#: Small, so the 413 test stays cheap; the bench uses the default (16 MiB).
MAX_BODY = 1 << 20


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def http_url(client) -> str:
    from logan_ray.http import HttpSettings, start_http, stop_http

    settings = HttpSettings(port=_free_port(), max_body_bytes=MAX_BODY)
    try:
        url = start_http(settings)
        deadline = time.monotonic() + 60
        while True:  # the proxy answers 503/404 until the app's route is live
            try:
                if httpx.get(f"{url}/topic", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the HTTP API did not come up at {url}")
            time.sleep(0.2)
        yield url
    finally:
        stop_http()


@pytest.fixture
def http(http_url):
    with httpx.Client(base_url=http_url, timeout=30) as c:
        yield c
