"""CRC-checking a segment's byte ranges before they are served, once per range.

Part of :class:`.segment.Segment` (a mixin: it uses the segment's ``walk``,
``verified``, ``corrupt`` and ``path``). Appended batches were validated
before the write and recovery checks what it scans, so only ranges neither
covered (data below a clean shutdown's recovery point) are read here.
"""
from __future__ import annotations

import logging

from .file_batches import SCAN_CHUNK
from .segment_refs import CorruptBatch

log = logging.getLogger(__name__)


class ServedRangeChecks:
    """``ensure_verified``: the CRC check of ranges about to be served."""

    __slots__ = ()

    def ensure_verified(self, start: int, end: int) -> tuple[int, CorruptBatch | None]:
        """CRC-check the not yet verified parts of ``[start, end)`` (batch aligned).

        Returns ``(good_end, problem)``: ``good_end == end`` when everything is
        sound, otherwise the position of the first bad batch and its report.
        """
        for gap_start, gap_end in self.verified.missing(start, end):
            known = self._known_corrupt(gap_start, gap_end)
            scan_end = known.position if known is not None else gap_end
            good = gap_start
            for ref, kind, reason in self.walk(gap_start, scan_end, check_crc=True, window=SCAN_CHUNK):
                if kind in ("crc", "framing", "hole"):
                    bad = CorruptBatch(self.path, ref.position, ref.base_offset, reason or kind)
                    self.corrupt.setdefault(ref.position, bad)
                    self.verified.add(gap_start, ref.position)
                    log.error("corrupt batch in %s at position %d: %s", self.path, ref.position, reason)
                    return ref.position, bad
                good = ref.position + ref.size
            self.verified.add(gap_start, good)
            if known is not None:
                return known.position, known
        return end, None

    def _known_corrupt(self, start: int, end: int) -> CorruptBatch | None:
        hits = [p for p in self.corrupt if start <= p < end]
        return self.corrupt[min(hits)] if hits else None


__all__ = ["ServedRangeChecks"]
