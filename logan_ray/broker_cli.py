"""``logan-ray start``, ``stop`` and ``status``: a broker's life and what it serves."""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from typing import Any

from . import runtime_file
from .actors.topic_names import is_internal
from .cli_common import connect, err, human, ray_only
from .storage.file_modes import close_dir, private_opener


def add_broker_parsers(sub: argparse._SubParsersAction) -> None:
    """The ``start``, ``stop`` and ``status`` subcommands."""
    s = sub.add_parser("start", help="start a broker")
    s.add_argument("--foreground", action="store_true", help="stay up until Ctrl-C or SIGTERM")
    s.add_argument("--config", action="append", metavar="NAME=VALUE",
                   help="a broker setting by Kafka's name (repeatable), e.g. listeners=SASL_SSL://:9093")
    s.add_argument("--config-file", default=None, metavar="server.properties",
                   help="broker settings in a Kafka-style properties file (--config wins over it)")
    s.add_argument("--num-partitions", type=int, default=None, help="partitions of auto-created topics "
                                                                      "(num.partitions, default 1)")
    s.add_argument("--no-auto-create-topics", action="store_true", help="auto.create.topics.enable=false")
    s.add_argument("--host", default=None,
                   help="Kafka gateway listen address on every node (default 127.0.0.1); node-ip: each node's own "
                        "Ray address (multi-host clusters), 0.0.0.0: all of its interfaces")
    s.add_argument("--port", type=int, default=None, help="Kafka gateway port on every node (default 9092)")
    s.add_argument("--advertised-host", default=None, help="host clients are told to connect to")
    s.add_argument("--advertised-port", type=int, default=None, help="port clients are told to connect to")
    s.add_argument("--no-gateway", action="store_true", help="no Kafka gateway (Python API only)")
    s.add_argument("--http", default=None, metavar="off|[HOST]:PORT[/PREFIX]",
                   help="HTTP API and console on Ray Serve (default $LOGAN_RAY_HTTP or 127.0.0.1:8000; off disables)")
    s.add_argument("--http-allowed-hosts", default=None, metavar="NAME[,NAME...]",
                   help="host names the HTTP API answers to besides its listen address (Host and Origin; "
                        "default $LOGAN_RAY_HTTP_ALLOWED_HOSTS)")
    s.add_argument("--http-insecure", action="store_true",
                   help="allow the HTTP API beyond loopback although no Kafka listener authenticates (anyone who "
                        "reaches it may do everything)")
    s.set_defaults(func=cmd_start)

    s = sub.add_parser("stop", help="stop the broker serving --data-dir")
    s.add_argument("--timeout", type=float, default=120)
    s.set_defaults(func=cmd_stop)

    st = sub.add_parser("status", help="topics and partitions with offsets and sizes")
    st.add_argument("--internal", action="store_true", help="also show internal topics (__consumer_offsets)")
    st.set_defaults(func=cmd_status)


def _port_taken(host: str, port: int) -> str | None:
    """Why ``host:port`` cannot be listened on now (``None`` when it can)."""
    import socket

    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as e:
        return e.strerror or str(e)
    return None


def _refuse_taken_ports(opts: Any, http: Any) -> None:
    """Fail in a second, before Ray starts, when a listener's port is already taken.

    Finding it out after Ray, the router and Serve have started takes half a minute and
    leaves the user waiting for a line that was known at once. The listeners still
    report a port taken in between (they bind for real later).
    """
    if opts.gateway and opts.port:
        why = _port_taken(opts.host, opts.port)
        if why is not None:
            raise ValueError(f"cannot serve Kafka on {opts.host}:{opts.port}: {why} (choose another with "
                             f"--port PORT, or stop what listens there)")
    if http is not None and http.port:
        why = _port_taken(http.host, http.port)
        if why is not None:
            raise ValueError(f"cannot serve the HTTP API on {http.host}:{http.port}: {why} (choose another with "
                             f"--http HOST:PORT, or --http off)")


def cmd_start(args: argparse.Namespace) -> int:
    ray_only(args, "start")
    signals = None
    if args.foreground:  # before Ray's import (seconds): a signal from now on stops the broker cleanly
        from .stop_signals import StopSignals

        signals = StopSignals().install()
    from .broker import BrokerOptions, run_foreground

    config = _broker_config(args)
    log_dir = config.pop("log.dirs", None) or config.pop("log.dir", None)
    if log_dir is not None:
        log_dir = os.path.abspath(os.path.expanduser(log_dir.strip()))
        if args.data_dir and args.data_dir != log_dir:
            raise ValueError(f"--data-dir {args.data_dir} and log.dirs={log_dir} disagree; give one of them")
        args.data_dir = log_dir
    args.data_dir = args.data_dir or runtime_file.default_data_dir()
    opts = BrokerOptions(data_dir=args.data_dir, address=args.address, gateway=not args.no_gateway,
                         host=args.host or "127.0.0.1", port=9092 if args.port is None else args.port,
                         advertised_host=args.advertised_host, advertised_port=args.advertised_port, config=config)
    opts.resolve()  # unknown names or bad values: one line and exit 1, before anything starts
    # HTTP API (logan_ray.http); a bad value, or an open API beyond loopback, fails here, before anything starts
    opts.http, opts.http_allowed_hosts, opts.http_insecure = args.http, args.http_allowed_hosts, args.http_insecure
    http = opts.http_settings()
    warning = opts.check_http_exposure(http)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    if args.address is None and runtime_file.read(runtime_file.data_dir_path(args.data_dir)) is None:
        _refuse_taken_ports(opts, http)  # embedded: this machine is where both listeners will be
    if args.foreground:
        def ready(ep: dict[str, Any]) -> None:
            _print_endpoints(ep)
            print("logan-ray is running; Ctrl-C or SIGTERM stops it.", flush=True)

        status = run_foreground(opts, on_ready=ready, signals=signals)
        print("logan-ray stopped cleanly.", flush=True)
        return status
    # Background: run the foreground broker as a detached process and wait for its broker file.
    info = runtime_file.read(runtime_file.data_dir_path(args.data_dir))
    if info is not None:
        err(f"a broker (pid {info['pid']}) already serves {args.data_dir}")
        return 1
    close_dir(args.data_dir)
    cmd = [sys.executable, "-m", "logan_ray.cli", "--data-dir", args.data_dir, "start", "--foreground"]
    if args.address:
        cmd += ["--address", args.address]
    if args.config_file:  # passed by path: secrets in it (ssl.key.password) stay out of the process list
        cmd += ["--config-file", os.path.abspath(args.config_file)]
    for item in args.config or ():
        cmd += ["--config", item]
    if args.num_partitions is not None:
        cmd += ["--num-partitions", str(args.num_partitions)]
    if args.no_auto_create_topics:
        cmd.append("--no-auto-create-topics")
    if args.host is not None:
        cmd += ["--host", args.host]
    if args.port is not None:
        cmd += ["--port", str(args.port)]
    if args.advertised_host:
        cmd += ["--advertised-host", args.advertised_host]
    if args.advertised_port:
        cmd += ["--advertised-port", str(args.advertised_port)]
    if args.no_gateway:
        cmd.append("--no-gateway")
    if args.http is not None:
        cmd += ["--http", args.http]
    if args.http_allowed_hosts is not None:
        cmd += ["--http-allowed-hosts", args.http_allowed_hosts]
    if args.http_insecure:
        cmd.append("--http-insecure")
    log_path = os.path.join(args.data_dir, "broker.log")
    with open(log_path, "ab", opener=private_opener) as logf:  # it names clients and principals
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        info = runtime_file.read(runtime_file.data_dir_path(args.data_dir))
        if info is not None and info.get("pid") == proc.pid and runtime_file.is_ready(info):
            _print_endpoints(info)
            print(f"logan-ray started in the background (pid {proc.pid}, log {log_path}).")
            return 0
        if proc.poll() is not None:
            err(f"the broker exited with code {proc.returncode}; see {log_path}")
            return 1
        time.sleep(0.3)
    proc.terminate()
    err(f"the broker did not come up within 180 s; see {log_path}")
    return 1


def _broker_config(args: argparse.Namespace) -> dict[str, str]:
    """Kafka-named broker settings: --config-file, then --config, then the flags that name one."""
    from .broker_config import parse_assignments, read_properties_file

    config: dict[str, str] = {}
    if args.config_file:
        config.update(read_properties_file(args.config_file))
    config.update(parse_assignments(args.config or ()))
    if args.num_partitions is not None:
        config["num.partitions"] = str(args.num_partitions)
    if args.no_auto_create_topics:
        config["auto.create.topics.enable"] = "false"
    if (args.host is not None or args.port is not None) and "listeners" in config:
        raise ValueError("--host/--port and listeners both say where to listen; give one of them")
    return config


def _print_endpoints(ep: dict[str, Any]) -> None:
    print(f"data dir:      {ep['data_dir']}")
    print(f"ray address:   {ep['ray_address']}")
    if ep.get("kafka"):
        print(f"kafka:         {ep['kafka']}  (bootstrap.servers)")
    for name, eps in sorted((ep.get("listeners") or {}).items()):
        print(f"  listener {name}: {eps}")
    if ep.get("http"):
        auth = ", HTTP Basic with the SCRAM users" if ep.get("http_auth") == "basic" else ""
        print(f"http:          {ep['http']}/  (console {ep['http']}/console, API docs {ep['http']}/docs{auth})")
    if ep.get("dashboard"):
        print(f"ray dashboard: {ep['dashboard']}")
    sys.stdout.flush()


def cmd_stop(args: argparse.Namespace) -> int:
    ray_only(args, "stop")
    lookup = runtime_file.find(args.data_dir)
    if lookup.info is None:
        err(runtime_file.not_found_message(lookup))
        return 1
    pid = lookup.info["pid"]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if not runtime_file.process_alive(pid):
            print(f"logan-ray (pid {pid}) stopped.")
            return 0
        time.sleep(0.2)
    err(f"broker pid {pid} did not stop within {args.timeout} s")
    return 1


def cmd_status(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    c = connect(args)
    # Internal topics (__consumer_offsets) only when asked, as Kafka's tools list them.
    rows = [r for r in c.status() if args.internal or not is_internal(r["topic"])]
    table = Table(title=f"logan-ray: {len(c.list_topics(internal=args.internal))} topics")
    for col in ("topic", "partition", "node", "log start", "log end", "size", "segments", "state"):
        table.add_column(col, justify="right" if col not in ("topic", "node", "state") else "left")
    for r in rows:
        if r.get("offline"):  # its node is gone; the router names the node it waits for
            table.add_row(r["topic"], str(r["partition"]), f"offline: waiting for {r['waiting_for']}", "-", "-",
                          "-", "-", "offline")
            continue
        if r.get("error"):
            table.add_row(r["topic"], str(r["partition"]), f"unavailable: {r['error']}", "-", "-", "-", "-", "-")
            continue
        if not r.get("active", True):  # no process now: started on first need (lazy activation)
            table.add_row(r["topic"], str(r["partition"]), r["node_id"][:12], "-", "-", "-", "-", "inactive")
            continue
        table.add_row(r["topic"], str(r["partition"]), r["node_id"][:12], str(r["log_start_offset"]),
                      str(r["log_end_offset"]), "-" if r["size_bytes"] is None else human(r["size_bytes"]),
                      "-" if r["segment_count"] is None else str(r["segment_count"]), "active")
    # Piped output is for reading and parsing: never truncate a topic name to a terminal's width.
    Console(width=None if sys.stdout.isatty() else 10_000).print(table)
    return 0


__all__ = ["add_broker_parsers", "cmd_start", "cmd_stop", "cmd_status"]
