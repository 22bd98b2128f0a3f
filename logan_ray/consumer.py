"""Consumer: reads partitions through their actors with one prefetching long-poll per partition.

Each fetch returns whole batches (up to ``fetch_max_bytes``), so a single actor
call delivers thousands of records; records are decoded only here, at the edge,
and only when the caller asks for them: ``poll`` decodes into record tuples,
``poll_arrow`` into an Arrow table (the columnar decoder Ray Data and Spark
use), both through the compiled record codec.

With ``group=`` the consumer is a member of a Kafka consumer group (classic
protocol, see :mod:`logan_ray.group_member`): ``subscribe`` lets the group split
the topics' partitions among its members (Python consumers and Kafka clients
alike), positions start from the group's committed offsets, and offsets are
committed automatically every ``auto_commit_interval_ms`` (records returned by
earlier polls, so at-least-once) or by ``commit()``. Rebalances are eager: before
rejoining, the consumer commits (when auto-committing), calls ``on_revoke`` with
every partition it had, and after the new assignment calls ``on_assign``. Both
callbacks run inside ``poll`` on the caller's thread.

``isolation_level="read_committed"`` (Kafka's; the default stays ``read_uncommitted``)
reads each partition only up to its last stable offset and drops the records of aborted
transactions and the markers (``PartitionActor.locate_committed`` and
:mod:`logan_ray.read_committed`), for ``poll`` and ``poll_arrow`` alike.
"""
from __future__ import annotations

import concurrent.futures
import logging
import time
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, NamedTuple, Sequence

import ray

from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.records import decode_tagged
from logan_ray.storage.slice_reader import read_slices

from ._ray import get
from .local_path import ChannelClosedError, reads_files
from .local_path import result as local_result
from .errors import (
    GroupError,
    LoganError,
    NotRunningError,
    OffsetOutOfRangeError,
    PartitionHibernatedError,
    UnknownPartitionError,
)
from .group_member import GroupMember, OffsetAndMetadata
from .serializers import deserializer

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Consumer", "ConsumerRecord", "OffsetAndMetadata", "TopicPartition"]

log = logging.getLogger("logan_ray.consumer")

EARLIEST = -2
LATEST = -1


def _wait_any(waiting: list[Any], timeout: float) -> set:
    """The fetches (Ray refs and channel futures) that are done, waiting up to ``timeout``
    for the first; every one already done is taken, not just the first."""
    refs = [w for w in waiting if isinstance(w, ray.ObjectRef)]
    futures = [w for w in waiting if not isinstance(w, ray.ObjectRef)]
    if not futures:
        ready, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        return set(ray.wait(refs, num_returns=len(refs), timeout=0)[0]) if ready else set()
    if not refs:
        done, _ = concurrent.futures.wait(futures, timeout, concurrent.futures.FIRST_COMPLETED)
        return {f for f in futures if f.done()} if done else set()
    # Partitions on this node and on others: look at both kinds in short turns.
    deadline = time.monotonic() + timeout
    while True:
        done = {f for f in futures if f.done()} | set(ray.wait(refs, num_returns=len(refs), timeout=0)[0])
        left = deadline - time.monotonic()
        if done or left <= 0:
            return done
        concurrent.futures.wait(futures, min(left, 0.002), concurrent.futures.FIRST_COMPLETED)


def _read_located(slices: list) -> bytes | None:
    """The bytes of located slices read from the segment files, or None when they are
    no longer there as located (deleted or truncated since, or not whole batches)."""
    import pyarrow as pa  # its memory pool reuses pages: fresh megabytes cost page faults

    data = read_slices(slices, pa.allocate_buffer)
    if not data:
        return data
    end = 0
    for at, h in iter_headers(data):
        end = at + h.size
    return data if end == len(data) else None


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
                 max_poll_records: int = 100_000, group: str | None = None, enable_auto_commit: bool = True,
                 auto_commit_interval_ms: int = 5000,
                 on_assign: Callable[[list[TopicPartition]], None] | None = None,
                 on_revoke: Callable[[list[TopicPartition]], None] | None = None,
                 group_instance_id: str | None = None, session_timeout_ms: int = 45000,
                 heartbeat_interval_ms: int = 3000, max_poll_interval_ms: int = 300000,
                 partition_assignment_strategy: str | Sequence[str] = "range",
                 client_id: str = "logan-ray-python", isolation_level: str = "read_uncommitted") -> None:
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(f"isolation_level must be 'read_uncommitted' or 'read_committed', got {isolation_level!r}")
        self._read_committed = isolation_level == "read_committed"
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(f"auto_offset_reset must be 'earliest', 'latest' or 'none', got {auto_offset_reset!r}")
        strategies = [partition_assignment_strategy] if isinstance(partition_assignment_strategy, str) \
            else list(partition_assignment_strategy)
        self._group: GroupMember | None = None
        if group is not None:
            self._group = GroupMember(client, group, client_id=client_id, instance_id=group_instance_id,
                                      session_timeout_ms=session_timeout_ms, rebalance_timeout_ms=max_poll_interval_ms,
                                      heartbeat_interval_ms=heartbeat_interval_ms, assignors=strategies)
        self._subscribed: list[str] | None = None
        self._auto_commit = enable_auto_commit and group is not None
        self._auto_commit_s = auto_commit_interval_ms / 1000.0
        self._next_commit = time.monotonic() + self._auto_commit_s
        self._last_committed: dict[TopicPartition, int] = {}
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._client = client
        self._reset = auto_offset_reset
        self._max_bytes = fetch_max_bytes
        self._max_wait_ms = fetch_max_wait_ms
        self._key_de = deserializer(key_deserializer)
        self._value_de = deserializer(value_deserializer)
        self._max_poll_records = max_poll_records
        self._positions: dict[TopicPartition, int | None] = {}
        # tp -> (Ray ref or channel future, offset fetched, path: "pread", "channel" or "ray")
        self._pending: dict[TopicPartition, tuple[Any, int, str]] = {}
        #: fetches served per path: "pread" (located over the node-local channel, read from the
        #: segment files by this process), "channel" (bytes over the channel) or "ray" (actor call)
        self.fetch_paths: dict[str, int] = {"pread": 0, "channel": 0, "ray": 0}
        # partitions whose next fetch asks for the bytes (a located file went away before the read)
        self._bytes_once: set[TopicPartition] = set()
        # Fetched but not yet returned, in fetch order: raw fetches are decoded on demand,
        # into records (poll) or a table (poll_arrow); a caller mixing both gets the rest converted.
        self._fetched: deque[tuple[TopicPartition, int, bytes]] = deque()  # (tp, first offset wanted, batches)
        self._buffer: list[ConsumerRecord] = []
        self._table: pa.Table | None = None
        if topics:
            self.subscribe(topics)

    # ------------------------------------------------------------- assignment
    def subscribe(self, topics: Iterable[str]) -> None:
        """Without a group: all partitions of ``topics``. With a group: the share the group assigns
        (topics that do not exist yet are assigned once they appear)."""
        topics = [topics] if isinstance(topics, str) else list(topics)
        if self._group is not None:
            self._subscribed = sorted(set(topics))
            self._group.subscribe(self._subscribed)
            return
        tps = [TopicPartition(t, p) for t in topics for p in range(len(self._client.partitions(t)))]
        self.assign(tps)

    def subscription(self) -> list[str]:
        return list(self._subscribed or ())

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Read exactly these partitions (no group rebalancing; with a group, commits still go to it)."""
        if self._subscribed is not None:
            raise ValueError("this consumer is subscribed to a group; assign() and subscribe() cannot be mixed")
        self._assign(partitions)

    def _assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        new = [TopicPartition(*tp) for tp in partitions]
        for tp in new:
            if not 0 <= tp.partition < len(self._client.partitions(tp.topic)):
                raise UnknownPartitionError(f"topic {tp.topic!r} has no partition {tp.partition}")
        self._positions = {tp: self._positions.get(tp) for tp in new}
        self._pending = {tp: v for tp, v in self._pending.items() if tp in self._positions}
        self._drop_buffered(lambda tp: tp not in self._positions)

    def assignment(self) -> set[TopicPartition]:
        return set(self._positions)

    # --------------------------------------------------------------- position
    def seek(self, partition: tuple[str, int], offset: int) -> None:
        tp = TopicPartition(*partition)
        if tp not in self._positions:
            raise UnknownPartitionError(f"{tp.topic}-{tp.partition} is not assigned to this consumer")
        if offset < 0:
            raise OffsetOutOfRangeError(f"cannot seek {tp.topic}-{tp.partition} to negative offset {offset}")
        self._positions[tp] = offset
        self._pending.pop(tp, None)
        self._drop_buffered(lambda other: other == tp)

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
        """(log start, end): the end is the high watermark, or for a read_committed consumer the
        last stable offset, as Kafka's consumer (its ListOffsets carries the isolation level), so
        seek_to_end, end_offsets and a "latest" reset never point past an open transaction."""
        start, end = self._client.call(tp.topic, tp.partition, "offsets")
        if self._read_committed:
            found = self._client.call(tp.topic, tp.partition, "list_offset", -1, -1, True)
            if found is not None:
                end = found[0]
        return start, end

    def beginning_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[TopicPartition, int]:
        return {TopicPartition(*tp): self._offsets(TopicPartition(*tp))[0] for tp in partitions}

    def end_offsets(self, partitions: Sequence[tuple[str, int]]) -> dict[TopicPartition, int]:
        return {TopicPartition(*tp): self._offsets(TopicPartition(*tp))[1] for tp in partitions}

    def offsets_for_times(self, timestamps: dict[tuple[str, int], int]) -> dict[TopicPartition, tuple[int, int] | None]:
        """{tp: (offset, timestamp)} of the first record with timestamp >= the given ms, or None."""
        found = {TopicPartition(*tp): self._client.call(tp[0], tp[1], "offset_for_timestamp", ts)
                 for tp, ts in timestamps.items()}
        return {tp: (tuple(r) if r is not None else None) for tp, r in found.items()}

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
            handle, node = self._client.partition_route(tp.topic, tp.partition)
            # On the partition's own node the fetch goes over its channel: by default only the
            # batches' file ranges (locate), which this process then reads from the segment
            # files itself (as Ray Data's read tasks do); elsewhere by Ray.
            local = self._client.local_path
            if self._read_committed:
                self._pending[tp] = self._prefetch_committed(tp, pos, handle, node, wait_ms)
                continue
            how = "pread"
            waiting = None
            if tp not in self._bytes_once and reads_files():
                waiting = local.call(handle, node, "locate", pos, self._max_bytes, wait_ms, 1)
            if waiting is None:
                how = "channel"
                self._bytes_once.discard(tp)
                waiting = local.call(handle, node, "fetch", pos, self._max_bytes, wait_ms, 1)
            if waiting is None:
                how = "ray"
                waiting = handle.fetch.remote(pos, self._max_bytes, wait_ms, 1)
            self._pending[tp] = (waiting, pos, how)

    def _prefetch_committed(self, tp: TopicPartition, pos: int, handle: Any, node: str, wait_ms: int
                            ) -> tuple[Any, int, str]:
        """A read_committed fetch: the batches' file ranges below the last stable offset and the aborted
        transactions among them, over the channel on this node, else by Ray."""
        args = (pos, self._max_bytes, wait_ms, 1)
        waiting = self._client.local_path.call(handle, node, "locate_committed", *args)
        if waiting is not None:
            return waiting, pos, "committed-channel"
        return handle.locate_committed.remote(*args), pos, "committed-ray"

    def _committed_bytes(self, tp: TopicPartition, pos: int, located: tuple) -> tuple[bytes, int] | None:
        """(kept batches, next position) of a read_committed fetch's answer; None to fetch again."""
        from .read_committed import committed_batches

        slices, _hw, _start, lso, aborted = located
        if not slices:
            return b"", pos
        data = _read_located(slices)
        if data is None:  # a segment went away, or the files are on another machine: the bytes by Ray
            data, _hw, _start = self._client.call(tp.topic, tp.partition, "fetch", pos, self._max_bytes)
        kept, next_offset = committed_batches(data, aborted, lso)
        return kept, max(pos, next_offset)

    def poll(self, timeout_ms: int = 1000, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from any assigned partition, waiting up to ``timeout_ms`` for the first ones."""
        limit = max_records or self._max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000.0
        while True:
            if not self._wait_for_data(deadline, timeout_ms):
                return []
            if self._table is not None:
                self._buffer.extend(self._table_records(self._table))
                self._table = None
            while self._fetched and len(self._buffer) < limit:
                self._buffer.extend(self._decode(*self._fetched.popleft()))
            if self._buffer or time.monotonic() >= deadline:
                break
        out, self._buffer = self._buffer[:limit], self._buffer[limit:]
        return out

    def poll_arrow(self, timeout_ms: int = 1000, max_records: int | None = None) -> "pa.Table":
        """Like ``poll``, as one Arrow table with the columns of ``logan_ray.data.read_topic``
        (topic, partition, offset, timestamp, timestamp_type, key, value, headers).

        Decoded straight from the fetched batches into Arrow buffers, no Python object
        per record; keys and values stay bytes (deserializers do not apply). Positions
        and commits advance exactly as with ``poll``.
        """
        import pyarrow as pa

        from logan_ray.data.arrow_records import decode_to_table, empty_table

        limit = max_records or self._max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000.0
        tables = []
        have = 0
        while not tables:
            if not self._wait_for_data(deadline, timeout_ms):
                return empty_table()
            if self._buffer:
                tables.append(self._records_table(self._buffer))
                have = len(self._buffer)
                self._buffer = []
            if self._table is not None:
                tables.append(self._table)
                have += self._table.num_rows
                self._table = None
            while self._fetched and have < limit:
                tp, pos, data = self._fetched.popleft()
                t = decode_to_table(data, topic=tp.topic, partition=tp.partition, start=pos)
                if t.num_rows:
                    tables.append(t)
                    have += t.num_rows
            if time.monotonic() >= deadline:
                break
        if not tables:
            return empty_table()
        table = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        if table.num_rows > limit:
            self._table = table.slice(limit)
            table = table.slice(0, limit)
        return table

    def _wait_for_data(self, deadline: float, timeout_ms: int) -> bool:
        """Fetch until something is buffered or the deadline passes; False if the group is not ready."""
        if self._subscribed is not None and not self._group_poll(deadline):
            return False
        if self._auto_commit and time.monotonic() >= self._next_commit:
            self._maybe_auto_commit()
        while not self._has_buffered() and self._positions:
            self._prefetch(min(self._max_wait_ms, max(0, timeout_ms)))
            remaining = max(0.0, deadline - time.monotonic())
            ready_set = _wait_any([w for w, _, _ in self._pending.values()], remaining)
            for tp, (ref, pos, how) in list(self._pending.items()):
                if ref in ready_set:
                    del self._pending[tp]
                    self._absorb(tp, pos, ref, how)
            if not self._has_buffered() and time.monotonic() >= deadline:
                break
        if self._has_buffered():
            # the next fetches travel while the caller decodes and handles these records
            self._prefetch(min(self._max_wait_ms, max(0, timeout_ms)))
        return True

    def _has_buffered(self) -> bool:
        return bool(self._buffer or self._fetched or (self._table is not None and self._table.num_rows))

    def _absorb(self, tp: TopicPartition, pos: int, ref, how: str) -> None:
        if self._positions.get(tp) != pos:
            return  # a seek happened while this fetch was in flight
        try:
            if how.startswith("committed"):
                got = self._committed_bytes(tp, pos, get(ref) if how == "committed-ray" else local_result(ref))
                if got is None:
                    return
                data, next_offset = got
                self.fetch_paths["ray" if how == "committed-ray" else "pread"] += 1
                if data:
                    self._fetched.append((tp, pos, data))
                self._positions[tp] = next_offset
                return
            data, _hw, _start = get(ref) if how == "ray" else local_result(ref)
        except OffsetOutOfRangeError:
            self._positions[tp] = None
            self._reset_position(tp)
            return
        except (ChannelClosedError, PartitionHibernatedError, NotRunningError):
            # The actor hibernated (or restarted): same position; the next fetch goes to the current one.
            try:
                stale, _node = self._client.partition_route(tp.topic, tp.partition)
                self._client.reroute(tp.topic, tp.partition, stale)
            except LoganError as e:  # e.g. its node is gone: the next fetch reports it
                log.info("%s-%d: no current actor yet: %s", tp.topic, tp.partition, e)
            return
        if how == "pread" and data:
            data = _read_located(data)  # data: the located slices
            if data is None:  # a segment went away since locate: ask the partition for the bytes
                self._bytes_once.add(tp)
                return
        self.fetch_paths[how] += 1
        if not data:
            return
        next_offset = pos
        for _, h in iter_headers(data):
            next_offset = max(next_offset, h.next_offset)
        if next_offset > pos:
            self._fetched.append((tp, pos, data))
        self._positions[tp] = next_offset

    def _decode(self, tp: TopicPartition, pos: int, data: bytes) -> list[ConsumerRecord]:
        records = decode_tagged(data, ConsumerRecord, tp.topic, tp.partition, pos)
        kd, vd = self._key_de, self._value_de
        if kd is None and vd is None:
            return records
        return [r._replace(key=r.key if kd is None else kd(r.key), value=r.value if vd is None else vd(r.value))
                for r in records]

    def _table_records(self, table: "pa.Table") -> list[ConsumerRecord]:
        """Rows a poll_arrow left buffered, as records for a following poll (not a hot path)."""
        kd, vd = self._key_de, self._value_de
        return [ConsumerRecord(r["topic"], r["partition"], r["offset"], r["timestamp"],
                               r["key"] if kd is None else kd(r["key"]), r["value"] if vd is None else vd(r["value"]),
                               tuple((h["key"], h["value"]) for h in r["headers"]))
                for r in table.to_pylist()]

    @staticmethod
    def _records_table(records: list[ConsumerRecord]) -> "pa.Table":
        """Records a poll left buffered, as a table for a following poll_arrow (not a hot path)."""
        import pyarrow as pa

        from logan_ray.data.arrow_records import RECORD_SCHEMA

        return pa.Table.from_pylist([
            {"topic": r.topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
             "timestamp_type": 0, "key": r.key, "value": r.value,
             "headers": [{"key": k, "value": v} for k, v in r.headers]} for r in records], schema=RECORD_SCHEMA)

    def _drop_buffered(self, drop: Callable[[TopicPartition], bool]) -> None:
        """Forget buffered records of the partitions ``drop`` selects (seek, reassignment)."""
        self._buffer = [r for r in self._buffer if not drop(TopicPartition(r.topic, r.partition))]
        self._fetched = deque(f for f in self._fetched if not drop(f[0]))
        if self._table is not None:
            import pyarrow as pa

            keep = [not drop(TopicPartition(t, p)) for t, p in
                    zip(self._table.column("topic").to_pylist(), self._table.column("partition").to_pylist())]
            if not all(keep):
                self._table = self._table.filter(pa.array(keep, pa.bool_()))

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while True:
            yield from self.poll(self._max_wait_ms)

    # ------------------------------------------------------------------ groups
    def _group_poll(self, deadline: float) -> bool:
        """Rebalance when the group asks for it; True once this member holds a current assignment."""
        g = self._group
        assert g is not None
        if g.rejoin_needed() and g.state in ("stable", "unjoined"):
            self._revoke()
            g.start_join()
        if g.active:
            return True
        assigned = g.advance(deadline - time.monotonic())
        if assigned is None:
            return g.active
        tps = [TopicPartition(t, p) for t, p in assigned]
        for topic in {tp.topic for tp in tps}:
            self._client.partitions(topic, refresh=True)  # the group may know of partitions added since
        self._assign(tps)
        committed = g.committed(tps)
        for tp in tps:
            c = committed.get(tp)
            self._positions[tp] = c.offset if c is not None else None
            if c is not None:
                self._last_committed[tp] = c.offset
        self._next_commit = time.monotonic() + self._auto_commit_s
        if self._on_assign is not None:
            self._on_assign(list(tps))
        return True

    def _revoke(self) -> None:
        owned = list(self._positions)
        if owned and self._auto_commit:
            try:
                self._commit_consumed()
            except (GroupError, LoganError) as e:  # the group moved on: these records will be seen again
                log.warning("commit before rebalance failed: %s", e)
        if owned and self._on_revoke is not None:
            self._on_revoke(owned)
        self._assign([])
        self._last_committed.clear()

    def _consumed(self) -> dict[TopicPartition, int]:
        """Next offset to hand to the caller per partition: what a commit of "everything polled" stores."""
        first: dict[TopicPartition, int] = {}
        if self._table is not None and self._table.num_rows:
            for t, p, o in zip(*(self._table.column(c).to_pylist() for c in ("topic", "partition", "offset"))):
                first.setdefault(TopicPartition(t, p), o)
        for r in self._buffer:
            tp = TopicPartition(r.topic, r.partition)
            if tp not in first:
                first[tp] = r.offset
        for tp, pos, _ in self._fetched:
            first.setdefault(tp, pos)
        out = {}
        for tp, pos in self._positions.items():
            at = first.get(tp, pos)
            if at is not None:
                out[tp] = at
        return out

    def _commit_consumed(self) -> None:
        todo = {tp: OffsetAndMetadata(off, "") for tp, off in self._consumed().items()
                if self._last_committed.get(tp) != off}
        if todo:
            self._group_commit(todo)

    def _group_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        assert self._group is not None
        self._group.commit(offsets, managed=self._subscribed is not None)
        for tp, om in offsets.items():
            self._last_committed[tp] = om.offset

    def _maybe_auto_commit(self) -> None:
        self._next_commit = time.monotonic() + self._auto_commit_s
        if self._group is None or (self._subscribed is not None and not self._group.active):
            return
        try:
            self._commit_consumed()
        except (GroupError, LoganError) as e:
            log.warning("auto-commit failed: %s", e)

    def commit(self, offsets: dict[tuple[str, int], int | OffsetAndMetadata | tuple[int, str]] | None = None) -> None:
        """Commit offsets to the group (default: everything returned by poll so far), synchronously.

        An offset is the *next* record to read, as in Kafka. Raises CommitFailedError
        when the group has rebalanced since this consumer's last poll.
        """
        if self._group is None:
            raise GroupError("commit() needs a consumer created with group=...")
        if offsets is None:
            todo = {tp: OffsetAndMetadata(off, "") for tp, off in self._consumed().items()}
        else:
            todo = {}
            for tp, v in offsets.items():
                if isinstance(v, int):
                    v = OffsetAndMetadata(v, "")
                elif not isinstance(v, OffsetAndMetadata):
                    v = OffsetAndMetadata(*v)
                todo[TopicPartition(*tp)] = v
        self._group_commit(todo)

    def committed(self, partitions: Iterable[tuple[str, int]] | None = None
                  ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offset and metadata per partition (None where nothing is committed)."""
        if self._group is None:
            raise GroupError("committed() needs a consumer created with group=...")
        tps = [TopicPartition(*tp) for tp in (partitions if partitions is not None else self._positions)]
        got = self._group.committed(tps)
        return {tp: got.get(tp) for tp in tps}

    def group_metadata(self) -> dict[str, Any] | None:
        """Group id, member id, generation and instance id of this member (None without a group)."""
        g = self._group
        if g is None:
            return None
        return {"group_id": g.group_id, "member_id": g.member_id, "generation": g.generation,
                "group_instance_id": g.instance_id, "protocol": g.protocol, "state": g.state}

    def close(self, autocommit: bool = True) -> None:
        """Commit (when auto-committing), leave the group so its partitions move at once, drop buffers."""
        if self._group is not None:
            if autocommit and self._auto_commit and self._positions and \
                    (self._subscribed is None or self._group.active):
                try:
                    self._commit_consumed()
                except (GroupError, LoganError) as e:
                    log.warning("commit on close failed: %s", e)
            self._group.close()
        self._pending.clear()
        self._buffer.clear()
        self._fetched.clear()
        self._table = None
        self._positions.clear()

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
