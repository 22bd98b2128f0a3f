"""One client connection: frames in, responses out in request order, file ranges by sendfile.

Why raw non-blocking sockets instead of asyncio streams: a Fetch response is a
few header bytes followed by ranges of segment files, and those ranges must go
out with ``os.sendfile`` on the socket itself. asyncio transports buffer writes
and pause reading around ``loop.sendfile``; owning the socket keeps reading
(and so request pipelining) going while a large response drains.

Requests are handled concurrently, but their responses are written strictly in
arrival order, as Kafka clients require. A malformed or oversized frame closes
only this connection.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import struct
from collections import deque
from typing import Any, Awaitable, Callable

log = logging.getLogger("logan_ray.gateway")

_I32 = struct.Struct(">i")
RECV_SIZE = 256 * 1024
#: Frames at least this large are read straight into their own buffer (no copy).
DIRECT_FRAME = 64 * 1024
#: Stop reading a connection while this many responses are still owed...
MAX_PENDING = 256
#: ... or while the frames of those requests hold this many bytes.
MAX_PENDING_BYTES = 128 << 20
_AGAIN = (BlockingIOError, InterruptedError)


class FrameError(Exception):
    """The peer sent something that is not a Kafka frame; the connection is dropped."""


class FileRanges:
    """Opaque record value of a Fetch response: byte ranges of open segment files.

    The codec counts it with ``len()`` and passes it through as its own chunk; the
    connection sends it with ``os.sendfile``. The descriptors are opened by the
    handler before the response is encoded, so a segment deleted by retention in
    between is still readable, and closed once the bytes are sent.
    """

    __slots__ = ("ranges", "fds", "size")

    def __init__(self, ranges: list[tuple[int, int, int]], fds: list[int]) -> None:
        self.ranges = ranges  # (fd, position, length)
        self.fds = fds
        self.size = sum(r[2] for r in ranges)

    @classmethod
    def open(cls, slices: list[tuple[str, int, int]]) -> "FileRanges":
        fds: dict[str, int] = {}
        ranges = []
        try:
            for path, position, length in slices:
                fd = fds.get(path)
                if fd is None:
                    fd = fds[path] = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                ranges.append((fd, position, length))
        except OSError:
            for fd in fds.values():
                os.close(fd)
            raise
        return cls(ranges, list(fds.values()))

    def __len__(self) -> int:
        return self.size

    def close(self) -> None:
        fds, self.fds = self.fds, []
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def __del__(self) -> None:  # a response never written (connection gone) still frees its files
        self.close()


def release(chunks: list[Any]) -> None:
    for c in chunks:
        if isinstance(c, FileRanges):
            c.close()


Dispatch = Callable[["Connection", memoryview], "Awaitable[list[Any]] | None"]


class Connection:
    """Reads frames, hands them to ``dispatch``, writes the answers in order."""

    def __init__(self, sock: socket.socket, peer: Any, dispatch: Dispatch, max_frame: int,
                 on_close: Callable[["Connection"], None] | None = None) -> None:
        self.sock = sock
        self.peer = peer
        self.fd = sock.fileno()
        self.max_frame = max_frame
        self.loop = asyncio.get_running_loop()
        self._dispatch = dispatch
        self._on_close = on_close
        self._buf = bytearray(RECV_SIZE)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._frame: bytearray | None = None  # large frame being filled in place
        self._frame_filled = 0
        self._pending: deque[tuple[Any, int]] = deque()  # (awaitable of chunks, frame bytes)
        self._pending_bytes = 0
        self._reading = False
        self._wake: asyncio.Future | None = None
        self.closed = False
        self.requests = 0
        # per-connection state for handlers (e.g. ordering of produce appends)
        self.state: dict[str, Any] = {}
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._writer = self.loop.create_task(self._write_loop())
        self._resume_reading()

    # ------------------------------------------------------------------ reading
    def _resume_reading(self) -> None:
        if not self._reading and not self.closed:
            self.loop.add_reader(self.fd, self._on_readable)
            self._reading = True

    def _pause_reading(self) -> None:
        if self._reading:
            self.loop.remove_reader(self.fd)
            self._reading = False

    def _on_readable(self) -> None:
        try:
            if self._frame is not None:
                n = self.sock.recv_into(memoryview(self._frame)[self._frame_filled:])
                if n == 0:
                    return self.close("peer closed the connection mid-frame")
                self._frame_filled += n
                if self._frame_filled == len(self._frame):
                    frame, self._frame = self._frame, None
                    self._submit(memoryview(frame))
                return
            if self._end == len(self._buf):
                self._compact()
            n = self.sock.recv_into(self._view[self._end:])
            if n == 0:
                if self._end > self._start:
                    return self.close("peer closed the connection mid-frame")
                return self.close(None)
            self._end += n
            self._parse()
        except _AGAIN:
            return
        except (ConnectionError, OSError) as e:
            self.close(f"read failed: {e}")
        except FrameError as e:
            self.close(str(e), warn=True)

    def _compact(self) -> None:
        live = self._end - self._start
        self._buf[:live] = self._buf[self._start:self._end]
        self._start, self._end = 0, live

    def _parse(self) -> None:
        buf, view = self._buf, self._view
        while not self.closed and self._end - self._start >= 4:
            (size,) = _I32.unpack_from(buf, self._start)
            if size < 0 or size > self.max_frame:
                raise FrameError(f"frame size {size} is outside 0..{self.max_frame} (socket.request.max.bytes)")
            have = self._end - self._start - 4
            if have >= size:
                begin = self._start + 4
                frame = bytes(view[begin:begin + size])
                self._start = begin + size
                self._submit(memoryview(frame))
                continue
            if size >= DIRECT_FRAME or size + 4 > len(buf):
                # read the rest of this frame straight into its own buffer
                frame = bytearray(size)
                frame[:have] = view[self._start + 4:self._end]
                self._start = self._end = 0
                if have == size:  # pragma: no cover - handled above
                    self._submit(memoryview(frame))
                else:
                    self._frame, self._frame_filled = frame, have
                return
            break
        if self._start == self._end:
            self._start = self._end = 0

    def _submit(self, frame: memoryview) -> None:
        self.requests += 1
        result = self._dispatch(self, frame)
        if result is None:  # no response owed (Produce with acks=0)
            return
        self._pending.append((result, len(frame)))
        self._pending_bytes += len(frame)
        if len(self._pending) >= MAX_PENDING or self._pending_bytes >= MAX_PENDING_BYTES:
            self._pause_reading()
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    # ------------------------------------------------------------------ writing
    async def _write_loop(self) -> None:
        try:
            while not self.closed:
                if not self._pending:
                    self._wake = self.loop.create_future()
                    await self._wake
                    self._wake = None
                    continue
                result, nbytes = self._pending[0]
                chunks = await result if not isinstance(result, list) else result
                self._pending.popleft()
                self._pending_bytes -= nbytes
                if not self._reading and len(self._pending) < MAX_PENDING // 2 \
                        and self._pending_bytes < MAX_PENDING_BYTES // 2:
                    self._resume_reading()
                if chunks is None:
                    continue
                try:
                    await self._send(chunks)
                finally:
                    release(chunks)
        except asyncio.CancelledError:
            raise
        except (ConnectionError, OSError) as e:
            self.close(f"write failed: {e}")
        except Exception as e:  # a handler bug: drop this connection, keep the gateway
            log.exception("gateway: request from %s failed", self.peer)
            self.close(f"internal error: {e!r}")

    async def _send(self, chunks: list[Any]) -> None:
        sock = self.sock
        i = 0
        n = len(chunks)
        while i < n:
            c = chunks[i]
            if isinstance(c, FileRanges):
                for fd, position, length in c.ranges:
                    await self._sendfile(fd, position, length)
                i += 1
                continue
            j = i
            while j < n and not isinstance(chunks[j], FileRanges):
                j += 1
            await self._sendall(chunks[i:j])
            i = j

    async def _sendall(self, parts: list[Any]) -> None:
        sock = self.sock
        views = [memoryview(p) for p in parts if len(p)]
        while views:
            try:
                sent = sock.sendmsg(views[:512]) if len(views) > 1 else sock.send(views[0])
            except _AGAIN:
                await self._writable()
                continue
            while sent:
                if sent >= len(views[0]):
                    sent -= len(views[0])
                    views.pop(0)
                else:
                    views[0] = views[0][sent:]
                    sent = 0

    async def _sendfile(self, fd: int, position: int, length: int) -> None:
        while length > 0:
            try:
                sent = os.sendfile(self.fd, fd, position, length)
            except _AGAIN:
                await self._writable()
                continue
            if sent == 0:
                # The file is shorter than the partition promised: the frame cannot be completed.
                raise ConnectionError(errno.EIO, "segment file ended before the promised bytes were sent")
            position += sent
            length -= sent

    async def _writable(self) -> None:
        if self.closed:
            raise ConnectionError(errno.EPIPE, "connection closed")
        fut = self.loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        self.loop.add_writer(self.fd, ready)
        try:
            await fut
        finally:
            self.loop.remove_writer(self.fd)

    # ------------------------------------------------------------------ closing
    def close(self, reason: str | None = None, warn: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        if reason:
            (log.warning if warn else log.info)("gateway: closing connection from %s: %s", self.peer, reason)
        self._pause_reading()
        try:
            self.loop.remove_writer(self.fd)
        except Exception:
            pass
        if not self._writer.done() and asyncio.current_task() is not self._writer:
            self._writer.cancel()
        for result, _ in self._pending:
            if isinstance(result, asyncio.Future):
                result.add_done_callback(_discard)
            elif isinstance(result, list):
                release(result)
        self._pending.clear()
        self._frame = None
        try:
            self.sock.close()
        except OSError:
            pass
        if self._on_close is not None:
            self._on_close(self)


def _discard(fut: asyncio.Future) -> None:
    """Release the files of a response that will never be written."""
    if fut.cancelled():
        return
    if fut.exception() is None and fut.result():
        release(fut.result())
