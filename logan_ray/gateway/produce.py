"""Produce: hand each partition's record batches, untouched, to its partition actor.

Validation (CRC, magic, size), offset assignment, LogAppendTime and idempotent
de-duplication all happen in the partition actor, which owns the log; the bytes
travel over the node-local channel (``actors/channel.py``), or as a Ray call
when there is none, and Ray may start two pipelined calls to an async actor out
of submission order. So the gateway keeps the ordering: each connection has one
queue per partition, drained by one task, append after append — a connection's
batches land in the order it sent them, as with Kafka.

Draining a queue also coalesces: the plain (non-idempotent) batches of all the
requests waiting behind an append in flight go to the actor as one append, so a
producer sending small requests faster than appends complete (``linger.ms=0``)
does not queue up without bound. The
offsets of each request follow from the batch headers' record counts, since
plain batches are appended back to back. If a merged append fails, its requests
are retried one by one so each gets its own error.

``acks=all`` (-1) goes to the actor's ``append_durable``, answered only once the
batches are fsynced (a group commit shared with concurrent appends); ``acks``
0 and 1 go to ``append``, answered once the batches are in the log. A merged
append is durable if any of its requests asked for it. A partition that has not
taken a request's batch within the request's ``timeout_ms`` is answered
REQUEST_TIMED_OUT, as Kafka does, so no client waits on a slow activation forever.
"""
from __future__ import annotations

import asyncio
import logging
from collections import deque
from typing import TYPE_CHECKING, Any

from logan_ray.protocol import errors as codes
from logan_ray.storage.batch_header import MAGIC, MAGIC_AT, iter_headers

from .cluster import error_code, error_message, is_stale_route, record_errors
from .meta import leader_endpoints
from .txn import is_transactional, verify_produce
from .handler import GatewayContext, HandlerTable

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("logan_ray.gateway")

_QUEUES = "produce_queues"
MERGE_MAX_BYTES = 16 << 20


def _result(index: int, code: int, message: str | None = None, base_offset: int = -1,
            append_time: int = -1, log_start: int = -1) -> dict:
    return {"index": index, "error_code": code, "base_offset": base_offset, "log_append_time_ms": append_time,
            "log_start_offset": log_start, "record_errors": [], "error_message": message}


def _not_leader(index: int, name: str, part: Any) -> dict:
    """NOT_LEADER_OR_FOLLOWER with the right broker (KIP-951), so the client can go there directly."""
    out = _result(index, codes.NOT_LEADER_OR_FOLLOWER, f"{name}-{index} is served by another gateway")
    out["current_leader"] = part.leader_hint()
    return out


def _fenced(index: int, name: str) -> dict:
    """NOT_LEADER_OR_FOLLOWER for a node whose broker lease lapsed: the client refreshes its metadata."""
    return _result(index, codes.NOT_LEADER_OR_FOLLOWER,
                   f"{name}-{index}: this broker's lease with the controller lapsed (fenced)")


def _plain_records(data: Any) -> int | None:
    """Offsets taken by well-framed, non-idempotent batches; None when the data must go alone."""
    total = end = 0
    for pos, h in iter_headers(data):
        if h.producer_id >= 0:
            return None
        total += h.last_offset_delta + 1  # as the log advances
        end = pos + h.size
    return total if end == len(data) else None


class _Item:
    __slots__ = ("index", "data", "records", "future", "durable")

    def __init__(self, index: int, data: Any, future: asyncio.Future, durable: bool) -> None:
        self.index = index
        self.data = data
        self.records = _plain_records(data)
        self.future = future
        self.durable = durable  # acks=all: answer only once fsynced


class _PartitionQueue:
    """One connection's pending appends to one partition, drained in order by one task."""

    __slots__ = ("items", "task")

    def __init__(self) -> None:
        self.items: deque[_Item] = deque()
        self.task: asyncio.Task | None = None


async def _drain(gw: GatewayContext, conn: "Connection", key: tuple, name: str, index: int,
                 queue: _PartitionQueue) -> None:
    try:
        while queue.items:
            group = [queue.items.popleft()]
            if group[0].records is not None:
                size = len(group[0].data)
                while queue.items and queue.items[0].records is not None and size < MERGE_MAX_BYTES:
                    size += len(queue.items[0].data)
                    group.append(queue.items.popleft())
            results = await _append_group(gw, name, index, group)
            for item, r in zip(group, results):
                if not item.future.done():
                    item.future.set_result(r)
    except BaseException as e:  # never leave a request waiting forever
        for item in list(queue.items):
            if not item.future.done():
                item.future.set_result(_result(item.index, codes.UNKNOWN_SERVER_ERROR, repr(e)))
        raise
    finally:
        queues = conn.state.get(_QUEUES)
        if queues is not None and queues.get(key) is queue and not queue.items:
            del queues[key]


async def _append_group(gw: GatewayContext, name: str, index: int, group: list[_Item]) -> list[dict]:
    try:
        part = await gw.cluster.partition(name, index)
    except Exception as e:
        return [_result(index, error_code(e), error_message(e)) for _ in group]
    if part is None:
        return [_result(index, codes.UNKNOWN_TOPIC_OR_PARTITION, f"this server does not host {name}-{index}")
                for _ in group]
    if part.offline:
        return [_result(index, codes.LEADER_NOT_AVAILABLE, f"{name}-{index} waits for its node {part.node_id}")
                for _ in group]
    if not part.local:
        return [_not_leader(index, name, part) for _ in group]
    durable = all(item.durable for item in group)
    # only a replicated partition can move. acks=all: the partition actor decides, as it alone knows whether
    # another replica confirms the write (then no lease is needed: PartitionActor._refuse_if_fenced)
    lease = gw.cluster.lease if len(part.replicas) > 1 and not durable else None
    session = lease.broker_epoch if lease is not None else None
    if lease is not None and not lease.valid(session):
        return [_fenced(index, name) for _ in group]
    data = group[0].data if len(group) == 1 else b"".join(item.data for item in group)
    method = "append_durable" if any(item.durable for item in group) else "append"
    try:
        base, append_time, log_start = await part.call(method, payload=data)
        gw.cluster.board_waits.poke()  # Fetches waiting at this partition's old log end look now
        if lease is not None and not lease.valid(session):
            # this node's lease ran out during the append (stopped, cut off from the router): another
            # leader may be elected by now, so this one must not acknowledge (a fenced Kafka broker). The
            # route stays: it is dropped when the node registers again, and asking the router now would
            # wait for it (across a network cut, every later request waited for the link)
            return [_fenced(index, name) for _ in group]
    except Exception as e:
        if is_stale_route(e):
            gw.cluster.forget(name)
        if len(group) > 1 and not is_stale_route(e):
            out = []
            for item in group:  # find out which request was bad: one at a time, in order
                out += await _append_group(gw, name, index, [item])
            return out
        return [{**_result(index, error_code(e), error_message(e)), "record_errors": record_errors(e)} for _ in group]
    out = []
    for item in group:
        out.append(_result(index, codes.NONE, None, base, append_time, log_start))
        if item.records is not None:
            base += item.records
    return out


def _enqueue(gw: GatewayContext, conn: "Connection", key: tuple, name: str, index: int, data: Any,
             durable: bool) -> asyncio.Future:
    future = asyncio.get_running_loop().create_future()
    queues: dict = conn.state.setdefault(_QUEUES, {})
    queue = queues.get(key)
    if queue is None:
        queue = queues[key] = _PartitionQueue()
    queue.items.append(_Item(index, data, future, durable))
    if queue.task is None or queue.task.done():
        queue.task = asyncio.get_running_loop().create_task(_drain(gw, conn, key, name, index, queue))
    return future


async def _done(result: dict) -> dict:
    return result


async def _within(wait: Any, timeout_ms: int, name: str, index: int) -> dict:
    """The append's answer, or REQUEST_TIMED_OUT once the request's ``timeout_ms`` has passed.

    A client must get an answer even when the partition cannot take the batch in time
    (its actor is still starting on a loaded node, say): Kafka answers REQUEST_TIMED_OUT,
    a retriable error, and so does this. The append itself goes on, as in Kafka, where a
    timed-out request may still have been written: an idempotent producer's retry is
    de-duplicated.
    """
    if timeout_ms <= 0:
        return await wait
    try:
        return await asyncio.wait_for(asyncio.shield(wait), timeout_ms / 1000)
    except asyncio.TimeoutError:
        return _result(index, codes.REQUEST_TIMED_OUT,
                       f"{name}-{index} did not take the batch within the request's timeout_ms={timeout_ms}")


async def produce(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict | None:
    version = header.api_version
    by_id = version >= 13
    topics = body["topic_data"]
    acks = body.get("acks", 1)
    names: dict = {}
    if by_id and acks in (0, 1, -1):
        names = await gw.cluster.topic_names({t["topic_id"] for t in topics})
    # Requests of one connection are dispatched in arrival order and each reaches this
    # point before the next one runs (no await above for name-addressed requests), so
    # enqueueing here keeps the connection's order; topic-id requests resolve names
    # first, and a connection uses one addressing mode throughout.
    timeout_ms = body.get("timeout_ms", 0) if acks != 0 else 0  # acks=0 gets no answer to time
    refused: dict = {}  # transactional batches of partitions their transaction did not add (KIP-890)
    if body.get("transactional_id") is not None or any(
            is_transactional(p["records"]) for t in topics for p in t["partition_data"]):
        refused = await verify_produce(gw, body, [(names.get(t["topic_id"]) if by_id else t["name"], p["index"],
                                                   p["records"]) for t in topics for p in t["partition_data"]])
    waits: list[tuple[int, Any]] = []
    out_topics = []
    for slot, t in enumerate(topics):
        name = names.get(t["topic_id"]) if by_id else t["name"]
        out_topics.append({"name": t.get("name", ""), "topic_id": t.get("topic_id"), "partition_responses": []})
        for p in t["partition_data"]:
            index, data = p["index"], p["records"]
            if acks not in (0, 1, -1):
                waits.append((slot, _done(_result(index, codes.INVALID_REQUIRED_ACKS,
                                                  f"acks must be 0, 1 or -1, got {acks}"))))
            elif name is None:
                waits.append((slot, _done(_result(index, codes.UNKNOWN_TOPIC_ID, "unknown topic id"))))
            elif data is None or len(data) == 0:
                waits.append((slot, _done(_result(index, codes.INVALID_RECORD,
                                                  "produce request holds no record batches"))))
            elif refused.get((name, index), codes.NONE) != codes.NONE:
                waits.append((slot, _done(_result(index, refused[(name, index)],
                                                  f"{name}-{index} is not in the producer's ongoing transaction"))))
            elif version < 3 and (len(data) <= MAGIC_AT or data[MAGIC_AT] != MAGIC):
                waits.append((slot, _done(_result(index, codes.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                                                  "message format v0/v1 is not supported; use record batches"))))
            else:
                key = (t.get("topic_id") if by_id else name, index)
                waits.append((slot, _within(_enqueue(gw, conn, key, name, index, data, acks == -1),
                                            timeout_ms, name, index)))
    results = await asyncio.gather(*(w for _, w in waits))
    for (slot, _), r in zip(waits, results):
        out_topics[slot]["partition_responses"].append(r)
    if acks == 0:
        # Kafka sends nothing back for acks=0; a failure closes the connection so the client notices.
        failed = [r for r in results if r["error_code"] != codes.NONE]
        if failed:
            conn.close(f"acks=0 produce failed: {failed[0]['error_message']}")
        return None
    return {"responses": out_topics, "throttle_time_ms": 0,
            "node_endpoints": await leader_endpoints(gw, [r.get("current_leader") for r in results])}


# Produce v0-2 are served for record batches (magic 2) only, as Kafka 4 serves none of the
# old message formats. They are advertised anyway because librdkafka up to 2.5 (kcat on
# Debian links 2.0.x) compresses with gzip, snappy or lz4 only if the broker lists Produce v0.
HANDLERS: HandlerTable = {
    0: (0, 13, produce),
}
