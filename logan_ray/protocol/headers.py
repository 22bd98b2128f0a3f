"""Request and response headers, declared in the same schema language as the bodies.

Kafka's rules: a request uses header v2 (tagged fields) when its API version is
flexible and v1 otherwise (v0 only exists for ControlledShutdown v0, which we do
not serve); a response uses header v1 when flexible, else v0, except ApiVersions
whose response header is always v0 so that a client that does not yet know the
broker's versions can read it.
"""
from __future__ import annotations

from typing import NamedTuple

from .schema import INT16, INT32, STRING, F

REQUEST_HEADER_FIELDS = (
    F("request_api_key", INT16),
    F("request_api_version", INT16),
    F("correlation_id", INT32),
    # Old-style int16 length even in the flexible v2, so that any broker can read the
    # header of an ApiVersions request of a version it does not know.
    F("client_id", STRING, "1+", nullable="1+", compact=False, default=None),
)

RESPONSE_HEADER_FIELDS = (F("correlation_id", INT32),)

API_VERSIONS_KEY = 18


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_version: int = 1


def request_header_version(flexible: bool) -> int:
    return 2 if flexible else 1


def response_header_version(api_key: int, flexible: bool) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if flexible else 0
