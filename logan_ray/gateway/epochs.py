"""OffsetForLeaderEpoch (API 23): where did a leader epoch end in this partition's log?

Consumers ask it to validate their position after a leader change (KIP-320:
librdkafka and the Java client do, with the epoch of the last record they
consumed) and followers to find where their log diverges (KIP-101/279). The
partition actor answers from its leader-epoch cache (``storage/leader_epochs.py``),
fencing a ``current_leader_epoch`` that is not its own as Fetch does.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from logan_ray.protocol import errors as codes

from .cluster import Partition, error_code, is_stale_route
from .handler import GatewayContext, HandlerTable

if TYPE_CHECKING:
    from .connection import Connection

EPOCH_ERRORS = (codes.FENCED_LEADER_EPOCH, codes.UNKNOWN_LEADER_EPOCH)


async def _one(gw: GatewayContext, name: str, p: dict) -> dict:
    index = p["partition"]
    out = {"error_code": codes.NONE, "partition": index, "leader_epoch": -1, "end_offset": -1}
    try:
        part: Partition | None = await gw.cluster.partition(name, index)
    except Exception as e:
        out["error_code"] = error_code(e)
        return out
    if part is None:
        out["error_code"] = codes.UNKNOWN_TOPIC_OR_PARTITION
    elif part.offline:
        out["error_code"] = codes.LEADER_NOT_AVAILABLE
    elif not part.local:  # only the leader answers (a consumer's request; followers have no replicas here yet)
        out["error_code"] = codes.NOT_LEADER_OR_FOLLOWER
    else:
        try:
            out["leader_epoch"], out["end_offset"] = await part.call(
                "end_offset_for_epoch", p["leader_epoch"], p.get("current_leader_epoch", -1))
        except Exception as e:
            out["error_code"] = error_code(e)
            if is_stale_route(e) or out["error_code"] in EPOCH_ERRORS:
                gw.cluster.forget(name)
    return out


async def offset_for_leader_epoch(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    topics = []
    for t in body["topics"]:
        name = t["topic"]
        parts = await asyncio.gather(*(_one(gw, name, p) for p in t["partitions"]))
        topics.append({"topic": name, "partitions": list(parts)})
    return {"throttle_time_ms": 0, "topics": topics}


HANDLERS: HandlerTable = {
    23: (0, 4, offset_for_leader_epoch),
}
