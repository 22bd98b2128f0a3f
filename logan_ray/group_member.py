"""A Python consumer's membership in a consumer group, speaking the classic group protocol.

The member sends the same JoinGroup / SyncGroup / Heartbeat / OffsetCommit bodies a
Kafka client sends (straight to the coordinator actor instead of over TCP), with
"consumer" protocol subscription bytes and, when it leads, range or round-robin
assignments encoded exactly as Kafka clients encode them. So a Python app and,
say, a librdkafka consumer can be members of one group and split its partitions.

Why a non-blocking state machine (``advance``) instead of one blocking join: a
JoinGroup answer arrives only when *every* member has rejoined. Several members
polled from one thread would deadlock if each poll blocked in its join; instead
each ``Consumer.poll`` advances the join as far as its timeout allows, the
requests staying in flight between polls. Heartbeats go out from a background
thread so a slow poll loop does not cost the member its place.
"""
from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import ray

from logan_ray.groups.assignors import ASSIGNORS, MemberSubscription
from logan_ray.groups.consumer_protocol import decode_assignment, decode_subscription, encode_assignment, \
    encode_subscription
from logan_ray.protocol import errors as E

from ._ray import get
from .errors import (
    CommitFailedError,
    FencedInstanceIdError,
    GroupError,
    InconsistentGroupProtocolError,
    RebalanceInProgressError,
    UnknownTopicError,
)

log = logging.getLogger("logan_ray.group")

UNJOINED, JOINING, SYNCING, STABLE = "unjoined", "joining", "syncing", "stable"
_RETRY_JOIN = {E.REBALANCE_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR, E.COORDINATOR_LOAD_IN_PROGRESS,
               E.ILLEGAL_GENERATION, E.UNKNOWN_SERVER_ERROR}
_FATAL = {E.FENCED_INSTANCE_ID: FencedInstanceIdError, E.INCONSISTENT_GROUP_PROTOCOL: InconsistentGroupProtocolError}


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str | None = ""


def _node_ip() -> str:
    try:
        return ray.util.get_node_ip_address()
    except Exception:
        return socket.gethostname()


class GroupMember:
    """Join, sync, heartbeat, commit and leave for one consumer (thread-safe where it matters)."""

    def __init__(self, client: Any, group_id: str, *, client_id: str = "logan-ray-python",
                 instance_id: str | None = None, session_timeout_ms: int = 45000, rebalance_timeout_ms: int = 300000,
                 heartbeat_interval_ms: int = 3000, assignors: Sequence[str] = ("range",),
                 metadata_refresh_ms: int = 5000, retry_backoff_ms: int = 100) -> None:
        unknown = [a for a in assignors if a not in ASSIGNORS]
        if unknown or not assignors:
            raise ValueError(f"partition_assignment_strategy must be among {sorted(ASSIGNORS)}, got {list(assignors)}")
        if not group_id:
            raise ValueError("a consumer group needs a non-empty group id")
        self._client = client
        self.group_id = group_id
        self.client_id = client_id
        self.instance_id = instance_id
        self.session_timeout_ms = session_timeout_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.heartbeat_interval_s = heartbeat_interval_ms / 1000.0
        self.assignors = list(assignors)
        self.metadata_refresh_s = metadata_refresh_ms / 1000.0
        self.retry_backoff_s = retry_backoff_ms / 1000.0
        self._coord_handle: Any = None  # the coordinator of the group, found again after it failed or moved
        self._host = "/" + _node_ip()
        self._lock = threading.RLock()
        self.member_id = ""
        self.generation = -1
        self.protocol: str | None = None
        self.leader = ""
        self.state = UNJOINED
        self.topics: list[str] = []
        self._ref: Any = None  # the JoinGroup or SyncGroup in flight
        self._rejoin = True
        self._retry_at = 0.0
        self._leader_topics: dict[str, int] = {}  # what the leader assigned from: topic -> partitions
        self._leader_checked = 0.0
        self._closed = threading.Event()
        self._fatal: GroupError | None = None
        self._thread = threading.Thread(target=self._heartbeat_loop, name=f"logan-ray-heartbeat-{group_id}",
                                        daemon=True)
        self._thread.start()

    @property
    def _coord(self) -> Any:
        """The coordinator of the group: the one on the node leading its __consumer_offsets partition."""
        from logan_ray.actors.group_coordinator import group_coordinator

        handle = self._coord_handle
        if handle is None:
            handle = self._coord_handle = group_coordinator(self.group_id)
        return handle

    def _lost_coordinator(self) -> None:
        """A call failed (NOT_COORDINATOR, the actor gone): look the coordinator up again next time."""
        self._coord_handle = None

    # ------------------------------------------------------------- state
    def subscribe(self, topics: Iterable[str]) -> None:
        with self._lock:
            topics = sorted(set(topics))
            if topics != self.topics:
                self.topics = topics
                self._rejoin = True

    def rejoin_needed(self) -> bool:
        with self._lock:
            if self._fatal is not None:
                raise self._fatal
            return self._rejoin or self.state == UNJOINED

    def request_rejoin(self) -> None:
        with self._lock:
            self._rejoin = True

    @property
    def active(self) -> bool:
        return self.state == STABLE

    def _body(self) -> dict:
        return {"group_id": self.group_id, "member_id": self.member_id, "group_instance_id": self.instance_id}

    def _reset(self, member_id: bool) -> None:
        self.generation = -1
        self.protocol = None
        if member_id:
            self.member_id = ""

    # -------------------------------------------------------------- join
    def start_join(self) -> None:
        """Send JoinGroup (after the consumer has revoked its partitions)."""
        with self._lock:
            self._rejoin = False
            self.state = JOINING
            self._send_join()

    def _send_join(self) -> None:
        meta = encode_subscription(self.topics)
        body = {**self._body(), "session_timeout_ms": self.session_timeout_ms,
                "rebalance_timeout_ms": self.rebalance_timeout_ms, "protocol_type": "consumer",
                "protocols": [{"name": a, "metadata": meta} for a in self.assignors], "reason": None}
        self._ref = self._coord.join_group.remote(body, 9, self.client_id, self._host)

    def advance(self, timeout_s: float) -> list[tuple[str, int]] | None:
        """Drive the join/sync in flight for up to ``timeout_s``; the new assignment once it arrives."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        while True:
            with self._lock:
                if self._fatal is not None:
                    raise self._fatal
                if self.state == STABLE:
                    return None
                if self.state == UNJOINED:
                    self.state = JOINING
                    self._send_join()
                ref = self._ref
            wait_s = max(0.0, deadline - time.monotonic())
            if self._retry_at > time.monotonic():
                pause = min(wait_s, self._retry_at - time.monotonic())
                time.sleep(pause)
                if time.monotonic() < self._retry_at:
                    return None
                with self._lock:
                    self._send_join()
                continue
            ready, _ = ray.wait([ref], num_returns=1, timeout=wait_s)
            if not ready:
                return None
            try:
                resp = get(ref)
            except Exception as e:  # the coordinator restarted, moved or is unreachable: retry the join
                log.warning("group %s: join/sync failed: %s", self.group_id, e)
                self._lost_coordinator()
                with self._lock:
                    self.state = JOINING
                    self._retry_at = time.monotonic() + max(self.retry_backoff_s, 0.5)
                continue
            with self._lock:
                if self.state == JOINING:
                    self._on_join(resp)
                else:
                    assigned = self._on_sync(resp)
                    if assigned is not None:
                        return assigned
            if time.monotonic() >= deadline:
                return None

    def _backoff(self) -> None:
        self._retry_at = time.monotonic() + self.retry_backoff_s

    def _on_join(self, resp: dict) -> None:
        code = resp["error_code"]
        if code in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE):
            self._lost_coordinator()
        if code == E.MEMBER_ID_REQUIRED:
            self.member_id = resp["member_id"]
            self._send_join()
            return
        if code == E.UNKNOWN_MEMBER_ID:
            self._reset(member_id=True)
            self._send_join()
            return
        if code in _RETRY_JOIN:
            self._backoff()
            return
        if code != E.NONE:
            self._fatal = _FATAL.get(code, GroupError)(
                f"group {self.group_id}: JoinGroup failed with {E.ERROR_NAMES.get(code, code)}", code)
            raise self._fatal
        self.member_id = resp["member_id"]
        self.generation = resp["generation_id"]
        self.protocol = resp["protocol_name"]
        self.leader = resp["leader"]
        assignments = []
        if self.leader == self.member_id and not resp.get("skip_assignment"):
            assignments = self._assign(resp["members"])
        self.state = SYNCING
        body = {**self._body(), "generation_id": self.generation, "protocol_type": "consumer",
                "protocol_name": self.protocol, "assignments": assignments}
        self._ref = self._coord.sync_group.remote(body, 5)

    def _on_sync(self, resp: dict) -> list[tuple[str, int]] | None:
        code = resp["error_code"]
        if code in (E.NOT_COORDINATOR, E.COORDINATOR_NOT_AVAILABLE):
            self._lost_coordinator()
        if code == E.NONE:
            self.state = STABLE
            return decode_assignment(resp["assignment"]).topic_partitions()
        if code in _FATAL:
            self._fatal = _FATAL[code](f"group {self.group_id}: SyncGroup failed with {E.ERROR_NAMES[code]}")
            raise self._fatal
        self._reset(member_id=code == E.UNKNOWN_MEMBER_ID)
        self.state = JOINING
        self._send_join()
        return None

    # ----------------------------------------------------------- leading
    def _partition_counts(self, topics: Iterable[str]) -> dict[str, int]:
        counts = {}
        for t in topics:
            try:
                counts[t] = len(self._client.partitions(t, refresh=True))
            except UnknownTopicError:
                counts[t] = 0
        return counts

    def _assign(self, members: list[dict]) -> list[dict]:
        subs = []
        for m in members:
            try:
                topics = decode_subscription(m["metadata"]).topics
            except ValueError:
                topics = []
            subs.append(MemberSubscription(m["member_id"], m.get("group_instance_id"), topics))
        counts = self._partition_counts({t for s in subs for t in s.topics})
        self._leader_topics = counts
        self._leader_checked = time.monotonic()
        result = ASSIGNORS[self.protocol or self.assignors[0]](subs, counts)
        return [{"member_id": mid, "assignment": encode_assignment(parts)} for mid, parts in result.items()]

    def _check_metadata(self) -> None:
        """The leader rejoins when a subscribed topic appears or gains partitions (as Kafka's leader does)."""
        with self._lock:
            if self.state != STABLE or self.leader != self.member_id or not self._leader_topics:
                return
            if time.monotonic() - self._leader_checked < self.metadata_refresh_s:
                return
            self._leader_checked = time.monotonic()
            known = dict(self._leader_topics)
        if self._partition_counts(known) != known:
            self.request_rejoin()

    # --------------------------------------------------------- heartbeat
    def _heartbeat_loop(self) -> None:
        while not self._closed.wait(self.heartbeat_interval_s):
            with self._lock:
                if self.state not in (SYNCING, STABLE) or self.generation < 0:
                    continue
                body = {**self._body(), "generation_id": self.generation}
                generation = self.generation
            try:
                code = get(self._coord.heartbeat.remote(body), timeout=self.session_timeout_ms / 1000.0)["error_code"]
            except Exception as e:
                log.warning("group %s: heartbeat failed: %s", self.group_id, e)
                self._lost_coordinator()
                continue
            with self._lock:
                if generation != self.generation:
                    continue
                if code == E.REBALANCE_IN_PROGRESS:
                    self._rejoin = True
                elif code in (E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID):
                    self._reset(member_id=code == E.UNKNOWN_MEMBER_ID)
                    self._rejoin = True
                elif code == E.FENCED_INSTANCE_ID:
                    self._fatal = FencedInstanceIdError(f"group {self.group_id}: another consumer uses instance id "
                                                        f"{self.instance_id!r}")
            try:
                self._check_metadata()
            except Exception as e:
                log.warning("group %s: metadata check failed: %s", self.group_id, e)

    # ----------------------------------------------------------- offsets
    def commit(self, offsets: dict[tuple[str, int], OffsetAndMetadata], *, managed: bool = True) -> None:
        """Commit offsets; raises CommitFailedError if the group moved on (rebalanced) meanwhile.

        ``managed=False`` commits as a consumer without group membership (manual assignment).
        """
        if not offsets:
            return
        with self._lock:
            if managed:
                if self.state != STABLE:
                    raise RebalanceInProgressError(f"group {self.group_id} is rebalancing; commit after the next poll")
                body = {**self._body(), "generation_id_or_member_epoch": self.generation}
            else:
                body = {"group_id": self.group_id, "member_id": "", "group_instance_id": None,
                        "generation_id_or_member_epoch": -1}
        topics: dict[str, list[dict]] = {}
        for (t, p), om in offsets.items():
            topics.setdefault(t, []).append({"partition_index": p, "committed_offset": om.offset,
                                             "committed_leader_epoch": -1, "committed_metadata": om.metadata})
        body["topics"] = [{"name": t, "partitions": ps} for t, ps in topics.items()]
        try:
            resp = get(self._coord.offset_commit.remote(body, 9))
        except Exception:
            self._lost_coordinator()
            raise
        failed = {(t["name"], p["partition_index"]): p["error_code"] for t in resp["topics"] for p in t["partitions"]
                  if p["error_code"] != E.NONE}
        if not failed:
            return
        codes = set(failed.values())
        names = ", ".join(sorted({E.ERROR_NAMES.get(c, str(c)) for c in codes}))
        if codes & {E.ILLEGAL_GENERATION, E.UNKNOWN_MEMBER_ID, E.REBALANCE_IN_PROGRESS}:
            with self._lock:
                if E.UNKNOWN_MEMBER_ID in codes:
                    self._reset(member_id=True)
                self._rejoin = True
            raise CommitFailedError(f"group {self.group_id}: commit refused ({names}); the group has rebalanced",
                                    min(codes))
        if E.FENCED_INSTANCE_ID in codes:
            raise FencedInstanceIdError(f"group {self.group_id}: commit fenced ({names})")
        raise GroupError(f"group {self.group_id}: commit of {sorted(failed)} failed ({names})", min(codes))

    def committed(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], OffsetAndMetadata | None]:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        if not by_topic:
            return {}
        body = {"group_id": self.group_id,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}
        try:
            resp = get(self._coord.offset_fetch.remote(body, 7))
        except Exception:
            self._lost_coordinator()
            raise
        out: dict[tuple[str, int], OffsetAndMetadata | None] = {}
        for t in resp["topics"]:
            for p in t["partitions"]:
                off = p["committed_offset"]
                out[(t["name"], p["partition_index"])] = None if off < 0 else OffsetAndMetadata(off, p["metadata"])
        return out

    # ------------------------------------------------------------- close
    def close(self, leave: bool = True) -> None:
        """Stop heartbeating; dynamic members leave the group so their partitions move at once.

        Static members (``group_instance_id``) stay, as in Kafka: a restart within the
        session timeout gets the same partitions back without a rebalance.
        """
        if self._closed.is_set():
            return
        self._closed.set()
        self._thread.join(timeout=self.heartbeat_interval_s + 5)
        with self._lock:
            member_id, state = self.member_id, self.state
            self.state = UNJOINED
        if leave and member_id and self.instance_id is None:
            body = {"group_id": self.group_id, "members": [{"member_id": member_id, "group_instance_id": None,
                                                            "reason": "the consumer is closing"}]}
            try:
                get(self._coord.leave_group.remote(body, 5), timeout=30)
            except Exception as e:
                log.warning("group %s: leave failed: %s", self.group_id, e)
