"""atomic_write: a replaced file never exposes a secret with wider permissions than asked."""
from __future__ import annotations

import os
import stat

from logan_ray.storage.atomic import atomic_write


def test_a_secret_file_is_created_owner_only_whatever_the_umask(tmp_path):
    path = str(tmp_path / "meta.json")
    old = os.umask(0)
    try:
        atomic_write(path, b"{}")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # the default: data-dir files are private
        atomic_write(path, b"{}", mode=0o640)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o640  # an explicit mode is taken as given
        open(path + ".tmp", "w").close()  # a leftover temp file from a crash, world-readable
        os.chmod(path + ".tmp", 0o666)
        atomic_write(path, b'{"users": 1}', mode=0o600)
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert open(path, "rb").read() == b'{"users": 1}'
    finally:
        os.umask(old)
