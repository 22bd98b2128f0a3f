"""Crash-safe replacement of log segments by the cleaner's output.

The cleaner writes a cleaned segment as ``<stem>.log.cleaned`` (plus its two
indexes), fsynced; the swap adds its ``.txnindex.cleaned`` (the aborted
transactions of the segments it replaces) before committing. Swapping a pass's segments in is then committed by one
durable file, the swap manifest ``<first new stem>.swap``, naming each new stem
and the stems it replaces:

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
from .segment_files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX
from .sync import fsync_dir

log = logging.getLogger(__name__)

MANIFEST_SUFFIX = ".swap"
PENDING_SUFFIX = ".cleaned"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX)


class SwapManifest(NamedTuple):
    path: str
    swaps: tuple[tuple[str, tuple[str, ...]], ...]  # (new stem, stems it replaces)


def manifest_path(directory: str, new_stem: str) -> str:
    return os.path.join(directory, new_stem + MANIFEST_SUFFIX)


def pending_paths(directory: str, stem: str) -> list[str]:
    """The ``.cleaned`` files of a stem (log last, so it is renamed last)."""
    return [os.path.join(directory, stem + s + PENDING_SUFFIX)
            for s in (INDEX_SUFFIX, TIMEINDEX_SUFFIX, TXNINDEX_SUFFIX, LOG_SUFFIX)]


def write_manifest(directory: str, swaps: list[tuple[str, list[str]]]) -> str:
    """Durably commit swaps ``(new stem, replaced stems)``: one fsynced file for a whole pass."""
    path = manifest_path(directory, swaps[0][0])
    body = json.dumps({"version": 1, "swaps": [{"new": new, "old": list(old)} for new, old in swaps]}, sort_keys=True)
    atomic_write(path, body.encode())
    return path


def read_manifest(path: str) -> SwapManifest:
    """Parse a manifest; an unreadable one stops recovery rather than guess which files are live."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
        swaps = tuple((s["new"], tuple(s["old"])) for s in doc["swaps"])
        if not swaps or not all(isinstance(n, str) and all(isinstance(o, str) for o in old) for n, old in swaps):
            raise ValueError("a manifest names new and old stems as strings")
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptRecordError(f"unreadable segment swap manifest: {e}", path=path, position=0) from None
    return SwapManifest(path, swaps)


def committed_stems(directory: str) -> set[str]:
    """New stems of every swap committed in ``directory`` (manifests not yet removed)."""
    stems: set[str] = set()
    for name in os.listdir(directory):
        if name.endswith(MANIFEST_SUFFIX):
            try:
                stems.update(new for new, _ in read_manifest(os.path.join(directory, name)).swaps)
            except (CorruptRecordError, FileNotFoundError):
                continue
    return stems


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
    """Remove an uncommitted cleaned segment.

    Only called by whoever wrote it before offering it for a swap, or for a
    stem no swap of the open log can have committed (a committed swap renames
    its files at once under the log's lock; recovery finishes any other).
    """
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
    done = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(MANIFEST_SUFFIX):
            continue
        manifest = read_manifest(os.path.join(directory, name))
        for new, old in manifest.swaps:
            present = rename_pending(directory, new)
            for stem in old:
                if stem != new:
                    delete_stem(directory, stem)
            log.info("finished an interrupted segment swap in %s: %s replaces %s%s", directory, new,
                     ", ".join(old), "" if present else " (itself already replaced)")
        fsync_dir(directory)
        os.remove(manifest.path)
        fsync_dir(directory)
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
    "committed_stems",
    "delete_stem",
    "discard_pending",
    "finish_swaps",
]
