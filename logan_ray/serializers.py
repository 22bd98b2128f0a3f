"""Key/value (de)serializers: bytes (default), str, JSON and msgpack.

The log stores bytes; serializers live only at the edges so the same topic can
be read by Kafka clients in any language.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Union

import msgpack

from .errors import SerializationError

Serializer = Callable[[Any], Union[bytes, None]]
Deserializer = Callable[[Union[bytes, None]], Any]


def _bytes_ser(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    raise SerializationError(f"bytes serializer got {type(v).__name__}; pass bytes or choose 'str', 'json' or 'msgpack'")


def _str_ser(v: Any) -> bytes | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise SerializationError(f"str serializer got {type(v).__name__}")
    return v.encode("utf-8")


def _str_de(b: bytes | None) -> str | None:
    try:
        return None if b is None else b.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SerializationError(f"value is not valid UTF-8: {e}") from None


def _json_ser(v: Any) -> bytes | None:
    try:
        return None if v is None else json.dumps(v, separators=(",", ":")).encode()
    except (TypeError, ValueError) as e:
        raise SerializationError(f"cannot serialize to JSON: {e}") from None


def _json_de(b: bytes | None) -> Any:
    try:
        return None if b is None else json.loads(b)
    except ValueError as e:
        raise SerializationError(f"value is not valid JSON: {e}") from None


def _msgpack_ser(v: Any) -> bytes | None:
    try:
        return None if v is None else msgpack.packb(v, use_bin_type=True)
    except (TypeError, ValueError) as e:
        raise SerializationError(f"cannot serialize to msgpack: {e}") from None


def _msgpack_de(b: bytes | None) -> Any:
    try:
        return None if b is None else msgpack.unpackb(b, raw=False)
    except Exception as e:  # msgpack raises several unrelated types
        raise SerializationError(f"value is not valid msgpack: {e}") from None


SERIALIZERS: dict[str, tuple[Serializer, Deserializer]] = {
    "bytes": (_bytes_ser, lambda b: b),
    "str": (_str_ser, _str_de),
    "json": (_json_ser, _json_de),
    "msgpack": (_msgpack_ser, _msgpack_de),
}


def serializer(spec: str | Serializer | None) -> Serializer | None:
    """None means bytes pass through untouched (the fast path)."""
    if spec is None or spec == "bytes":
        return None
    if callable(spec):
        return spec
    try:
        return SERIALIZERS[spec][0]
    except KeyError:
        raise ValueError(f"unknown serializer {spec!r}; choose one of {sorted(SERIALIZERS)} or a callable") from None


def deserializer(spec: str | Deserializer | None) -> Deserializer | None:
    if spec is None or spec == "bytes":
        return None
    if callable(spec):
        return spec
    try:
        return SERIALIZERS[spec][1]
    except KeyError:
        raise ValueError(f"unknown deserializer {spec!r}; choose one of {sorted(SERIALIZERS)} or a callable") from None
