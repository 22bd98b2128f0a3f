"""The transaction APIs, answered by the transaction coordinator actor of this node.

As in Kafka, a ``transactional.id``'s coordinator is the leader of its
``__transaction_state`` partition: FindCoordinator (key type 1, in :mod:`.groups`)
names the gateway of that node, and this gateway hands the transaction requests to
its node's coordinator actor (``actors/txn_coordinator.py``), which answers
NOT_COORDINATOR for ids it does not lead. TxnOffsetCommit goes to the group
coordinator, which holds the offsets until the transaction's marker.

Produce (KIP-890 part 1): a transactional batch is accepted only for a partition the
ongoing transaction added; :func:`verify_produce` asks the id's coordinator (on
whichever node leads it) before the batches are queued, so a late batch of an ended
transaction cannot start a transaction nobody will end. As Kafka verifies only a
transaction's first batch in a partition, a verified (id, producer id, epoch, partition)
is remembered with the partition's count of transaction markers from its offsets board
(``actors/offsets_board.py``): the next batches skip the coordinator while that count is
unchanged. The partition counts a marker before writing it, so once a transaction has
ended (EndTxn, a timeout abort, a fencing) a late batch is verified again, and refused;
an epoch bump is another key.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any


from logan_ray.common.errors import NotCoordinatorError
from logan_ray.groups import ownership
from logan_ray.protocol import errors as codes
from logan_ray.transactions import error_for_version

from .handler import GatewayContext, HandlerTable

if TYPE_CHECKING:
    from .connection import Connection

log = logging.getLogger("logan_ray.gateway")

#: node id -> that node's transaction coordinator actor (looked up once; forgotten when a call fails)
_HANDLES: dict[str, Any] = {}
#: (transactional id, producer id, epoch, topic, partition) -> the partition's marker mark when its
#: coordinator verified it (see the module's docstring); oldest first, at most MAX_VERIFIED
_VERIFIED: OrderedDict[tuple, tuple] = OrderedDict()
MAX_VERIFIED = 100_000
_ATTRIBUTES_AT = 22  # low byte of a v2 batch's attributes: bit 4 is "transactional"
_TRANSACTIONAL = 0x10


def txn_topic() -> str:
    from logan_ray.actors.txn_coordinator import TXN_TOPIC

    return TXN_TOPIC


def _coordinator_on(node_id: str) -> Any:
    handle = _HANDLES.get(node_id)
    if handle is None:
        from logan_ray.actors.txn_coordinator import txn_coordinator_on

        handle = _HANDLES[node_id] = txn_coordinator_on(node_id)
    return handle


async def _call(gw: GatewayContext, method: str, *args: Any, node_id: str | None = None) -> Any:
    """Call a coordinator (this node's unless ``node_id``); NotCoordinatorError / ConnectionError out."""
    node = node_id or gw.cluster.node_id
    try:
        return await getattr(_coordinator_on(node), method).remote(*args)
    except NotCoordinatorError:
        raise
    except Exception as e:
        _HANDLES.pop(node, None)
        log.warning("gateway: transaction coordinator %s failed: %s", method, e)
        raise ConnectionError(str(e)) from e


def _code(e: BaseException) -> int:
    return codes.NOT_COORDINATOR if isinstance(e, NotCoordinatorError) else codes.COORDINATOR_NOT_AVAILABLE


async def coordinator_nodes(gw: GatewayContext, keys: list[str]) -> dict[str, str | None]:
    """The node leading each transactional id's ``__transaction_state`` partition (None: no leader)."""
    from logan_ray.actors.txn_coordinator import partition_for_txn

    route = (await gw.cluster.router.route_with_ids.remote([txn_topic()])).get(txn_topic())
    if route is None:
        return {k: None for k in keys}
    n = len(route["partitions"])
    return {k: ownership.leadership(route, partition_for_txn(k, n)).node_id for k in keys}


# ------------------------------------------------------------------ InitProducerId
async def init_transactional(gw: GatewayContext, header: Any, body: dict) -> dict:
    """InitProducerId with a transactional.id: the coordinator bumps the epoch (fencing older producers)."""
    out = {"throttle_time_ms": 0, "error_code": codes.NONE, "producer_id": -1, "producer_epoch": -1}
    try:
        error, pid, epoch = await _call(gw, "init_producer_id", body["transactional_id"],
                                        body.get("transaction_timeout_ms", 60_000), body.get("producer_id", -1),
                                        body.get("producer_epoch", -1))
    except Exception as e:
        out["error_code"] = _code(e)
        return out
    out["error_code"] = error_for_version(22, header.api_version, error)
    if error == codes.NONE:
        out["producer_id"], out["producer_epoch"] = pid, epoch
    return out


# ------------------------------------------------------------------ AddPartitionsToTxn
def _topic_results(topics: list[dict], code_of: Any) -> list[dict]:
    return [{"name": t["name"], "results_by_partition": [
        {"partition_index": p, "partition_error_code": code_of((t["name"], p))} for p in t.get("partitions") or ()]}
        for t in topics or ()]


async def _add_one(gw: GatewayContext, tid: str, pid: int, epoch: int, topics: list[dict], verify_only: bool,
                   version: int) -> list[dict]:
    wanted = [(t["name"], p) for t in topics or () for p in t.get("partitions") or ()]
    known = await gw.cluster.refresh(sorted({t for t, _ in wanted}), False) if wanted else {}
    missing = {(t, p) for t, p in wanted if known.get(t) is None or not 0 <= p < len(known[t])}
    if missing:  # Kafka: the unknown ones fail, the others OPERATION_NOT_ATTEMPTED
        return _topic_results(topics, lambda tp: codes.UNKNOWN_TOPIC_OR_PARTITION if tp in missing
                              else codes.OPERATION_NOT_ATTEMPTED)
    try:
        if verify_only:
            got = await _call(gw, "verify_partitions", tid, pid, epoch, wanted)
            return _topic_results(topics, lambda tp: got.get(tp, codes.UNKNOWN_SERVER_ERROR))
        error = await _call(gw, "add_partitions", tid, pid, epoch, wanted)
    except Exception as e:
        error = _code(e)
    error = error_for_version(24, version, error)
    return _topic_results(topics, lambda tp: error)


async def add_partitions_to_txn(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    v = header.api_version
    if v <= 3:
        results = await _add_one(gw, body["v3_and_below_transactional_id"], body["v3_and_below_producer_id"],
                                 body["v3_and_below_producer_epoch"], body["v3_and_below_topics"], False, v)
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": results}
    out = []
    for t in body.get("transactions") or ():
        out.append({"transactional_id": t["transactional_id"], "topic_results": await _add_one(
            gw, t["transactional_id"], t["producer_id"], t["producer_epoch"], t["topics"], t.get("verify_only", False),
            v)})
    return {"throttle_time_ms": 0, "error_code": codes.NONE, "results_by_transaction": out}


# ------------------------------------------------------------------ AddOffsetsToTxn, EndTxn
async def add_offsets_to_txn(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    try:
        error = await _call(gw, "add_offsets", body["transactional_id"], body["producer_id"], body["producer_epoch"],
                            body["group_id"])
    except Exception as e:
        error = _code(e)
    return {"throttle_time_ms": 0, "error_code": error_for_version(25, header.api_version, error)}


async def end_txn(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    v = header.api_version
    try:
        error, pid, epoch = await _call(gw, "end_txn", body["transactional_id"], body["producer_id"],
                                        body["producer_epoch"], body["committed"], 2 if v >= 5 else 0)
    except Exception as e:
        error, pid, epoch = _code(e), -1, -1
    return {"throttle_time_ms": 0, "error_code": error_for_version(26, v, error), "producer_id": pid,
            "producer_epoch": epoch}


# ------------------------------------------------------------------ TxnOffsetCommit
async def txn_offset_commit(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    from .groups import _call as group_call

    def fail(code: int) -> dict:
        return {"throttle_time_ms": 0, "topics": [
            {"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": code}
                                               for p in t.get("partitions") or ()]} for t in body.get("topics") or ()]}

    return await group_call(gw, "txn_offset_commit", body, header.api_version, fail=fail)


# ------------------------------------------------------------------ admin
async def describe_transactions(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    ids = list(body.get("transactional_ids") or ())
    nodes = await coordinator_nodes(gw, ids) if ids else {}
    states = []
    for tid in ids:
        node = nodes.get(tid)
        try:
            if node is None:
                raise ConnectionError("no leader")
            states += await _call(gw, "describe", [tid], node_id=node)
        except Exception as e:
            states.append({"error_code": _code(e), "transactional_id": tid, "transaction_state": "",
                           "transaction_timeout_ms": 0, "transaction_start_time_ms": -1, "producer_id": -1,
                           "producer_epoch": -1, "topics": []})
    return {"throttle_time_ms": 0, "transaction_states": states}


async def list_transactions(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    """This broker's transactions: those of the partitions of ``__transaction_state`` its node leads
    (Kafka's admin client asks every broker and merges the answers)."""
    try:
        got = await _call(gw, "list_transactions", list(body.get("state_filters") or ()),
                          list(body.get("producer_id_filters") or ()), body.get("duration_filter", -1))
    except Exception as e:
        return {"throttle_time_ms": 0, "error_code": _code(e), "unknown_state_filters": [], "transaction_states": []}
    return {"throttle_time_ms": 0, **got}


# ------------------------------------------------------------------ Produce (KIP-890 verification)
def is_transactional(data: Any) -> bool:
    """Whether the first record batch of a produce's partition data is transactional (all are, or none)."""
    return data is not None and len(data) > _ATTRIBUTES_AT and bool(data[_ATTRIBUTES_AT] & _TRANSACTIONAL)


async def verify_produce(gw: GatewayContext, body: dict, partitions: list[tuple[str, int, Any]]) -> dict:
    """(topic, partition) -> error code for the transactional partition data of a produce request.

    NONE only where the producer's ongoing transaction added the partition, as its
    coordinator says; a request without ``transactional_id`` may carry no transactional batch.
    """
    wanted = [(t, p) for t, p, data in partitions if is_transactional(data)]
    if not wanted:
        return {}
    tid = body.get("transactional_id")
    if tid is None:
        return {tp: codes.INVALID_TXN_STATE for tp in wanted}
    first = next(data for t, p, data in partitions if is_transactional(data))
    pid = int.from_bytes(first[43:51], "big", signed=True)  # producerId, then producerEpoch
    epoch = int.from_bytes(first[51:53], "big", signed=True)
    marks = {tp: await _marker_mark(gw, *tp) for tp in wanted}  # read before the coordinator answers
    unverified = [tp for tp in wanted if marks[tp] is None or _VERIFIED.get((tid, pid, epoch, *tp)) != marks[tp]]
    if not unverified:
        return {tp: codes.NONE for tp in wanted}  # each verified in this transaction, no marker since
    from logan_ray.actors.txn_coordinator import partition_for_txn

    try:  # the cached route (no router call per produce); a stale one is forgotten below
        routes = await gw.cluster.topic(txn_topic())
        part = await gw.cluster.partition(txn_topic(), partition_for_txn(tid, len(routes))) if routes else None
        if part is None or part.offline:
            return {tp: codes.NOT_ENOUGH_REPLICAS for tp in wanted}
        got = await _call(gw, "verify_partitions", tid, pid, epoch, unverified, node_id=part.node_id)
    except Exception as e:
        log.warning("gateway: cannot verify transactional produce of %r: %s", tid, e)
        return {tp: codes.NOT_ENOUGH_REPLICAS for tp in wanted}  # retriable, as Kafka answers
    if codes.NOT_COORDINATOR in got.values():
        gw.cluster.forget(txn_topic())
    for tp, code in got.items():
        key = (tid, pid, epoch, *tp)
        if code == codes.NONE and marks.get(tp) is not None:
            _VERIFIED[key] = marks[tp]
            _VERIFIED.move_to_end(key)
            while len(_VERIFIED) > MAX_VERIFIED:
                _VERIFIED.popitem(last=False)
        else:
            _VERIFIED.pop(key, None)
    out = {tp: codes.NONE for tp in wanted}
    out.update((tp, _PRODUCE_CODES.get(c, c)) for tp, c in got.items())
    return out


async def _marker_mark(gw: GatewayContext, topic: str | None, partition: int) -> tuple | None:
    """The partition's marker mark from its cached route's board (no call), None when unknown."""
    if topic is None:
        return None
    try:
        routes = await gw.cluster.topic(topic)
    except Exception:
        return None
    if not routes or not 0 <= partition < len(routes):
        return None
    return routes[partition].marker_mark()


#: what a Produce answers for a verification error (Kafka's older-client translations)
_PRODUCE_CODES = {codes.PRODUCER_FENCED: codes.INVALID_PRODUCER_EPOCH,
                  codes.INVALID_PRODUCER_ID_MAPPING: codes.INVALID_TXN_STATE,
                  codes.TRANSACTION_ABORTABLE: codes.INVALID_TXN_STATE,
                  codes.CONCURRENT_TRANSACTIONS: codes.NOT_ENOUGH_REPLICAS,
                  codes.NOT_COORDINATOR: codes.NOT_ENOUGH_REPLICAS}


HANDLERS: HandlerTable = {
    24: (0, 5, add_partitions_to_txn),
    25: (0, 4, add_offsets_to_txn),
    26: (0, 5, end_txn),
    28: (0, 4, txn_offset_commit),
    65: (0, 0, describe_transactions),
    66: (0, 1, list_transactions),
}
