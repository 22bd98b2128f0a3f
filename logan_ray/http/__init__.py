"""HTTP API and live console for logan-ray, served by Ray Serve (FastAPI ingress).

``start_http(parse_http_setting("127.0.0.1:8000"))`` deploys it next to a running
broker (``logan-ray start`` does this by default); ``stop_http()`` removes it.
Routes: ``/topic``, ``/publish``, ``/subscribe``, ``/stream/{topic}/{partition}``,
``/console``, OpenAPI at ``/docs``. With Kafka listener security, the same users, ACLs and
certificate protect it (logan_ray.http.security, logan_ray.http.auth).
"""
from __future__ import annotations

from .settings import DEFAULT, HttpSettings, parse_http_setting
from .serve import APP_NAME, start_http, stop_http

__all__ = ["APP_NAME", "DEFAULT", "HttpSettings", "parse_http_setting", "start_http", "stop_http"]
