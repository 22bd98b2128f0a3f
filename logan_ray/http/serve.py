"""Deploying the HTTP API on Ray Serve next to the broker, and taking it down again."""
from __future__ import annotations

import logging

from logan_ray.errors import LoganError

from .security import HttpSecurity
from .settings import HttpSettings

APP_NAME = "logan-ray-http"


class HttpStartError(LoganError):
    """Ray Serve could not start the HTTP API (address in use, bad host...)."""
log = logging.getLogger("logan_ray.http")


def _deployment(settings: HttpSettings, security: HttpSecurity | None):
    from ray import serve

    from .app import app

    @serve.deployment(name="api", num_replicas=1, ray_actor_options={"num_cpus": 0},
                      max_ongoing_requests=1000, max_queued_requests=-1, health_check_period_s=10)
    @serve.ingress(app)
    class HttpApi:
        def __init__(self, settings: HttpSettings, security: HttpSecurity | None) -> None:
            import logan_ray

            from .backend import Backend, install
            from .guard import HostGuard

            install(Backend(logan_ray.connect(embedded=False), settings.max_body_bytes, security,
                            HostGuard(settings.host, settings.allowed_hosts)))

    return HttpApi.bind(settings, security)


def start_http(settings: HttpSettings, security: HttpSecurity | None = None) -> str:
    """Start Serve (proxy on ``settings.host:port``) and deploy the API; returns its base URL.

    Needs Ray initialised and a broker (router) running. Serve is started with
    ``proxy_location="HeadOnly"``: one listener, on the node that runs the broker.
    ``security`` (logan_ray.http.security.http_security of the gateways' settings):
    Basic authentication against the gateways' SCRAM users, their ACLs, and HTTPS
    with their TLS keystore (Serve's proxy serves it: uvicorn's ``ssl_*`` options).
    """
    from ray import serve

    options = {"host": settings.host, "port": settings.port}
    if security is not None and security.tls:
        # Kafka's PEM keystore holds the key and the chain in one file: it is both files for uvicorn
        options.update(ssl_keyfile=security.tls_keystore, ssl_certfile=security.tls_keystore,
                       ssl_keyfile_password=security.tls_key_password)
    elif security is not None and security.authenticate and settings.host not in ("127.0.0.1", "::1", "localhost"):
        log.warning("logan-ray: the HTTP API on %s:%s takes HTTP Basic passwords without TLS (no Kafka listener "
                    "has TLS); anyone on the network path can read them", settings.host, settings.port)
    try:
        serve.start(proxy_location="HeadOnly", http_options=options)
        serve.run(_deployment(settings, security), name=APP_NAME, route_prefix=settings.route_prefix,
                  blocking=False)
    except Exception as e:  # e.g. the port is taken: one clear line for the CLI, not Serve's traceback
        stop_http()
        cause = getattr(e, "cause", None) or e
        raise HttpStartError(f"cannot serve the HTTP API on {settings.host}:{settings.port}: "
                             f"{str(cause).strip().splitlines()[-1]} (choose another with --http HOST:PORT, "
                             f"or --http off)") from None
    return settings.url.replace("http://", "https://", 1) if security is not None and security.tls else settings.url


def stop_http() -> None:
    """Delete the app and shut Serve down (its controller and proxy are detached actors)."""
    from ray import serve

    try:
        serve.shutdown()
    except Exception as e:  # Ray may already be going away
        log.warning("stopping Ray Serve failed: %s", e)
