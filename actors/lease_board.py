"""This node's broker lease, readable by every partition actor on the node without a call.

Why: the lease (``broker_lease.py``) keeps a fenced or stopped node from acknowledging
once the controller may elect other leaders, but the gateway held it alone, so only
writes through the gateway were fenced. A Python ``Producer``, the Ray Data sink and
the group coordinator append through Ray straight to the partition actor: on a node
whose raylet stopped (Ray calls the node dead and the controller elects elsewhere) that
actor could still acknowledge ``acks=1``, a second leader. So the gateway publishes the
lease here after every answered heartbeat, and a replicated partition's actor refuses to
acknowledge an append (checked before and after it, as the gateway does) once the
node's lease ran out.

A 32-byte shared map next to the channel sockets (the same private per-user
directory), one per Ray node: ``until`` on the monotonic clock (one clock for every
process of the machine) and the broker epoch, under a sequence lock as the offsets
board's. No board on the node (no gateway ever ran there, or it stopped on purpose):
the node has no broker session, the controller never fences it, and nothing is refused.
A gateway that died leaves its board behind with a lease that runs out, which is the
point.
"""
from __future__ import annotations

import mmap
import os
import struct
import time

from .channel import channel_dir
from .shared_map import create

#: seq (u64), lease until (f64, monotonic seconds), broker epoch (i64)
_FIELDS = struct.Struct("<Qdq")
SIZE = 32


def lease_path(node_id: str) -> str | None:
    base = channel_dir()
    return None if base is None else os.path.join(base, f"node-{node_id[:16]}.lease")


class LeaseWriter:
    """The gateway's side: publishes every lease its heartbeat is granted."""

    def __init__(self, node_id: str) -> None:
        self.path = lease_path(node_id)
        self._map: mmap.mmap | None = None
        self._seq = 0
        if self.path is None:
            return
        self._map = create(self.path, SIZE)  # zeros: a lease that ran out before it began

    def _write(self, until: float, broker_epoch: int) -> None:
        assert self._map is not None
        seq = self._seq + 1
        struct.pack_into("<Q", self._map, 0, seq)  # odd: being written
        _FIELDS.pack_into(self._map, 0, seq, until, broker_epoch)
        self._seq = seq + 1
        struct.pack_into("<Q", self._map, 0, self._seq)

    def publish(self, until: float, broker_epoch: int) -> None:
        if self._map is not None and not self._map.closed:
            self._write(until, broker_epoch)

    def retire(self) -> None:
        """The gateway stops on purpose (its session ends without fencing): no lease to require."""
        if self._map is None or self._map.closed:
            return
        self._map.close()
        try:
            if self.path is not None:
                os.unlink(self.path)
        except OSError:
            pass


class LeaseReader:
    """A partition actor's side: may this node acknowledge writes to a replicated partition now?"""

    def __init__(self, node_id: str) -> None:
        self._path = lease_path(node_id)
        self._map: mmap.mmap | None = None
        self._ino: int | None = None

    def _mapped(self) -> mmap.mmap | None:
        """The current board (a gateway restarted by Ray writes a new file at the same path)."""
        if self._path is None:
            return None
        try:
            st = os.stat(self._path)
        except OSError:
            if self._map is not None:
                self._map.close()
                self._map = None
            return None
        if self._map is None or st.st_ino != self._ino:
            if self._map is not None:
                self._map.close()
            try:
                fd = os.open(self._path, os.O_RDONLY)
            except OSError:
                self._map = None
                return None
            try:
                if os.fstat(fd).st_size < SIZE:
                    self._map = None
                    return None
                self._map, self._ino = mmap.mmap(fd, SIZE, prot=mmap.PROT_READ), st.st_ino
            finally:
                os.close(fd)
        return self._map

    def lapsed(self, now: float | None = None) -> bool:
        """True when this node has a broker lease and it ran out (or cannot be read consistently)."""
        mapped = self._mapped()
        if mapped is None:
            return False  # no gateway session on this node: never fenced by the controller
        for _ in range(3):
            seq, until, _epoch = _FIELDS.unpack_from(mapped, 0)
            if not seq & 1 and struct.unpack_from("<Q", mapped, 0)[0] == seq:
                return (time.monotonic() if now is None else now) >= until
        return True  # being rewritten three times over: refuse this once, the client retries

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
