"""The "consumer" embedded protocol: JoinGroup metadata and SyncGroup assignment bytes.

The coordinator treats these bytes as opaque; members must agree on them. Kafka
clients (Java, librdkafka, kafka-python, aiokafka, kafkajs) encode subscriptions
as ConsumerProtocolSubscription v0-v3 and assignments as
ConsumerProtocolAssignment, classic (non-flexible) encoding: int16 version, then
int32-length arrays, int16-length strings, int32-length nullable bytes. A Python
member that writes and reads exactly this layout can lead a group of Kafka
clients and be led by one. Newer versions than we know are read field by field
and the rest ignored, as Kafka's own readers do.
"""
from __future__ import annotations

import struct
from typing import Iterable, Mapping, NamedTuple, Sequence

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")

SUBSCRIPTION_VERSION = 1  # topics + user data + owned partitions: what eager assignors need
ASSIGNMENT_VERSION = 0


class Subscription(NamedTuple):
    topics: list[str]
    user_data: bytes | None = None
    owned_partitions: list[tuple[str, list[int]]] = []
    generation_id: int = -1
    rack_id: str | None = None
    version: int = SUBSCRIPTION_VERSION


class Assignment(NamedTuple):
    partitions: list[tuple[str, list[int]]]
    user_data: bytes | None = None
    version: int = ASSIGNMENT_VERSION

    def topic_partitions(self) -> list[tuple[str, int]]:
        return [(t, p) for t, parts in self.partitions for p in parts]


class _Writer:
    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def i16(self, v: int) -> None:
        self.parts.append(_I16.pack(v))

    def i32(self, v: int) -> None:
        self.parts.append(_I32.pack(v))

    def string(self, s: str | None) -> None:
        if s is None:
            self.i16(-1)
            return
        b = s.encode()
        self.i16(len(b))
        self.parts.append(b)

    def nbytes(self, b: bytes | None) -> None:
        if b is None:
            self.i32(-1)
            return
        self.i32(len(b))
        self.parts.append(bytes(b))

    def topic_partitions(self, items: Iterable[tuple[str, Sequence[int]]]) -> None:
        items = list(items)
        self.i32(len(items))
        for topic, parts in items:
            self.string(topic)
            self.i32(len(parts))
            self.parts.append(b"".join(_I32.pack(p) for p in parts))

    def value(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = bytes(data)
        self.pos = 0

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError(f"consumer protocol data truncated at byte {self.pos} (wanted {n})")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def at_end(self) -> bool:
        return self.pos >= len(self.data)

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self._take(n).decode()

    def nbytes(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self._take(n)

    def array_len(self) -> int:
        n = self.i32()
        if n > len(self.data):
            raise ValueError(f"consumer protocol array of {n} items in {len(self.data)} bytes")
        return max(n, 0)

    def topic_partitions(self) -> list[tuple[str, list[int]]]:
        out = []
        for _ in range(self.array_len()):
            topic = self.string() or ""
            n = self.array_len()
            parts = list(struct.unpack(f">{n}i", self._take(4 * n)))
            out.append((topic, parts))
        return out


def encode_subscription(topics: Iterable[str], user_data: bytes | None = None,
                        owned_partitions: Iterable[tuple[str, Sequence[int]]] = (), generation_id: int = -1,
                        rack_id: str | None = None, version: int = SUBSCRIPTION_VERSION) -> bytes:
    w = _Writer()
    w.i16(version)
    topics = list(topics)
    w.i32(len(topics))
    for t in topics:
        w.string(t)
    w.nbytes(user_data)
    if version >= 1:
        w.topic_partitions(owned_partitions)
    if version >= 2:
        w.i32(generation_id)
    if version >= 3:
        w.string(rack_id)
    return w.value()


def decode_subscription(data: bytes) -> Subscription:
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise ValueError(f"bad consumer subscription version {version}")
    topics = [r.string() or "" for _ in range(r.array_len())]
    user_data = r.nbytes() if not r.at_end() else None
    owned: list[tuple[str, list[int]]] = []
    generation = -1
    rack = None
    if version >= 1 and not r.at_end():
        owned = r.topic_partitions()
    if version >= 2 and not r.at_end():
        generation = r.i32()
    if version >= 3 and not r.at_end():
        rack = r.string()
    return Subscription(topics, user_data, owned, generation, rack, version)


def encode_assignment(partitions: Mapping[str, Sequence[int]] | Iterable[tuple[str, Sequence[int]]],
                      user_data: bytes | None = None, version: int = ASSIGNMENT_VERSION) -> bytes:
    items = sorted(partitions.items()) if isinstance(partitions, Mapping) else list(partitions)
    w = _Writer()
    w.i16(version)
    w.topic_partitions((t, sorted(ps)) for t, ps in items)
    w.nbytes(user_data)
    return w.value()


def decode_assignment(data: bytes | None) -> Assignment:
    """An empty payload means "nothing assigned" (what the coordinator sends a member the leader skipped)."""
    if not data:
        return Assignment([], None, ASSIGNMENT_VERSION)
    r = _Reader(data)
    version = r.i16()
    if version < 0:
        raise ValueError(f"bad consumer assignment version {version}")
    partitions = r.topic_partitions()
    user_data = r.nbytes() if not r.at_end() else None
    return Assignment(partitions, user_data, version)


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics of one member's subscription, or None when its metadata cannot be read."""
    try:
        return set(decode_subscription(metadata).topics)
    except (ValueError, UnicodeDecodeError, struct.error):
        return None
