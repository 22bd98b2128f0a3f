"""Where the HTTP API listens: one setting, ``--http`` on the command line or ``LOGAN_RAY_HTTP``.

The value is ``off`` or ``[HOST]:PORT[/PREFIX]``; the default is Ray Serve's usual
``127.0.0.1:8000`` with the API under ``/`` (the console is at ``PREFIX/console``).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT = "127.0.0.1:8000"
ENV = "LOGAN_RAY_HTTP"
#: Bodies larger than this are refused with 413 before they are parsed (bounded memory).
MAX_BODY_BYTES = 16 << 20


@dataclass(frozen=True)
class HttpSettings:
    host: str = "127.0.0.1"
    port: int = 8000
    route_prefix: str = "/"
    max_body_bytes: int = MAX_BODY_BYTES

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}{self.route_prefix.rstrip('/')}"


def parse_http_setting(value: str | None) -> HttpSettings | None:
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
    return HttpSettings(host=host or "127.0.0.1", port=port_number, route_prefix="/" + prefix.strip("/") if slash else "/")
