"""Where a running broker can be reached: the runtime file ``logan-ray start`` publishes.

A broker writes one small JSON file (pid, Ray address, Kafka address(es), data
dir, dashboard) into its data dir and a copy into a per-user well-known place
(``$XDG_STATE_HOME/logan-ray/broker.json``, by default under
``~/.local/state``), so that a command run in another shell finds the broker
without being told its data dir. A clean stop removes both. A file whose
process is gone (or whose pid now belongs to another process) is stale: it is
reported and ignored, never trusted.

The broker writes the file as soon as it starts, before it listens anywhere, and
again as it comes up: first with ``state: starting`` and no Ray address, then with
the Ray address once its router answers (Ray commands work from then on), then with
its Kafka gateways, and ``state: ready`` last. A command that finds a broker still
without its Ray address waits for it (``await_reachable``, bounded, saying so), so
nothing that listens is ever ahead of the file.

Pure Python, no Ray: the CLI reads it before deciding whether to import Ray.
"""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from logan_ray.storage.atomic import atomic_write
from logan_ray.storage.file_modes import close_dir

FILE_NAME = "broker.json"
STARTING, READY = "starting", "ready"
#: How long a command waits for a starting broker's Ray address: Ray's start and the router's
#: recovery of every partition take tens of seconds on a small, busy machine.
STARTUP_WAIT_S = 60.0


def default_data_dir() -> str:
    """``$LOGAN_RAY_DATA_DIR`` or ``~/.logan-ray``."""
    return os.path.abspath(os.path.expanduser(os.environ.get("LOGAN_RAY_DATA_DIR") or "~/.logan-ray"))


def data_dir_path(data_dir: str) -> str:
    return os.path.join(data_dir, FILE_NAME)


def user_path() -> str:
    """The per-user copy, which names the broker started last by this user."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "logan-ray", FILE_NAME)


def _process_start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot), to tell a reused pid apart."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # Field 22; the command name (field 2) may contain spaces, so count from its closing parenthesis.
    return int(stat.rsplit(")", 1)[1].split()[19])


def process_alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (exited, not yet reaped by its parent) does not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _alive(info: dict[str, Any]) -> bool:
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0 or not process_alive(pid):
        return False
    started = info.get("pid_start_time")
    return started is None or _process_start_time(pid) in (None, started)


@dataclass
class Lookup:
    """What a search for a running broker found: ``info`` (or None), where it looked, stale files it skipped."""

    info: dict[str, Any] | None = None
    tried: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)

    @property
    def path(self) -> str | None:
        """The file ``info`` came from (the last place looked at)."""
        return self.tried[-1] if self.info is not None and self.tried else None


def read(path: str, lookup: Lookup | None = None) -> dict[str, Any] | None:
    """The broker info in ``path`` if that broker process is alive; stale files are noted in ``lookup``."""
    if lookup is not None:
        lookup.tried.append(path)
    try:
        with open(path) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    if not _alive(info):
        if lookup is not None:
            lookup.stale.append(f"{path} (pid {info.get('pid')} is gone)")
        return None
    return info


def find(data_dir: str | None = None) -> Lookup:
    """Look for a running broker.

    An explicit ``data_dir`` (a flag, or else ``$LOGAN_RAY_DATA_DIR``) is the only
    place looked at; otherwise the per-user file, then the default data dir.
    """
    lookup = Lookup()
    if data_dir is None and os.environ.get("LOGAN_RAY_DATA_DIR"):
        data_dir = default_data_dir()
    if data_dir is not None:
        lookup.info = read(data_dir_path(data_dir), lookup)
        return lookup
    for path in (user_path(), data_dir_path(default_data_dir())):
        if path in lookup.tried:
            continue
        lookup.info = read(path, lookup)
        if lookup.info is not None:
            break
    return lookup


def is_ready(info: dict[str, Any]) -> bool:
    """Whether the broker has started everything it serves (files of older brokers have no state: ready)."""
    return info.get("state", READY) == READY


def reachable(info: dict[str, Any]) -> bool:
    """Whether commands can attach: the broker published its Ray address, which it does once its router answers."""
    return bool(info.get("ray_address"))


def await_reachable(data_dir: str | None = None, timeout: float = STARTUP_WAIT_S,
                    on_wait: Callable[[Lookup], None] | None = None) -> Lookup:
    """``find(data_dir)``, waiting up to ``timeout`` seconds while the broker found is starting
    and has no Ray address yet; ``on_wait`` is called once if it waits. A broker that is gone
    meanwhile gives an empty lookup; one still starting at the deadline is returned as found
    (``reachable`` says no: see ``still_starting_message``). A broker never waits for itself:
    the file of this very process is returned at once."""
    def starting(info: dict[str, Any] | None) -> bool:
        return info is not None and not reachable(info) and info.get("pid") != os.getpid()

    lookup = find(data_dir)
    deadline = time.monotonic() + timeout
    said = False
    while starting(lookup.info) and time.monotonic() < deadline:
        if not said and on_wait is not None:
            on_wait(lookup)
            said = True
        time.sleep(0.2)
        lookup = find(data_dir)
    return lookup


def waiting_message(lookup: Lookup, timeout: float = STARTUP_WAIT_S) -> str:
    """The line a command prints while it waits for a starting broker."""
    pid = lookup.info.get("pid") if lookup.info else None
    return f"logan-ray: the broker (pid {pid}) at {lookup.path} is starting; waiting for it (up to {timeout:.0f} s)"


def still_starting_message(lookup: Lookup, timeout: float = STARTUP_WAIT_S) -> str:
    pid = lookup.info.get("pid") if lookup.info else None
    log = os.path.join(lookup.info.get("data_dir", "?"), "broker.log") if lookup.info else "its log"
    return (f"the broker (pid {pid}) at {lookup.path} is still starting after {timeout:.0f} s; "
            f"try again later, or see its terminal or {log}")


def not_found_message(lookup: Lookup) -> str:
    """One line: where a broker was looked for, the stale files skipped, and what to do."""
    msg = "no logan-ray broker found"
    if lookup.tried:
        msg += " at " + " or ".join(lookup.tried)
    if lookup.stale:
        msg += "; ignored stale " + ", ".join(lookup.stale)
    return msg + ("; start one with ./scripts/start.sh or `logan-ray start` "
                  "(or pass --data-dir, --address or --bootstrap-server)")


def publish(info: dict[str, Any]) -> None:
    """Write the broker's runtime file into its data dir and the per-user place (crash-safe replace,
    mode 0600: it names the broker's Ray address, through which its processes can be reached)."""
    info = {**info, "pid_start_time": _process_start_time(info["pid"])}
    data = json.dumps(info, indent=1).encode()
    atomic_write(data_dir_path(info["data_dir"]), data)
    user = user_path()
    close_dir(os.path.dirname(user))
    atomic_write(user, data)


def withdraw(data_dir: str, pid: int) -> None:
    """Remove the runtime files that name the broker ``pid`` (never another broker's)."""
    for path in (data_dir_path(data_dir), user_path()):
        try:
            with open(path) as f:
                if json.load(f).get("pid") != pid:
                    continue
            os.unlink(path)
        except (OSError, ValueError, AttributeError):
            pass
