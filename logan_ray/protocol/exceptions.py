"""Exceptions of the wire codec.

They deliberately do not derive from ``logan_ray.errors.LoganError``: the codec stays
importable without the storage package, and the gateway reacts to these by the class
(close the connection, or answer UNSUPPORTED_VERSION) rather than by an error code.
"""
from __future__ import annotations

from typing import Any


class ProtocolError(Exception):
    """Base of every codec error."""


class ProtocolDecodeError(ProtocolError):
    """The bytes are truncated or garbage: the peer is broken, close its connection."""


class ProtocolEncodeError(ProtocolError):
    """A body dict cannot be encoded (wrong type, value out of range)."""


class UnknownApiKeyError(ProtocolError):
    """The request names an API this codec does not know at all.

    ``header`` carries what could be read (api key, version, correlation id) so the
    gateway can log it before closing the connection, as Kafka does.
    """

    def __init__(self, api_key: int, header: Any = None) -> None:
        super().__init__(f"unknown api key {api_key}")
        self.api_key = api_key
        self.header = header


class UnsupportedVersionError(ProtocolError):
    """A known API at a version this codec does not implement.

    ``header`` is the decoded request header when it could be read, so the gateway
    can still answer an ApiVersions request of a too-new version (Kafka's rule: reply
    with a v0 body, error UNSUPPORTED_VERSION and the supported ranges).
    """

    def __init__(self, api_key: int, version: int, header: Any = None) -> None:
        super().__init__(f"api key {api_key} version {version} is not supported")
        self.api_key = api_key
        self.version = version
        self.header = header
