"""What a segment hands out about its batches: a file slice to send, a batch's header facts, a corrupt batch."""
from __future__ import annotations

from typing import NamedTuple


class FileSlice(NamedTuple):
    """A batch-aligned byte range of a segment file, ready for ``os.sendfile``."""

    path: str
    position: int
    length: int


class CorruptBatch(NamedTuple):
    """A batch that failed validation in data that is kept (acknowledged)."""

    path: str
    position: int
    offset: int  # the offset the batch should start at
    reason: str


class BatchRef(NamedTuple):
    """Header facts of one batch in a segment, as a walk yields them.

    Offsets are where the batch belongs in the log (for a damaged batch: where
    it should start); ``fields`` are the batch's own header fields (name them
    with :func:`.batch_header.named`), None when unreadable.
    """

    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int
    attributes: int
    fields: tuple | None


__all__ = ["FileSlice", "CorruptBatch", "BatchRef"]
