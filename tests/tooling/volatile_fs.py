"""A FUSE file system that forgets every write not yet fsynced when it "loses power".

What LazyFS does for real databases, in a page of Python: file contents and
directory entries live in this process's memory (the "page cache"); only
``fsync``/``fdatasync`` of a file makes its bytes durable, and only ``fsync`` of
a directory makes the names in it durable (creations, renames, deletions).
Durable state is kept in a backing folder, keyed by inode number, plus a JSON
file of durable directory entries. A power loss is a SIGKILL of this process:
everything volatile is gone, and mounting again from the backing folder shows
exactly what a disk would hold after the crash in the strictest POSIX reading.
It can also fail every file fsync with EIO on demand (:meth:`VolatileMount.fail_fsync`).

Run: ``python volatile_fs.py BACKING MOUNTPOINT`` (foreground; needs /dev/fuse
and libfuse2, and root or fusermount). :class:`VolatileMount` drives it from tests.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import stat
import subprocess
import sys
import time

from fuse import FUSE, FuseOSError, Operations

ROOT = 1
FAIL_FSYNC = "FAIL_FSYNC"  # present in the backing folder: every file fsync fails with EIO
FSYNC_JOURNAL = "fsync.journal"  # one line per fsync, in the backing folder (not in the mounted tree)


class VolatileFS(Operations):
    """fusepy operations; single-threaded (``nothreads``), so no locking."""

    use_ns = True

    def __init__(self, backing: str) -> None:
        self.backing = backing
        os.makedirs(os.path.join(backing, "data"), exist_ok=True)
        self.meta_path = os.path.join(backing, "meta.json")
        try:
            with open(self.meta_path) as f:
                meta = json.load(f)
        except FileNotFoundError:
            meta = {"kinds": {str(ROOT): "d"}, "dirs": {str(ROOT): {}}}
        self.kind: dict[int, str] = {int(k): v for k, v in meta["kinds"].items()}
        self.durable_dirs: dict[int, dict[str, int]] = {int(k): dict(v) for k, v in meta["dirs"].items()}
        for ino, kind in self.kind.items():
            if kind == "d":
                self.durable_dirs.setdefault(ino, {})  # named durably, its own entries never synced: empty
        self.dirs: dict[int, dict[str, int]] = {k: dict(v) for k, v in self.durable_dirs.items()}
        self.data: dict[int, bytearray] = {}
        known = [int(n) for n in os.listdir(os.path.join(backing, "data")) if n.isdigit()]
        self.next_ino = max([ROOT, *self.kind, *known]) + 1  # never reuse a number with durable bytes
        self.now = time.time_ns()

    # -- helpers ---------------------------------------------------------------
    def _data_path(self, ino: int) -> str:
        return os.path.join(self.backing, "data", str(ino))

    def _content(self, ino: int) -> bytearray:
        buf = self.data.get(ino)
        if buf is None:
            try:
                with open(self._data_path(ino), "rb") as f:
                    buf = bytearray(f.read())
            except FileNotFoundError:
                buf = bytearray()  # created, never fsynced: empty after a crash
            self.data[ino] = buf
        return buf

    def _lookup(self, path: str) -> int:
        ino = ROOT
        for part in path.strip("/").split("/"):
            if not part:
                continue
            entries = self.dirs.get(ino)
            if entries is None:
                raise _err(errno.ENOTDIR)
            ino = entries.get(part)
            if ino is None:
                raise _err(errno.ENOENT)
        return ino

    def _parent(self, path: str) -> tuple[int, str]:
        head, name = os.path.split(path.rstrip("/"))
        parent = self._lookup(head or "/")
        if parent not in self.dirs:
            raise _err(errno.ENOTDIR)
        return parent, name

    def _new(self, kind: str) -> int:
        ino = self.next_ino
        self.next_ino += 1
        self.kind[ino] = kind
        if kind == "d":
            self.dirs[ino] = {}
        else:
            self.data[ino] = bytearray()
        return ino

    # -- metadata ----------------------------------------------------------------
    def getattr(self, path, fh=None):
        ino = self._lookup(path)
        if self.kind[ino] == "d":
            mode, size, nlink = stat.S_IFDIR | 0o755, 4096, 2
        else:
            mode, size, nlink = stat.S_IFREG | 0o644, len(self._content(ino)), 1
        return {"st_mode": mode, "st_size": size, "st_nlink": nlink, "st_ino": ino, "st_uid": os.getuid(),
                "st_gid": os.getgid(), "st_atime": self.now, "st_mtime": self.now, "st_ctime": self.now,
                "st_blocks": (size + 511) // 512, "st_blksize": 4096}

    def statfs(self, path):
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": 1 << 20, "f_bfree": 1 << 19,
                "f_bavail": 1 << 19, "f_files": 1 << 20, "f_ffree": 1 << 19, "f_namemax": 255}

    def chmod(self, path, mode):
        self._lookup(path)
        return 0

    def chown(self, path, uid, gid):
        self._lookup(path)
        return 0

    def utimens(self, path, times=None):
        self._lookup(path)
        return 0

    def access(self, path, amode):
        self._lookup(path)
        return 0

    # -- directories ---------------------------------------------------------------
    def readdir(self, path, fh):
        ino = self._lookup(path)
        return [".", "..", *self.dirs[ino]]

    def mkdir(self, path, mode):
        parent, name = self._parent(path)
        if name in self.dirs[parent]:
            raise _err(errno.EEXIST)
        self.dirs[parent][name] = self._new("d")
        return 0

    def rmdir(self, path):
        parent, name = self._parent(path)
        ino = self._lookup(path)
        if self.dirs.get(ino):
            raise _err(errno.ENOTEMPTY)
        del self.dirs[parent][name]
        return 0

    def fsyncdir(self, path, datasync, fh):
        """The names in this directory become durable (and the inodes they name are known)."""
        ino = self._lookup(path)
        self.durable_dirs[ino] = dict(self.dirs[ino])
        meta = {"kinds": {str(k): v for k, v in self.kind.items()},
                "dirs": {str(k): v for k, v in self.durable_dirs.items()}}
        tmp = self.meta_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(meta, f)
        os.replace(tmp, self.meta_path)
        return 0

    # -- files ---------------------------------------------------------------------
    def create(self, path, mode, fi=None):
        parent, name = self._parent(path)
        ino = self.dirs[parent].get(name)
        if ino is None:
            ino = self._new("f")
            self.dirs[parent][name] = ino
        return ino

    def open(self, path, flags):
        return self._lookup(path)

    def opendir(self, path):
        return self._lookup(path)

    def read(self, path, size, offset, fh):
        return bytes(self._content(fh)[offset:offset + size])

    def write(self, path, data, offset, fh):
        buf = self._content(fh)
        end = offset + len(data)
        if end > len(buf):
            buf.extend(bytes(end - len(buf)))
        buf[offset:end] = data
        return len(data)

    def truncate(self, path, length, fh=None):
        ino = fh if fh is not None else self._lookup(path)
        buf = self._content(ino)
        if length < len(buf):
            del buf[length:]
        else:
            buf.extend(bytes(length - len(buf)))
        return 0

    def fsync(self, path, datasync, fh):
        """This file's bytes become durable (not its name: that takes an fsync of its directory).

        While the backing folder holds a file named ``FAIL_FSYNC`` the disk is failing:
        the sync reports EIO and the unwritten bytes are gone, as when a kernel drops
        dirty pages after a writeback error.
        """
        ino = fh if fh else self._lookup(path)
        if os.path.exists(os.path.join(self.backing, FAIL_FSYNC)):
            self.data.pop(ino, None)  # next read shows what the disk holds
            raise _err(errno.EIO)
        tmp = self._data_path(ino) + ".tmp"
        with open(tmp, "wb") as f:
            f.write(self._content(ino))
        os.replace(tmp, self._data_path(ino))
        with open(os.path.join(self.backing, FSYNC_JOURNAL), "a") as f:  # for a failing test to show
            f.write(f"{time.time():.3f} fsync {path} {len(self._content(ino))} bytes\n")
        return 0

    def unlink(self, path):
        parent, name = self._parent(path)
        if name not in self.dirs[parent]:
            raise _err(errno.ENOENT)
        del self.dirs[parent][name]
        return 0

    def rename(self, old, new):
        op, oname = self._parent(old)
        np_, nname = self._parent(new)
        ino = self.dirs[op].get(oname)
        if ino is None:
            raise _err(errno.ENOENT)
        del self.dirs[op][oname]
        self.dirs[np_][nname] = ino
        return 0

    def flush(self, path, fh):
        return 0

    def release(self, path, fh):
        return 0

    def releasedir(self, path, fh):
        return 0


def _err(code: int) -> FuseOSError:
    return FuseOSError(code)


# ------------------------------------------------------------------ test driver
class VolatileMount:
    """Mounts a :class:`VolatileFS` in a child process; :meth:`power_loss` drops unsynced writes."""

    def __init__(self, backing: str, mountpoint: str) -> None:
        self.backing = backing
        self.mountpoint = mountpoint
        self.proc: subprocess.Popen | None = None

    def mount(self, timeout: float = 20.0) -> None:
        os.makedirs(self.backing, exist_ok=True)
        os.makedirs(self.mountpoint, exist_ok=True)
        self.proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), self.backing, self.mountpoint],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while not os.path.ismount(self.mountpoint):
            if self.proc.poll() is not None:
                raise RuntimeError(f"volatile_fs exited: {self.proc.stderr.read().decode(errors='replace')}")
            if time.monotonic() > deadline:
                self.unmount()
                raise TimeoutError("volatile_fs did not mount")
            time.sleep(0.02)

    def fail_fsync(self, failing: bool = True) -> None:
        """Make every file fsync fail with EIO (and lose its unwritten bytes) until called with False."""
        path = os.path.join(self.backing, FAIL_FSYNC)
        if failing:
            open(path, "w").close()
        elif os.path.exists(path):
            os.remove(path)

    def fsync_journal(self, last: int = 20) -> str:
        """The last ``last`` fsyncs this file system saw (time, path, size): what a failing test shows."""
        try:
            with open(os.path.join(self.backing, FSYNC_JOURNAL)) as f:
                return "".join(f.readlines()[-last:])
        except FileNotFoundError:
            return "(no fsync)"

    def power_loss(self) -> None:
        """Everything not fsynced is gone, at once: SIGKILL the file system, then detach it."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self._detach()
        self.proc = None

    def unmount(self) -> None:
        """Orderly teardown (the file system's volatile state is dropped too: nothing here writes back)."""
        self.power_loss()

    def _detach(self) -> None:
        # A dead FUSE daemon leaves a mount whose stat fails (ENOTCONN): detach it unconditionally.
        subprocess.run(["umount", "-l", self.mountpoint], check=False, stderr=subprocess.DEVNULL)
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()


def main() -> None:
    backing, mountpoint = sys.argv[1], sys.argv[2]
    # No kernel attribute or name caching: every lookup and size comes from this process.
    # ``nonempty``: a test may mount over a folder that holds files (hidden while mounted).
    FUSE(VolatileFS(backing), mountpoint, foreground=True, nothreads=True, attr_timeout=0, entry_timeout=0,
         negative_timeout=0, nonempty=True)


if __name__ == "__main__":
    main()
