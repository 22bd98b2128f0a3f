"""Reads of inactive partitions served from their closed files: a fetch does not wake a partition.

Why: consumers poll every assigned partition continuously. If a Fetch or ListOffsets
started the partition's actor, no partition with a reader would ever hibernate, and a
node would hold a process per partition again. So the gateway on a partition's node
answers the read methods of an inactive partition itself, from the folder's
:class:`~logan_ray.storage.closed_log.ClosedLog` view (the storage layer's own
locate and timestamp code, read-only), with the same answers the actor would give;
Fetch still sends the file ranges with ``sendfile``.

Long-polls wait here, on the partition's wake-up event, without a process. The first
append starts the actor (through the router); the router's change feed
(``actors/partition_feed.py``), or this gateway's own activation, sets the event, and the
waiting call goes on in the actor with what is left of its wait: the actor's answer
starts at the offset the consumer asked for, so nothing is lost or repeated.

A view is valid while the clean-shutdown marker it was opened with is there
(``ClosedLog.current``); the actor's open removes it first. Anything else (a folder not
closed cleanly, of another topic id, or no folder yet) raises :class:`NeedsActor` and
the caller starts the partition as before.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import OrderedDict
from typing import Any, Callable

from logan_ray.storage.closed_log import ClosedLog
from logan_ray.storage.leader_epochs import fence
from logan_ray.storage.partition_dir import read_topic_id

#: Partition actor methods this module answers for an inactive partition (the gateway's reads).
CLOSED_METHODS = frozenset({"locate", "locate_committed", "wait_for_data", "offsets", "list_offset", "offset_for_timestamp",
                            "max_timestamp_offset", "end_offset_for_epoch", "leader_epoch"})
log = logging.getLogger("logan_ray.gateway")

#: open views kept (each holds one descriptor per segment read). More than a consumer group reads at once:
#: a group polling more inactive partitions than this reopened hundreds of views on every Fetch.
MAX_VIEWS = 4096
#: a view found unchanged this recently is used without looking at its folder again (ClosedLog.current)
FRESH_S = 0.25


class NeedsActor(Exception):
    """The partition must be served by its actor (not closed cleanly, or it woke up); ``args`` are the
    call's arguments to use there (a long-poll's wait shortened by the time already spent)."""

    def __init__(self, args: tuple) -> None:
        super().__init__("partition is active")
        self.call_args = args


class ClosedReads:
    """Per gateway: views of its node's inactive partitions, and the long-polls waiting on them."""

    def __init__(self, data_dir: Callable[[], Any]) -> None:
        self._data_dir = data_dir  # async () -> the broker's data dir (from the router's settings)
        self._views: OrderedDict[tuple[str, int], ClosedLog] = OrderedDict()
        self._wakers: dict[tuple[str, int], asyncio.Event] = {}
        #: fetches waiting on many inactive partitions at once (one waiter each, see wait_any)
        self._listeners: dict[tuple[str, int], list[tuple[asyncio.Event, set]]] = {}
        self.served = 0  # calls answered from files
        self.handed_over = 0  # long-polls that went on in a woken actor

    # ------------------------------------------------------------------ state
    def changed(self, topic: str, partition: int) -> None:
        """The partition became active (or changed state): drop its view, wake its long-polls."""
        view = self._views.pop((topic, partition), None)
        if view is not None:
            view.close()
        event = self._wakers.pop((topic, partition), None)
        if event is not None:
            event.set()
        for event, woke in self._listeners.pop((topic, partition), ()):
            woke.add((topic, partition))
            event.set()

    def forget_all(self) -> None:
        for key in list(self._views):
            self.changed(*key)
        for key in list(self._wakers):
            self.changed(*key)
        for key in list(self._listeners):
            self.changed(*key)

    async def wait_any(self, keys: list[tuple[str, int]], timeout_s: float) -> set[tuple[str, int]]:
        """Until any of these inactive partitions changes state (it woke: its actor serves it now), or
        the time is up; returns those that changed. One waiter for all of them: a Fetch over a
        thousand inactive partitions must not start a thousand waits (and leave them behind) each
        time one of its active partitions gets a record."""
        event, woke = asyncio.Event(), set()
        entry = (event, woke)
        for key in keys:
            self._listeners.setdefault(key, []).append(entry)
        try:
            await asyncio.wait_for(event.wait(), timeout_s)
        except asyncio.TimeoutError:
            pass
        finally:
            for key in keys:
                waiting = self._listeners.get(key)
                if waiting is not None:
                    try:
                        waiting.remove(entry)
                    except ValueError:
                        pass
                    if not waiting:
                        del self._listeners[key]
        return woke

    def has_view(self, topic: str, partition: int) -> bool:
        """A view of the partition is open (its reads need no file opened, unless it changed since)."""
        return (topic, partition) in self._views

    def inactive_views(self) -> int:
        return len(self._views)

    def _open_view(self, topic: str, partition: int, directory: str | None) -> ClosedLog | None:
        """The partition's open view if it may still answer (of ``directory`` when given), else None
        (a stale one is dropped: its long-polls are woken)."""
        key = (topic, partition)
        view = self._views.get(key)
        if view is None:
            return None
        if view.current(FRESH_S) and (directory is None or view.directory == directory):
            self._views.move_to_end(key)
            return view
        self.changed(topic, partition)
        return None

    async def _view(self, topic: str, partition: int, topic_id: str | None, directory: str | None = None
                    ) -> ClosedLog:
        key = (topic, partition)
        view = self._open_view(topic, partition, directory)
        if view is not None:
            return view
        if directory is None:
            directory = os.path.join(await self._data_dir(), f"{topic}-{partition}")
        if topic_id is not None and read_topic_id(directory) not in (topic_id,):
            raise NeedsActor(())  # no folder yet (never started on this node), or an earlier topic's
        view = await asyncio.to_thread(ClosedLog.open, directory)
        if view is None:
            raise NeedsActor(())
        self._views[key] = view
        while len(self._views) > MAX_VIEWS:
            self._views.popitem(last=False)[1].close()
        return view

    # ------------------------------------------------------------------ calls
    def locate_now(self, topic: str, partition: int, leader_epoch: int, offset: int, max_bytes: int,
                   current_leader_epoch: int = -1, directory: str | None = None, committed: bool = False):
        """A Fetch's locate without waiting, answered at once from an open view of the partition's
        closed files: (slices, log end, log start), or None when this cannot answer it here (no view
        open, or one that may be stale, or an error such as a fenced epoch) and :meth:`call` must.

        Why a second way in: a consumer assigned a thousand idle partitions names them all in
        every Fetch; going through the partition's call, the closed reader and a coroutine each
        was most of the gateway's time per request (docs/benchmarks.md, issue 14).

        ``committed`` (a read_committed Fetch): only from a view whose files hold no transaction to
        bound or drop (``ClosedLog.has_transactions``); its answer is then a plain one."""
        view = self._open_view(topic, partition, directory)
        if view is None or (committed and view.has_transactions()):
            return None
        try:
            found = self._answer(view, topic, partition, _epoch(view, leader_epoch), offset, max_bytes, None,
                                 current_leader_epoch)
        except Exception:  # the partition's call gives the error its usual way
            return None
        self.served += 1
        return found

    async def call(self, topic: str, partition: int, topic_id: str | None, leader_epoch: int, method: str,
                   args: tuple, directory: str | None = None) -> Any:
        """Answer ``method(*args)`` as the partition actor would; NeedsActor when its actor must.

        ``directory``: the leader's folder when it is not ``<data-dir>/<topic>-<partition>`` (a partition
        that moved to this node leads on the folder it was built in)."""
        view = await self._view(topic, partition, topic_id, directory)
        epoch = _epoch(view, leader_epoch)
        self.served += 1
        if method == "locate":
            if len(args) > 6 and args[6] is not None:
                raise NeedsActor(args)  # a follower's fetch: its leader's actor records its position
            return await self._locate(view, topic, partition, epoch, *args)
        if method == "locate_committed":
            if view.has_transactions():
                raise NeedsActor(args)  # its LSO and aborted transactions: the actor's locate_committed
            offset, max_bytes, max_wait_ms, min_bytes, current = (*args, 0, 1, -1)[:5]
            try:
                slices, end, start = await self._locate(view, topic, partition, epoch, offset, max_bytes,
                                                        max_wait_ms, min_bytes, None, current)
            except NeedsActor as e:  # it woke during the wait: the rest of it in locate_committed's terms
                left = e.call_args[2] if len(e.call_args) > 2 else 0
                raise NeedsActor((offset, max_bytes, left, min_bytes, current)) from None
            return slices, end, start, end, []  # no transaction: the LSO is the (closed) log end
        if method == "wait_for_data":
            offset, max_wait_ms = args
            if view.log_end_offset <= offset and max_wait_ms > 0:
                await self._wait(view, topic, partition, max_wait_ms, lambda left: (offset, left))
            return view.log_end_offset
        if method == "offsets":
            return view.log_start_offset, view.log_end_offset
        if method == "leader_epoch":
            return epoch
        if method == "list_offset":
            timestamp, current, read_committed = (*args, -1, False)[:3]
            if read_committed and view.has_transactions():
                raise NeedsActor(args)  # the answer ends at its LSO: the actor's list_offset
            fence(f"{topic}-{partition}", current, epoch)
            found = view.offset_for_timestamp(timestamp)
            return None if found is None else (found[0], found[1], view.epoch_for_offset(found[0]))
        if method == "offset_for_timestamp":
            return view.offset_for_timestamp(args[0])
        if method == "max_timestamp_offset":
            return view.offset_for_timestamp(-3)
        if method == "end_offset_for_epoch":
            requested, current = (*args, -1)[:2]
            fence(f"{topic}-{partition}", current, epoch)
            return view.end_offset_for_epoch(requested)
        raise NeedsActor(args)

    async def _locate(self, view: ClosedLog, topic: str, partition: int, epoch: int, offset: int, max_bytes: int,
                      max_wait_ms: int = 0, min_bytes: int = 1, max_offset: int | None = None,
                      current_leader_epoch: int = -1, _replica: str | None = None):
        found = self._answer(view, topic, partition, epoch, offset, max_bytes, max_offset, current_leader_epoch)
        if max_wait_ms > 0 and sum(s[2] for s in found[0]) < min_bytes:
            # a closed log does not grow: wait for the partition to wake, then ask its actor
            await self._wait(view, topic, partition, max_wait_ms,
                             lambda left: (offset, max_bytes, left, min_bytes, max_offset, current_leader_epoch))
        return found

    @staticmethod
    def _answer(view: ClosedLog, topic: str, partition: int, epoch: int, offset: int, max_bytes: int,
                max_offset: int | None, current_leader_epoch: int) -> tuple[list[tuple], int, int]:
        if current_leader_epoch != epoch:  # (the name is only formatted when fence may need it)
            fence(f"{topic}-{partition}", current_leader_epoch, epoch)
        end = view.log_end_offset
        if offset == end:  # caught up, the usual case of an idle partition: nothing to locate
            return [], end, view.log_start_offset
        slices = view.locate(offset, max_bytes, max_offset=max_offset)
        return [tuple(s) for s in slices], end, view.log_start_offset

    async def _wait(self, view: ClosedLog, topic: str, partition: int, max_wait_ms: int,
                    remaining_args: Callable[[int], tuple]) -> None:
        """Until the partition wakes (NeedsActor with the wait that is left) or the wait is over."""
        deadline = time.monotonic() + max_wait_ms / 1000.0
        event = self._wakers.get((topic, partition))
        if event is None:
            event = self._wakers[(topic, partition)] = asyncio.Event()
        try:
            await asyncio.wait_for(event.wait(), max_wait_ms / 1000.0)
        except asyncio.TimeoutError:
            pass
        if event.is_set() or not view.current():
            self.handed_over += 1
            raise NeedsActor(remaining_args(max(0, int((deadline - time.monotonic()) * 1000))))



def _epoch(view: ClosedLog, leader_epoch: int) -> int:
    """The closed log's newest leader epoch, or the route's when its folder recorded none."""
    latest = view.leader_epochs.latest_epoch
    return latest if latest >= 0 else leader_epoch


FOLLOW_WAIT_S = 30.0  # one router call waits this long for a change


async def follow_changes(router: Any, node_id: str, changed: Callable[[str, int, Any], None],
                         reset: Callable[[], None]) -> None:
    """Keep one call waiting at the router's partition feed and apply each change as it comes
    (``changed(topic, partition, handle or None)``); ``reset()`` when the feed cannot say what was
    missed (a restarted router). Runs for the gateway's lifetime."""
    feed_id: str | None = None
    since = 0
    while True:
        try:
            new_id, seq, events = await router.partition_changes.remote(node_id, feed_id, since, FOLLOW_WAIT_S)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the router is restarting: ask again shortly
            log.info("gateway: partition feed unavailable (%s); retrying", e)
            await asyncio.sleep(1.0)
            continue
        if events is None:
            if feed_id is not None:
                reset()
            feed_id, since = new_id, seq
            continue
        since = seq
        for topic, partition, handle in events:
            changed(topic, partition, handle)
