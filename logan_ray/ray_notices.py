"""Ray's notices to drivers that are not for logan-ray's users: logged, not printed.

Ray's raylet publishes cluster-wide notices that every attached driver prints on its
stdout: above all "N PYTHON worker processes have been started on node ..., which is
4x the maximum expected startup concurrency", which logan-ray triggers by design (each
partition is an actor in its own worker, and the router keeps warm workers). It
reached the terminal of the broker and of every client script, although nobody can
act on it. The notices picked here go to the ``logan_ray.ray`` logger (INFO) instead:
silent unless the application configures logging, and written to ``broker.log`` by the
broker (logan_ray.broker). Other notices (a worker that died...) still print.

Ray offers no switch for this: its printer (``ray._private.worker.print_to_stdstream``,
looked up at each call by the thread that listens for notices) is wrapped. That is a
private API; tests/cli/test_startup_signals.py shows the notice stays off stdout.
"""
from __future__ import annotations

import logging
from typing import Callable

log = logging.getLogger("logan_ray.ray")

#: Which raylet notices are diverted; several callers add their own (the CLI diverts them all).
_selectors: list[Callable[[str], bool]] = []


def is_worker_pool_notice(line: str) -> bool:
    """Ray's warning that more worker processes started than it expects (raylet worker_pool)."""
    return "worker processes have been started" in line


def every_notice(line: str) -> bool:
    """Every raylet notice: a CLI command's stdout is its output, read by pipes and scripts."""
    return True


def divert(select: Callable[[str], bool] = is_worker_pool_notice) -> None:
    """Log, instead of printing, the raylet notices ``select`` picks (idempotent; any time before
    or after ``ray.init``)."""
    import ray._private.worker as ray_worker

    if select not in _selectors:
        _selectors.append(select)
    printer = ray_worker.print_to_stdstream
    if getattr(printer, "_logan_ray_diverted", False):
        return

    def print_or_log(data: dict, ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            kept = []
            for line in data.get("lines", ()):
                if any(picks(line) for picks in _selectors):
                    log.info("ray: %s", line)
                else:
                    kept.append(line)
            if not kept:
                return
            data = {**data, "lines": kept}
        printer(data, ignore_prefix)

    print_or_log._logan_ray_diverted = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = print_or_log


__all__ = ["divert", "every_notice", "is_worker_pool_notice", "log"]
