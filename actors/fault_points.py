"""Fault-injection points for crash tests: a partition actor can be held at a named step so a
test kills its process there (SIGKILL), as a real crash at that step would.

A test arms a point by creating ``<data dir>/.test-pause/<topic>-<partition>.<point>``. The
actor reaching that point writes its pid into the file, renames it to ``….paused`` (one
shot: the actor Ray restarts afterwards does not stop there again) and waits while that
file exists. Unarmed, a point costs one ``stat`` of a missing file, and only at activation
and hibernation, never per request.
"""
from __future__ import annotations

import os
import time

PAUSE_DIR = ".test-pause"


def pause_file(directory: str, point: str) -> str:
    """The file that arms ``point`` for the partition folder ``directory``."""
    return os.path.join(os.path.dirname(directory), PAUSE_DIR, f"{os.path.basename(directory)}.{point}")


def pause_point(directory: str, point: str) -> None:
    """Wait here (blocking the whole actor) if a test armed ``point`` for this partition."""
    armed = pause_file(directory, point)
    if not os.path.exists(armed):
        return
    try:
        with open(armed, "w") as f:
            f.write(str(os.getpid()))
        os.rename(armed, armed + ".paused")
    except OSError:
        return
    while os.path.exists(armed + ".paused"):
        time.sleep(0.02)
