"""The live console: a page (plain HTML, JS and inline SVG shipped here, nothing from a CDN) and the
state it polls every two seconds. Rates and chart history are computed in the browser from the
counters in ``/console/state``; the page keeps the last ten minutes.

With an authorizer, the state holds what the principal could learn over Kafka: topics it
may DESCRIBE (Metadata), groups it may DESCRIBE (DescribeGroups) and, in those, committed
offsets and lag of topics it may DESCRIBE (OffsetFetch)."""
from __future__ import annotations

import os
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse

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
            "topics": [{"name": n, "partitions": sorted(ps, key=lambda p: p["partition"])}
                       for n, ps in sorted(topics.items())],
            "groups": groups}
