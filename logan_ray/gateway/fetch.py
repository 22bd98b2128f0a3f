"""Fetch (zero-copy, long-poll) and ListOffsets.

A Fetch never reads record bytes into Python: the partition actor's ``locate``
returns batch-aligned ranges of its segment files (asked over the node-local
channel, ``actors/channel.py``), the gateway opens them, and
the connection sends the encoded response header followed by the ranges with
``os.sendfile``. A long-poll over active partitions with one replica waits on their
offsets boards (``board_waits.py``: no call to the actors until one moves); others
wait in the partition actor, which wakes the moment an append makes enough data
available. Fetch sessions (KIP-227) are not
offered: every request is a full, session-less fetch, which clients fall back to
when the broker answers with session id 0.

A Fetch naming a ``replica_id`` is a follower's: served only to a connection that
proved to be that broker, or to a principal with CLUSTER_ACTION under an authorizer
(``broker_identity.py``); anyone else gets TOPIC_AUTHORIZATION_FAILED, as Kafka answers.

Leader epochs (KIP-320): each partition's ``current_leader_epoch`` goes to the
partition actor with the locate call, which answers FENCED_LEADER_EPOCH /
UNKNOWN_LEADER_EPOCH when it differs from its own; a ``last_fetched_epoch``
(v12+, sent by followers) is first checked for divergence, answered with
``diverging_epoch`` and no records (KIP-595), as a Kafka leader does.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from logan_ray.protocol import errors as codes
from logan_ray.storage.file_batches import next_offset_after

from .broker_identity import may_fetch_as_replica, replica_id_of
from .cluster import Partition, broker_id, error_code, error_message, ignore_outcome, is_stale_route
from .meta import leader_endpoints
from .connection import FileRanges
from .handler import GatewayContext, HandlerTable

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("logan_ray.gateway")

INT32_MAX = 2**31 - 1
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD, LATEST_TIERED = -1, -2, -3, -4, -5, -6


def _partition_result(index: int, code: int = codes.NONE, hw: int = -1, log_start: int = -1,
                      records: Any = b"") -> dict:
    return {"partition_index": index, "error_code": code, "high_watermark": hw, "last_stable_offset": hw,
            "log_start_offset": log_start, "aborted_transactions": None, "preferred_read_replica": -1,
            "records": records}


class _Slot:
    """One requested partition and what we found for it so far."""

    __slots__ = ("topic", "index", "offset", "max_bytes", "epoch", "last_fetched_epoch", "part", "result", "slices",
                 "replica", "committed")

    def __init__(self, topic: str | None, index: int, offset: int, max_bytes: int, epoch: int = -1,
                 last_fetched_epoch: int = -1) -> None:
        self.topic = topic
        self.index = index
        self.offset = offset
        self.max_bytes = max_bytes
        self.epoch = epoch  # the client's current_leader_epoch (-1: no fencing)
        self.last_fetched_epoch = last_fetched_epoch
        self.replica: str | None = None  # node id of the follower fetching (Fetch replica_id >= 0)
        self.part: Partition | None = None
        self.result: dict | None = None  # final answer (error or data)
        self.slices: list = []
        self.committed = False  # read_committed (isolation_level 1): up to the last stable offset

    @property
    def size(self) -> int:
        return sum(s[2] for s in self.slices)


async def _locate(gw: GatewayContext, slot: _Slot, max_bytes: int, max_wait_ms: int, min_bytes: int,
                  ahead: dict | None = None) -> None:
    part = slot.part
    assert part is not None
    if ahead is not None and slot.replica is None:
        found = await _take_ahead(ahead, slot, max_bytes, min_bytes)
        if found is not None:
            _answer(slot, found)
            return
    if slot.committed:
        await _locate_committed(gw, slot, max_bytes, max_wait_ms, min_bytes)
        return
    try:
        if slot.replica is None:
            slices, hw, log_start = await part.call("locate", slot.offset, max_bytes, max_wait_ms, min_bytes, None,
                                                    slot.epoch)
        else:  # a follower: reports its position, reads past the high watermark
            slices, hw, log_start = await part.call("locate", slot.offset, max_bytes, max_wait_ms, min_bytes, None,
                                                    slot.epoch, slot.replica)
    except Exception as e:
        code = error_code(e)
        if is_stale_route(e) or code in EPOCH_ERRORS:
            gw.cluster.forget(slot.topic)
        hw = log_start = -1
        if code == codes.OFFSET_OUT_OF_RANGE:
            try:
                log_start, hw = await part.call("offsets")
            except Exception:
                pass
        elif code == codes.UNKNOWN_SERVER_ERROR:
            log.warning("gateway: fetch %s-%d at %d failed: %s", slot.topic, slot.index, slot.offset,
                        error_message(e))
        slot.slices = []
        slot.result = _partition_result(slot.index, code, hw, log_start)
        return
    slot.slices = slices
    slot.result = _partition_result(slot.index, codes.NONE, hw, log_start)


async def _locate_committed(gw: GatewayContext, slot: _Slot, max_bytes: int, max_wait_ms: int,
                            min_bytes: int) -> None:
    """A read_committed fetch: batches below the last stable offset, with the aborted transactions
    among them (from the partition's ``.txnindex``), so the client drops their records."""
    part = slot.part
    assert part is not None
    try:
        slices, hw, log_start, lso, aborted = await part.call("locate_committed", slot.offset, max_bytes,
                                                              max_wait_ms, min_bytes, slot.epoch)
    except Exception as e:
        code = error_code(e)
        if is_stale_route(e) or code in EPOCH_ERRORS:
            gw.cluster.forget(slot.topic)
        slot.slices = []
        slot.result = _partition_result(slot.index, code)
        return
    _answer(slot, (slices, hw, log_start, lso, aborted))


def _answer(slot: _Slot, found: tuple) -> None:
    """A locate's answer (slices, hw, log start) or a locate_committed's (..., LSO, aborted) into ``slot``."""
    slot.slices = found[0]
    slot.result = _partition_result(slot.index, codes.NONE, found[1], found[2])
    if len(found) > 3:
        slot.result["last_stable_offset"] = found[3]
        slot.result["aborted_transactions"] = [{"producer_id": pid, "first_offset": first}
                                               for pid, first in found[4]]


# ---------------------------------------------------------------- read-ahead
# A consumer that is behind fetches offset after offset. Right after answering one
# fetch, the gateway asks the partition where the next one will start, so the
# actor's answer is ready when the consumer's next request arrives: the round trip
# to the actor leaves the consumer's critical path. A prefetched answer is always correct
# (slices of immutable, CRC-checked batches), at worst a little shorter than a
# fresh one; if it is empty or too small for min_bytes, a normal locate follows. A read_committed
# consumer's is a locate_committed: below the LSO of its time, which only grows, with the aborted
# transactions among the batches (final once below the LSO), so it stays correct too.
_AHEAD = "fetch_ahead"
EPOCH_ERRORS = (codes.FENCED_LEADER_EPOCH, codes.UNKNOWN_LEADER_EPOCH)
AHEAD_WALK_MAX = 64  # batch headers read to find where the answer ends


async def _take_ahead(ahead: dict, slot: _Slot, max_bytes: int, min_bytes: int):
    entry = ahead.pop((slot.topic, slot.index), None)
    if entry is None:
        return None
    offset, limit, epoch, committed, future = entry
    if offset != slot.offset or limit != max_bytes or epoch != slot.epoch or committed != slot.committed:
        future.add_done_callback(ignore_outcome)
        return None
    try:
        found = await future
    except Exception:
        return None
    if not found[0] or sum(s[2] for s in found[0]) < min_bytes:
        return None
    return found


def _next_offset(ranges: "FileRanges") -> int | None:
    """Offset after the last batch served (reads a few batch headers), or None if too many."""
    return next_offset_after(ranges.ranges, AHEAD_WALK_MAX)


def _read_ahead(conn: "Connection", slot: _Slot, max_bytes: int) -> None:
    records = slot.result.get("records") if slot.result else None
    if not isinstance(records, FileRanges):
        return
    nxt = _next_offset(records)
    if nxt is None or nxt >= min(slot.result["high_watermark"], slot.result["last_stable_offset"]):
        return  # caught up: the next fetch long-polls as usual
    ahead = conn.state.setdefault(_AHEAD, {})
    old = ahead.pop((slot.topic, slot.index), None)
    if old is not None:
        old[-1].add_done_callback(ignore_outcome)
    if slot.committed:
        call = slot.part.call("locate_committed", nxt, max_bytes, 0, 0, slot.epoch)
    else:
        call = slot.part.call("locate", nxt, max_bytes, 0, 0, None, slot.epoch)
    ahead[(slot.topic, slot.index)] = (nxt, max_bytes, slot.epoch, slot.committed, asyncio.ensure_future(call))


async def _wait_any(gw: GatewayContext, slots: list[_Slot], timeout_s: float) -> list[_Slot]:
    """Until an append reaches any of the partitions (or the time is up): the slots to look at again.

    Active partitions long-poll in their actors; inactive ones served from their files wait
    together on one gateway-side waiter (they get data only by waking up)."""
    by_key: dict[tuple[str | None, int], _Slot] = {}
    on_board: list[_Slot] = []  # active, at their log end by their offsets board: wait on it (board_waits.py)
    in_actor: list[_Slot] = []
    for s in slots:
        if s.part.from_files:
            by_key[(s.topic, s.index)] = s
        elif s.replica is None and s.part.at_log_end(s.offset, s.epoch) is not None:
            on_board.append(s)
        else:
            in_actor.append(s)
    wait_ms = int(timeout_s * 1000) + 1
    # a read_committed slot waits for its LSO to pass its offset, not the log end (an open transaction)
    waits = {asyncio.ensure_future(s.part.call("locate_committed", s.offset, 1, wait_ms, 1, s.epoch) if s.committed
                                   else s.part.call("wait_for_data", s.offset, wait_ms)): s for s in in_actor}
    closed = asyncio.ensure_future(gw.cluster.closed.wait_any(list(by_key), timeout_s)) if by_key else None
    board = asyncio.ensure_future(gw.cluster.board_waits.wait_any(
        [(s, s.part, s.offset, s.epoch) for s in on_board], timeout_s)) if on_board else None
    extra = [f for f in (closed, board) if f is not None]
    try:
        done, _ = await asyncio.wait([*waits, *extra], timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for f in extra:
            if not f.done():
                f.cancel()
        for w in waits:  # the actor-side waits end by themselves on the next append or timeout
            if not w.done():
                w.add_done_callback(ignore_outcome)
    woke = [waits[w] for w in done if w in waits]
    if closed is not None and closed in done and not closed.cancelled():
        woke += [by_key[k] for k in closed.result() if k in by_key]
    if board is not None and board in done and not board.cancelled():
        woke += board.result()
    return woke


async def fetch(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    version = header.api_version
    by_id = version >= 13
    session_id, session_epoch = body.get("session_id", 0), body.get("session_epoch", -1)
    response = {"throttle_time_ms": 0, "error_code": codes.NONE, "session_id": 0, "responses": [],
                "node_endpoints": []}
    if session_id != 0:
        response["error_code"] = codes.FETCH_SESSION_ID_NOT_FOUND
        return response
    if session_epoch > 0:
        response["error_code"] = codes.INVALID_FETCH_SESSION_EPOCH
        return response
    max_wait = max(0, body["max_wait_ms"])
    # A follower's fetch names its broker (replica_id, in replica_state from v15); consumers send -1.
    replica_id = replica_id_of(version, body)
    if replica_id >= 0 and not await may_fetch_as_replica(gw, conn, replica_id):
        log.warning("gateway: Fetch as replica %d from %s refused: not that broker, no CLUSTER_ACTION", replica_id,
                    conn.peer)
        return _refused_whole(response, body, codes.TOPIC_AUTHORIZATION_FAILED)
    min_bytes = max(0, body["min_bytes"])
    max_bytes = body.get("max_bytes", INT32_MAX)
    if max_bytes <= 0:
        max_bytes = INT32_MAX
    deadline = time.monotonic() + max_wait / 1000.0
    topics = body["topics"]
    # read_committed reads: bounded by the partition's own LSO (locate_committed, in its actor or, for a
    # closed partition without transactions, its files); the board answers one at the log end (nothing
    # to read), and read-ahead prefetches the same call. Nothing here remembers which topics had any.
    read_committed = body.get("isolation_level", 0) == 1 and replica_id < 0
    names: dict = {}
    if by_id:
        names = await gw.cluster.topic_names({t["topic_id"] for t in topics})
    groups: list[tuple[dict, list[_Slot]]] = []
    live: list[_Slot] = []
    for t in topics:
        name = names.get(t["topic_id"]) if by_id else t["topic"]
        slots = [_Slot(name, p["partition"], p["fetch_offset"], p["partition_max_bytes"],
                       p.get("current_leader_epoch", -1), p.get("last_fetched_epoch", -1)) for p in t["partitions"]]
        groups.append(({"topic": t.get("topic", ""), "topic_id": t.get("topic_id")}, slots))
        if read_committed:
            for s in slots:
                s.committed = True
        routes: Any = None  # the topic's cached routes, looked up once per request
        for s in slots:
            if name is None:
                s.result = _partition_result(s.index, codes.UNKNOWN_TOPIC_ID)
                continue
            try:
                if routes is None:
                    routes = await gw.cluster.topic(name) or ()  # () : no such topic, the router said
                if not routes:
                    s.part = None
                elif 0 <= s.index < len(routes) and not routes[s.index].offline:
                    s.part = routes[s.index]
                else:  # maybe partitions were added, or its node is back: ask the router
                    s.part = await gw.cluster.partition(name, s.index)
                    routes = None
                if s.part is not None and s.epoch > s.part.leader_epoch >= 0:
                    # the fetcher knows a newer leader epoch than this cached route: leadership changed
                    gw.cluster.forget(name)
                    s.part = await gw.cluster.partition(name, s.index)
                    routes = None
            except Exception as e:
                s.result = _partition_result(s.index, error_code(e))
                continue
            if s.part is None:
                s.result = _partition_result(s.index, codes.UNKNOWN_TOPIC_OR_PARTITION)
            elif s.part.offline:
                s.result = _partition_result(s.index, codes.LEADER_NOT_AVAILABLE)
            elif not s.part.local:  # KIP-951: name the right broker
                s.result = _partition_result(s.index, codes.NOT_LEADER_OR_FOLLOWER)
                s.result["current_leader"] = s.part.leader_hint()
            elif s.last_fetched_epoch >= 0 and await _diverging(gw, s):
                pass  # answered: no records, the epoch where the fetcher's log diverges
            else:
                if replica_id >= 0:
                    # any replica but the leader: a leader change reorders the replicas (the old leader follows)
                    s.replica = next((n for n in s.part.replicas if n != s.part.node_id and broker_id(n) == replica_id),
                                     None)
                    if s.replica is None:  # a replica added since this route was cached (a reassignment)
                        fresh = (await gw.cluster.refresh([name])).get(name) or []
                        if s.index < len(fresh) and fresh[s.index].local and not fresh[s.index].offline:
                            s.part = fresh[s.index]
                            s.replica = next((n for n in s.part.replicas
                                              if n != s.part.node_id and broker_id(n) == replica_id), None)
                live.append(s)
    ahead = conn.state.get(_AHEAD)
    if len(live) == 1:
        s = live[0]
        await _locate(gw, s, min(s.max_bytes, max_bytes), max_wait, min_bytes, ahead)
    elif live:
        await _locate_all(gw, live, max_bytes, ahead)
        while True:
            remaining = deadline - time.monotonic()
            ok = [s for s in live if s.result["error_code"] == codes.NONE]
            if remaining <= 0 or len(ok) < len(live) or sum(s.size for s in ok) >= max(min_bytes, 1):
                break
            # look again only where something happened: with a thousand partitions assigned, locating
            # every one after each append to one of them was most of the gateway's work
            woke = await _wait_any(gw, ok, remaining)
            await _locate_all(gw, woke, max_bytes)
        await _fit(gw, live, max_bytes)
    for s in live:
        if not s.slices:
            continue  # nothing to open or read ahead (most partitions of a wide Fetch)
        await _open(gw, s)
        if s.result["error_code"] == codes.NONE and s.replica is None:
            try:
                _read_ahead(conn, s, min(s.max_bytes, max_bytes))
            except OSError:
                pass
    for topic, slots in groups:
        for s in slots:
            if s.result["error_code"] == codes.FENCED_LEADER_EPOCH and s.topic is not None:
                await _hint_leader(gw, s)
        topic["partitions"] = [s.result for s in slots]
        response["responses"].append(topic)
    response["node_endpoints"] = await leader_endpoints(
        gw, [s.result.get("current_leader") for _, slots in groups for s in slots])
    return response


def _refused_whole(response: dict, body: dict, code: int) -> dict:
    """Every partition of the request answered ``code``, nothing read."""
    for t in body["topics"]:
        response["responses"].append({"topic": t.get("topic", ""), "topic_id": t.get("topic_id"),
                                      "partitions": [_partition_result(p["partition"], code)
                                                     for p in t["partitions"]]})
    return response


async def _locate_all(gw: GatewayContext, slots: list[_Slot], max_bytes: int, ahead: dict | None = None) -> None:
    """Locate every slot without waiting. Partitions read from a view of their closed files that is
    already open go one after the other in this task (no I/O wait: a task each was half of a Fetch's
    cost over a thousand inactive partitions); the others concurrently (a call to their actor, or a
    view to open, or an activation when their files cannot be read)."""
    closed = gw.cluster.closed
    inline, others = [], []
    for s in slots:
        part = s.part
        if part.from_files:
            (inline if closed.has_view(s.topic, s.index) else others).append(s)
            continue
        quiet = part.at_log_end(s.offset, s.epoch) if s.replica is None else None
        if quiet is None:
            others.append(s)
        else:  # active, nothing past the consumer's offset: its board says so, the actor sleeps on
            s.slices = []
            s.result = _partition_result(s.index, codes.NONE, quiet[0], quiet[1])
    calls = asyncio.gather(*(_locate(gw, s, min(s.max_bytes, max_bytes), 0, 0, ahead) for s in others))
    locate_now = closed.locate_now
    for s in inline:
        part = s.part
        found = None if s.replica is not None else locate_now(
            s.topic, s.index, part.leader_epoch, s.offset, min(s.max_bytes, max_bytes), s.epoch,
            part.files_directory, s.committed)
        if found is None:
            await _locate(gw, s, min(s.max_bytes, max_bytes), 0, 0, ahead)
        else:
            s.slices = found[0]
            s.result = _partition_result(s.index, codes.NONE, found[1], found[2])
    await calls


async def _diverging(gw: GatewayContext, slot: _Slot) -> bool:
    """A follower's fetch (``last_fetched_epoch`` set): True when answered here, with an error or with
    the ``diverging_epoch`` its log must be truncated to; False when it fetches as usual."""
    part = slot.part
    assert part is not None
    try:
        found = await part.call("diverging_epoch", slot.offset, slot.last_fetched_epoch, slot.epoch)
        if found is None:
            return False
        log_start, hw = await part.call("offsets")
    except Exception as e:
        code = error_code(e)
        if is_stale_route(e) or code in EPOCH_ERRORS:
            gw.cluster.forget(slot.topic)
        slot.result = _partition_result(slot.index, code)
        return True
    slot.result = _partition_result(slot.index, codes.NONE, hw, log_start)
    slot.result["diverging_epoch"] = {"epoch": found[0], "end_offset": found[1]}
    return True


async def _hint_leader(gw: GatewayContext, slot: _Slot) -> None:
    """KIP-951: a FENCED_LEADER_EPOCH answer names the leader and its epoch, from fresh routes."""
    try:
        part = await gw.cluster.partition(slot.topic, slot.index)
    except Exception:
        return
    if part is not None and not part.offline:
        slot.result["current_leader"] = part.leader_hint()


async def _fit(gw: GatewayContext, live: list[_Slot], max_bytes: int) -> None:
    """Honour the response's ``max_bytes``: the first non-empty partition may exceed it (one whole
    batch, so a consumer never stalls); later ones get what is left, or nothing."""
    total = 0
    for s in live:
        size = s.size
        if not size:
            continue
        if total and total + size > max_bytes:
            left = max_bytes - total
            s.slices = []
            if left > 0:
                await _locate(gw, s, left, 0, 0)
                if total + s.size > max_bytes:
                    s.slices = []
        total += s.size


async def _open(gw: GatewayContext, s: _Slot) -> None:
    for attempt in range(2):
        if not s.slices:
            return
        try:
            s.result["records"] = FileRanges.open(s.slices)
            return
        except FileNotFoundError:  # retention removed the segment since locate: look again
            if attempt == 0:
                await _locate(gw, s, max(s.size, 1), 0, 0)
    s.slices = []
    s.result["records"] = b""


# ------------------------------------------------------------------ ListOffsets
async def _list_one(part: Partition | None, index: int, timestamp: int, current_leader_epoch: int = -1,
                    read_committed: bool = False) -> dict:
    out = {"partition_index": index, "error_code": codes.NONE, "old_style_offsets": [], "timestamp": -1,
           "offset": -1, "leader_epoch": -1}
    if part is None:
        out["error_code"] = codes.UNKNOWN_TOPIC_OR_PARTITION
        return out
    if part.offline:
        out["error_code"] = codes.LEADER_NOT_AVAILABLE
        return out
    if not part.local:
        out["error_code"] = codes.NOT_LEADER_OR_FOLLOWER
        return out
    try:
        if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):  # nothing is tiered
            await part.call("list_offset", LATEST, current_leader_epoch)  # fencing still applies
        elif timestamp in (LATEST, EARLIEST, EARLIEST_LOCAL, MAX_TIMESTAMP) or timestamp >= 0:
            # one call: fencing, the lookup and the leader epoch of the offset found (v4+)
            found = await part.call("list_offset", EARLIEST if timestamp == EARLIEST_LOCAL else timestamp,
                                    current_leader_epoch, read_committed)
            if found is not None:
                out["offset"], out["timestamp"], out["leader_epoch"] = found
        else:
            out["error_code"] = codes.INVALID_REQUEST
    except Exception as e:
        out["error_code"] = error_code(e)
    return out


async def list_offsets(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    topics_out = []
    read_committed = body.get("isolation_level", 0) == 1  # v2+: answers end at the LSO
    for t in body["topics"]:
        name = t["name"]
        jobs = []
        for p in t["partitions"]:
            try:
                part = await gw.cluster.partition(name, p["partition_index"])
            except Exception:
                part = None
            jobs.append(_list_one(part, p["partition_index"], p["timestamp"], p.get("current_leader_epoch", -1),
                                  read_committed))
        parts = await asyncio.gather(*jobs)
        for r in parts:
            if r["error_code"] == codes.NOT_LEADER_OR_FOLLOWER or r["error_code"] in EPOCH_ERRORS:
                gw.cluster.forget(name)
        topics_out.append({"name": name, "partitions": parts})
    return {"throttle_time_ms": 0, "topics": topics_out}


HANDLERS: HandlerTable = {
    1: (4, 18, fetch),
    2: (1, 11, list_offsets),
}
