"""POST /publish: one or many records into a topic through the Python ``Producer``.

Everything in the body is checked (shape, base64, partitions) before the first
record is sent, so a refused request writes nothing. Records without key,
headers, partition and timestamp go through ``send_batch`` (one batch build, no
per-record call into the producer); the others through ``send``, which still
packs them into whole batches per partition. The answer waits for the appends
(acks 1/all) or not at all (acks 0, offsets -1).
"""
from __future__ import annotations

import json

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from logan_ray.errors import UnknownPartitionError
from logan_ray.security import acl

from .access import access
from .backend import current
from .body import documented_body, parse, read_body
from .encoding import headers_to_bytes, to_bytes
from .models import PublishRequest, PublishResponse

router = APIRouter(tags=["records"])
TIMEOUT_S = 30.0


@router.post("/publish", summary="Publish records", responses={200: {"model": PublishResponse}},
             openapi_extra=documented_body(PublishRequest))
async def publish(request: Request) -> Response:
    backend = current()
    req = parse(PublishRequest, await read_body(request, backend.max_body_bytes))
    access(request).require(acl.WRITE, acl.TOPIC, req.topic)  # Produce: WRITE on the topic
    return Response(await run_in_threadpool(publish_records, backend, req), media_type="application/json")


def _values_only(records: list[dict], encoding: str) -> list[bytes] | None:
    """The values as bytes when every record is a bare UTF-8 string value, else None."""
    if encoding != "utf8":
        return None
    try:
        return [r["value"].encode() for r in records if len(r) == 1]  # type: ignore[union-attr]
    except (KeyError, AttributeError):
        return None


def publish_records(backend, req: PublishRequest) -> str:
    """Send the records and wait as acks asks; the answer as JSON text."""
    topic, records, enc = req.topic, req.records, req.encoding
    n = backend.partition_count(topic)
    producer = backend.producer(req.acks)
    values = _values_only(records, enc)
    if values is not None and len(values) == len(records):
        futures = producer.send_batch(topic, values)
    else:
        prepared = []
        for i, r in enumerate(records):
            p = r.get("partition")
            if p is not None and not 0 <= p < n:
                raise UnknownPartitionError(f"topic {topic!r} has no partition {p} (it has {n})")
            prepared.append((to_bytes(r.get("value"), enc, f"records[{i}].value"),
                             to_bytes(r.get("key"), enc, f"records[{i}].key"),
                             headers_to_bytes(r.get("headers"), enc), p, r.get("timestamp")))
        futures = [producer.send(topic, v, k, headers=h, partition=p, timestamp_ms=ts)
                   for v, k, h, p, ts in prepared]
    # Written as JSON text directly: a 10,000-record answer through a response model costs more than the append.
    out = []
    for f in futures:
        m = f.result(TIMEOUT_S)
        out.append(f'{{"partition":{m.partition},"offset":{m.offset},"timestamp":{m.timestamp}}}')
    return f'{{"topic":{json.dumps(topic)},"records":[{",".join(out)}]}}'

