"""SIGTERM and Ctrl-C as a request to stop the broker process, whatever it is doing then.

Left to Python and Ray, a signal during start-up ended the process half-way: before
any handler SIGTERM killed it outright, ``ray.init`` installs a handler that calls
``sys.exit(15)``, the Ray node it starts one that kills Ray's processes and exits 1,
and Ray's core worker prints a C++ stack trace first. Each left processes behind
(Ray's agents) or a runtime file, and none was the clean stop a signal after start-up
gets. Here the first signal only records the request: the broker checks it between
its start-up steps (``raise_if_requested``) and waits on it once ready, then stops
everything it started, so every signal ends in the same clean stop. A step under way
(Ray's start, the router's recovery, Serve's start) finishes first; a second signal
interrupts it (as KeyboardInterrupt, which Ray's blocking calls already honour), for a
start that hangs.
"""
from __future__ import annotations

import signal
import threading
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopRequested(KeyboardInterrupt):
    """A stop signal arrived; raised between start-up steps, or by a second signal anywhere.

    A KeyboardInterrupt so that Ray's blocking calls, which turn KeyboardInterrupt into an
    interruption of the wait, treat it as Ctrl-C.
    """


class StopSignals:
    """Turns SIGTERM and SIGINT into a stop request (main thread only: Python's rule for handlers)."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._event = threading.Event()
        self._previous: dict[int, Any] = {}
        self._ray_setter: Any = None

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    @property
    def exit_status(self) -> int:
        """The process's exit status after a clean stop: 130 after Ctrl-C (the shell's convention
        for SIGINT), 0 otherwise (SIGTERM is the normal way to stop a service)."""
        return 130 if self.signum == signal.SIGINT else 0

    def install(self) -> "StopSignals":
        """Take SIGTERM and SIGINT (again: after ``ray.init`` too, whose core worker sets its own)."""
        for signum in SIGNALS:
            previous = signal.signal(signum, self._on_signal)
            self._previous.setdefault(signum, previous)
        return self

    def keep_from_ray(self) -> None:
        """Stop Ray from taking SIGTERM over in this process (call after importing Ray, before ``ray.init``).

        ``ray.init`` and the node it starts set their handlers through
        ``ray._private.utils.set_sigterm_handler`` (private API), made a no-op here; the
        core worker's C++ failure handler, which prints a stack trace on SIGTERM before
        passing it on, is not installed in this process (crashes of this process lose
        Ray's C++ trace; Ray's workers keep theirs).
        """
        import ray._private.utils as ray_utils
        from ray._private import ray_constants

        ray_constants.RAY_DISABLE_FAILURE_SIGNAL_HANDLER = True
        if self._ray_setter is None:
            self._ray_setter = ray_utils.set_sigterm_handler
            ray_utils.set_sigterm_handler = lambda handler: None

    def restore(self) -> None:
        """Give the signals (and Ray's SIGTERM setter) back as they were."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
        if self._ray_setter is not None:
            import ray._private.utils as ray_utils

            ray_utils.set_sigterm_handler = self._ray_setter
            self._ray_setter = None

    def raise_if_requested(self) -> None:
        if self.requested:
            raise StopRequested(signal.Signals(self.signum).name if self.signum else "stop")

    def wait(self, timeout: float) -> bool:
        """Whether a stop was requested within ``timeout`` seconds."""
        return self._event.wait(timeout)

    def _on_signal(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise StopRequested(signal.Signals(signum).name)
        self.signum = signum
        self._event.set()


__all__ = ["SIGNALS", "StopRequested", "StopSignals"]
