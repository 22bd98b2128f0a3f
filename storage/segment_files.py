"""Names of a segment's files: the base offset, 20 digits, plus a generation for cleaned segments.

Files are named by the 20-digit zero-padded base offset, as in Kafka:
``00000000000000000000.log``, ``.index``, ``.timeindex``, ``.txnindex``. A segment written by
the log cleaner adds a generation, ``00000000000000000000-c3.log``: unlike
Kafka, a cleaned segment never reuses the name of a file it replaces, so a
reader that was handed ``(path, position, length)`` before a swap still reads
the old bytes at that path until the delayed deletion, never the new layout.
"""
from __future__ import annotations

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"  # aborted transactions (see .txn_index)

GENERATION_MARK = "-c"


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


def segment_stem(base_offset: int, generation: int = 0) -> str:
    """File name without suffix: the base offset, plus ``-c<generation>`` for cleaned segments."""
    name = segment_name(base_offset)
    return name if generation == 0 else f"{name}{GENERATION_MARK}{generation}"


def parse_segment_name(filename: str, suffix: str = LOG_SUFFIX) -> int | None:
    """Base offset encoded in a (never cleaned) segment file name, or None if it is not one."""
    parsed = parse_segment_file(filename, suffix)
    return parsed[0] if parsed is not None and parsed[1] == 0 else None


def parse_segment_file(filename: str, suffix: str = LOG_SUFFIX) -> tuple[int, int] | None:
    """``(base offset, generation)`` of a segment file name, or None if it is not one."""
    if not filename.endswith(suffix):
        return None
    stem = filename[: -len(suffix)]
    base, mark, generation = stem.partition(GENERATION_MARK)
    if len(base) != 20 or not (base.isascii() and base.isdigit()):
        return None
    if not mark:
        return int(base), 0
    if not (generation.isascii() and generation.isdigit()) or generation.startswith("0"):
        return None
    return int(base), int(generation)
