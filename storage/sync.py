"""fsync helpers for the log: file data, folders, and a fault hook for tests.

Every fsync the partition log relies on for durability goes through here, so
one test hook (:func:`set_fault`) can make any of them fail the way a dying
disk does (``EIO``) without a special block device. Production code never
sets the hook.
"""
from __future__ import annotations

import errno
import os
import shutil
from typing import Callable

#: Called with (kind, path) before each sync; may raise OSError. Tests only.
_fault: Callable[[str, str], None] | None = None

#: errno values meaning the disk (or its quota) is full: the write can be retried once space returns.
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def set_fault(hook: Callable[[str, str], None] | None) -> None:
    """Install (or with None remove) a hook called before every fsync: ``hook(kind, path)``.

    ``kind`` is ``"data"`` (a segment's fdatasync), ``"file"`` (an index or
    checkpoint fsync) or ``"dir"`` (a folder fsync). Raising OSError from the
    hook makes that sync fail exactly as the kernel would report it.
    """
    global _fault
    _fault = hook


def _check(kind: str, path: str) -> None:
    if _fault is not None:
        _fault(kind, path)


def fdatasync(fd: int, path: str) -> None:
    """fdatasync a segment file: its bytes and size, not its timestamps (as Kafka's flush)."""
    _check("data", path)
    os.fdatasync(fd)


def fsync_fd(fd: int, path: str) -> None:
    """fsync an open file (a checkpoint being written)."""
    _check("file", path)
    os.fsync(fd)


def fsync_path(path: str) -> None:
    """fsync a file by name (indexes, checkpoints)."""
    _fsync_by_name("file", path)


def fsync_dir(directory: str) -> None:
    """fsync a folder so the names created, renamed or removed in it survive a power loss."""
    _fsync_by_name("dir", directory)


def _fsync_by_name(kind: str, path: str) -> None:
    _check(kind, path)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def is_no_space(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in NO_SPACE


def free_bytes(path: str) -> int:
    """Bytes available to this process on the file system holding ``path`` (-1 if unknown)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return -1


__all__ = ["set_fault", "fdatasync", "fsync_fd", "fsync_path", "fsync_dir", "is_no_space", "free_bytes", "NO_SPACE"]
