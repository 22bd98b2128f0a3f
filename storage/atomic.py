"""Crash-safe small-file replacement: write temp, fsync, rename, fsync the folder.

Used for metadata and checkpoints, where a half-written file after a crash would
be worse than the previous version.
"""
from __future__ import annotations

import os

from .file_modes import FILE_MODE


def atomic_write(path: str, data: bytes, mode: int = FILE_MODE) -> None:
    """Replace ``path`` with ``data``; the file gets ``mode`` (0600 by default: data-dir files are the
    broker user's only) from its creation on, never readable by others, not even for an instant."""
    directory = os.path.dirname(os.path.abspath(path))
    tmp = f"{path}.tmp"
    try:
        os.unlink(tmp)  # a leftover from a crash may carry other permissions
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)  # the umask may narrow it further
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
