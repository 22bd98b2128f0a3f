"""Where the HTTP API listens: ``--http`` on the command line or ``LOGAN_RAY_HTTP``.

The value is ``off`` or ``[HOST]:PORT[/PREFIX]``; the default is Ray Serve's usual
``127.0.0.1:8000`` with the API under ``/`` (the console is at ``PREFIX/console``).
Two more settings say who may reach it (docs/security.md, "HTTP API"):
``--http-allowed-hosts`` / ``LOGAN_RAY_HTTP_ALLOWED_HOSTS``, the host names (besides
the listen address) requests may name in ``Host`` and ``Origin``; and
``--http-insecure``, needed to listen beyond loopback when nothing authenticates.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT = "127.0.0.1:8000"
ENV = "LOGAN_RAY_HTTP"
ALLOWED_HOSTS_ENV = "LOGAN_RAY_HTTP_ALLOWED_HOSTS"
#: Bodies larger than this are refused with 413 before they are parsed (bounded memory).
MAX_BODY_BYTES = 16 << 20


@dataclass(frozen=True)
class HttpSettings:
    host: str = "127.0.0.1"
    port: int = 8000
    route_prefix: str = "/"
    max_body_bytes: int = MAX_BODY_BYTES
    #: host names (lower case) requests may name besides the listen address (logan_ray.http.guard)
    allowed_hosts: tuple[str, ...] = ()

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}{self.route_prefix.rstrip('/')}"


def parse_allowed_hosts(value: str | None) -> tuple[str, ...]:
    """``name,name`` (None: ``$LOGAN_RAY_HTTP_ALLOWED_HOSTS``) -> lower-case names; a port or scheme is refused."""
    value = value if value is not None else os.environ.get(ALLOWED_HOSTS_ENV) or ""
    names = []
    for item in (v.strip().lower() for v in value.split(",")):
        if not item:
            continue
        bare = item[1:-1] if item.startswith("[") and item.endswith("]") else item
        if "/" in bare or (":" in bare and bare.count(":") == 1) or any(c.isspace() for c in bare):
            raise ValueError(f"--http-allowed-hosts expects host names separated by commas (no scheme, no port), "
                             f"got {item!r}")
        names.append(bare)
    return tuple(names)


def parse_http_setting(value: str | None, allowed_hosts: str | None = None) -> HttpSettings | None:
    """``off``/``none``/``false`` -> None; ``[HOST]:PORT[/PREFIX]`` -> settings; raises ValueError otherwise."""
    value = (value if value is not None else os.environ.get(ENV) or DEFAULT).strip()
    if value.lower() in ("off", "none", "false", "no", "0"):
        return None
    address, slash, prefix = value.partition("/")
    host, colon, port = address.rpartition(":")
    if not colon:
        host, port = address, ""
    try:
        port_number = int(port) if port else 8000
    except ValueError:
        raise ValueError(f"--http expects off or [HOST]:PORT[/PREFIX], got {value!r}") from None
    if not 0 < port_number < 65536:
        raise ValueError(f"--http port must be between 1 and 65535, got {port_number}")
    return HttpSettings(host=host or "127.0.0.1", port=port_number, route_prefix="/" + prefix.strip("/") if slash else "/",
                        allowed_hosts=parse_allowed_hosts(allowed_hosts))


def beyond_loopback(settings: HttpSettings) -> bool:
    """Whether anyone but this machine's own programs can reach the API."""
    from .guard import is_loopback

    return not is_loopback(settings.host)


def check_exposure(settings: HttpSettings | None, authenticates: bool, insecure: bool) -> str | None:
    """Refuse (ValueError) an API beyond loopback that takes anyone, unless ``insecure`` asks for it.

    Returns the one warning line to print when it is asked for (None: nothing to say)."""
    if settings is None or authenticates or not beyond_loopback(settings):
        return None
    where = f"{settings.host}:{settings.port}"
    if not insecure:
        raise ValueError(f"the HTTP API on {where} would let anyone on the network create, write, read and delete "
                         f"topics (no Kafka listener authenticates); give the broker an authenticating listener (SASL_SSL, docs/security.md), "
                         f"listen on loopback (--http 127.0.0.1:{settings.port}), or add --http-insecure")
    return (f"logan-ray: WARNING: the HTTP API on {where} has no authentication (--http-insecure): "
            f"anyone who can reach it can do everything")
