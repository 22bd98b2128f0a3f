"""An exclusive ``flock`` on a data dir's ``.lock`` file, as Kafka locks each log dir.

Two brokers writing one data dir would assign the same offsets twice and
delete each other's segments; the lock makes the second one fail at start with
a clear message instead. The kernel drops the lock when its holder dies (also
on SIGKILL), so a crashed broker never leaves a stale lock behind.
"""
from __future__ import annotations

import fcntl
import os
import time

from .errors import LoganError
from .file_modes import FILE_MODE

LOCK_FILE = ".lock"


class DataDirLockedError(LoganError):
    """Another process (another broker) holds the data dir."""


class DataDirLock:
    """Holds the lock from ``acquire`` until ``release`` or process exit."""

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(os.path.abspath(data_dir), LOCK_FILE)
        self._fd: int | None = None

    def acquire(self, wait_s: float = 0.0) -> "DataDirLock":
        """Take the lock, retrying for ``wait_s`` (a predecessor being killed still holds it briefly)."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, FILE_MODE)
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                    os.close(fd)
                    raise DataDirLockedError(
                        f"data dir {os.path.dirname(self.path)} is in use by another logan-ray broker "
                        f"(held by pid {holder}); stop it or choose another --data-dir") from None
                time.sleep(0.1)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the last descriptor drops the flock
            self._fd = None
