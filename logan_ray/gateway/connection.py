"""One client connection: frames in, responses out in request order, file ranges by sendfile.

Why raw non-blocking sockets instead of asyncio streams: a Fetch response is a
few header bytes followed by ranges of segment files, and those ranges must go
out with ``os.sendfile`` on the socket itself. asyncio transports buffer writes
and pause reading around ``loop.sendfile``; owning the socket keeps reading
(and so request pipelining) going while a large response drains.

Requests are handled concurrently, but their responses are written strictly in
arrival order, as Kafka clients require. A malformed or oversized frame closes
only this connection. What a client can make the gateway hold is bounded (see
``limits.py``): frames grow as their bytes arrive, only bytes that arrived count
against one broker-wide pool, and ``last_active`` / ``opened`` let the gateway
close connections that sit idle or never log in (``deadlines.py``).
"""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import socket
import ssl
import struct
from collections import deque
from typing import Any, Awaitable, Callable

from .limits import RequestMemoryPool

log = logging.getLogger("logan_ray.gateway")

_I32 = struct.Struct(">i")
#: Stop reading a connection while this many responses are still owed (its bytes are
#: bounded by the gateway's RequestMemoryPool).
MAX_PENDING = 256
_AGAIN = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
#: A TLS handshake that takes longer than this closes the connection (a peer that never finishes one).
TLS_HANDSHAKE_TIMEOUT_S = 10.0
#: how long a connection that must close (failed login) waits for the peer to close first
FINISH_WAIT_S = 2.0
#: Over TLS, file ranges are read into memory and encrypted in pieces of this size (no sendfile).
TLS_CHUNK = 256 * 1024
#: Marker a handler's response may end with: close the connection once the response is written.
CLOSE_AFTER = object()


class MuteAfter:
    """Marker a response may end with: read nothing more from the connection for ``seconds`` once the
    response is written (KIP-219: a quota-throttled client's channel is muted after its answer)."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


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
    """Reads frames, hands them to ``dispatch``, writes the answers in order.

    Memory a client can make it hold is bounded: a frame's bytes are kept only as
    they arrive (a header claiming 2 GB allocates nothing), they count in the
    gateway's :class:`RequestMemoryPool` as they arrive (a claim reserves nothing),
    and an idle connection owns no read buffer (all read into the pool's shared scratch).
    """

    def __init__(self, sock: socket.socket, peer: Any, dispatch: Dispatch, max_frame: int,
                 on_close: Callable[["Connection"], None] | None = None,
                 pool: RequestMemoryPool | None = None, tls: ssl.SSLContext | None = None,
                 session: Any = None) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if tls is not None:  # TLS in the same non-blocking socket; the handshake runs before any read
            sock = tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        self.tls = tls is not None
        #: who is on this connection (logan_ray.security.session.Session), None on a listener without security
        self.session = session
        self.sock = sock
        self.peer = peer
        self.fd = sock.fileno()
        self.max_frame = max_frame
        self.loop = asyncio.get_running_loop()
        self._dispatch = dispatch
        self._on_close = on_close
        self._pool = pool if pool is not None else RequestMemoryPool()
        self._stash = b""  # at most 3 bytes of a frame header read but not parsed
        self._frame: bytearray | None = None  # frame being received, grown as its bytes arrive
        self._frame_size = 0
        self._pending: deque[tuple[Any, int]] = deque()  # (awaitable of chunks, reserved bytes)
        self._reading = False
        self._finishing = False  # the last response is out: no more requests are read
        self._pending_full = False
        self._sending = False  # an answer is being written (already off ``_pending``)
        self._pool_wait = False
        self._wake: asyncio.Future | None = None
        self._muted_until = 0.0  # loop time until which a quota throttle keeps the connection unread
        self._unmute: asyncio.TimerHandle | None = None
        self.closed = False
        self.requests = 0
        #: loop time of the accept and of the last byte read or written (connections.max.idle.ms)
        self.opened = self.last_active = self.loop.time()
        # per-connection state for handlers (e.g. ordering of produce appends)
        self.state: dict[str, Any] = {}
        self._writer = self.loop.create_task(self._write_loop())
        if not self.tls:
            self._update_reading()

    @property
    def in_flight(self) -> bool:
        """A request of this connection is being handled or its answer is being written."""
        return bool(self._pending) or self._sending

    # ------------------------------------------------------------------ TLS
    async def _handshake(self) -> None:
        """Finish the TLS handshake (bounded in time) before the first frame is read."""
        sock: Any = self.sock
        deadline = self.loop.time() + TLS_HANDSHAKE_TIMEOUT_S
        while True:
            try:
                sock.do_handshake()
                break
            except ssl.SSLWantReadError:
                await self._wait(deadline, read=True)
            except ssl.SSLWantWriteError:
                await self._wait(deadline, read=False)
        if self.session is not None:
            from logan_ray.security.tls import principal_from_cert

            self.session.principal = principal_from_cert(sock.getpeercert())
        self._update_reading()

    async def _wait(self, deadline: float, read: bool) -> None:
        remaining = deadline - self.loop.time()
        if remaining <= 0:
            raise ConnectionError(errno.ETIMEDOUT, "TLS handshake timed out")
        fut = self.loop.create_future()

        def ready() -> None:
            if not fut.done():
                fut.set_result(None)

        (self.loop.add_reader if read else self.loop.add_writer)(self.fd, ready)
        try:
            await asyncio.wait_for(fut, remaining)
        except asyncio.TimeoutError:
            raise ConnectionError(errno.ETIMEDOUT, "TLS handshake timed out") from None
        finally:
            (self.loop.remove_reader if read else self.loop.remove_writer)(self.fd)

    # ------------------------------------------------------------------ reading
    def _update_reading(self) -> None:
        want = not self.closed and not self._finishing and not self._pool_wait and not self._pending_full \
            and self._unmute is None
        if want and not self._reading:
            self.loop.add_reader(self.fd, self._on_readable)
            self._reading = True
        elif not want and self._reading:
            self.loop.remove_reader(self.fd)
            self._reading = False

    def mute(self, seconds: float) -> None:
        """Read no request for ``seconds`` (a client over its quota; a longer mute wins over a shorter one)."""
        until = self.loop.time() + seconds
        if self.closed or seconds <= 0 or until <= self._muted_until:
            return
        self._muted_until = until
        if self._unmute is not None:
            self._unmute.cancel()
        self._unmute = self.loop.call_at(until, self._end_mute)
        self._update_reading()

    def _end_mute(self) -> None:
        self._unmute = None
        self._update_reading()

    def _on_readable(self) -> None:
        self._read_once()
        # TLS may hold decrypted bytes the socket will not signal again: read them now
        while self.tls and self._reading and not self.closed and self.sock.pending():
            self._read_once()

    def _read_once(self) -> None:
        try:
            if self._frame is not None:
                return self._fill_frame()
            if not self._pool.has_room():
                return self._wait_for_pool()
            scratch = self._pool.scratch
            n = self.sock.recv_into(scratch)
            if n == 0:
                if self._stash:
                    return self.close("peer closed the connection mid-frame")
                return self.close(None)
            self.last_active = self.loop.time()
            data: Any = memoryview(scratch)[:n]
            if self._stash:  # at most 3 bytes of a header here
                data, self._stash = self._stash + bytes(data), b""
            self._parse(data)
        except _AGAIN:
            return
        except (ConnectionError, OSError) as e:
            self.close(f"read failed: {e}")
        except FrameError as e:
            self.close(str(e), warn=True)

    def _fill_frame(self) -> None:
        frame = self._frame
        assert frame is not None
        if not self._pool.has_room():
            return self._wait_for_pool()
        scratch = self._pool.scratch
        n = self.sock.recv_into(scratch, min(self._frame_size - len(frame), len(scratch)))
        if n == 0:
            return self.close("peer closed the connection mid-frame")
        self.last_active = self.loop.time()
        self._pool.arrived(n)
        frame += memoryview(scratch)[:n]
        if len(frame) == self._frame_size:
            self._frame = None
            self._pool.completed(self._frame_size)
            self._submit(memoryview(frame), self._frame_size)

    def _parse(self, data: Any) -> None:
        """Split ``data`` into frames; keep what does not yet form one.

        Every byte read is counted in the pool as it is kept (read means held: the
        pool may go past its capacity by one read), a frame's claimed size never is.
        """
        pos, end = 0, len(data)
        while not self.closed and end - pos >= 4:
            (size,) = _I32.unpack_from(data, pos)
            if size < 0 or size > self.max_frame:
                raise FrameError(f"frame size {size} is outside 0..{self.max_frame} (socket.request.max.bytes)")
            begin = pos + 4
            if end - begin >= size:
                frame = bytes(data[begin:begin + size])
                pos = begin + size
                self._pool.force(size)
                self._submit(memoryview(frame), size)
                continue
            self._frame = bytearray(data[begin:end])
            self._frame_size = size
            self._pool.arrived(end - begin)
            return
        if pos < end and not self.closed:
            self._stash = bytes(data[pos:end])

    def _wait_for_pool(self) -> None:
        if not self._pool_wait:
            self._pool_wait = True
            self._pool.wait(self._pool_ready)
        self._update_reading()

    def _pool_ready(self) -> None:
        self.loop.call_soon(self._resume_after_pool)

    def _resume_after_pool(self) -> None:
        if self.closed or not self._pool_wait:
            return
        self._pool_wait = False
        self._update_reading()

    def _submit(self, frame: memoryview, reserved: int) -> None:
        self.requests += 1
        try:
            result = self._dispatch(self, frame)
        except BaseException:
            self._pool.release(reserved)
            raise
        if result is None:  # nothing owed and nothing running
            self._pool.release(reserved)
            return
        self._pending.append((result, reserved))
        if len(self._pending) >= MAX_PENDING and not self._pending_full:
            self._pending_full = True
            self._update_reading()
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    # ------------------------------------------------------------------ writing
    async def _write_loop(self) -> None:
        try:
            if self.tls:
                await self._handshake()
            while not self.closed:
                if not self._pending:
                    self._wake = self.loop.create_future()
                    await self._wake
                    self._wake = None
                    continue
                result, nbytes = self._pending[0]
                chunks = await result if not isinstance(result, list) else result
                self._pending.popleft()
                self._pool.release(nbytes)  # the request is answered: its bytes are free
                if self._pending_full and len(self._pending) < MAX_PENDING // 2:
                    self._pending_full = False
                    self._update_reading()
                if chunks is None:
                    continue
                close_after = bool(chunks) and chunks[-1] is CLOSE_AFTER
                if close_after:
                    chunks = chunks[:-1]
                mute_after = chunks[-1] if chunks and isinstance(chunks[-1], MuteAfter) else None
                if mute_after is not None:
                    chunks = chunks[:-1]
                self._sending = True
                try:
                    await self._send(chunks)
                finally:
                    self._sending = False
                    release(chunks)
                self.last_active = self.loop.time()
                if mute_after is not None:
                    self.mute(mute_after.seconds)
                if close_after:
                    await self._finish()
                    self.close("closed after its response, as the protocol asks (failed authentication)")
                    return
        except asyncio.CancelledError:
            raise
        except (ConnectionError, OSError) as e:
            self.close(f"write failed: {e}" if not isinstance(e, ssl.SSLError) else f"TLS failed: {e}",
                       warn=isinstance(e, ssl.SSLError))
        except Exception as e:  # a handler bug: drop this connection, keep the gateway
            log.exception("gateway: request from %s failed", self.peer)
            self.close(f"internal error: {e!r}")

    async def _finish(self, wait_s: float = FINISH_WAIT_S) -> None:
        """End the connection after its last response so the peer reads that response.

        The peer closes first when it can: a client told its login failed closes its
        socket itself, and until it does the gateway only reads (and discards) what it
        still sends. A FIN sent right behind the response can reach a slow client in the
        same read as the response, and some clients (kafka-python 3.0) then report
        "socket disconnected" and drop the response they just read. Closing with unread
        bytes would send RST, which drops the response in the peer's kernel. So: stop
        reading requests, wait up to ``wait_s`` for the peer's EOF, then send FIN (the
        caller closes). Bounded: a peer that never closes holds the socket ``wait_s``.
        """
        self._finishing = True
        self._update_reading()
        deadline = self.loop.time() + wait_s
        while self.loop.time() < deadline:
            try:
                if not os.read(self.fd, 65536):
                    break  # the peer closed first
            except (BlockingIOError, InterruptedError):
                fut = self.loop.create_future()
                self.loop.add_reader(self.fd, lambda: fut.done() or fut.set_result(None))
                try:
                    await asyncio.wait_for(fut, max(0.0, deadline - self.loop.time()))
                except asyncio.TimeoutError:
                    break
                finally:
                    self.loop.remove_reader(self.fd)
            except OSError:
                return
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_WR)
        except OSError:
            return

    async def _send(self, chunks: list[Any]) -> None:
        sock = self.sock
        i = 0
        n = len(chunks)
        while i < n:
            c = chunks[i]
            if isinstance(c, FileRanges):
                for fd, position, length in c.ranges:
                    if self.tls:
                        await self._send_file_tls(fd, position, length)
                    else:
                        await self._sendfile(fd, position, length)
                i += 1
                continue
            j = i
            while j < n and not isinstance(chunks[j], FileRanges):
                j += 1
            await self._sendall(chunks[i:j])
            i = j

    async def _sendall(self, parts: list[Any]) -> None:
        if self.tls:
            return await self._sendall_tls(parts)
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

    async def _sendall_tls(self, parts: list[Any]) -> None:
        """TLS has no scatter-gather send: small parts go as one record, large ones in pieces."""
        small = sum(len(p) for p in parts) <= TLS_CHUNK
        pieces = [b"".join(parts)] if small and len(parts) > 1 else parts
        for p in pieces:
            view = memoryview(p)
            for start in range(0, len(view), TLS_CHUNK):
                await self._send_tls(view[start:start + TLS_CHUNK])

    async def _send_tls(self, view: memoryview) -> None:
        while len(view):
            try:
                sent = self.sock.send(view)
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                await self._writable()  # OpenSSL retries the same record when called again
                continue
            view = view[sent:]

    async def _send_file_tls(self, fd: int, position: int, length: int) -> None:
        """Fetch over TLS: read the file range and encrypt it (sendfile cannot encrypt without kTLS)."""
        while length > 0:
            data = os.pread(fd, min(length, TLS_CHUNK), position)
            if not data:
                raise ConnectionError(errno.EIO, "segment file ended before the promised bytes were sent")
            await self._send_tls(memoryview(data))
            position += len(data)
            length -= len(data)

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
        if self._unmute is not None:
            self._unmute.cancel()
            self._unmute = None
        if reason:
            (log.warning if warn else log.info)("gateway: closing connection from %s: %s", self.peer, reason)
        self._update_reading()
        try:
            self.loop.remove_writer(self.fd)
        except Exception:
            pass
        if not self._writer.done() and asyncio.current_task() is not self._writer:
            self._writer.cancel()
        partial = len(self._frame) if self._frame is not None else 0
        held = partial
        for result, nbytes in self._pending:
            held += nbytes
            if isinstance(result, asyncio.Future):
                result.add_done_callback(_discard)
            elif isinstance(result, list):
                release(result)
        self._pending.clear()
        self._frame = None
        self._stash = b""
        if self._pool_wait:
            self._pool.forget(self._pool_ready)
        self._pool.release(held, partial)
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
