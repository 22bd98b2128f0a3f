"""Which byte ranges of a segment file this process has CRC-checked already.

Reads check each batch once (on append, recovery or the first read) and
then serve it without another CRC pass; this set of disjoint sorted ranges
is that memory.
"""
from __future__ import annotations

from bisect import bisect_right


class VerifiedRanges:
    """Disjoint sorted byte ranges: the parts of a file already CRC-checked."""

    __slots__ = ("_starts", "_ends")

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: list[int] = []

    def add(self, start: int, end: int) -> None:
        if end <= start:
            return
        i = bisect_right(self._ends, start - 1)  # first range ending at/after start
        j = i
        while j < len(self._starts) and self._starts[j] <= end:
            start = min(start, self._starts[j])
            end = max(end, self._ends[j])
            j += 1
        self._starts[i:j] = [start]
        self._ends[i:j] = [end]

    def missing(self, start: int, end: int) -> list[tuple[int, int]]:
        gaps = []
        i = bisect_right(self._ends, start)
        cur = start
        while cur < end and i < len(self._starts):
            s, e = self._starts[i], self._ends[i]
            if s >= end:
                break
            if s > cur:
                gaps.append((cur, s))
            cur = max(cur, e)
            i += 1
        if cur < end:
            gaps.append((cur, end))
        return gaps

    def truncate(self, end: int) -> None:
        while self._starts and self._starts[-1] >= end:
            self._starts.pop()
            self._ends.pop()
        if self._ends and self._ends[-1] > end:
            self._ends[-1] = end

    def covered(self) -> int:
        return sum(e - s for s, e in zip(self._starts, self._ends))
