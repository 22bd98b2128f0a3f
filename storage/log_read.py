"""The read path of a partition log: which byte ranges of which segments answer a fetch.

Reads move whole batches as file ranges (for ``sendfile``); a batch is
CRC-checked by this process once (on append, recovery or its first read)
before it is served, and a damaged batch is never served.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import Sequence

from .errors import CorruptRecordError, OffsetOutOfRangeError
from .log_state import LogState
from .segment import Segment


def locate_ranges(
    st: LogState, offset: int, max_bytes: int, max_offset: int | None, min_one: bool
) -> list[tuple[Segment, int, int]]:
    """:func:`batch_ranges` of the live log for a fetch at ``offset``; the caller holds ``st.lock``.

    ``offset`` must lie between the log start and the log end (inclusive) and
    ``max_offset`` (a high watermark, exclusive) is capped at the log end.
    """
    st.check_open()
    if not isinstance(offset, int) or offset < st.log_start or offset > st.log_end:
        raise OffsetOutOfRangeError(
            f"offset {offset} is out of range for partition {st.name}: "
            f"valid offsets are {st.log_start} (log start) to {st.log_end} (log end)"
        )
    limit = st.log_end if max_offset is None else min(max_offset, st.log_end)
    return batch_ranges(st.segments, st.bases, offset, max_bytes, limit, min_one)


def batch_ranges(
    segments: Sequence[Segment], bases: Sequence[int], offset: int, max_bytes: int, limit: int, min_one: bool
) -> list[tuple[Segment, int, int]]:
    """``(segment, position, length)`` runs of whole, CRC-checked batches from the one holding ``offset``.

    Only batches wholly below ``limit`` (an exclusive offset bound) are
    included; at most ``max_bytes`` in all unless ``min_one`` lets the first
    batch through whatever its size. The first batch being unreadable raises
    CorruptRecordError; a later one just ends the answer there.
    """
    out: list[tuple[Segment, int, int]] = []
    if offset >= limit:
        return out
    total = 0
    i = max(0, bisect_right(bases, offset) - 1)
    first = True
    while i < len(segments):
        seg = segments[i]
        i += 1
        if offset >= seg.next_offset:
            continue
        run_start = run_end = -1
        stop = False
        try:
            walk = seg.batches_from(offset)
            for ref, kind, reason in walk:
                bad = seg.corrupt.get(ref.position)
                if kind is not None or bad is not None:
                    if first:
                        raise CorruptRecordError(
                            f"cannot serve offset {max(offset, ref.base_offset)}: corrupt batch "
                            f"({reason or bad.reason})", path=seg.path, position=ref.position,
                        )
                    stop = True
                    break
                if ref.last_offset >= limit:
                    stop = True
                    break
                if first:
                    if not min_one and ref.size > max_bytes:
                        stop = True
                        break
                elif total + ref.size > max_bytes:
                    stop = True
                    break
                if run_start < 0:
                    run_start = ref.position
                run_end = ref.position + ref.size
                total += ref.size
                first = False
        except CorruptRecordError:
            if not out and run_start < 0:
                raise
            stop = True
        if run_start >= 0:
            good_end, bad = seg.ensure_verified(run_start, run_end)
            if good_end < run_end:
                stop = True
                if good_end == run_start and not out:
                    raise CorruptRecordError(
                        f"cannot serve offset {max(offset, bad.offset)}: corrupt batch ({bad.reason})",
                        path=seg.path, position=bad.position,
                    )
            if good_end > run_start:
                out.append((seg, run_start, good_end - run_start))
        if stop or seg.next_offset >= limit:
            break
        offset = seg.next_offset
    return out
