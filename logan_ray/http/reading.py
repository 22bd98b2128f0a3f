"""Reading a partition for HTTP: resolve a start position, fetch whole batches, render records as JSON.

Shared by the one-shot read (POST /subscribe) and the live stream. Fetches go
to the partition actor (long-poll there); records are decoded with the storage
codec and written out as JSON text directly, one string per record.
"""
from __future__ import annotations

from dataclasses import dataclass
from json.encoder import encode_basestring_ascii as _quote
from typing import Any

from logan_ray.errors import OffsetOutOfRangeError
from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.records import decode_records

from .encoding import quoted
from .errors import unwrap


async def call(ref) -> Any:
    """Await an actor call; a logan-ray error raised in the actor comes out as itself."""
    try:
        return await ref
    except Exception as e:  # Ray wraps actor exceptions
        raise unwrap(e) from None


async def start_offset(actor, offset: int | None, timestamp: int | None, position: str | None) -> int:
    if offset is not None:
        return offset
    if timestamp is not None:
        found = await call(actor.offset_for_timestamp.remote(timestamp))
        return found[0] if found is not None else (await call(actor.offsets.remote()))[1]
    start, end = await call(actor.offsets.remote())
    return end if position == "latest" else start


@dataclass
class Chunk:
    records: list[str]  # one JSON object per record
    next_offset: int
    high_watermark: int
    log_start_offset: int


async def fetch(actor, offset: int, max_bytes: int, wait_ms: int, max_records: int, encoding: str) -> Chunk:
    try:
        data, hw, log_start = await call(actor.fetch.remote(offset, max_bytes, wait_ms, 1))
    except OffsetOutOfRangeError as e:
        start, end = await call(actor.offsets.remote())
        raise OffsetOutOfRangeError(f"offset {offset} is outside the log [{start}, {end}): {e}") from None
    if not data:
        return Chunk([], offset, hw, log_start)
    records = [r for r in decode_records(data) if r.offset >= offset]
    if len(records) > max_records:
        records = records[:max_records]
        next_offset = records[-1].offset + 1
    else:
        # Past the last batch, not the last record: compaction gaps and control batches are skipped too.
        next_offset = max([offset] + [h.next_offset for _, h in iter_headers(data)])
    return Chunk(render(records, encoding), next_offset, hw, log_start)


def render(records: list, encoding: str) -> list[str]:
    """One JSON object per record. UTF-8 records without headers (the common case) take one
    f-string each; anything else, or bytes that are not UTF-8, goes through ``quoted``."""
    if encoding == "utf8" and not any(r.headers for r in records):
        q = _quote
        try:
            return [f'{{"offset":{r.offset},"timestamp":{r.timestamp},'
                    f'"key":{"null" if r.key is None else q(r.key.decode())},'
                    f'"value":{"null" if r.value is None else q(r.value.decode())},"headers":[]}}'
                    for r in records]
        except UnicodeDecodeError:
            pass  # the slow path names the offset
    out = []
    for r in records:
        if r.headers:
            hs = ",".join(f"[{_quote(k)},{quoted(v, encoding, r.offset)}]" for k, v in r.headers)
        else:
            hs = ""
        out.append(f'{{"offset":{r.offset},"timestamp":{r.timestamp},"key":{quoted(r.key, encoding, r.offset)},'
                   f'"value":{quoted(r.value, encoding, r.offset)},"headers":[{hs}]}}')
    return out
