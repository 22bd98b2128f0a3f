"""A partition folder's identity and its removal, as Kafka's log manager does them.

Identity: ``partition.metadata`` in the folder names the topic id it belongs to
(Kafka's file and format). A topic deleted and created again under the same
name gets a new id, so a folder a crash left behind is recognised as the old
topic's and never served as the new one's.

Removal: a folder is first renamed out of the way to ``<topic>-<p>.<uniq>-delete``
(one atomic rename, made durable by fsyncing the parent), then removed. A crash
between the two leaves only a ``-delete`` folder, which nothing opens and
``sweep_deleted`` removes; the folder's own name is free at once.

Strays: a folder that names a topic id the cluster does not give that name now is
never removed on the strength of metadata alone. It may be a cut-short deletion's
remains, but it may as well be a live topic's data after the cluster's metadata was
lost or rolled back (issue 33): so it is renamed aside to ``<topic>-<p>.<uniq>-stray``
(as Kafka renames stray logs) and kept for an operator, who removes it or moves it
back. Nothing opens or sweeps ``-stray`` folders.
"""
from __future__ import annotations

import base64
import glob
import os
import shutil
import uuid

from .atomic import atomic_write
from .file_modes import make_private_dirs
from .sync import fsync_dir

METADATA_FILE = "partition.metadata"
DELETE_SUFFIX = "-delete"
STRAY_SUFFIX = "-stray"


def _kafka_uuid(topic_id: str) -> str:
    """Kafka's text form of a Uuid: URL-safe base64 of its 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(uuid.UUID(topic_id).bytes).rstrip(b"=").decode()


def _parse_uuid(text: str) -> str | None:
    try:
        return str(uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))))
    except (ValueError, TypeError):
        return None


def read_topic_id(directory: str) -> str | None:
    """The topic id recorded in ``directory`` (None: no or unreadable file)."""
    try:
        with open(os.path.join(directory, METADATA_FILE)) as f:
            fields = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
    except (FileNotFoundError, NotADirectoryError, ValueError):
        return None
    text = fields.get("topic_id", "").strip()
    return _parse_uuid(text) if text else None


def write_topic_id(directory: str, topic_id: str) -> None:
    """Record ``topic_id`` as the folder's owner, durably (creates the folder if needed)."""
    make_private_dirs(directory)
    atomic_write(os.path.join(directory, METADATA_FILE),
                 f"version: 0\ntopic_id: {_kafka_uuid(topic_id)}\n".encode())


def _rename_aside(directory: str, suffix: str) -> str | None:
    """Rename ``directory`` to ``<name>.<uniq><suffix>`` durably; returns the new path (None: no folder)."""
    directory = os.path.abspath(directory)
    aside = f"{directory}.{uuid.uuid4().hex}{suffix}"
    try:
        os.rename(directory, aside)
    except FileNotFoundError:
        return None
    fsync_dir(os.path.dirname(directory))
    return aside


def mark_for_deletion(directory: str) -> str | None:
    """Rename ``directory`` to ``<name>.<uniq>-delete`` durably; returns the new path (None: no folder)."""
    return _rename_aside(directory, DELETE_SUFFIX)


def set_aside_as_stray(directory: str) -> str | None:
    """Rename ``directory`` to ``<name>.<uniq>-stray`` durably and keep it; returns the new path."""
    return _rename_aside(directory, STRAY_SUFFIX)


def remove_marked(doomed: str | None) -> None:
    """Remove a folder renamed by ``mark_for_deletion`` (and make its removal durable)."""
    if doomed is None:
        return
    shutil.rmtree(doomed, ignore_errors=True)
    fsync_dir(os.path.dirname(doomed))


def delete_partition_dir(directory: str, topic_id: str | None = None) -> bool:
    """Rename then remove a partition folder; with ``topic_id``, only if the folder is that topic's
    (or names none). Returns True when a folder was removed."""
    if topic_id is not None and read_topic_id(directory) not in (None, topic_id):
        return False
    doomed = mark_for_deletion(directory)
    remove_marked(doomed)
    return doomed is not None


def sweep_deleted(data_dir: str) -> int:
    """Remove the ``-delete`` folders a crash left in ``data_dir``; returns how many."""
    found = [p for p in glob.glob(os.path.join(glob.escape(data_dir), f"*{DELETE_SUFFIX}")) if os.path.isdir(p)]
    for path in found:
        shutil.rmtree(path, ignore_errors=True)
    if found:
        fsync_dir(data_dir)
    return len(found)


def claim(directory: str, topic_id: str) -> tuple[str, str] | None:
    """Make ``directory`` the folder of topic ``topic_id`` before its log opens.

    A folder that names another topic id is never served as this topic's: it is
    set aside as a stray (see the module docstring), not removed, because the
    metadata that calls it foreign may be the thing that is wrong. A folder with
    no id (written before ids were recorded) is adopted. Returns ``(the other
    topic id, where its folder now is)`` when one was set aside.
    """
    found = read_topic_id(directory)
    aside = None
    if found is not None and found != topic_id:
        aside = set_aside_as_stray(directory)
    if found != topic_id:
        write_topic_id(directory, topic_id)
    return (found, aside) if found is not None and aside is not None else None
