"""Deleting a log's dropped segment files later (``file.delete.delay.ms``), outside its lock.

Segments dropped by retention, DeleteRecords or a cleaner swap leave the log
at once but their files stay a while, so an in-flight ``sendfile`` of a slice
handed out earlier still finds them (a restart removes them anyway). The
unlinking itself happens after the log's lock is released: deleting a large
file takes milliseconds that appends and reads need not wait for.
"""
from __future__ import annotations

from .log_state import LogState
from .sync import fsync_dir


def schedule(st: LogState, items: list, now: int) -> None:
    """Queue dropped segments (or a cleaner swap's replaced ones) for deletion after the delay."""
    due = now + st.config.file_delete_delay_ms
    st.pending_deletes.extend((due, item) for item in items)


def take_due(st: LogState, now: int | None) -> list:
    """Pending deletions that are due (all with None), removed from the queue; caller holds ``st.lock``."""
    keep, due = [], []
    for when, item in st.pending_deletes:
        (due if now is None or when <= now else keep).append((when, item))
    st.pending_deletes = keep
    return [item for _, item in due]


def delete_files(st: LogState, due: list) -> None:
    """Delete segments whose delay ran out, then fsync the folder so they stay gone."""
    if not due:
        return
    for item in due:
        item.delete_files()
    try:
        fsync_dir(st.directory)
    except FileNotFoundError:
        pass  # the partition was deleted meanwhile
    except OSError as e:
        if not st.closed:
            raise st.go_offline("fsync of the folder after deleting segments", e) from e


def purge(st: LogState, now: int | None) -> None:
    """Delete what is due now (everything with None, as ``close()`` does)."""
    delete_files(st, take_due(st, now))
