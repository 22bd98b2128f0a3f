"""Deploying the HTTP API on Ray Serve next to the broker, and taking it down again."""
from __future__ import annotations

import logging

from logan_ray.errors import LoganError

from .settings import HttpSettings

APP_NAME = "logan-ray-http"


class HttpStartError(LoganError):
    """Ray Serve could not start the HTTP API (address in use, bad host...)."""
log = logging.getLogger("logan_ray.http")


def _deployment(settings: HttpSettings):
    from ray import serve

    from .app import app

    @serve.deployment(name="api", num_replicas=1, ray_actor_options={"num_cpus": 0},
                      max_ongoing_requests=1000, max_queued_requests=-1, health_check_period_s=10)
    @serve.ingress(app)
    class HttpApi:
        def __init__(self, max_body_bytes: int) -> None:
            import logan_ray

            from .backend import Backend, install

            install(Backend(logan_ray.connect(embedded=False), max_body_bytes))

    return HttpApi.bind(settings.max_body_bytes)


def start_http(settings: HttpSettings) -> str:
    """Start Serve (proxy on ``settings.host:port``) and deploy the API; returns its base URL.

    Needs Ray initialised and a broker (router) running. Serve is started with
    ``proxy_location="HeadOnly"``: one listener, on the node that runs the broker.
    """
    from ray import serve

    try:
        serve.start(proxy_location="HeadOnly", http_options={"host": settings.host, "port": settings.port})
        serve.run(_deployment(settings), name=APP_NAME, route_prefix=settings.route_prefix, blocking=False)
    except Exception as e:  # e.g. the port is taken: one clear line for the CLI, not Serve's traceback
        stop_http()
        cause = getattr(e, "cause", None) or e
        raise HttpStartError(f"cannot serve the HTTP API on {settings.host}:{settings.port}: "
                             f"{str(cause).strip().splitlines()[-1]} (choose another with --http HOST:PORT, "
                             f"or --http off)") from None
    return settings.url


def stop_http() -> None:
    """Delete the app and shut Serve down (its controller and proxy are detached actors)."""
    from ray import serve

    try:
        serve.shutdown()
    except Exception as e:  # Ray may already be going away
        log.warning("stopping Ray Serve failed: %s", e)
