"""Produce: hand each partition's record batches, untouched, to its partition actor.

Validation (CRC, magic, size), offset assignment, LogAppendTime and idempotent
de-duplication all happen in the partition actor, which owns the log. The
gateway's one job besides routing is ordering: Ray may start two pipelined calls
to an async actor out of submission order, so the appends a connection makes to
one partition are chained — each starts only after the previous one finished —
which keeps a connection's batches in the order it sent them, as Kafka does.
"""
from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from logan_ray.protocol import errors as codes

from .cluster import error_code, error_message, is_stale_route

if TYPE_CHECKING:
    from .connection import Connection
    from .server import Gateway

log = logging.getLogger("logan_ray.gateway")

_CHAINS = "produce_chains"
MAGIC_AT = 16  # byte offset of the magic in a record batch (and in a v0/v1 message)


def _result(index: int, code: int, message: str | None = None, base_offset: int = -1,
            append_time: int = -1, log_start: int = -1) -> dict:
    return {"index": index, "error_code": code, "base_offset": base_offset, "log_append_time_ms": append_time,
            "log_start_offset": log_start, "record_errors": [], "error_message": message}


async def _append(gw: "Gateway", conn: "Connection", name: str, index: int, data: Any, key: Any,
                  previous: asyncio.Future | None, done: asyncio.Future, old_version: bool = False) -> dict:
    try:
        if previous is not None:
            await asyncio.shield(previous)  # the same connection's earlier append to this partition
        if data is None or len(data) == 0:
            return _result(index, codes.INVALID_RECORD, "produce request holds no record batches")
        if old_version and (len(data) <= MAGIC_AT or data[MAGIC_AT] != 2):
            return _result(index, codes.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                           "message format v0/v1 is not supported; use record batches (magic 2)")
        part = await gw.cluster.partition(name, index)
        if part is None:
            return _result(index, codes.UNKNOWN_TOPIC_OR_PARTITION,
                           f"this server does not host {name}-{index}")
        if not part.local:
            return _result(index, codes.NOT_LEADER_OR_FOLLOWER, f"{name}-{index} is served by another gateway")
        try:
            base, append_time, log_start = await part.handle.append.remote(data)
        except Exception as e:
            if is_stale_route(e):
                gw.cluster.forget(name)
            return _result(index, error_code(e), error_message(e))
        return _result(index, codes.NONE, None, base, append_time, log_start)
    finally:
        if not done.done():
            done.set_result(None)
        chains = conn.state.get(_CHAINS)
        if chains is not None and chains.get(key) is done:
            del chains[key]


async def produce(gw: "Gateway", conn: "Connection", header: Any, body: dict) -> dict | None:
    # Chain this request's appends behind the connection's earlier ones *before* the
    # first await, so the order is the order in which requests arrived.
    loop = asyncio.get_running_loop()
    chains: dict = conn.state.setdefault(_CHAINS, {})
    version = header.api_version
    by_id = version >= 13
    topics = body["topic_data"]
    jobs: list[tuple] = []  # (topic slot, partition index, chain key, previous, done, records)
    out_topics = []
    for slot, t in enumerate(topics):
        key_name = t.get("topic_id") if by_id else t["name"]
        for p in t["partition_data"]:
            key = (key_name, p["index"])
            done = loop.create_future()
            previous = chains.get(key)
            chains[key] = done
            jobs.append((slot, p["index"], key, previous, done, p["records"]))
        out_topics.append({"name": t.get("name", ""), "topic_id": t.get("topic_id"), "partition_responses": []})
    acks = body.get("acks", 1)
    names: dict = {}
    if by_id and acks in (0, 1, -1):
        try:
            names = await gw.cluster.topic_names({t["topic_id"] for t in topics})
        except Exception:
            _release(chains, jobs)
            raise
    coros = []
    for slot, index, key, previous, done, data in jobs:
        t = topics[slot]
        name = names.get(t["topic_id"]) if by_id else t["name"]
        if acks not in (0, 1, -1):
            coros.append(_fail(index, codes.INVALID_REQUIRED_ACKS, f"acks must be 0, 1 or -1, got {acks}"))
        elif name is None:
            coros.append(_fail(index, codes.UNKNOWN_TOPIC_ID, "unknown topic id"))
        else:
            coros.append(_append(gw, conn, name, index, data, key, previous, done, version < 3))
            continue
        _release(chains, [(slot, index, key, previous, done, data)])
    results = await asyncio.gather(*coros)
    for (slot, *_), r in zip(jobs, results):
        out_topics[slot]["partition_responses"].append(r)
    if acks == 0:
        # Kafka sends nothing back for acks=0; a failure closes the connection so the client notices.
        failed = [r for r in results if r["error_code"] != codes.NONE]
        if failed:
            conn.close(f"acks=0 produce failed: {failed[0]['error_message']}")
        return None
    return {"responses": out_topics, "throttle_time_ms": 0}


async def _fail(index: int, code: int, message: str) -> dict:
    return _result(index, code, message)


def _release(chains: dict, jobs: list[tuple]) -> None:
    """Free chain slots of appends that will not run (later appends must not wait for them)."""
    for _slot, _index, key, previous, done, _data in jobs:
        if not done.done():
            if previous is None or previous.done():
                done.set_result(None)
            else:  # keep the order: resolve only once the earlier append has finished
                previous.add_done_callback(lambda _f, d=done: d.done() or d.set_result(None))
        if chains.get(key) is done and done.done():
            del chains[key]


# Produce v0-2 are served for record batches (magic 2) only, as Kafka 4 serves none of the
# old message formats. They are advertised anyway because librdkafka up to 2.5 (kcat on
# Debian links 2.0.x) compresses with gzip, snappy or lz4 only if the broker lists Produce v0.
HANDLERS = {
    0: (0, 13, produce),
}
