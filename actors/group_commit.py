"""Group commit for ``acks=all``: appends wait for an fdatasync that many of them share.

With one replica, ``acks=all`` can only mean "on stable storage". An fsync per
append would cap a partition at a few hundred appends per second, so an
acknowledgement waits for the next sync that covers it: at most one sync runs
at a time (in a worker thread, so the actor's event loop keeps appending and
serving reads meanwhile), and everything appended while it ran is covered by
the one after it. Under load the number of syncs per second stays at what the
disk allows while each covers more appends.
"""
from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from logan_ray.storage.log import PartitionLog


class GroupCommit:
    """Awaitable durability of one partition log, one fdatasync in flight at a time."""

    def __init__(self, plog: PartitionLog) -> None:
        self._log = plog
        self._pool = ThreadPoolExecutor(1, thread_name_prefix=f"sync-{plog.name}")
        self._running: asyncio.Future | None = None
        self.syncs = 0  # fdatasync rounds started: fewer than waits under concurrency

    async def wait(self, upto: int) -> None:
        """Return once every offset below ``upto`` is on stable storage.

        Raises KafkaStorageError when the sync fails (the log is then offline),
        LogClosedError when the log closes first.
        """
        while self._log.recovery_point < upto:
            running = self._running
            if running is None or running.done():
                # Start a round; it syncs up to the log end as it is when it starts, which
                # includes this caller's append and every append queued before it.
                running = asyncio.get_running_loop().run_in_executor(self._pool, self._log.flush_to, upto)
                self._running = running
                self.syncs += 1
            await asyncio.shield(running)

    def close(self) -> None:
        self._pool.shutdown(wait=False)
