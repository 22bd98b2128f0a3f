"""The listener of the request being handled, for code that answers with broker addresses.

Set by the gateway around each handler (a context variable, so concurrent requests
of different listeners never see each other's); None on the primary listener.
"""
from __future__ import annotations

import contextvars

_LISTENER: contextvars.ContextVar[str | None] = contextvars.ContextVar("logan_ray_listener", default=None)


def set_other_listener(name: str | None) -> None:
    _LISTENER.set(name)


def other_listener() -> str | None:
    return _LISTENER.get()
