"""Consumer: reads partitions through their actors with one prefetching long-poll per partition.

Each fetch returns whole batches (up to ``fetch_max_bytes``), so a single actor
call delivers thousands of records; records are decoded only here, at the edge.
"""
from __future__ import annotations

import time
from typing import Any, Iterable, Iterator, NamedTuple, Sequence

import ray

from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.records import decode_records

from ._ray import get
from .errors import OffsetOutOfRangeError, UnknownPartitionError
from .serializers import deserializer

EARLIEST = -2
LATEST = -1


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class ConsumerRecord(NamedTuple):
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: Any
    value: Any
    headers: tuple


class Consumer:
    """Assign partitions (or subscribe to whole topics), seek, and poll records in offset order."""

    def __init__(self, client, *topics: str, auto_offset_reset: str = "latest", fetch_max_bytes: int = 1 << 20,
                 fetch_max_wait_ms: int = 500, key_deserializer: Any = None, value_deserializer: Any = None,
                 max_poll_records: int = 100_000) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto_offset_reset must be 'earliest', 'latest' or 'none', got {auto_offset_reset!r}")
        self._client = client
        self._reset = auto_offset_reset
        self._max_bytes = fetch_max_bytes
        self._max_wait_ms = fetch_max_wait_ms
        self._key_de = deserializer(key_deserializer)
        self._value_de = deserializer(value_deserializer)
        self._max_poll_records = max_poll_records
        self._positions: dict[TopicPartition, int | None] = {}
        self._pending: dict[TopicPartition, tuple[Any, int]] = {}  # tp -> (ref, offset fetched)
        self._buffer: list[ConsumerRecord] = []
        if topics:
            self.subscribe(topics)

    # ------------------------------------------------------------- assignment
    def subscribe(self, topics: Iterable[str]) -> None:
        """All partitions of ``topics`` (group membership arrives with consumer groups)."""
        tps = [TopicPartition(t, p) for t in topics for p in range(len(self._client.partitions(t)))]
        self.assign(tps)

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        new = [TopicPartition(*tp) for tp in partitions]
        for tp in new:
            if not 0 <= tp.partition < len(self._client.partitions(tp.topic)):
                raise UnknownPartitionError(f"topic {tp.topic!r} has no partition {tp.partition}")
        self._positions = {tp: self._positions.get(tp) for tp in new}
        self._pending = {tp: v for tp, v in self._pending.items() if tp in self._positions}
        self._buffer = [r for r in self._buffer if (r.topic, r.partition) in self._positions]

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    def _actor(self, tp: TopicPartition):
        return self._client.partition_actor(tp.topic, tp.partition)

    # --------------------------------------------------------------- position
    def seek(self, partition: tuple[str, int], offset: int) -> None:
        tp = TopicPartition(*partition)
        if tp not in self._positions:
            raise UnknownPartitionError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot seek {tp.topic}-{tp.partition} to negative offset {offset}")
        self._positions[tp] = offset
        self._pending.pop(tp, None)
        self._buffer = [r for r in self._buffer if (r.topic, r.partition) != tp]

    def seek_to_beginning(self, *partitions: tuple[str, int]) -> None:
        for tp in partitions or list(self._positions):
            self.seek(tp, self._offsets(TopicPartition(*tp))[0])

    def seek_to_end(self, *partitions: tuple[str, int]) -> None:
        for tp in partitions or list(self._positions):
            self.seek(tp, self._offsets(TopicPartition(*tp))[1])

    def position(self, partition: tuple[str, int]) -> int:
        tp = TopicPartition(*partition)
        if self._positions.get(tp) is None:
            self._reset_position(tp)
        return self._positions[tp]  # type: ignore[return-value]

    def _offsets(self, tp: TopicPartition) -> tuple[int, int]:
        return tuple(get(self._actor(tp).offsets.remote()))  # type: ignore[return-value]

    def beginning_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[TopicPartition, int]:
        return {TopicPartition(*tp): self._offsets(TopicPartition(*tp))[0] for tp in partitions}

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[TopicPartition, int]:
        return {TopicPartition(*tp): self._offsets(TopicPartition(*tp))[1] for tp in partitions}

    def offsets_for_times(self, timestamps: dict[tuple[str, int], int]) -> dict[TopicPartition, tuple[int, int] | None]:
        """{tp: (offset, timestamp)} of the first record with timestamp >= the given ms, or None."""
        refs = {TopicPartition(*tp): self._actor(TopicPartition(*tp)).offset_for_timestamp.remote(ts)
                for tp, ts in timestamps.items()}
        return {tp: (tuple(r) if r is not None else None) for tp, r in zip(refs, get(list(refs.values())))}

    def _reset_position(self, tp: TopicPartition) -> None:
        if self._reset == "none":
            raise OffsetOutOfRangeError(f"{tp.topic}-{tp.partition} has no position and auto_offset_reset is 'none'")
        start, end = self._offsets(tp)
        self._positions[tp] = start if self._reset == "earliest" else end

    # ------------------------------------------------------------------- poll
    def _prefetch(self, wait_ms: int) -> None:
        for tp, pos in self._positions.items():
            if tp in self._pending:
                continue
            if pos is None:
                self._reset_position(tp)
                pos = self._positions[tp]
            ref = self._actor(tp).fetch.remote(pos, self._max_bytes, wait_ms, 1)
            self._pending[tp] = (ref, pos)

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from any assigned partition, waiting up to ``timeout_ms`` for the first ones."""
        limit = max_records or self._max_poll_records
        if not self._buffer:
            deadline = time.monotonic() + timeout_ms / 1000.0
            while not self._buffer and self._positions:
                self._prefetch(min(self._max_wait_ms, max(0, timeout_ms)))
                remaining = max(0.0, deadline - time.monotonic())
                refs = [ref for ref, _ in self._pending.values()]
                ready, _ = ray.wait(refs, num_returns=1, timeout=remaining)
                # take every fetch that is already done, not just the first
                ready, _ = ray.wait(refs, num_returns=len(refs), timeout=0) if ready else (ready, None)
                ready_set = set(ready)
                for tp, (ref, pos) in list(self._pending.items()):
                    if ref in ready_set:
                        del self._pending[tp]
                        self._absorb(tp, pos, ref)
                if not self._buffer and time.monotonic() >= deadline:
                    break
        out, self._buffer = self._buffer[:limit], self._buffer[limit:]
        return out

    def _absorb(self, tp: TopicPartition, pos: int, ref) -> None:
        if self._positions.get(tp) != pos:
            return  # a seek happened while this fetch was in flight
        try:
            data, _hw, _start = get(ref)
        except OffsetOutOfRangeError:
            self._positions[tp] = None
            self._reset_position(tp)
            return
        if not data:
            return
        next_offset = pos
        for _, h in iter_headers(data):
            next_offset = max(next_offset, h.next_offset)
        kd, vd = self._key_de, self._value_de
        topic, part = tp
        self._buffer.extend(
            ConsumerRecord(topic, part, r.offset, r.timestamp,
                           r.key if kd is None else kd(r.key), r.value if vd is None else vd(r.value), r.headers)
            for r in decode_records(data) if r.offset >= pos
        )
        self._positions[tp] = next_offset

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while True:
            yield from self.poll(self._max_wait_ms)

    def close(self) -> None:
        self._pending.clear()
        self._buffer.clear()
        self._positions.clear()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
