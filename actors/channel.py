"""Node-local data plane: a Unix socket from a node's gateway to a partition actor.

Why: a Ray actor call costs about a millisecond and moves a 1 MiB argument at
about 350 MB/s, which made a Kafka produce pay more for the hop into the
partition actor than for writing the bytes to disk, and put two Ray hops on the
path of every record from producer to consumer. The gateway always serves
partitions of its own node, so it can reach their actors through a Unix socket
instead: tens of microseconds per call, bytes at memory speed. Ray stays the
control plane (placement, restarts, names, the Python API); the socket carries
only appends, fetch locations and long-polls, and is served by the partition's
own event loop, so it sees the same single-threaded log as the Ray methods.

Only the same user may connect: the socket lives in a 0700 directory owned by
that user, the socket file is 0600, and the peer's uid is checked on accept.
If any of that cannot be set up, ``serve_channel`` returns None and the gateway
keeps using Ray calls.

Wire format (both directions): ``>I`` length of the rest, ``>I`` length of a
msgpack header, the header, then an optional raw payload. A request header is
``[id, method, args, has_payload]`` (the payload, when present, is the last
argument: record batches travel without being re-encoded); a reply header is
``[id, 0, result]`` or ``[id, 1, [error type, message, kafka error code, record errors]]``
(record errors: ``[[index in batch, message], ...]``, see ``InvalidRecordError``).
"""
from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import os
import socket
import stat
import struct
import tempfile
from collections import deque
from typing import Any, Awaitable, Callable

import msgpack

from .offsets_board import BoardReader, board_path

log = logging.getLogger("logan_ray.channel")

_LEN = struct.Struct(">II")
MAX_FRAME = 1 << 30
#: Longest usable AF_UNIX path on Linux (sun_path is 108 bytes with the NUL).
MAX_PATH = 107
NOT_LEADER_OR_FOLLOWER = 6


class ChannelError(Exception):
    """An error raised by the partition actor, carried over the channel with its Kafka error code."""

    def __init__(self, kind: str, message: str, code: int, record_errors: tuple = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.code = code
        self.record_errors = tuple((int(i), str(m)) for i, m in record_errors)


class ChannelClosedError(ChannelError):
    """The partition actor went away (crash, restart, deleted topic): the route is stale."""

    def __init__(self, message: str) -> None:
        super().__init__("ChannelClosedError", message, NOT_LEADER_OR_FOLLOWER)


# ------------------------------------------------------------------ framing (no I/O)
def encode_frame(header: list, payload: Any = None) -> list[Any]:
    """Chunks of one frame; the payload is passed through, not copied."""
    head = msgpack.packb(header, use_bin_type=True)
    size = 4 + len(head) + (len(payload) if payload is not None else 0)
    out = [_LEN.pack(size, len(head)) + head]
    if payload is not None and len(payload):
        out.append(payload)
    return out


class FrameReader:
    """Incremental frame parser for a ``BufferedProtocol``: small frames are parsed from a
    reused buffer; a large frame (a big append, or a reply listing many file slices) is
    received straight into its own buffer, whose payload part is then handed on without
    another copy."""

    SMALL = 256 * 1024

    def __init__(self) -> None:
        self._buf = bytearray(self.SMALL)
        self._view = memoryview(self._buf)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None  # header + payload of a large frame being received
        self._big_filled = 0
        self._big_head = 0

    def get_buffer(self) -> memoryview:
        if self._big is not None:
            return memoryview(self._big)[self._big_filled:]
        if self._end == len(self._buf):
            live = self._end - self._start
            self._buf[:live] = self._buf[self._start:self._end]
            self._start, self._end = 0, live
        return self._view[self._end:]

    def filled(self, n: int) -> list[tuple[list, Any]]:
        """Account for ``n`` received bytes; returns the (header, payload) of completed frames."""
        if self._big is not None:
            self._big_filled += n
            if self._big_filled < len(self._big):
                return []
            big, head = self._big, self._big_head
            self._big = None
            header = msgpack.unpackb(memoryview(big)[:head], raw=False)
            return [(header, memoryview(big)[head:] if len(big) > head else None)]
        self._end += n
        frames = []
        view = self._view
        while self._end - self._start >= 8:
            pos = self._start
            size, head_len = _LEN.unpack_from(self._buf, pos)
            if size > MAX_FRAME or head_len > size - 4:
                raise ValueError(f"bad channel frame (size {size}, header {head_len})")
            body_at = pos + 8
            frame_end = pos + 4 + size
            if frame_end <= self._end:
                payload_at = body_at + head_len
                header = msgpack.unpackb(view[body_at:payload_at], raw=False)
                payload = bytes(view[payload_at:frame_end]) if frame_end > payload_at else None
                frames.append((header, payload))
                self._start = frame_end
                continue
            if size + 4 > self.SMALL // 4:
                # receive the rest of this large frame in place
                big = bytearray(size - 4)
                got = self._end - body_at
                big[:got] = view[body_at:self._end]
                self._start = self._end = 0
                self._big, self._big_filled, self._big_head = big, got, head_len
                return frames
            break
        if self._start == self._end:
            self._start = self._end = 0
        return frames


# ------------------------------------------------------------------ socket path
def channel_dir() -> str | None:
    """This user's private directory for channel sockets, or None if it is not private."""
    base = os.path.join(tempfile.gettempdir(), f"logan-ray-{os.getuid()}")
    try:
        os.mkdir(base, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        log.warning("no node-local channel: cannot create %s: %s", base, e)
        return None
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or stat.S_IMODE(st.st_mode) & 0o077:
        log.warning("no node-local channel: %s is not a private directory of this user", base)
        return None
    return base


def channel_path(key: str, pid: int | None = None) -> str | None:
    """The socket path of ``key`` (a partition's log directory) served by process ``pid``.

    The pid in the name lets a new server sweep sockets left by killed processes.
    """
    base = channel_dir()
    if base is None:
        return None
    digest = hashlib.sha1(os.path.realpath(key).encode()).hexdigest()[:24]
    path = os.path.join(base, f"{digest}-{pid or os.getpid()}.sock")
    return path if len(path.encode()) <= MAX_PATH else None


def sweep_stale_sockets(base: str) -> int:
    """Remove sockets (and their offsets boards) whose serving process is gone (SIGKILL leaves them
    behind); returns how many."""
    removed = 0
    for name in os.listdir(base):
        suffix = next((x for x in (".sock", ".board", ".board.tmp") if name.endswith(x)), None)
        stem, _, pid = name[:-len(suffix)].rpartition("-") if suffix else ("", "", "")
        if not stem or not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (ours or not): leave it
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            os.unlink(os.path.join(base, name))
            removed += 1
        except OSError:
            pass
    return removed


# ------------------------------------------------------------------ server side
class _ServerProtocol(asyncio.BufferedProtocol):
    def __init__(self, methods: dict[str, Callable[..., Awaitable[Any]]]) -> None:
        self._methods = methods
        self._reader = FrameReader()
        self._transport: asyncio.Transport | None = None
        self._tasks: set[asyncio.Task] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        sock = transport.get_extra_info("socket")
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _, uid, _ = struct.unpack("3i", creds)
        if uid != os.getuid():
            log.warning("channel: refused a connection from uid %d", uid)
            transport.close()
            return
        self._transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        if self._transport is None:
            return
        try:
            frames = self._reader.filled(nbytes)
        except Exception as e:
            log.warning("channel: closing a connection that sent a bad frame: %s", e)
            self._transport.close()
            self._transport = None
            return
        loop = asyncio.get_running_loop()
        for header, payload in frames:
            # Tasks start in creation order, so requests of one connection start in
            # arrival order (an append runs to its end without yielding).
            task = loop.create_task(self._run(header, payload))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _run(self, header: list, payload: Any) -> None:
        try:
            req_id, method, args, has_payload = header
        except (TypeError, ValueError):
            log.warning("channel: malformed request header %r", header)
            return
        try:
            fn = self._methods.get(method)
            if fn is None:
                raise ValueError(f"method {method!r} is not served over the channel")
            if has_payload:
                args = [*args, payload if payload is not None else b""]
            reply = [req_id, 0, await fn(*args)]
        except Exception as e:
            reply = [req_id, 1, [type(e).__name__, str(e), int(getattr(e, "code", -1)),
                                 [list(r) for r in getattr(e, "record_errors", ())]]]
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(encode_frame(reply)[0])

    def connection_lost(self, exc: Exception | None) -> None:
        self._transport = None


class ChannelServer:
    """Serves ``methods`` on a Unix socket in the running event loop."""

    def __init__(self, server: asyncio.AbstractServer, path: str) -> None:
        self._server = server
        self.path = path

    def close(self) -> None:
        self._server.close()
        try:
            os.unlink(self.path)
        except OSError:
            pass


async def serve_channel(key: str, methods: dict[str, Callable[..., Awaitable[Any]]]) -> ChannelServer | None:
    """Listen for the node's gateway; None (and a log line) if no private socket can be made."""
    path = channel_path(key)
    if path is None:
        return None
    sweep_stale_sockets(os.path.dirname(path))
    try:
        server = await asyncio.get_running_loop().create_unix_server(lambda: _ServerProtocol(methods), path)
    except OSError as e:
        log.warning("no node-local channel at %s: %s", path, e)
        return None
    os.chmod(path, 0o600)  # the 0700 directory already keeps other users out; this is belt and braces
    return ChannelServer(server, path)


# ------------------------------------------------------------------ client side
class ChannelClient:
    """Calls a partition actor's methods over its channel; replies may come in any order.

    A raw non-blocking socket rather than an asyncio transport: a request's
    payload (up to megabytes of record batches) is sent from the caller's buffer
    with ``sendmsg``, never joined or copied into a transport buffer.
    """

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._fd = sock.fileno()
        self._loop = asyncio.get_running_loop()
        self._reader = FrameReader()
        self._out: deque[memoryview] = deque()
        self._writing = False
        self._pending: dict[int, asyncio.Future] = {}
        self._next_id = 0
        self.closed = False
        self.calls = 0
        self._loop.add_reader(self._fd, self._on_readable)

    @classmethod
    async def connect(cls, path: str) -> "ChannelClient":
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            await asyncio.get_running_loop().sock_connect(sock, path)
        except BaseException:
            sock.close()
            raise
        return cls(sock)

    def call(self, method: str, *args: Any, payload: Any = None) -> "asyncio.Future[Any]":
        """Send one request now (so calls go out in the order they are made); await the reply."""
        fut = self._loop.create_future()
        if self.closed:
            fut.set_exception(ChannelClosedError("channel to the partition is closed"))
            return fut
        self._next_id += 1
        req_id = self._next_id
        self._pending[req_id] = fut
        self.calls += 1
        for chunk in encode_frame([req_id, method, list(args), payload is not None], payload):
            self._out.append(memoryview(chunk).cast("B"))
        if not self._writing:
            self._flush()
        return fut

    def _flush(self) -> None:
        out = self._out
        try:
            while out:
                sent = self._sock.sendmsg(list(itertools.islice(out, 64)))
                while sent:
                    head = out[0]
                    if sent >= len(head):
                        sent -= len(head)
                        out.popleft()
                    else:
                        out[0] = head[sent:]
                        sent = 0
        except (BlockingIOError, InterruptedError):
            pass
        except OSError as e:
            self._lost(f"channel write failed: {e}")
            return
        if out and not self._writing:
            self._loop.add_writer(self._fd, self._flush)
            self._writing = True
        elif not out and self._writing:
            self._loop.remove_writer(self._fd)
            self._writing = False

    def _on_readable(self) -> None:
        try:
            n = self._sock.recv_into(self._reader.get_buffer())
        except (BlockingIOError, InterruptedError):
            return
        except OSError as e:
            return self._lost(f"channel read failed: {e}")
        if n == 0:
            return self._lost("channel to the partition closed by the actor")
        try:
            frames = self._reader.filled(n)
        except ValueError as e:
            return self._lost(f"bad reply frame: {e}")
        for header, _ in frames:
            self._reply(header)

    def _reply(self, header: list) -> None:
        req_id, status, result = header
        fut = self._pending.pop(req_id, None)
        if fut is None or fut.done():
            return
        if status == 0:
            fut.set_result(result)
        else:
            kind, message, code, *record_errors = result
            fut.set_exception(ChannelError(kind, message, code, *record_errors))

    def _lost(self, reason: str) -> None:
        if not self.closed:
            self.closed = True
            self._loop.remove_reader(self._fd)
            if self._writing:
                self._loop.remove_writer(self._fd)
                self._writing = False
            self._out.clear()
            self._sock.close()
        pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(ChannelClosedError(reason))

    def close(self) -> None:
        self._lost("channel closed by this side")


class ChannelLink:
    """The node-local channel to one partition actor, shared by every caller on this node
    (the gateway's routes, a Python client's producers and consumers).

    Opened on first use: one Ray call asks the actor for its socket path (which
    also starts its server, after a restart too), then calls go over the socket.
    When the channel closes (the actor died), the next use asks again.
    """

    __slots__ = ("client", "board", "lock", "unavailable", "calls", "connects")

    def __init__(self) -> None:
        self.client: ChannelClient | None = None
        #: the actor's offsets board (actors/offsets_board.py), trusted only while ``client`` is open
        self.board: BoardReader | None = None
        self.lock = asyncio.Lock()
        self.unavailable = False
        self.calls = 0
        self.connects = 0

    def close(self) -> None:
        """Close the channel and let go of the board beside it."""
        if self.client is not None:
            self.client.close()
        if self.board is not None:
            self.board.close()
            self.board = None

    async def get(self, handle: Any) -> ChannelClient | None:
        client = self.client
        if client is not None and not client.closed:
            return client
        if self.unavailable:
            return None
        async with self.lock:
            if self.client is not None and not self.client.closed:
                return self.client
            self.client = None
            if self.board is not None:
                self.board.close()
                self.board = None
            path = await handle.channel.remote()
            if path is None:
                self.unavailable = True  # e.g. no private socket directory: Ray calls it is
                return None
            try:
                self.client = await ChannelClient.connect(path)
                self.connects += 1
                self.board = BoardReader.open(board_path(path))  # made before the actor named its path
            except OSError as e:  # the actor restarted in between: Ray calls for now, retry next time
                log.info("no channel to %s yet: %s", path, e)
                return None
            return self.client
