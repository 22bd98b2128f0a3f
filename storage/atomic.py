"""Crash-safe small-file replacement: write temp, fsync, rename, fsync the folder.

Used for metadata and checkpoints, where a half-written file after a crash would
be worse than the previous version.
"""
from __future__ import annotations

import os


def atomic_write(path: str, data: bytes) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
