"""The live console: a page (plain HTML, JS and inline SVG shipped here, nothing from a CDN) and the
state it polls every two seconds. Rates and chart history are computed in the browser from the
counters in ``/console/state``; the page keeps the last ten minutes. Its record browser reads
through ``POST /subscribe`` (base64, a page of records at a time), so it has that endpoint's
limits and READ check; nothing here reads records.

Partitions name their node by address, as an operator knows it: the host:port of the node's
Kafka gateway, else the node's IP; the Ray node id stays in ``node_id``. Topics whose name starts
with ``__`` carry ``internal: true`` (the page folds them).

With an authorizer, the state holds what the principal could learn over Kafka: topics it
may DESCRIBE (Metadata), groups it may DESCRIBE (DescribeGroups) and, in those, committed
offsets and lag of topics it may DESCRIBE (OffsetFetch)."""
from __future__ import annotations

import os
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse

from logan_ray._ray import get
from logan_ray.security import acl

from .access import access
from .backend import current

router = APIRouter(tags=["console"])
STATIC = os.path.join(os.path.dirname(__file__), "static")


@router.get("/console", include_in_schema=False)
def page() -> FileResponse:
    return FileResponse(os.path.join(STATIC, "console.html"), media_type="text/html")


@router.get("/console/console.js", include_in_schema=False)
def script() -> FileResponse:
    return FileResponse(os.path.join(STATIC, "console.js"), media_type="text/javascript")


@router.get("/console/records.js", include_in_schema=False)
def records_script() -> FileResponse:
    return FileResponse(os.path.join(STATIC, "records.js"), media_type="text/javascript")


@router.get("/console/state", summary="Topics, partitions and consumer groups with their counters")
def state(request: Request) -> dict[str, Any]:
    client = current().client
    who = access(request)
    topics: dict[str, list] = {}
    for s in client.status():
        if not who.may(acl.DESCRIBE, acl.TOPIC, s["topic"]):
            continue
        topics.setdefault(s["topic"], []).append({
            "partition": s["partition"], "node_id": s["node_id"],
            "log_start_offset": s["log_start_offset"], "log_end_offset": s["log_end_offset"],
            "size_bytes": s["size_bytes"], "segments": s["segment_count"],
            "appended_records": s.get("appended_records", 0), "read_bytes": s.get("read_bytes", 0),
        })
    hosts = node_addresses(client, {p["node_id"] for ps in topics.values() for p in ps})
    for ps in topics.values():
        for p in ps:
            p["host"] = hosts.get(p["node_id"], p["node_id"])
    groups = []
    admin = client.groups
    for g in admin.list():
        if not who.may(acl.DESCRIBE, acl.GROUP, g["group_id"]):
            continue
        try:
            d = admin.describe(g["group_id"])
        except Exception:  # deleted between list and describe
            continue
        groups.append({"group_id": g["group_id"], "state": g.get("group_state"), "members": len(d.get("members", [])),
                       "offsets": [{k: o[k] for k in ("topic", "partition", "committed", "end", "lag")}
                                   for o in d.get("offsets", []) if who.may(acl.DESCRIBE, acl.TOPIC, o["topic"])]})
    return {"time_ms": int(time.time() * 1000),
            "topics": [{"name": n, "internal": n.startswith("__"),
                        "partitions": sorted(ps, key=lambda p: p["partition"])}
                       for n, ps in sorted(topics.items())],
            "groups": groups}


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def node_addresses(client: Any, node_ids: set[str]) -> dict[str, str]:
    """Ray node id -> the address an operator knows the node by: its Kafka gateway's advertised
    host:port (what clients connect to), else the node's IP as Ray knows it. An id found in
    neither (a node that is gone) is left out."""
    if not node_ids:
        return {}
    out = {n: _host_port(h, p) for n, (h, p) in get(client.router.gateways.remote()).items() if n in node_ids}
    if node_ids - out.keys():
        import ray

        out.update({n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes()
                    if n["NodeID"] in node_ids and n["NodeID"] not in out})
    return out
