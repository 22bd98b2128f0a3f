"""Test helpers: representative bodies built from the schemas, and the decoded form to expect.

A sample fills every field the API has in any version with a distinct non-default
value, so one dict can be encoded at every version (fields outside the version are
ignored) and every field that travels is checked to come back.
"""
from __future__ import annotations

import itertools
import uuid
from typing import Any

from logan_ray.protocol.schema import (
    BOOL,
    BYTES,
    FLOAT64,
    RECORDS,
    STRING,
    UUID,
    Array,
    Field,
    Fixed,
    Struct,
)

_RANGES = {"b": 100, "h": 30000, "i": 2_000_000_000, "q": 9_000_000_000_000, "H": 60000, "I": 4_000_000_000}


def sample_body(fields, *, nulls: bool = False, seed: int = 1) -> dict:
    """A body with every field set; ``nulls`` sets every ever-nullable field to None."""
    counter = itertools.count(seed)
    return _struct_value(fields, counter, nulls)


def _struct_value(fields, counter, nulls):
    return {f.name: _field_value(f, counter, nulls) for f in fields}


def _field_value(f: Field, counter, nulls):
    if nulls and f.ever_nullable:
        return None
    return _type_value(f.type, f.name, counter, nulls)


def _type_value(t, name, counter, nulls):
    n = next(counter)
    if t is BOOL:
        return n % 2 == 1
    if t is FLOAT64:
        return n + 0.5
    if isinstance(t, Fixed):
        return (n * 7919) % _RANGES[t.code] - (_RANGES[t.code] // 3 if t.code.islower() else 0)
    if t is STRING:
        return f"{name}-{n}-\u00e9"  # non-ASCII: lengths are in bytes, not characters
    if t is BYTES:
        return bytes([n % 256]) * (n % 5 + 1)
    if t is RECORDS:
        return bytes(range(n % 200, n % 200 + 40))
    if t is UUID:
        return uuid.UUID(int=(n * 0x9E3779B97F4A7C15) % (1 << 128))
    if isinstance(t, Array):
        return [_type_value(t.element, name, counter, nulls) for _ in range(2)]
    if isinstance(t, Struct):
        return _struct_value(t.fields, counter, nulls)
    raise TypeError(t)


def _empty(t):
    if t is STRING:
        return ""
    if t in (BYTES, RECORDS):
        return b""
    if isinstance(t, Array):
        return []
    raise TypeError(t)


def expected(fields, body: dict, version: int) -> dict:
    """What decoding ``encode(body)`` at ``version`` must give (records as bytes)."""
    out = {}
    for f in fields:
        if version not in f.versions:
            out[f.name] = normalize(f.default_value())
            continue
        value = body.get(f.name, f.default_value())
        if value is None and version not in f.nullable and not isinstance(f.type, Struct):
            value = _empty(f.type)  # the codec's leniency: None becomes empty where null is not allowed
        out[f.name] = _expected_value(f.type, value, version)
    return out


def _expected_value(t, value, version):
    if value is None:
        return None
    if isinstance(t, Struct):
        return expected(t.fields, value, version)
    if isinstance(t, Array):
        return [_expected_value(t.element, v, version) for v in value]
    if t is RECORDS or t is BYTES:
        return bytes(value)
    return value


def normalize(value: Any) -> Any:
    """Decoded values with memoryviews turned into bytes, for comparisons."""
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, memoryview):
        return value.tobytes()
    return value
