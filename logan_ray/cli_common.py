"""What every ``logan-ray`` command shares: reaching the broker, never hanging, one-line errors."""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import threading
from typing import Iterator, Sequence

ATTACH_TIMEOUT_S = 20.0  # a broker whose runtime file and Ray port look fine but which does not answer


def parse_configs(items: Sequence[str] | None) -> dict[str, str]:
    """``--config NAME=VALUE`` items as a dict (a missing ``=`` is a ValueError: one line, exit 1)."""
    out = {}
    for item in items or ():
        if "=" not in item:
            raise ValueError(f"--config expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


@contextlib.contextmanager
def watchdog(seconds: float, message: str) -> Iterator[None]:
    """Exit with ``message`` if the block has not finished within ``seconds``: the CLI never hangs.

    Ray's attach has its own long retry loops; they can not be interrupted from Python.
    """
    def fire() -> None:
        err(message)
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def connect(args: argparse.Namespace):  # -> KafkaBackend | Client (imported lazily: Ray loads slowly)
    """The backend a command talks to: Kafka with --bootstrap-server, else the broker's Ray actors."""
    if args.bootstrap_server:
        from .kafka_backend import KafkaBackend

        from .client_config import client_conf

        conf = client_conf(args.command_config, args.security_protocol, args.sasl_mechanism, args.sasl_username,
                           os.environ)
        return KafkaBackend(args.bootstrap_server, conf)
    from . import client as _client
    from . import runtime_file
    from .errors import NotRunningError

    if args.address is None:  # a broker that is starting: wait for it here, outside the watchdog's time
        lookup = runtime_file.await_reachable(args.data_dir, on_wait=lambda found: err_line(
            runtime_file.waiting_message(found)))
        if lookup.info is not None and not runtime_file.reachable(lookup.info):
            raise NotRunningError(runtime_file.still_starting_message(lookup))
    divert_ray_broadcasts()
    target = args.address or (args.data_dir and f"data dir {args.data_dir}") or "the running broker"
    with watchdog(ATTACH_TIMEOUT_S, f"no answer from logan-ray at {target} within {ATTACH_TIMEOUT_S:.0f} s; "
                                     f"check that its broker is up (`logan-ray status`) or restart it"):
        return _client.connect(args.address, args.data_dir, embedded=False)


def divert_ray_broadcasts() -> None:
    """Keep a command's stdout for its output.

    Ray prints cluster-wide notices (the raylet's "N worker processes have been started",
    which a broker with many partition actors triggers) to the stdout of every attached
    driver; in a CLI that would land in pipes and scripts. All of them go to logging
    instead (logan_ray.ray_notices; the README test checks the output).
    """
    from .ray_notices import divert, every_notice

    divert(every_notice)


def ray_only(args: argparse.Namespace, what: str) -> None:
    """Refuse ``--bootstrap-server`` for commands that only work through Ray."""
    if args.bootstrap_server:
        raise ValueError(f"{what} works through Ray, not the Kafka protocol; drop --bootstrap-server")


def err(msg: str) -> None:
    """The one error line a command prints before exiting non-zero."""
    print(f"logan-ray: error: {msg}", file=sys.stderr)


def err_line(line: str) -> None:
    """A line about the command's progress, on stderr: stdout is its output."""
    print(line, file=sys.stderr, flush=True)


def human(n: int) -> str:
    """A byte count for people (KiB, MiB...)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


__all__ = ["ATTACH_TIMEOUT_S", "parse_configs", "watchdog", "connect", "divert_ray_broadcasts", "ray_only", "err",
           "err_line", "human"]
