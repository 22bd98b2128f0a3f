"""A partition actor's log end, readable by its node's gateway without a call.

Why: a consumer assigned a thousand partitions names them all in every Fetch (librdkafka
uses no fetch sessions). For an inactive partition the gateway answers from its closed
files (``logan_ray/gateway/closed_reads.py``); for an active one it asked the actor, and
an actor with nothing new still woke up for it: with 200 active, quiet partitions a
Fetch cost the gateway 68 ms instead of 4 (docs/benchmarks.md, issue 14), and every
actor a process wake-up per Fetch.

So each actor with a node-local channel keeps a 64-byte board next to its socket, a
shared memory map: its log end, log start and leader epoch, rewritten after every
change, and a flag saying whether a reader may answer from it at all (only a partition
with one replica, whose high watermark is its log end, with a healthy log). The gateway
answers a Fetch at exactly the log end from the board; anything else (data to read, a
fenced epoch, a follower) still goes to the actor. The board lives as long as the
channel it sits next to: a reader trusts it only while that channel is open, so a
killed actor's board is never read.

Consistency is a sequence lock: the writer makes the count odd, writes, makes it even;
a reader that sees an odd count or a different count after reading gives up (and asks
the actor). A reader may see a log end a moment old, as a Fetch that reached the actor
a moment earlier would have: it answers "nothing new yet" and the next Fetch sees more.
"""
from __future__ import annotations

import mmap
import os
import struct

from .shared_map import create

#: seq (u64), log end, log start, leader epoch (i64 each), usable (u64), transaction markers written (i64)
_FIELDS = struct.Struct("<QqqqQq")
SIZE = 64
SUFFIX = ".board"


def board_path(channel_path: str) -> str:
    """The board of the actor serving ``channel_path`` (``<digest>-<pid>.sock``)."""
    return (channel_path[:-len(".sock")] if channel_path.endswith(".sock") else channel_path) + SUFFIX


class BoardWriter:
    """The actor's side: one per channel; only the actor's event loop writes."""

    def __init__(self, path: str) -> None:
        self._map = create(path, SIZE)
        self.path = path
        self._seq = 0

    def publish(self, log_end: int, log_start: int, leader_epoch: int, usable: bool, markers: int = 0) -> None:
        """``markers``: COMMIT/ABORT markers this actor began to write; a change ends the transactions
        whose produce verification the gateway cached (``logan_ray/gateway/txn.py``)."""
        seq = self._seq + 1
        struct.pack_into("<Q", self._map, 0, seq)  # odd: being written
        _FIELDS.pack_into(self._map, 0, seq, log_end, log_start, leader_epoch, 1 if usable else 0, markers)
        self._seq = seq + 1
        struct.pack_into("<Q", self._map, 0, self._seq)

    def retire(self) -> None:
        """Unusable from now on, and gone: the actor closes its log or its channel."""
        if self._map.closed:
            return
        self.publish(-1, -1, -1, False)
        self._map.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


class BoardReader:
    """The gateway's side, opened with the channel it belongs to."""

    def __init__(self, mapped: mmap.mmap) -> None:
        self._map = mapped

    @classmethod
    def open(cls, path: str) -> "BoardReader | None":
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            return None  # an actor of an older logan-ray, or one that just closed: ask it instead
        try:
            if os.fstat(fd).st_size < SIZE:
                return None
            return cls(mmap.mmap(fd, SIZE, prot=mmap.PROT_READ))
        finally:
            os.close(fd)

    def read(self) -> tuple[int, int, int] | None:
        """(log end, log start, leader epoch) when a reader may answer from them, else None."""
        if self._map.closed:
            return None
        seq, log_end, log_start, epoch, usable, _ = _FIELDS.unpack_from(self._map, 0)
        if seq & 1 or not usable or struct.unpack_from("<Q", self._map, 0)[0] != seq:
            return None
        return log_end, log_start, epoch

    def markers(self) -> int | None:
        """The count of transaction markers the actor began to write (any usable flag), None mid-write."""
        if self._map.closed:
            return None
        seq, _, _, _, _, markers = _FIELDS.unpack_from(self._map, 0)
        if seq & 1 or seq == 0 or struct.unpack_from("<Q", self._map, 0)[0] != seq:
            return None
        return markers

    def close(self) -> None:
        self._map.close()
