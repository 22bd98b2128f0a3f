"""Bytes <-> JSON strings for keys, values and header values (UTF-8 text or base64)."""
from __future__ import annotations

import base64
import binascii
import json
from json.encoder import encode_basestring_ascii as _quote
from typing import Any

from logan_ray.protocol import errors as E

from .errors import HttpError


def to_bytes(value: Any, encoding: str, field: str) -> bytes | None:
    """Decode one field of a publish body; refuses bad base64 with 400 INVALID_RECORD."""
    if value is None:
        return None
    if isinstance(value, str):
        if encoding == "base64":
            try:
                return base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise HttpError(400, E.INVALID_RECORD, f"{field} is not valid base64") from None
        return value.encode()
    if encoding == "base64":
        raise HttpError(422, E.INVALID_REQUEST, f"{field} must be a base64 string when encoding is base64")
    return json.dumps(value, separators=(",", ":")).encode()


def headers_to_bytes(headers: Any, encoding: str) -> list[tuple[str, bytes | None]] | None:
    if not headers:
        return None
    pairs = headers.items() if isinstance(headers, dict) else headers
    return [(k, to_bytes(v, encoding, f"header {k!r}")) for k, v in pairs]


def quoted(data: bytes | None, encoding: str, offset: int) -> str:
    """A JSON string literal (or null) for stored bytes, written without a json.dumps per field."""
    if data is None:
        return "null"
    if encoding == "base64":
        return '"' + base64.b64encode(data).decode() + '"'
    try:
        return _quote(data.decode())
    except UnicodeDecodeError:
        raise HttpError(422, E.INVALID_REQUEST,
                        f"the record at offset {offset} is not valid UTF-8; read it with encoding=base64") from None
