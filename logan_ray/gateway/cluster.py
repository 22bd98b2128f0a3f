"""What a gateway knows about the cluster: routes, broker ids, topic ids, error codes.

Every Kafka request names topics and partitions; the gateway needs the partition
actor (and the node it lives on) for each. Asking the router on every request
would add a Ray round trip to each produce and fetch, so routes are cached and
dropped when a call through them fails (deleted topic, dead actor) or when a
Metadata request asks for fresh ones, which is when Kafka clients expect change.
"""
from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import Any, Awaitable, Callable, Iterable

from logan_ray._ray import ACTOR_GONE
from logan_ray.actors.channel import ChannelClosedError, ChannelLink
from logan_ray.actors.names import broker_id
from logan_ray.common.errors import BrokerFencedError, PartitionHibernatedError
from logan_ray.protocol import errors as codes

from .broker_identity import BrokerSecret
from .board_waits import BoardWaits
from .closed_reads import CLOSED_METHODS, ClosedReads, NeedsActor, follow_changes

log = logging.getLogger("logan_ray.gateway")

GATEWAYS_TTL_S = 2.0
#: Kafka's "no topic id" (unknown topics, errors).
ZERO_UUID = uuid.UUID(int=0)


def _actor_gone(exc: BaseException) -> bool:
    """The call's actor is dead, unreachable, or cannot be placed (Ray refuses a node it drains)."""
    return isinstance(exc, ACTOR_GONE)


def error_code(exc: BaseException) -> int:
    """Kafka error code for an exception from an actor call (Ray wraps the original)."""
    import ray

    cause = getattr(exc, "cause", None) or exc
    code = getattr(cause, "code", None)
    if isinstance(code, int) and code != -1:
        return code
    if _actor_gone(exc):  # the leadership moved or is moving: the client refreshes its metadata
        return codes.NOT_LEADER_OR_FOLLOWER
    if isinstance(exc, (asyncio.TimeoutError, ray.exceptions.GetTimeoutError)):
        return codes.REQUEST_TIMED_OUT
    return codes.UNKNOWN_SERVER_ERROR


def error_message(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    return text[0] if text else type(cause).__name__


def record_errors(exc: BaseException) -> list[dict]:
    """Produce v8+ ``record_errors`` for an append refused because of named records (KIP-467)."""
    cause = getattr(exc, "cause", None) or exc
    return [{"batch_index": i, "batch_index_error_message": m} for i, m in getattr(cause, "record_errors", ())]


def is_stale_route(exc: BaseException) -> bool:
    """True when the cached handle may point at an actor that no longer serves the partition. Not for a
    node whose broker lease ran out (``BrokerFencedError``): its routes are void only once it registers
    again, and asking the router meanwhile would wait for it (across a network cut, for the link)."""
    if _actor_gone(exc) or isinstance(exc, ChannelClosedError):
        return True
    return error_code(exc) == codes.NOT_LEADER_OR_FOLLOWER and not raised(exc, BrokerFencedError)


#: Partition actor methods that change nothing: repeating one after any failure is harmless.
READ_METHODS = frozenset({"locate", "fetch", "offsets", "wait_for_data", "offset_for_timestamp",
                          "max_timestamp_offset", "read_records", "list_offset", "end_offset_for_epoch",
                          "diverging_epoch", "leader_epoch"})


def raised(exc: BaseException, kind: type) -> bool:
    """Did the partition actor raise ``kind``, whichever way the error came: a Ray task error carries the
    actor's exception as ``.cause``, the channel its class name as ``.kind``."""
    cause = getattr(exc, "cause", None) or exc
    return isinstance(cause, kind) or getattr(cause, "kind", None) == kind.__name__


def refused_by_hibernation(exc: BaseException) -> bool:
    """True when a partition actor refused the call because it hibernates (the call did nothing)."""
    return raised(exc, PartitionHibernatedError)


def ignore_outcome(fut: "asyncio.Future") -> None:
    """Done-callback for a future nobody awaits any more: retrieve its error so asyncio
    does not log it (a background channel opening fails again on first use, an unused
    read-ahead or long-poll simply ends)."""
    if not fut.cancelled():
        fut.exception()


Activator = Callable[[Any], Awaitable[tuple[Any, ChannelLink | None, bool]]]


class Partition:
    """One routed partition: actor handle (None while inactive), node, and whether this gateway serves it.

    The gateway's one way to reach a partition: :meth:`call` starts an inactive
    partition through the router, and when the actor it knew is gone (it hibernated,
    or crashed and the caller must look again) asks the router for the current one.
    """

    __slots__ = ("handle", "node_id", "local", "leader_epoch", "replicas", "isr", "_link", "_activate", "_down",
                 "_closed")

    def __init__(self, handle: Any, node_id: str, local: bool, link: ChannelLink | None = None,
                 activate: Activator | None = None, offline: bool | None = None, leader_epoch: int = -1,
                 closed: Callable[["Partition", str, tuple], Awaitable[Any]] | None = None,
                 replicas: list[str] | None = None, isr: list[str] | None = None) -> None:
        self.handle = handle
        self.node_id = node_id
        self.local = local
        #: the partition's leader epoch as the router had it when this route was fetched (Metadata shows it)
        self.leader_epoch = leader_epoch
        #: node ids of its replicas (leader first) and of those in sync, as the router had them
        self.replicas = replicas or [node_id]
        self.isr = isr or [node_id]
        self._link = link
        self._activate = activate
        self._down = handle is None if offline is None else offline
        #: reads of this partition while inactive, answered from its closed files (closed_reads.py)
        self._closed = closed

    @property
    def offline(self) -> bool:
        """Its node is gone and it waits for it (LEADER_NOT_AVAILABLE); ``node_id`` is that node."""
        return self._down

    @property
    def files_directory(self) -> str | None:
        """The folder its closed files are read from when it is not ``<data-dir>/<topic>-<p>``."""
        return getattr(self._closed, "directory", None)

    @property
    def from_files(self) -> bool:
        """Inactive, and its reads are answered from its closed files by this gateway (closed_reads.py)."""
        return self.handle is None and self._closed is not None

    def _open_board(self) -> Any:
        """This active partition's offsets board, if its channel is open (the board is only current then)."""
        link = self._link
        if link is None or self.handle is None:
            return None
        client, board = link.client, link.board
        if client is None or client.closed:
            return None
        return board

    def at_log_end(self, offset: int, current_leader_epoch: int = -1) -> tuple[int, int] | None:
        """(log end, log start) when this active partition's actor says, on its offsets board
        (actors/offsets_board.py), that ``offset`` is its log end: a consumer's Fetch there is
        answered "nothing new" without waking the actor. None when only the actor can answer (no
        open channel, another offset, another leader epoch, or a partition with followers)."""
        board = self._open_board()
        if board is None:
            return None
        found = board.read()
        if found is None:
            return None
        end, start, epoch = found
        if offset != end or (current_leader_epoch >= 0 and current_leader_epoch != epoch):
            return None
        return end, start

    def marker_mark(self) -> tuple[Any, int] | None:
        """(board, transaction markers begun) from this active partition's offsets board, or None when
        it cannot say (no open channel): a cached KIP-890 verification holds while this is unchanged."""
        board = self._open_board()
        if board is None:
            return None
        count = board.markers()
        return None if count is None else (board, count)

    def leader_hint(self) -> dict:
        """KIP-951 ``current_leader`` for a NOT_LEADER_OR_FOLLOWER answer: the broker to go to."""
        return {"leader_id": broker_id(self.node_id), "leader_epoch": self.leader_epoch}

    async def call(self, method: str, *args: Any, payload: Any = None) -> Any:
        """Call a partition actor method: over the node-local channel when there is one, else by Ray.

        An inactive partition is started first. When the actor turns out to be gone, the
        router names the current one (starting it); the call is repeated there when it
        cannot have taken effect on the old one (a read, or the old actor hibernated,
        refusing everything after its last call), else the error goes to the caller.
        """
        closed_read = self._closed is not None and method in CLOSED_METHODS
        if self.handle is None and closed_read:
            try:
                return await self._closed(self, method, args)  # inactive: its files answer, nothing wakes
            except NeedsActor as e:
                args = e.call_args or args
        if self.handle is None and self._activate is not None:
            self.handle, self._link, _ = await self._activate(None)  # inactive: the router starts its actor
        for attempt in range(3):
            handle = self.handle
            try:
                return await self._call_once(method, args, payload)
            except Exception as e:
                if self._activate is None or attempt == 2 or not is_stale_route(e):
                    raise
                if closed_read:  # the actor is gone: if it hibernated, read its files instead of waking it
                    try:
                        result = await self._closed(self, method, args)
                    except NeedsActor as n:
                        args = n.call_args or args
                    else:
                        if self.handle is handle:
                            self.handle, self._link = None, None
                        return result
                fresh, link, stale_hibernated = await self._activate(handle)
                if self.handle is handle:
                    self.handle, self._link = fresh, link
                if not (refused_by_hibernation(e) or stale_hibernated or method in READ_METHODS):
                    raise

    async def _call_once(self, method: str, args: tuple, payload: Any) -> Any:
        link = self._link
        client = link.client if link is not None else None
        if link is not None and (client is None or client.closed):
            client = await link.get(self.handle)
        if client is not None:
            link.calls += 1
            return await client.call(method, *args, payload=payload)
        if payload is not None:
            args = (*args, payload)
        return await getattr(self.handle, method).remote(*args)


class _RouterMethod:
    def __init__(self, proxy: "RouterProxy", name: str) -> None:
        self._proxy, self._name = proxy, name

    async def remote(self, *args: Any, **kwargs: Any) -> Any:
        import ray

        from logan_ray.actors.partition import NAMESPACE
        from logan_ray.actors.router import ROUTER_NAME

        try:
            return await getattr(self._proxy.handle, self._name).remote(*args, **kwargs)
        except ray.exceptions.RayActorError:
            # The router was replaced (stopped and started again): find the new one by name.
            self._proxy.handle = ray.get_actor(ROUTER_NAME, namespace=NAMESPACE)
            return await getattr(self._proxy.handle, self._name).remote(*args, **kwargs)


class RouterProxy:
    """The router's handle, looked up again by name if the actor behind it died for good."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __getattr__(self, name: str) -> _RouterMethod:
        return _RouterMethod(self, name)


class Cluster:
    """Route cache and cluster facts for one gateway (one per node)."""

    def __init__(self, router: Any, node_id: str, cluster_id: str) -> None:
        self.router = RouterProxy(router)
        self.node_id = node_id
        self.broker_id = broker_id(node_id)
        self.cluster_id = cluster_id
        self._routes: dict[str, list[Partition]] = {}
        self._ids: dict[uuid.UUID, str] = {}
        self._id_of: dict[str, uuid.UUID] = {}
        self._gateways: dict[str, tuple[str, int]] = {}
        self._gateways_at = 0.0
        self._settings: dict[str, Any] | None = None
        self._links: dict[str, ChannelLink] = {}
        self._activating: dict[tuple[str, int, str | None], asyncio.Future] = {}
        self.closed = ClosedReads(self._data_dir)
        #: long-polls of active partitions waiting on their offsets boards (board_waits.py)
        self.board_waits = BoardWaits()
        self._following: asyncio.Task | None = None
        #: this node's broker lease (actors/broker_lease.py) when its gateway heartbeats the router; None:
        #: no session, so the router never fences this node and nothing here waits for a lease
        self.lease: Any = None
        #: this gateway's own advertised (host, port) on its first listener, set once it listens
        self.own_endpoint: tuple[str, int] | None = None
        #: what this gateway's brokers prove to each other (broker_identity.py)
        self.broker_secret = BrokerSecret(self.router)

    # ---------------------------------------------------------------- routes
    def _store(self, name: str, route: dict | None) -> list[Partition] | None:
        if route is None:
            self._routes.pop(name, None)
            self._forget_id(name)
            return None
        offline = set(route.get("offline", ()))
        epochs = route.get("leader_epochs") or [-1] * len(route["partitions"])
        replicas = route.get("replicas") or [None] * len(route["partitions"])
        isrs = route.get("isr") or [None] * len(route["partitions"])
        folders = route.get("directories") or [None] * len(route["partitions"])
        routed = []
        for i, (h, n) in enumerate(route["partitions"]):
            local = n == self.node_id and i not in offline
            routed.append(Partition(h, n, local, self._link(h) if h is not None and local else None,
                                    activate=self._activator(name, i, local), offline=i in offline,
                                    leader_epoch=epochs[i], replicas=replicas[i], isr=isrs[i],
                                    # a replicated partition's high watermark lives in its actor only
                                    closed=self._closed_reader(name, i, folders[i])
                                    if local and len(replicas[i] or ()) < 2
                                    else None))
        if self._following is None:  # hear of partitions started or hibernated by anyone
            self._following = asyncio.ensure_future(follow_changes(self.router, self.node_id, self.partition_changed,
                                                                   self._feed_reset))
        for p in routed:  # open the channels now, so a client's first produce or fetch doesn't wait
            if p.local and p._link is not None and p._link.client is None and not p._link.lock.locked():
                asyncio.ensure_future(p._link.get(p.handle)).add_done_callback(ignore_outcome)
        self._routes[name] = routed
        self._remember_id(name, uuid.UUID(route["topic_id"]))
        if len(self._links) > 16 + 2 * sum(len(p) for p in self._routes.values()):
            self._drop_unused_links()
        return routed

    async def refresh(self, names: list[str] | None, auto_create: bool = False) -> dict[str, list[Partition] | None]:
        """Fresh routes from the router (all topics when ``names`` is None)."""
        routes = await self.router.route_with_ids.remote(names, auto_create)
        if names is None:
            for gone in set(self._routes) - set(routes):
                self._routes.pop(gone, None)
                self._forget_id(gone)
        return {name: self._store(name, parts) for name, parts in routes.items()}

    async def topic(self, name: str) -> list[Partition] | None:
        """Cached routes of one topic, asking the router only on a miss."""
        parts = self._routes.get(name)
        if parts is None:
            parts = (await self.refresh([name]))[name]
        return parts

    async def partition(self, name: str, index: int) -> Partition | None:
        """The routed partition, or None when the topic or partition does not exist."""
        parts = await self.topic(name)
        if parts is not None and (not 0 <= index < len(parts) or parts[index].offline):
            parts = (await self.refresh([name]))[name]  # maybe partitions were added, or its node is back
        if parts is None or not 0 <= index < len(parts):
            return None
        return parts[index]

    def _activator(self, name: str, index: int, local: bool) -> Activator:
        async def activate(stale: Any) -> tuple[Any, ChannelLink | None, bool]:
            """Ask the router for the partition's actor, starting it if inactive: (handle, channel link,
            whether ``stale``, the actor a call just failed on, ended by hibernating). Concurrent
            requests about the same actor share one router call."""
            stale_id = stale._actor_id.hex() if stale is not None else None
            key = (name, index, stale_id)
            fut = self._activating.get(key)
            if fut is None:
                fut = self._activating[key] = asyncio.ensure_future(
                    self.router.reactivate.remote(name, index, stale_id))
                fut.add_done_callback(lambda _f: self._activating.pop(key, None))
            handle, hibernated = await asyncio.shield(fut)
            if local:
                self.closed.changed(name, index)  # long-polls waiting on its files go on in the actor
            return handle, self._link(handle) if local else None, hibernated
        return activate

    def _closed_reader(self, name: str, index: int, directory: str | None = None
                       ) -> Callable[[Partition, str, tuple], Awaitable[Any]]:
        def read(part: Partition, method: str, args: tuple) -> Awaitable[Any]:
            tid = self._id_of.get(name)
            return self.closed.call(name, index, str(tid) if tid is not None else None, part.leader_epoch, method, args,
                                    directory)
        read.directory = directory  # type: ignore[attr-defined]  (Partition.files_directory)
        return read

    def _feed_reset(self) -> None:
        """The router's feed restarted (a router Ray restarted): routes and views cached until now may be
        stale. The routes are asked again beside the traffic, not dropped: until the answers come the old
        ones serve (a stale one is refused by its partition actor, then asked again), instead of every
        request waiting for a router that is still busy starting (seconds of write gap after each router
        restart on a loaded machine)."""
        self.closed.forget_all()
        names = list(self._routes)
        if names:
            asyncio.ensure_future(self.refresh(names)).add_done_callback(ignore_outcome)

    async def _data_dir(self) -> str:
        return (await self.settings())["data_dir"]

    def partition_changed(self, name: str, index: int, handle: Any) -> None:
        """The router says a partition of this node started (``handle``), or hibernated or lost its
        leadership to another node (None)."""
        parts = self._routes.get(name)
        if parts is not None and 0 <= index < len(parts):
            part = parts[index]
            if not part.local:
                if handle is not None:  # it started here while the cached route has it elsewhere: a leader change
                    self._routes.pop(name, None)  # moved here; without this, produce and follower fetches here
                    # were refused NOT_LEADER_OR_FOLLOWER until some client's Metadata refreshed this gateway
            elif handle is None and len(part.replicas) > 1:
                self._routes.pop(name, None)  # it may have hibernated or moved away (a controlled move): ask again
            elif handle is None:
                part.handle, part._link = None, None
            elif part.handle is None or part.handle._actor_id != handle._actor_id:
                part.handle, part._link = handle, self._link(handle)
        self.closed.changed(name, index)

    def _link(self, handle: Any) -> ChannelLink:
        key = handle._actor_id.hex()
        link = self._links.get(key)
        if link is None:
            link = self._links[key] = ChannelLink()
        return link

    def _drop_unused_links(self) -> None:
        """Close the channels of actors no route points to any more (deleted topics)."""
        used = {p.handle._actor_id.hex() for parts in self._routes.values() for p in parts
                if p.local and p.handle is not None}  # local: online
        for key in [k for k in self._links if k not in used]:
            self._links.pop(key).close()

    def channel_stats(self) -> dict[str, int]:
        links = self._links.values()
        return {"channels": sum(1 for k in links if k.client is not None and not k.client.closed),
                "channel_calls": sum(k.calls for k in links), "channel_connects": sum(k.connects for k in links),
                "closed_reads": self.closed.served, "closed_read_handovers": self.closed.handed_over,
                "closed_views": self.closed.inactive_views()}

    def close(self) -> None:
        if self._following is not None:
            self._following.cancel()
        self.closed.forget_all()
        for link in self._links.values():
            link.close()
        self._links.clear()

    def forget(self, name: str) -> None:
        self._routes.pop(name, None)

    def forget_all(self) -> None:
        """Drop every cached route and the gateways' addresses (this node was fenced: its leaderships may
        have moved; or the router is a new one, which learns the gateways as they register again)."""
        self._routes.clear()
        self._gateways_at = 0.0
        self.__dict__.pop("_by_listener", None)

    # ------------------------------------------------------------- topic ids
    def _remember_id(self, name: str, tid: uuid.UUID) -> None:
        old = self._id_of.get(name)
        if old is not None and old != tid:
            self._ids.pop(old, None)  # the topic was deleted and created again
        self._id_of[name] = tid
        self._ids[tid] = name

    def _forget_id(self, name: str) -> None:
        tid = self._id_of.pop(name, None)
        if tid is not None:
            self._ids.pop(tid, None)

    def topic_id(self, name: str) -> uuid.UUID:
        """The id of a routed topic (known after a refresh), else Kafka's zero id."""
        return self._id_of.get(name, ZERO_UUID)

    async def topic_names(self, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str | None]:
        """Names of topic ids; unknown ids make one router call for every topic's id."""
        ids = list(ids)
        if any(i not in self._ids for i in ids):
            current = {name: uuid.UUID(tid) for name, tid in (await self.router.topic_ids.remote()).items()}
            for name in [n for n in self._id_of if n not in current]:
                self._forget_id(name)
            for name, tid in current.items():
                self._remember_id(name, tid)
        return {i: self._ids.get(i) for i in ids}

    # --------------------------------------------------------------- brokers
    async def gateways(self, fresh: bool = False) -> dict[str, tuple[str, int]]:
        """{node id: (advertised host, port)} of every registered gateway.

        On a secondary listener (several ``listeners``) the addresses are those of that
        listener: a client is always told the brokers on the listener it came in by.
        """
        from logan_ray.security.current import other_listener

        listener = other_listener()
        if listener is not None:
            return await self._listener_gateways(listener, fresh)
        now = time.monotonic()
        if fresh or now - self._gateways_at > GATEWAYS_TTL_S:
            self._gateways = await self.router.gateways.remote()
            self._gateways_at = now
        if self.node_id not in self._gateways and self.own_endpoint is not None \
                and self.lease is not None and self.lease.valid():
            # a router that replaced a dead one knows no gateway until they register again: a broker
            # always names itself while its lease runs (it is not fenced), so a client that asked
            # it is never left without a broker to go to (librdkafka's admin client then stalled)
            return {**self._gateways, self.node_id: self.own_endpoint}
        return self._gateways

    async def _listener_gateways(self, listener: str, fresh: bool) -> dict[str, tuple[str, int]]:
        cache = self.__dict__.setdefault("_by_listener", {})
        at, eps = cache.get(listener, (0.0, {}))
        now = time.monotonic()
        if fresh or now - at > GATEWAYS_TTL_S:
            eps = {node: tuple(ep) for node, ep in (await self.router.listener_gateways.remote(listener)).items()}
            cache[listener] = (now, eps)
        return eps

    async def settings(self) -> dict[str, Any]:
        if self._settings is None:
            self._settings = await self.router.settings.remote()
        return self._settings
