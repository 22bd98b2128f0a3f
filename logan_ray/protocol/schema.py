"""A small declarative language for Kafka message schemas.

Kafka declares every message once, with per-field version ranges, and derives each
version's layout from that. We do the same in plain Python objects so the message
tables (``messages_*.py``) read like the upstream definitions, while a single
generic compiler (``compiler.py``) turns ``(schema, version)`` into a codec plan.
Nothing in here touches bytes.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field as dc_field
from typing import Any, Sequence

ZERO_UUID = uuid.UUID(int=0)


class VersionRange:
    """Kafka's version-range notation: ``"0+"``, ``"3-7"``, ``"5"``, ``"none"``."""

    __slots__ = ("low", "high", "text")

    def __init__(self, text: str | None) -> None:
        self.text = text or "none"
        if self.text == "none":
            self.low, self.high = 1, 0  # empty
        elif self.text.endswith("+"):
            self.low, self.high = int(self.text[:-1]), 1 << 15
        elif "-" in self.text:
            lo, hi = self.text.split("-")
            self.low, self.high = int(lo), int(hi)
        else:
            self.low = self.high = int(self.text)

    def __contains__(self, version: int) -> bool:
        return self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        return self.low > self.high

    def __repr__(self) -> str:
        return f"VersionRange({self.text!r})"


class Type:
    """Base of the schema types; instances are immutable descriptions."""

    name = "?"

    def __repr__(self) -> str:
        return self.name


class Fixed(Type):
    """A fixed-width number packed big-endian with the given ``struct`` code."""

    def __init__(self, name: str, code: str, size: int, default: Any) -> None:
        self.name, self.code, self.size, self.default = name, code, size, default


class Varlen(Type):
    """string, bytes, records, uuid: each has its own wire rule in the compiler."""

    def __init__(self, name: str) -> None:
        self.name = name


INT8 = Fixed("int8", "b", 1, 0)
INT16 = Fixed("int16", "h", 2, 0)
INT32 = Fixed("int32", "i", 4, 0)
INT64 = Fixed("int64", "q", 8, 0)
UINT16 = Fixed("uint16", "H", 2, 0)
UINT32 = Fixed("uint32", "I", 4, 0)
FLOAT64 = Fixed("float64", "d", 8, 0.0)
BOOL = Fixed("bool", "?", 1, False)
UUID = Varlen("uuid")
STRING = Varlen("string")
BYTES = Varlen("bytes")
#: Record batches: nullable bytes on the wire, but decoded as a zero-copy memoryview
#: and encoded from bytes-like values or opaque chunk objects (sendfile slices).
RECORDS = Varlen("records")


class Array(Type):
    def __init__(self, element: Type) -> None:
        self.element = element
        self.name = f"[]{element.name}"


class Struct(Type):
    def __init__(self, *fields: "Field") -> None:
        self.fields: tuple[Field, ...] = tuple(fields)
        self.name = "{" + ",".join(f.name for f in fields) + "}"
        seen: set[str] = set()
        for f in fields:
            if f.name in seen:
                raise ValueError(f"duplicate field {f.name!r}")
            seen.add(f.name)


_MISSING: Any = object()


class Field:
    """One field of a message or struct.

    ``versions`` is where the field exists; ``nullable`` where it may be null;
    ``tag`` makes it a tagged field (KIP-482) in ``tagged`` versions (default: all of
    ``versions``); ``compact=False`` pins the old non-compact encoding even in flexible
    versions (only the request header's client id needs that). ``default`` is what an
    absent field decodes to and what a missing dict key encodes as.
    """

    __slots__ = ("name", "type", "versions", "nullable", "tag", "tagged", "compact", "_default")

    def __init__(
        self,
        name: str,
        type: Type,
        versions: str = "0+",
        *,
        nullable: str | None = None,
        tag: int | None = None,
        tagged: str | None = None,
        default: Any = _MISSING,
        compact: bool | None = None,
    ) -> None:
        self.name = name
        self.type = type
        self.versions = VersionRange(versions)
        self.nullable = VersionRange(nullable)
        self.tag = tag
        self.tagged = VersionRange(tagged if tagged is not None else (versions if tag is not None else None))
        self.compact = compact
        self._default = default

    def is_tagged_in(self, version: int) -> bool:
        return self.tag is not None and version in self.tagged

    @property
    def ever_nullable(self) -> bool:
        return not self.nullable.empty

    def default_value(self) -> Any:
        """A fresh default: 0 / "" / b"" / None-if-nullable / [] / {struct defaults}."""
        if self._default is not _MISSING:
            return list(self._default) if isinstance(self._default, list) else self._default
        if self.ever_nullable or self.type is RECORDS:
            return None
        return type_default(self.type)

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.type!r}, {self.versions.text!r})"


def type_default(t: Type) -> Any:
    if isinstance(t, Fixed):
        return t.default
    if t is STRING:
        return ""
    if t is BYTES:
        return b""
    if t is UUID:
        return ZERO_UUID
    if t is RECORDS:
        return None
    if isinstance(t, Array):
        return []
    if isinstance(t, Struct):
        return {f.name: f.default_value() for f in t.fields}
    raise TypeError(f"no default for {t!r}")


@dataclass(frozen=True)
class Api:
    """One Kafka API: its key, versions, flexible versions, request and response."""

    key: int
    name: str
    valid: str
    flexible: str
    request: Sequence[Field]
    response: Sequence[Field]
    #: Versions implemented but not yet stable upstream: not advertised to clients.
    unstable: str | None = None
    _ranges: dict = dc_field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._ranges["valid"] = VersionRange(self.valid)
        self._ranges["flexible"] = VersionRange(self.flexible)
        self._ranges["unstable"] = VersionRange(self.unstable)
        Struct(*self.request)  # reject duplicate names early
        Struct(*self.response)

    @property
    def min_version(self) -> int:
        return self._ranges["valid"].low

    @property
    def max_version(self) -> int:
        return self._ranges["valid"].high

    @property
    def max_stable_version(self) -> int:
        unstable = self._ranges["unstable"]
        return self.max_version if unstable.empty else unstable.low - 1

    def is_flexible(self, version: int) -> bool:
        return version in self._ranges["flexible"]

    def supports(self, version: int) -> bool:
        return version in self._ranges["valid"]


# Short aliases keep the message tables compact and close to the upstream layout.
F = Field
S = Struct
A = Array
