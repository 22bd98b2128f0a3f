"""The local fast path: Python producers and consumers reach partitions of their own node
over the node-local channel, as the gateway does, instead of a Ray call per request.

Why: a Ray actor call costs about a millisecond and moves a megabyte of record batches
at a few hundred MB/s, which bounds a Python consumer at a few hundred fetches a
second whatever it decodes. The partition actor already serves appends and fetches
on a Unix socket for its node's gateway (``actors/channel.py``: 0600 socket in a 0700
folder, peer uid checked); a process on the same node can use the very same channel,
with the same methods, answers and error codes.

How: one daemon thread per process runs an asyncio loop that owns every channel
(one :class:`ChannelLink` per partition actor, shared by all producers and consumers
of the process). :meth:`LocalPath.call` hands a request to that loop and returns a
``concurrent.futures.Future`` at once, so callers keep pipelining as with Ray refs. A
partition on another node, a channel not open yet (it opens in the background on
first use) or turned off (``LOGAN_RAY_LOCAL_PATH=0``) gets ``None``: the caller
makes the Ray call instead. A channel that closes (the actor restarted) fails its
calls with ``ChannelClosedError``, which callers treat like a dead actor: retry,
which opens the new actor's channel.

Consumers go one step further (``reads_files``, on unless ``LOGAN_RAY_LOCAL_READS=0``):
they ask the channel only *where* the batches are (``locate``, as the gateway does before
``sendfile``) and ``pread`` the segment files themselves, as Ray Data's read tasks do
(``storage/slice_reader.py``); a located file that is gone by then (retention,
compaction) makes that partition's next fetch ask for the bytes instead.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from typing import Any

import ray

from logan_ray import errors
from logan_ray.actors.channel import ChannelClosedError, ChannelError, ChannelLink

__all__ = ["LocalPath", "ChannelClosedError", "ChannelError", "typed_error", "enabled", "reads_files", "result"]

_OFF = ("0", "false", "off", "no")


def enabled() -> bool:
    """The fast path is on unless ``LOGAN_RAY_LOCAL_PATH=0`` (for comparisons and debugging)."""
    return os.environ.get("LOGAN_RAY_LOCAL_PATH", "1") not in _OFF


def reads_files() -> bool:
    """Consumers on a partition's node read its segment files themselves (only the file ranges
    travel over the channel) unless ``LOGAN_RAY_LOCAL_READS=0``: then the bytes come over the channel."""
    return os.environ.get("LOGAN_RAY_LOCAL_READS", "1") not in _OFF


def typed_error(e: BaseException) -> BaseException:
    """The logan-ray error a Ray call would have raised for an error carried over the channel.

    The channel carries the error's class name, message, Kafka code and record errors;
    a class of ``logan_ray.errors`` is rebuilt from them (its message unchanged), so
    callers catch the same types on both paths. Others stay ChannelErrors (with .code).
    """
    if not isinstance(e, ChannelError) or isinstance(e, ChannelClosedError):
        return e
    cls = getattr(errors, e.kind, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.LoganError)):
        return e
    out = cls.__new__(cls)
    Exception.__init__(out, str(e))
    if e.record_errors or cls is errors.InvalidRecordError:
        out.record_errors = e.record_errors
    return out


class LocalPath:
    """The process's channels to partition actors on its own node."""

    def __init__(self) -> None:
        self.node_id = ray.get_runtime_context().get_node_id()
        self._links: dict[str, ChannelLink] = {}
        self._opening: set[str] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = threading.Lock()
        self.calls = 0

    # ------------------------------------------------------------------ loop
    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, name="logan-ray-local-path", daemon=True).start()
                self._loop = loop
            return self._loop

    # ------------------------------------------------------------------ calls
    def call(self, handle: Any, node_id: str | None, method: str, *args: Any,
             payload: Any = None) -> concurrent.futures.Future | None:
        """Send ``method(*args, payload)`` to the partition actor over its channel, or None for Ray.

        None when the actor is on another node, the fast path is off, or its channel is
        not open (yet): the first such call starts opening it in the background.
        """
        if node_id != self.node_id or not enabled():
            return None
        key = handle._actor_id.hex()
        link = self._links.get(key)
        client = link.client if link is not None else None
        if client is None or client.closed:
            if link is None or not link.unavailable:
                self._open(key, handle)
            return None
        self.calls += 1
        loop = self._running_loop()
        return asyncio.run_coroutine_threadsafe(_send(client, method, args, payload), loop)

    def uses_channel(self, handle: Any) -> bool:
        """True when calls to this actor currently go over its channel."""
        link = self._links.get(handle._actor_id.hex())
        return link is not None and link.client is not None and not link.client.closed

    def _open(self, key: str, handle: Any) -> None:
        with self._lock:
            if key in self._opening:
                return
            self._opening.add(key)
            link = self._links.setdefault(key, ChannelLink())

        async def opening() -> None:
            try:
                await link.get(handle)
            except Exception:  # the actor is restarting or gone: Ray calls until the next try
                pass
            finally:
                self._opening.discard(key)

        asyncio.run_coroutine_threadsafe(opening(), self._running_loop())

    def wait_open(self, handle: Any, timeout: float = 10.0) -> bool:
        """Open the channel to ``handle`` now and wait for it (tests, benchmarks); True if open."""
        key = handle._actor_id.hex()
        link = self._links.setdefault(key, ChannelLink())
        try:
            asyncio.run_coroutine_threadsafe(link.get(handle), self._running_loop()).result(timeout)
        except Exception:
            return False
        return self.uses_channel(handle)

    def close(self) -> None:
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return
        for link in self._links.values():
            if link.client is not None:
                loop.call_soon_threadsafe(link.client.close)
        loop.call_soon_threadsafe(loop.stop)


async def _send(client: Any, method: str, args: tuple, payload: Any) -> Any:
    try:
        return await client.call(method, *args, payload=payload)
    except ChannelError as e:
        raise typed_error(e) from None


def result(fut: concurrent.futures.Future, timeout: float | None = None) -> Any:
    """A channel call's answer, raising logan-ray's typed errors (RequestTimedOutError on timeout)."""
    try:
        return fut.result(timeout)
    except concurrent.futures.TimeoutError:
        raise errors.RequestTimedOutError(f"no answer from the partition within {timeout} s") from None
