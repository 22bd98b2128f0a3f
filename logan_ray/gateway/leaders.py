"""ElectLeaders (API 43): preferred-leader and unclean elections asked by an admin client.

Kafka's KIP-183/KIP-460 API (confluent-kafka's ``AdminClient.elect_leaders``, Kafka's
``kafka-leader-election.sh``). The router (the controller) does the election: PREFERRED
moves leadership back to each partition's first assigned replica by a controlled move
(``actors/router_rebalance.py``), UNCLEAN elects a leader for a partition that has none.
Version 0 has no election type: it is a preferred election.
"""
from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from logan_ray.protocol import errors as codes

from .cluster import error_code, error_message
from .handler import GatewayContext, HandlerTable

if TYPE_CHECKING:
    from .connection import Connection


def results_body(asked: list[tuple[str, int]] | None, results: dict[tuple[str, int], tuple[int, str | None]]
                 ) -> list[dict[str, Any]]:
    """``replica_election_results`` by topic, in the order asked. For a request naming no partitions
    (all of them), partitions whose election was not needed are left out, as Kafka does."""
    keys = asked if asked is not None else [k for k, (code, _m) in results.items() if code != codes.ELECTION_NOT_NEEDED]
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for topic, p in keys:
        code, message = results[(topic, p)]
        by_topic.setdefault(topic, []).append({"partition_id": p, "error_code": code, "error_message": message})
    return [{"topic": t, "partition_result": parts} for t, parts in by_topic.items()]


async def elect_leaders(gw: GatewayContext, conn: "Connection", header: Any, body: dict) -> dict:
    election_type = body.get("election_type", 0) if header.api_version >= 1 else 0
    asked = None if body.get("topic_partitions") is None else \
        [(t["topic"], p) for t in body["topic_partitions"] for p in t["partitions"]]
    try:
        timeout_ms = body.get("timeout_ms", 60000)  # 0: no wait asked for; the elections still run (as Kafka)
        results = await asyncio.wait_for(gw.cluster.router.elect_leaders.remote(election_type, asked),
                                          timeout_ms / 1000 if timeout_ms > 0 else None)
    except Exception as e:
        code, message = (codes.REQUEST_TIMED_OUT, "the elections did not finish within the timeout") \
            if isinstance(e, asyncio.TimeoutError) else (error_code(e), error_message(e))
        results = {k: (code, message) for k in asked or []}
    for topic in {t for t, _p in results}:
        gw.cluster.forget(topic)  # leaders moved: the next request routes anew
    return {"throttle_time_ms": 0, "error_code": codes.NONE,
            "replica_election_results": results_body(asked, results)}


HANDLERS: HandlerTable = {
    43: (0, 2, elect_leaders),
}
