"""A replicated partition's leader side, inside its partition actor.

Only partitions with more than one replica have one (with one replica the
high watermark is the log end and nothing here runs, so that path is as
before). It keeps :class:`~.isr.FollowerStates` up to date from the followers'
fetches (:meth:`follower_fetched`), answers what the high watermark is, lets
``acks=all`` wait for it (:meth:`wait_replicated`), and changes the ISR:
expansion when a follower caught up, shrinking on a timer every half
``replica.lag.time.max.ms`` (as Kafka's ``isr-expiration`` task). Every change
is persisted by the controller (the router's ``alter_isr``, which refuses a
leader of an older epoch) before it takes effect here.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable

from logan_ray.common.errors import NotEnoughReplicasAfterAppendError

from logan_ray.storage.hw_checkpoint import CHECKPOINT_INTERVAL_S, read_high_watermark, write_high_watermark

from .isr import DEFAULT_REPLICA_LAG_TIME_MAX_MS, FollowerStates

log = logging.getLogger(__name__)

#: the expiry loop woke this much later than asked: the leader's own process did not run meanwhile
STALL_MS = 100


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class LeaderReplication:
    def __init__(self, name: str, router: Any, topic: str, partition: int, leader: str, replicas: list[str],
                 isr: list[str], *, log_start: int, log_end: Callable[[], int], epoch: int,
                 lag_max_ms: int = DEFAULT_REPLICA_LAG_TIME_MAX_MS, directory: str | None = None,
                 isr_version: int = 0) -> None:
        self.name = name
        self._log_end = log_end
        self._router = router
        self._topic, self._partition, self._epoch = topic, partition, epoch
        alone = [n for n in isr if n != leader] == []
        self._directory = directory
        # with followers in the ISR: the checkpointed HW (never above this log's end), else the log start
        saved = read_high_watermark(directory) if directory is not None and not alone else None
        start_hw = log_end() if alone else max(log_start, min(saved, log_end())) if saved is not None else log_start
        self._saved_hw = saved
        self.states = FollowerStates(leader, replicas, isr or [leader], high_watermark=start_hw,
                                     epoch_start_offset=log_end(), now_ms=_now_ms(), lag_max_ms=lag_max_ms)
        self._isr_version = isr_version  # the controller's version of the ISR held here (alter_isr's CAS)
        self._moved = asyncio.Event()
        self._altering = False
        self._task: asyncio.Task | None = None
        self._checkpoint_task: asyncio.Task | None = None

    @property
    def high_watermark(self) -> int:
        return self.states.high_watermark

    @property
    def isr_size(self) -> int:
        return len(self.states.isr)

    @property
    def confirmed_by_others(self) -> bool:
        """Does the high watermark wait for another replica (the maximal ISR is more than this leader)?

        Then an ``acks=all`` write it passed is on every replica the controller could elect cleanly
        (an election picks from the ISR, and each ISR change goes through the controller, which refuses
        a leader of an older epoch), so it may be acknowledged without this node's broker lease: a
        leader the controller replaced cannot pass its high watermark over records the new leader lacks,
        as the new leader stopped fetching from it. Kafka's own rule; what lets ``acks=all`` writes go on
        while the controller is away (a router restart, the head's loss)."""
        return any(n != self.states.leader for n in self.states.maximal_isr)

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._expire_loop())
        if self._checkpoint_task is None and self._directory is not None:
            self._checkpoint_task = asyncio.get_running_loop().create_task(self._checkpoint_loop())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._checkpoint_task is not None:
            self._checkpoint_task.cancel()
            self._checkpoint_task = None

    def appended(self, log_end: int) -> None:
        """The leader's log grew: with the leader alone in sync, the high watermark follows it."""
        if self.states.advance(log_end):
            self._wake()

    async def follower_fetched(self, node: str, fetch_offset: int) -> int:
        """A follower's fetch position (its log end); returns the high watermark."""
        if self.states.fetched(node, fetch_offset, self._log_end(), _now_ms()):
            self._wake()
        grown = self.states.to_expand(node)
        if grown is not None:
            await self._alter(grown)
        return self.states.high_watermark

    async def wait_replicated(self, end: int, min_isr: int) -> None:
        """``acks=all``: return once the high watermark reaches ``end`` with the ISR at ``min_isr`` or more.

        Kafka's rule (``Partition.checkEnoughReplicasReachOffset``): the answer is
        success only if the ISR still holds ``min.insync.replicas`` when the high
        watermark passes the request. A shrink moves the high watermark to the
        leader's log end at once (the leader may be alone in sync), so passing it
        says nothing about copies then: the request answers
        NOT_ENOUGH_REPLICAS_AFTER_APPEND (the record is in the leader's log but may
        not survive it), also when the ISR shrinks below the minimum while waiting.
        The gateway bounds the wait by the request's timeout.
        """
        while True:
            if len(self.states.isr) < min_isr:
                raise NotEnoughReplicasAfterAppendError(
                    f"{self.name}: the ISR shrank to {len(self.states.isr)} replicas, below "
                    f"min.insync.replicas={min_isr}, before offset {end - 1} was replicated")
            self.states.advance(self._log_end())
            if self.states.high_watermark >= end:
                return
            await self._moved.wait()

    def reassigned(self, epoch: int, replicas: list[str], isr: list[str], isr_version: int | None = None) -> None:
        """The controller changed the replica set (a reassignment) in ``epoch``: adopt it (ISR changes are
        asked in that epoch from now on)."""
        self._epoch = epoch
        if isr_version is not None:
            self._isr_version = isr_version
        self.states.set_replicas(replicas, isr, self._log_end(), _now_ms())
        self._wake()

    def isr_changed(self, isr: list[str], isr_version: int) -> bool:
        """The controller changed the ISR in this epoch (a dead or fenced follower left it): adopt it
        unless this leader already holds as new a version. True when adopted."""
        if isr_version <= self._isr_version:
            return False
        before = self.states.isr
        self._isr_version = isr_version
        self.states.set_isr(isr, self._log_end())
        log.info("%s: ISR %s -> %s (by the controller, version %d)", self.name, before, isr, isr_version)
        self._wake()  # acks=all waiters look again: the HW may pass now, or the ISR be below the minimum
        return True

    def _wake(self) -> None:
        self._moved.set()
        self._moved = asyncio.Event()

    async def _alter(self, isr: list[str]) -> None:
        if self._altering:
            return
        self._altering = True
        self.states.asking(isr)  # the high watermark waits for who it adds until the answer says
        try:
            answer = await self._router.alter_isr.remote(self._topic, self._partition, self._epoch, isr,
                                                         self._isr_version)
            before = self.states.isr
            if answer["isr_version"] >= self._isr_version:  # a refused change still brings the stored state
                self._isr_version = answer["isr_version"]
                self.states.set_isr(answer["isr"], self._log_end(), answered=True)
            if answer["accepted"]:
                log.info("%s: ISR %s -> %s", self.name, before, answer["isr"])
            else:
                log.info("%s: ISR change to %s refused (%s); the controller's is %s", self.name, isr,
                         answer.get("reason"), answer["isr"])
            self._wake()
        except Exception as e:  # the controller refused (a newer leader exists) or is away: keep the old ISR
            # (and whoever it would have added stays pending: the change may have been made)
            log.warning("%s: ISR change to %s not made: %s", self.name, isr, e)
        finally:
            self._altering = False

    async def checkpoint(self) -> None:
        """Write the high watermark to the partition folder when it moved (``hw_checkpoint``)."""
        hw = self.states.high_watermark
        if self._directory is not None and hw != self._saved_hw:
            await asyncio.to_thread(write_high_watermark, self._directory, hw)
            self._saved_hw = hw

    async def _checkpoint_loop(self) -> None:
        while True:
            await asyncio.sleep(CHECKPOINT_INTERVAL_S)
            try:
                await self.checkpoint()
            except OSError as e:  # a full or failing disk: the log's own writes report it
                log.warning("%s: high watermark checkpoint not written: %s", self.name, e)

    async def _expire_loop(self) -> None:
        while True:
            pause_ms = self.states.lag_max_ms // 2
            asleep = _now_ms()
            await asyncio.sleep(pause_ms / 1000.0)
            late = _now_ms() - asleep - pause_ms
            if late > STALL_MS:
                # this leader was stopped or starved: the followers did not lag, their fetches waited for it
                self.states.stalled(late)
            smaller = self.states.to_shrink(_now_ms())
            if smaller is not None:
                await self._alter(smaller)
