"""Modes of what the broker writes: folders 0700, files 0600, readable by the broker's user only.

A data dir holds every record, the SCRAM credentials and the ACLs; nothing in it is
for other users of the machine. The broker also sets its umask to 0077 at start
(logan_ray.broker), which the Ray processes it starts inherit, but a node whose Ray was
started by hand (``ray start``) has the umask of that shell: so every place that
creates a file or folder asks for the private mode itself.
"""
from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_opener(path: str, flags: int) -> int:
    """An ``opener`` for :func:`open` that creates the file 0600 (an existing file keeps its mode)."""
    return os.open(path, flags, FILE_MODE)


def make_private_dirs(path: str) -> None:
    """``os.makedirs`` whose new last folder is 0700 (an existing one is left as it is)."""
    os.makedirs(path, mode=DIR_MODE, exist_ok=True)


def close_dir(path: str) -> None:
    """Create ``path`` if needed and make it 0700, tightening a folder an older version left 0755.

    Cheap (one chmod), so done for the data dir at every start: with the folder closed,
    files inside that older versions made 0644 are out of other users' reach too.
    """
    make_private_dirs(path)
    st = os.stat(path)
    if st.st_mode & 0o077 and st.st_uid == os.getuid():
        try:
            os.chmod(path, DIR_MODE)
        except OSError as e:  # a file system without modes (some network mounts): serve anyway, and say so
            log.warning("cannot make %s private (mode 0700): %s", path, e)
