"""Crash-safe replacement of log segments by the cleaner's output.

The cleaner writes a cleaned segment as ``<stem>.log.cleaned`` (plus its two
indexes), fsynced. Swapping it in is then committed by one durable file, the
swap manifest ``<stem>.swap``, naming the new stem and the stems it replaces:

1. write the manifest atomically (temp file, fsync, rename, fsync folder): the
   commit point. Before it, recovery deletes ``.cleaned`` files (roll back);
   after it, recovery finishes the swap (roll forward);
2. rename the ``.cleaned`` files to their final names;
3. later (``file.delete.delay.ms``, so readers of old slices finish), delete the
   replaced files, and only then the manifest.

Because the manifest outlives the old files, a crash at any point leaves a
folder where every segment is unambiguous: either a manifest says which files
are dead, or the old files are gone. Cleaned stems carry a generation
(``-c<n>``), so a new file never takes the name of a file it replaces.
"""
from __future__ import annotations

import json
import logging
import os
from typing import NamedTuple

from .atomic import atomic_write
from .errors import CorruptRecordError
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX

log = logging.getLogger(__name__)

MANIFEST_SUFFIX = ".swap"
PENDING_SUFFIX = ".cleaned"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX)


class SwapManifest(NamedTuple):
    path: str
    new: str  # stem of the cleaned segment
    old: tuple[str, ...]  # stems of the segments it replaces


def manifest_path(directory: str, new_stem: str) -> str:
    return os.path.join(directory, new_stem + MANIFEST_SUFFIX)


def pending_paths(directory: str, stem: str) -> list[str]:
    """The ``.cleaned`` files of a stem (log last, so it is renamed last)."""
    return [os.path.join(directory, stem + s + PENDING_SUFFIX) for s in (INDEX_SUFFIX, TIMEINDEX_SUFFIX, LOG_SUFFIX)]


def write_manifest(directory: str, new_stem: str, old_stems: list[str]) -> str:
    """Durably commit a swap; returns the manifest's path."""
    path = manifest_path(directory, new_stem)
    body = json.dumps({"version": 1, "new": new_stem, "old": list(old_stems)}, sort_keys=True)
    atomic_write(path, body.encode())
    return path


def read_manifest(path: str) -> SwapManifest:
    """Parse a manifest; an unreadable one stops recovery rather than guess which files are live."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
        new = doc["new"]
        old = tuple(doc["old"])
        if not isinstance(new, str) or not all(isinstance(o, str) for o in old):
            raise ValueError("stems must be strings")
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptRecordError(f"unreadable segment swap manifest: {e}", path=path, position=0) from None
    return SwapManifest(path, new, old)


def rename_pending(directory: str, stem: str) -> bool:
    """Give a committed stem's ``.cleaned`` files their final names; True if the log file is in place."""
    for pending in pending_paths(directory, stem):
        if os.path.exists(pending):
            os.replace(pending, pending[: -len(PENDING_SUFFIX)])
    return os.path.exists(os.path.join(directory, stem + LOG_SUFFIX))


def delete_stem(directory: str, stem: str) -> None:
    for suffix in SEGMENT_SUFFIXES:
        try:
            os.remove(os.path.join(directory, stem + suffix))
        except FileNotFoundError:
            pass


def discard_pending(directory: str, stem: str) -> None:
    """Remove an uncommitted cleaned segment (no manifest names it)."""
    if os.path.exists(manifest_path(directory, stem)):
        return
    for path in pending_paths(directory, stem):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def finish_swaps(directory: str) -> list[SwapManifest]:
    """Recovery: roll every committed swap forward, then forget it.

    Old files are deleted before the manifest, so repeating this after
    another crash is harmless.
    """
    from .recovery import fsync_dir

    done = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(MANIFEST_SUFFIX):
            continue
        manifest = read_manifest(os.path.join(directory, name))
        present = rename_pending(directory, manifest.new)
        for stem in manifest.old:
            if stem != manifest.new:
                delete_stem(directory, stem)
        fsync_dir(directory)
        os.remove(manifest.path)
        fsync_dir(directory)
        log.info("finished an interrupted segment swap in %s: %s replaces %s%s", directory, manifest.new,
                 ", ".join(manifest.old), "" if present else " (itself already replaced)")
        done.append(manifest)
    return done


__all__ = [
    "SwapManifest",
    "MANIFEST_SUFFIX",
    "PENDING_SUFFIX",
    "manifest_path",
    "pending_paths",
    "write_manifest",
    "read_manifest",
    "rename_pending",
    "delete_stem",
    "discard_pending",
    "finish_swaps",
]
