"""Ray's cluster token file, kept readable by its owner only.

With token authentication (logan-ray keeps it on) anyone holding the token and
reaching Ray's ports can run code in the cluster. Ray 2.60 writes a new token to
``~/.ray/auth_token`` with a plain ``open(..., "w")``, so under the usual umask 022 it is
readable by every user of the machine. Before Ray starts, the folder is made 0700 (a
token written into it is then out of other users' reach from its first byte); after,
the file itself is made 0600. A token named by ``RAY_AUTH_TOKEN_PATH`` is tightened too.
Only files and folders of this user are touched.
"""
from __future__ import annotations

import os

from .storage.file_modes import DIR_MODE, FILE_MODE


def token_path() -> str:
    """Where Ray reads the token: ``$RAY_AUTH_TOKEN_PATH``, else ``~/.ray/auth_token``."""
    return os.environ.get("RAY_AUTH_TOKEN_PATH") or os.path.join(os.path.expanduser("~"), ".ray", "auth_token")


def _tighten(path: str, mode: int) -> None:
    try:
        st = os.stat(path)
    except OSError:
        return
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(path, mode)


def protect_token() -> None:
    """Make the token's default folder (created if missing) 0700 and an existing token file 0600.

    Called before ``ray.init`` (which may write a new token) and again after it.
    """
    path = token_path()
    if "RAY_AUTH_TOKEN_PATH" not in os.environ:
        folder = os.path.dirname(path)
        try:
            os.makedirs(folder, mode=DIR_MODE, exist_ok=True)
        except OSError:
            return  # no writable home: Ray will say what it needs
        _tighten(folder, DIR_MODE)
    _tighten(path, FILE_MODE)
