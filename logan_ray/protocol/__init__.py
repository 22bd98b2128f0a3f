"""Sans-IO codec of the Kafka wire protocol: pure functions over bytes.

No sockets, no Ray, no storage: a gateway moves bytes between sockets, this codec
and the actors. Message layouts are declared as data (``messages_*.py``, one schema
per API with per-field version ranges, like Kafka's own definitions) and run
through one generic compiler (``compiler.py``); bodies are plain dicts with
snake_case keys.
"""
from __future__ import annotations

from . import errors
from .codec import (
    ADVERTISED,
    API_KEYS,
    APIS,
    SUPPORTED,
    api_versions_fallback_response,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
    expects_response,
    frame_size,
    precompile,
    supported_api_versions,
)
from .exceptions import (
    ProtocolDecodeError,
    ProtocolEncodeError,
    ProtocolError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from .headers import RequestHeader

__all__ = [
    "ADVERTISED",
    "API_KEYS",
    "APIS",
    "SUPPORTED",
    "ProtocolDecodeError",
    "ProtocolEncodeError",
    "ProtocolError",
    "RequestHeader",
    "UnknownApiKeyError",
    "UnsupportedVersionError",
    "api_versions_fallback_response",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "encode_request",
    "encode_response",
    "errors",
    "expects_response",
    "frame_size",
    "precompile",
    "supported_api_versions",
]
