"""Background fsync of rolled segments, so a roll never waits for a disk write."""
from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)


class RollFlusher:
    """Background fsync of rolled segments, as Kafka's scheduler does after a roll.

    Rolled segments must become durable so the recovery point can move past
    them (bounding recovery to the active segment), but an fsync of up to
    ``segment.bytes`` must not stall the append that triggered the roll.
    """

    def __init__(self, name: str, flush_to: Callable[[int], None]):
        self._name = name
        self._flush_to = flush_to
        self._cond = threading.Condition()
        self._target = 0
        self._done = 0
        self._stopping = False
        self._thread: threading.Thread | None = None

    def request(self, upto: int) -> None:
        with self._cond:
            if self._stopping:
                return
            self._target = max(self._target, upto)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"flush-{self._name}", daemon=True)
                self._thread.start()
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._target <= self._done and not self._stopping:
                    self._cond.wait()
                if self._target <= self._done:
                    return
                target = self._target
            try:
                self._flush_to(target)
            except Exception as e:
                # The log is offline now (or closed): the target is NOT done, and no later
                # flush may move the recovery point past it until the log is reopened.
                log.error("background flush of %s failed: %s", self._name, e)
                with self._cond:
                    self._stopping = True
                    self._cond.notify_all()
                return
            with self._cond:
                self._done = max(self._done, target)
                self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join()
