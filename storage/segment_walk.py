"""Walking a segment's batch headers: the careful walk that names every problem, and offset lookup.

Part of :class:`.segment.Segment` (a mixin: it uses the segment's ``fd``,
``size``, ``holes``, ``compacted``, ``index``, ``path`` and ``next_offset``).
The walk reads through the one file walk, :class:`.file_batches.FileBatches`,
and adds what a segment knows: known holes, offset continuity (cleaned
segments may have gaps) and, on request, CRC32C with the reason of a failure.
"""
from __future__ import annotations

from typing import Iterator

from .batch_header import LOG_OVERHEAD, named
from .errors import CorruptRecordError
from .file_batches import HEADER_WINDOW, FileBatches
from .segment_refs import BatchRef


class HeaderWalk:
    """Header walks and offset lookup of a segment."""

    __slots__ = ()

    def walk(
        self,
        start: int,
        end: int | None = None,
        *,
        expected: int | None = None,
        check_crc: bool = False,
        window: int = HEADER_WINDOW,
        reader: FileBatches | None = None,
    ) -> Iterator[tuple[BatchRef, str | None, str | None]]:
        """Yield ``(batch, problem kind, reason)`` for consecutive batches from ``start``.

        Problem kinds: ``"framing"`` (length/magic/truncation: the walk stops
        because the next position is unknown), ``"crc"`` (content fails CRC or
        counts; framing is usable so the walk goes on), ``"offset"`` (the base
        offset, which lies outside the CRC, breaks the offset sequence) and
        ``"hole"`` (a known unreadable region, skipped). ``expected`` is the base
        offset the first batch must have; continuity is checked from there.
        ``reader`` reads the file (one is made with ``window`` if not given).
        """
        end = self.size if end is None else end
        reader = FileBatches(self.fd, end, window) if reader is None else reader
        holes = self.holes
        gaps_ok = self.compacted
        pos = start
        while pos < end:
            hole = holes.get(pos)
            if hole is not None:
                resume_pos, resume_offset = hole
                yield BatchRef(pos, expected if expected is not None else -1, resume_offset - 1, -1, resume_pos - pos, 0, None), "hole", "unreadable region"
                pos, expected = resume_pos, resume_offset
                continue
            for pos, fields in reader.walk(pos, end, holes):
                base, length, _epoch, _magic, _crc, attributes, lod, _bts, max_ts, _pid, _pep, _seq, _count = fields
                size = length + LOG_OVERHEAD
                kind = reason = None
                if check_crc:
                    h = named(fields)
                    if not reader.sound(pos, h):
                        if reader.batch(pos, size) is None:
                            ref = BatchRef(pos, expected if expected is not None else base, -1, -1, end - pos, attributes, None)
                            yield ref, "framing", f"file ends inside a batch of {size} bytes"
                            return
                        kind, reason = "crc", str(reader.damage(pos, h))
                if kind is None and expected is not None and (base < expected if gaps_ok else base != expected):
                    kind, reason = "offset", f"batch base offset {base} where {expected} was expected"
                if kind is None:
                    yield BatchRef(pos, base, base + lod, max_ts, size, attributes, fields), None, None
                    expected = base + lod + 1
                elif kind == "offset":
                    yield BatchRef(pos, expected, expected + lod, max_ts, size, attributes, fields), kind, reason
                    expected = expected + lod + 1  # lod is CRC-protected, the stored base is not
                else:
                    first = expected if expected is not None else base
                    yield BatchRef(pos, first, first + max(lod, 0), max_ts, size, attributes, fields), kind, reason
                    expected = None  # lod may be damaged too: accept the next batch's base
            pos = reader.stop_position
            if reader.problem is not None:
                bad = reader.bad
                base = bad.base_offset if bad is not None else -1
                ref = BatchRef(pos, expected if expected is not None else base, -1, -1, end - pos,
                               bad.attributes if bad is not None else 0, None)
                yield ref, "framing", str(reader.problem)
                return

    def find(self, offset: int) -> tuple[int, int]:
        """(position, base offset) of the batch holding ``offset``: index lookup, then a short header walk.

        Raises CorruptRecordError if the walk meets broken framing first.
        """
        start_offset, start_pos = self.index.lookup(offset)
        for ref, kind, reason in self.walk(start_pos, expected=start_offset):
            if kind in ("framing", "offset", "hole"):
                if ref.last_offset >= offset or kind == "framing":
                    raise CorruptRecordError(f"corrupt batch while looking up offset {offset}: {reason}", path=self.path, position=ref.position)
                continue
            if ref.last_offset >= offset:
                return ref.position, ref.base_offset
        return self.size, self.next_offset

    def batches_from(self, offset: int, end: int | None = None) -> Iterator[tuple[BatchRef, str | None, str | None]]:
        """Walk from the batch holding ``offset`` (header facts only)."""
        position, base = self.find(offset)
        return self.walk(position, end, expected=base)


__all__ = ["HeaderWalk"]
