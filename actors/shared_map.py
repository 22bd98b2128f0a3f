"""A small shared memory map in a file, for the node-local boards (offsets_board.py, lease_board.py)."""
from __future__ import annotations

import mmap
import os


def create(path: str, size: int) -> mmap.mmap:
    """``size`` zero bytes mapped read-write at ``path`` (0600), swapped in whole: a reader maps a
    complete board or none, never a file being sized."""
    tmp = f"{path}.tmp"  # (a killed writer's is swept with its socket: channel.sweep_stale_sockets)
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.ftruncate(fd, size)
        mapped = mmap.mmap(fd, size)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return mapped
