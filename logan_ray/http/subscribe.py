"""Stateless reads (Katar's "dumb broker"): the client sends its position, gets records and the next one.

``POST /subscribe`` answers once (long-polling up to ``timeout_ms`` for a first
record); ``GET /stream/{topic}/{partition}`` follows the log live as chunked
NDJSON (one record per line) or Server-Sent Events (one event per fetched batch,
``id:`` = the next offset, so a browser's EventSource resumes where it stopped
via Last-Event-ID).
"""
from __future__ import annotations

import json
import time
from typing import AsyncIterator, Literal, Optional

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import Response, StreamingResponse

from logan_ray._ray import ACTOR_GONE
from logan_ray.errors import LoganError, OffsetOutOfRangeError, PartitionHibernatedError
from logan_ray.protocol import errors as E
from logan_ray.security import acl

from .access import Access, access
from .backend import current
from .body import documented_body, parse, read_body
from .errors import error_body
from .models import Encoding, Position, SubscribeRequest, SubscribeResponse
from .reading import call, fetch, start_offset

router = APIRouter(tags=["records"])
STREAM_POLL_MS = 500


@router.post("/subscribe", summary="Read records from a position (long-poll)",
             responses={200: {"model": SubscribeResponse}},
             openapi_extra=documented_body(SubscribeRequest))
async def subscribe(request: Request) -> Response:
    backend = current()
    req = parse(SubscribeRequest, await read_body(request, backend.max_body_bytes))
    access(request).require(acl.READ, acl.TOPIC, req.topic)  # Fetch: READ on the topic
    for attempt in (1, 2):
        actor = await backend.actor(req.topic, req.partition)
        try:
            offset = await start_offset(actor, req.offset, req.timestamp, req.position)
            chunk = await fetch(actor, offset, req.max_bytes, req.timeout_ms, req.max_records, req.encoding)
            break
        except (*ACTOR_GONE, PartitionHibernatedError):
            if attempt == 2:
                raise
            backend.forget(req.topic)  # deleted, re-created or hibernated since its route was cached
    text = (f'{{"topic":{json.dumps(req.topic)},"partition":{req.partition},"records":[{",".join(chunk.records)}],'
            f'"next_offset":{chunk.next_offset},"high_watermark":{chunk.high_watermark},'
            f'"log_start_offset":{chunk.log_start_offset}}}')
    return Response(text, media_type="application/json")


@router.get("/stream/{topic}/{partition}", summary="Follow a partition live (NDJSON or Server-Sent Events)",
            response_class=StreamingResponse,
            responses={200: {"content": {"application/x-ndjson": {}, "text/event-stream": {}}}})
async def stream(request: Request, topic: str, partition: int,
                 offset: Optional[int] = Query(None, ge=0), timestamp: Optional[int] = None,
                 position: Optional[Position] = None, format: Literal["ndjson", "sse"] = "ndjson",
                 encoding: Encoding = "utf8", max_records: Optional[int] = Query(None, ge=1),
                 idle_timeout_ms: Optional[int] = Query(None, ge=0),
                 max_bytes: int = Query(1 << 20, ge=1, le=64 << 20),
                 last_event_id: Optional[str] = Header(None)) -> StreamingResponse:
    """Runs until the client disconnects, or after ``max_records`` records, or after ``idle_timeout_ms``
    without new records. NDJSON lines are records; SSE events carry ``{"records": [...], "next_offset": N}``."""
    backend = current()
    who = access(request)
    who.require(acl.READ, acl.TOPIC, topic)
    actor = await backend.actor(topic, partition)
    if last_event_id is not None and last_event_id.isdigit():
        offset = int(last_event_id)
    pos = await start_offset(actor, offset, timestamp, position)
    start, end = await call(actor.offsets.remote())
    if not start <= pos <= end:  # refuse now, while the answer can still be an HTTP error
        raise OffsetOutOfRangeError(f"offset {pos} is outside the log [{start}, {end}) of {topic}-{partition}")
    media = "application/x-ndjson" if format == "ndjson" else "text/event-stream"
    body = _follow(actor, pos, format, encoding, max_records, idle_timeout_ms, max_bytes, who, topic, partition)
    return StreamingResponse(body, media_type=media, headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _error(fmt: str, code: int, message: str) -> str:
    err = json.dumps(error_body(code, message))
    return f"event: error\ndata: {err}\n\n" if fmt == "sse" else err + "\n"


async def _follow(actor, pos: int, fmt: str, encoding: str, max_records: int | None, idle_timeout_ms: int | None,
                  max_bytes: int, who: Access, topic: str, partition: int) -> AsyncIterator[str]:
    """Each round re-checks the reader's rights (cached: microseconds), so a changed password or a
    removed READ ends a live stream within about a second, with an error line, as a new request would.

    A partition that hibernates (or whose actor is replaced) under a live stream is looked up again
    through the router, which starts it: the stream goes on from its position, as a Kafka consumer's
    fetches do across a leader change."""
    lost = 0  # consecutive rounds whose actor was gone
    sent = 0
    idle_since = time.monotonic()
    if fmt == "sse":
        yield "retry: 1000\n\n"
    while max_records is None or sent < max_records:
        wait = STREAM_POLL_MS
        if idle_timeout_ms is not None:
            left = idle_timeout_ms / 1000.0 - (time.monotonic() - idle_since)
            if left <= 0:
                return
            wait = max(1, min(wait, int(left * 1000)))
        renewed = await who.renewed()
        if renewed is None:
            yield _error(fmt, E.SASL_AUTHENTICATION_FAILED, "Authentication failed: the credentials changed")
            return
        if not renewed.may(acl.READ, acl.TOPIC, topic):
            yield _error(fmt, E.TOPIC_AUTHORIZATION_FAILED, f"{who.principal} may no longer READ topic {topic!r}")
            return
        who = renewed
        try:
            chunk = await fetch(actor, pos, max_bytes, wait, (max_records - sent) if max_records else 1 << 30, encoding)
            lost = 0
        except (*ACTOR_GONE, PartitionHibernatedError):
            lost += 1
            if lost > 3:
                yield _error(fmt, E.NOT_LEADER_OR_FOLLOWER, f"partition {topic}-{partition} is not available")
                return
            current().forget(topic)
            actor = await current().actor(topic, partition)
            continue
        except LoganError as e:  # e.g. retention removed the position: say so in the stream, then end it
            yield _error(fmt, getattr(e, "code", E.UNKNOWN_SERVER_ERROR), str(e))
            return
        pos = chunk.next_offset
        if not chunk.records:
            if fmt == "sse":
                yield ": idle\n\n"  # keeps proxies from closing a quiet stream
            continue
        idle_since = time.monotonic()
        sent += len(chunk.records)
        if fmt == "ndjson":
            yield "\n".join(chunk.records) + "\n"
        else:
            yield f'id: {pos}\ndata: {{"records":[{",".join(chunk.records)}],"next_offset":{pos}}}\n\n'
