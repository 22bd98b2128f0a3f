"""Scrubbing a live partition log: CRC-check every stored batch, report, never truncate.

Recovery checks only what follows the recovery point; a scrub checks the rest
on demand. Bad batches found are remembered on their segment so reads of them
raise CorruptRecordError naming the file and position, and the ranges found
good are remembered so reads do not CRC-check them again.
"""
from __future__ import annotations

import logging

from .log_state import LogState
from .segment import CorruptBatch
from .segment_recovery import scan as scan_segment

log = logging.getLogger(__name__)


def verify(st: LogState) -> list[CorruptBatch]:
    """The corrupt batches of every segment, one segment at a time so appends are not blocked for long."""
    found: list[CorruptBatch] = []
    with st.lock:
        segments = list(st.segments)
    for seg in segments:
        with st.lock:
            st.check_open()
            if seg not in st.segments:
                continue
            outcome = scan_segment(seg, check_crc=True, is_last=False, indexes=False)
            for c in outcome.corrupt:
                seg.corrupt.setdefault(c.position, c)
            for s, e in outcome.verified:
                seg.verified.add(s, e)
            for p, (rp, ro) in outcome.holes.items():
                if ro >= 0:
                    seg.holes.setdefault(p, (rp, ro))
            found.extend(outcome.corrupt)
    for c in found:
        log.error("verification: corrupt batch in %s at position %d (offset %d): %s", c.path, c.position, c.offset, c.reason)
    return found
