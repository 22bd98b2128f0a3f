"""What a ``read_committed`` consumer keeps of fetched batches: Kafka's consumer-side filter.

A ``read_committed`` fetch (``PartitionActor.locate_committed``) returns the batches below
the last stable offset and the aborted transactions overlapping them, as (producer id,
first offset) from the ``.txnindex`` files. As Kafka's ``Fetcher`` does, a producer's
transactional batches are dropped from its aborted transaction's first offset until its
ABORT marker; control batches (markers) are never returned. Pure bytes in, bytes out:
the kept batches are whole, so the record decoders (``poll``, ``poll_arrow``) read them as
they are.
"""
from __future__ import annotations

import heapq
from typing import Iterable

from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.control_records import read_marker


def committed_batches(data: bytes | memoryview, aborted: Iterable[tuple[int, int]],
                      last_stable_offset: int) -> tuple[bytes, int]:
    """(the batches of ``data`` a read_committed reader returns, the offset after the last batch
    looked at). Batches at or past ``last_stable_offset`` are neither kept nor passed."""
    pending = [(first, pid) for pid, first in aborted]
    heapq.heapify(pending)
    aborting: set[int] = set()
    kept: list[bytes | memoryview] = []
    next_offset = -1
    view = memoryview(data)
    for pos, h in iter_headers(data):
        if h.base_offset >= last_stable_offset:
            break
        next_offset = h.next_offset
        if h.is_transactional:
            while pending and pending[0][0] <= h.last_offset:
                aborting.add(heapq.heappop(pending)[1])
        if h.is_control:
            marker = read_marker(data, pos, h)
            if marker is not None and not marker.committed:
                aborting.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in aborting:
            continue
        kept.append(view[pos:pos + h.size])
    return b"".join(kept), next_offset
