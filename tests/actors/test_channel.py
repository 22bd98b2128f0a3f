"""The node-local channel between a gateway and a partition actor, without Ray.

The server side runs either in this test's event loop or in a real child
process (to be SIGKILLed), exactly as it runs inside a partition actor.
"""
from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time

import pytest

from logan_ray.actors.channel import (
    ChannelClient,
    ChannelClosedError,
    ChannelError,
    FrameReader,
    channel_path,
    encode_frame,
    serve_channel,
)
from logan_ray.gateway.cluster import error_code, error_message, is_stale_route
from logan_ray.storage.errors import OffsetOutOfRangeError, RecordTooLargeError


class Target:
    """Stands in for a partition actor: records what it was sent, in order."""

    def __init__(self) -> None:
        self.seen: list[bytes] = []

    def methods(self) -> dict:
        return {"append": self.append, "fail": self.fail, "sleep": self.sleep, "echo": self.echo}

    async def append(self, data) -> list:
        self.seen.append(bytes(data))
        return [len(self.seen) - 1, len(data), hashlib.sha1(data).hexdigest()]

    async def fail(self, kind: str) -> None:
        if kind == "range":
            raise OffsetOutOfRangeError("offset 42 is outside [0, 10)")
        raise RecordTooLargeError("batch of 2000000 bytes exceeds max.message.bytes 1048588")

    async def sleep(self, ms: int) -> int:
        await asyncio.sleep(ms / 1000)
        return ms

    async def echo(self, *args):
        return list(args)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


@contextlib.asynccontextmanager
async def connected(tmp_path, target: Target | None = None):
    """A channel server for ``target`` in this loop and a client connected to it."""
    server = await serve_channel(str(tmp_path), (target or Target()).methods())
    client = await ChannelClient.connect(server.path)
    try:
        yield server, client
    finally:
        client.close()
        server.close()


def test_pipelined_appends_arrive_in_order_with_payloads_intact(tmp_path):
    async def main():
        target = Target()
        async with connected(tmp_path, target) as (_, client):
            sizes = [1, 100, 70_000, 5 << 20, 3, 300_000, 1 << 20] * 20
            payloads = [os.urandom(n) for n in sizes]
            futures = [client.call("append", payload=p) for p in payloads]  # all in flight at once
            replies = await asyncio.gather(*futures)
            assert [bytes(p) for p in target.seen] == payloads
            for i, (reply, p) in enumerate(zip(replies, payloads)):
                assert reply == [i, len(p), hashlib.sha1(p).hexdigest()]
            assert client.calls == len(payloads)

    run(main())


def test_arguments_and_results_round_trip(tmp_path):
    async def main():
        async with connected(tmp_path) as (_, client):
            args = [0, -1, 2**62, "topic-ä", None, [["/a/b.log", 0, 61]], b"\x00\xff"]
            assert await client.call("echo", *args) == args
            # a reply far larger than the read buffer: e.g. a locate over many tiny segments
            slices = [[f"/data/t-0/{i:020d}.log", 0, 1024] for i in range(40_000)]
            assert await client.call("echo", slices) == [slices]

    run(main())


def test_errors_carry_kind_kafka_code_and_message(tmp_path):
    async def main():
        async with connected(tmp_path) as (_, client):
            with pytest.raises(ChannelError) as info:
                await client.call("fail", "range")
            e = info.value
            assert (e.kind, e.code) == ("OffsetOutOfRangeError", 1)
            assert error_code(e) == 1 and error_message(e) == "offset 42 is outside [0, 10)"
            assert not is_stale_route(e)
            with pytest.raises(ChannelError) as info:
                await client.call("fail", "big")
            assert info.value.code == 10 and "max.message.bytes" in str(info.value)
            with pytest.raises(ChannelError, match="'close_everything' is not served"):
                await client.call("close_everything")
            assert await client.call("sleep", 1) == 1  # the connection is still fine

    run(main())


def test_replies_may_overtake_slower_requests(tmp_path):
    async def main():
        async with connected(tmp_path) as (_, client):
            slow = client.call("sleep", 300)
            fast = client.call("sleep", 1)
            assert await fast == 1
            assert not slow.done()  # a long-poll does not hold up the requests behind it
            assert await slow == 300

    run(main())


def test_socket_is_private_to_this_user(tmp_path):
    async def main():
        server = await serve_channel(str(tmp_path), Target().methods())
        mode = os.stat(server.path).st_mode
        assert stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o600
        parent = os.stat(os.path.dirname(server.path))
        assert stat.S_IMODE(parent.st_mode) == 0o700 and parent.st_uid == os.getuid()
        assert server.path == channel_path(str(tmp_path))  # stable: a restarted actor comes back on it
        server.close()
        assert not os.path.exists(server.path)

    run(main())


def test_sockets_of_killed_servers_are_swept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = channel_path(str(tmp_path / "old"), pid=dead.pid)
    open(stale, "w").close()
    alive = channel_path(str(tmp_path / "other"), pid=os.getppid())  # a live process: never touched
    open(alive, "w").close()

    async def main():
        server = await serve_channel(str(tmp_path), Target().methods())
        assert not os.path.exists(stale) and os.path.exists(alive)
        server.close()

    try:
        run(main())
    finally:
        os.unlink(alive)


def test_a_bad_frame_closes_only_its_connection(tmp_path):
    async def main():
        server = await serve_channel(str(tmp_path), Target().methods())
        good = await ChannelClient.connect(server.path)
        raw = socket.socket(socket.AF_UNIX)
        raw.connect(server.path)
        raw.sendall(b"\xff\xff\xff\xff\x00\x00\x00\x01garbage")
        raw.settimeout(5)
        assert await asyncio.get_running_loop().run_in_executor(None, raw.recv, 10) == b""  # closed
        raw.close()
        assert await good.call("echo", 7) == [7]
        server.close()
        good.close()

    run(main())


def test_frame_reader_splits_frames_at_any_byte():
    frames = [([1, "append", [], True], os.urandom(200_000)), ([2, "echo", [1, 2], False], None),
              ([3, "append", [], True], b"xy"), ([4, "echo", ["x" * 300_000], False], None),
              ([5, "append", ["y" * 100_000], True], os.urandom(70_000))]
    wire = b"".join(b"".join(bytes(c) for c in encode_frame(h, p)) for h, p in frames)
    for step in (1, 7, 4096, 65536, len(wire)):
        reader = FrameReader()
        got = []
        pos = 0
        while pos < len(wire):
            buf = reader.get_buffer()
            n = min(step, len(buf), len(wire) - pos)
            buf[:n] = wire[pos:pos + n]
            pos += n
            got += reader.filled(n)
        assert [(h, bytes(p) if p is not None else None) for h, p in got] == frames


def test_partition_process_killed_fails_pending_calls_as_stale_route(tmp_path):
    """SIGKILL of the serving process: calls in flight end with a stale-route error at once."""
    script = textwrap.dedent(f"""
        import asyncio, sys
        from logan_ray.actors.channel import serve_channel
        async def sleep(ms):
            await asyncio.sleep(ms / 1000)
            return ms
        async def main():
            server = await serve_channel({str(tmp_path)!r}, {{"sleep": sleep}})
            print(server.path, flush=True)
            await asyncio.sleep(60)
        asyncio.run(main())
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        path = child.stdout.readline().strip()

        async def main():
            client = await ChannelClient.connect(path)
            assert await client.call("sleep", 1) == 1
            pending = client.call("sleep", 20_000)
            os.kill(child.pid, signal.SIGKILL)
            started = time.monotonic()
            with pytest.raises(ChannelClosedError) as info:
                await pending
            assert time.monotonic() - started < 5
            assert is_stale_route(info.value) and error_code(info.value) == 6  # NOT_LEADER_OR_FOLLOWER
            assert client.closed
            with pytest.raises(ChannelClosedError):
                await client.call("sleep", 1)

        run(main())
    finally:
        child.kill()
        child.wait()
