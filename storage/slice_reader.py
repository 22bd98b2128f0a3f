"""Reading located file slices in the reader's own process (``pread``), as ``sendfile`` does in the gateway.

A partition's ``locate`` answers *where* batches are: batch-aligned ``(path,
position, length)`` ranges of its segment files, every byte already CRC-checked by
the partition's process. A reader on the same node (Ray Data's read tasks, a
Python consumer) then reads those ranges itself, so record bytes never cross a
socket or the Ray object store.

Between ``locate`` and the read a range can go away: retention or compaction
deletes a segment (cleaned segments always get new names, so a path never holds
other batches), or a log is truncated. Either shows as a missing file or a short
read, and :func:`read_slices` answers None (as for a file this process cannot
open): the caller then asks the partition
for the bytes instead. Files are opened for each read, never kept: a descriptor
kept across reads could outlive its file (deleted, then re-created under the same
name by a truncated follower) and read stale bytes; an ``open`` costs microseconds
against milliseconds for the megabytes read. ``pread`` rather than ``mmap``: a
file truncated under a mapping would kill the reader with SIGBUS.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def read_slices(slices: Sequence[Sequence], alloc: Callable[[int], Any] | None = None) -> bytes | memoryview | None:
    """The ``(path, position, length)`` slices' bytes, concatenated; None if a file is gone or shorter.

    ``alloc(n)``: a writable buffer to read into (e.g. from a pool that reuses pages,
    ``pyarrow.allocate_buffer``); the answer is then a memoryview of it.
    """
    if alloc is not None:
        return _read_into(slices, alloc)
    parts = []
    fds: dict[str, int] = {}
    try:
        for path, position, length in slices:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(path, _FLAGS)
            data = os.pread(fd, length, position)
            if len(data) != length:
                return None  # truncated since locate
            parts.append(data)
    except OSError:
        # deleted by retention or compaction since locate, or not readable here (another
        # mount namespace, permissions): the partition's own read reports real disk errors
        return None
    finally:
        for fd in fds.values():
            os.close(fd)
    if not parts:
        return b""
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _read_into(slices: Sequence[Sequence], alloc: Callable[[int], Any]) -> memoryview | None:
    total = sum(s[2] for s in slices)
    out = memoryview(alloc(total)).cast("B")
    fds: dict[str, int] = {}
    at = 0
    try:
        for path, position, length in slices:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(path, _FLAGS)
            if os.preadv(fd, [out[at:at + length]], position) != length:
                return None  # truncated since locate
            at += length
    except OSError:
        return None
    finally:
        for fd in fds.values():
            os.close(fd)
    return out
