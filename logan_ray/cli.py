"""The ``logan-ray`` command: start/stop a broker, admin topics, produce and consume lines.

Commands find the running broker through its runtime file (logan_ray.runtime_file);
``--data-dir``, ``--address`` and ``$LOGAN_RAY_DATA_DIR`` choose another, and
``--bootstrap-server`` talks the Kafka protocol instead of Ray (logan_ray.kafka_backend).
The global options are accepted before or after the subcommand. Errors are one
clear line on stderr and a non-zero exit within seconds, never a traceback or a hang.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Iterator, Sequence

from . import runtime_file
from .actors.topic_names import is_internal
from .errors import LoganError, SerializationError

ATTACH_TIMEOUT_S = 20.0  # a broker whose runtime file and Ray port look fine but which does not answer


def _parse_configs(items: Sequence[str] | None) -> dict[str, str]:
    out = {}
    for item in items or ():
        if "=" not in item:
            raise ValueError(f"--config expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        out[k.strip()] = v.strip()
    return out


@contextlib.contextmanager
def _watchdog(seconds: float, message: str) -> Iterator[None]:
    """Exit with ``message`` if the block has not finished within ``seconds``: the CLI never hangs.

    Ray's attach has its own long retry loops; they can not be interrupted from Python.
    """
    def fire() -> None:
        _err(message)
        sys.stderr.flush()
        os._exit(1)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _connect(args: argparse.Namespace):
    """The backend a command talks to: Kafka with --bootstrap-server, else the broker's Ray actors."""
    if args.bootstrap_server:
        from .kafka_backend import KafkaBackend

        from .client_config import client_conf

        conf = client_conf(args.command_config, args.security_protocol, args.sasl_mechanism, args.sasl_username,
                           os.environ)
        return KafkaBackend(args.bootstrap_server, conf)
    from . import client as _client

    _divert_ray_broadcasts()
    target = args.address or (args.data_dir and f"data dir {args.data_dir}") or "the running broker"
    with _watchdog(ATTACH_TIMEOUT_S, f"no answer from logan-ray at {target} within {ATTACH_TIMEOUT_S:.0f} s; "
                                     f"check that its broker is up (`logan-ray status`) or restart it"):
        return _client.connect(args.address, args.data_dir, embedded=False)


def _divert_ray_broadcasts() -> None:
    """Keep a command's stdout for its output.

    Ray prints cluster-wide notices (the raylet's "N worker processes have been started",
    which a broker with many partition actors triggers) to the stdout of every attached
    driver; in a CLI that would land in pipes and scripts. They go to logging instead.
    Ray offers no switch for this, so its printer is wrapped (private API, checked by the
    README test).
    """
    import logging

    import ray._private.worker as ray_worker

    printer = ray_worker.print_to_stdstream
    if getattr(printer, "_logan_ray_diverted", False):
        return

    def divert(data: dict, ignore_prefix: bool) -> None:
        if data.get("pid") == "raylet":
            for line in data.get("lines", ()):
                logging.getLogger("logan_ray.cli").info("ray: %s", line)
            return
        printer(data, ignore_prefix)

    divert._logan_ray_diverted = True  # type: ignore[attr-defined]
    ray_worker.print_to_stdstream = divert


def _ray_only(args: argparse.Namespace, what: str) -> None:
    if args.bootstrap_server:
        raise ValueError(f"{what} works through Ray, not the Kafka protocol; drop --bootstrap-server")


def _err(msg: str) -> None:
    print(f"logan-ray: error: {msg}", file=sys.stderr)


# ---------------------------------------------------------------- broker life
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
    _ray_only(args, "start")
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
    opts.http = args.http  # HTTP API (logan_ray.http); a bad value fails here, before anything starts
    from .http.settings import parse_http_setting

    http = parse_http_setting(args.http)
    if args.address is None and runtime_file.read(runtime_file.data_dir_path(args.data_dir)) is None:
        _refuse_taken_ports(opts, http)  # embedded: this machine is where both listeners will be
    if args.foreground:
        def ready(ep: dict[str, Any]) -> None:
            _print_endpoints(ep)
            print("logan-ray is running; Ctrl-C or SIGTERM stops it.", flush=True)

        run_foreground(opts, on_ready=ready)
        print("logan-ray stopped cleanly.", flush=True)
        return 0
    # Background: run the foreground broker as a detached process and wait for its broker file.
    info = runtime_file.read(runtime_file.data_dir_path(args.data_dir))
    if info is not None:
        _err(f"a broker (pid {info['pid']}) already serves {args.data_dir}")
        return 1
    os.makedirs(args.data_dir, exist_ok=True)
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
    log_path = os.path.join(args.data_dir, "broker.log")
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        info = runtime_file.read(runtime_file.data_dir_path(args.data_dir))
        if info is not None and info.get("pid") == proc.pid:
            _print_endpoints(info)
            print(f"logan-ray started in the background (pid {proc.pid}, log {log_path}).")
            return 0
        if proc.poll() is not None:
            _err(f"the broker exited with code {proc.returncode}; see {log_path}")
            return 1
        time.sleep(0.3)
    proc.terminate()
    _err(f"the broker did not come up within 180 s; see {log_path}")
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
    _ray_only(args, "stop")
    lookup = runtime_file.find(args.data_dir)
    if lookup.info is None:
        _err(runtime_file.not_found_message(lookup))
        return 1
    pid = lookup.info["pid"]
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        if not runtime_file.process_alive(pid):
            print(f"logan-ray (pid {pid}) stopped.")
            return 0
        time.sleep(0.2)
    _err(f"broker pid {pid} did not stop within {args.timeout} s")
    return 1


def cmd_status(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    c = _connect(args)
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
                      str(r["log_end_offset"]), "-" if r["size_bytes"] is None else _human(r["size_bytes"]),
                      "-" if r["segment_count"] is None else str(r["segment_count"]), "active")
    # Piped output is for reading and parsing: never truncate a topic name to a terminal's width.
    Console(width=None if sys.stdout.isatty() else 10_000).print(table)
    return 0


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


# --------------------------------------------------------------------- topics
def cmd_topic(args: argparse.Namespace) -> int:
    c = _connect(args)
    if args.topic_cmd == "create":
        info = c.create_topic(args.name, args.partitions, _parse_configs(args.config), activate=False)
        print(f"created topic {info['name']} with {len(info['partitions'])} partitions")
    elif args.topic_cmd == "list":
        for name in c.list_topics(internal=True):
            print(name)
    elif args.topic_cmd == "describe":
        info = c.describe_topic(args.name)
        offsets = c.partition_offsets(args.name)
        print(f"topic {info['name']}: {len(info['partitions'])} partitions, id {info['topic_id']}")
        for k, v in sorted(c.topic_config(args.name).items()):
            mark = "*" if k in info["config"] else " "
            print(f"  {mark} {k}={v}")
        for p in info["partitions"]:
            start, end = offsets[p["partition"]]
            print(f"  partition {p['partition']}: node {p['node_id'][:12]} offsets [{start}, {end})")
    elif args.topic_cmd == "alter":
        changes: dict[str, Any] = _parse_configs(args.config)
        changes.update({k: None for k in args.delete_config or ()})
        overrides = c.alter_topic(args.name, changes)
        print(f"altered {args.name}: overrides now {json.dumps(overrides, sort_keys=True)}")
    elif args.topic_cmd == "delete":
        c.delete_topic(args.name)
        print(f"deleted topic {args.name}")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    _ray_only(args, "compact")
    c = _connect(args)
    for r in c.compact(args.topic, roll=not args.no_roll):
        print(f"{args.topic}-{r['partition']}: {r['passes']} passes, {_human(r['bytes_before'])} -> "
              f"{_human(r['bytes_after'])} in {r['segments_after']} segments, {r['records_removed']} records removed "
              f"({r['tombstones_removed']} tombstones) in {r['duration_s']:.2f} s")
    return 0


# ------------------------------------------------------------ produce/consume
def cmd_produce(args: argparse.Namespace) -> int:
    c = _connect(args)
    sep = args.key_separator.encode() if args.key_separator else None
    started = time.monotonic()
    if args.bootstrap_server:
        n = c.produce_lines(args.topic, sys.stdin.buffer, sep, args.partition, args.acks, args.compression,
                            args.linger_ms)
    else:
        n = _produce_ray(c, args, sep)
    elapsed = time.monotonic() - started
    print(f"produced {n} records to {args.topic} in {elapsed:.2f} s", file=sys.stderr)
    return 0


def _produce_ray(c: Any, args: argparse.Namespace, sep: bytes | None) -> int:
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    producer = c.producer(acks=args.acks, compression=args.compression, linger_ms=args.linger_ms)
    n = 0
    started = time.monotonic()
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  transient=True, disable=not sys.stderr.isatty(), console=None) as progress:
        task = progress.add_task("producing", total=None)
        for raw in sys.stdin.buffer:
            line = raw.rstrip(b"\r\n")
            key = None
            if sep is not None:
                if sep not in line:
                    raise SerializationError(f"line {n + 1} has no key separator {args.key_separator!r}")
                key, line = line.split(sep, 1)
            producer.send(args.topic, line, key, partition=args.partition)
            n += 1
            if n % 10000 == 0:
                rate = n / max(time.monotonic() - started, 1e-9)
                progress.update(task, description=f"produced {n:,} records ({rate:,.0f}/s)")
        producer.close()
    return n


def cmd_consume(args: argparse.Namespace) -> int:
    c = _connect(args)
    if args.bootstrap_server:
        n = c.consume_lines(args.topic, sys.stdout.buffer, args.from_beginning, args.partition, args.offset,
                            args.max_messages, args.timeout_ms,
                            args.key_separator.encode() if args.key_separator else None)
        print(f"consumed {n} records", file=sys.stderr)
        return 0
    consumer = c.consumer(auto_offset_reset="earliest" if args.from_beginning else "latest")
    n_parts = len(c.partitions(args.topic))
    parts = [args.partition] if args.partition is not None else list(range(n_parts))
    consumer.assign([(args.topic, p) for p in parts])
    if args.offset is not None:
        for p in parts:
            consumer.seek((args.topic, p), args.offset)
    elif args.from_beginning:
        consumer.seek_to_beginning()
    out = sys.stdout.buffer
    sep = args.key_separator.encode() if args.key_separator else None
    n = 0
    idle_deadline = time.monotonic() + args.timeout_ms / 1000.0 if args.timeout_ms else None
    while args.max_messages is None or n < args.max_messages:
        records = consumer.poll(500, max_records=(args.max_messages - n) if args.max_messages else None)
        if not records:
            if idle_deadline is not None and time.monotonic() >= idle_deadline:
                break
            continue
        if args.timeout_ms:
            idle_deadline = time.monotonic() + args.timeout_ms / 1000.0
        for r in records:
            if sep is not None:
                out.write((r.key or b"") + sep)
            out.write((r.value or b"") + b"\n")
        out.flush()
        n += len(records)
    print(f"consumed {n} records", file=sys.stderr)
    return 0


# --------------------------------------------------------------------- groups
def cmd_groups(args: argparse.Namespace) -> int:
    from .group_cli import run_groups

    return run_groups(_connect(args), args)


# ------------------------------------------------------------------- security
def _security(args: argparse.Namespace):
    """Users and ACLs: Kafka's admin APIs with --bootstrap-server, else the router through Ray."""
    from .security_cli import RaySecurity

    backend = _connect(args)
    return backend.security if args.bootstrap_server else RaySecurity(backend)


def cmd_users(args: argparse.Namespace) -> int:
    from .security_cli import run_users

    return run_users(_security(args), args)


def cmd_acls(args: argparse.Namespace) -> int:
    from .security_cli import run_acls

    return run_acls(_security(args), args)


# ----------------------------------------------------------------------- main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="logan-ray", description="A Kafka-compatible streaming log on Ray.")
    sub = p.add_subparsers(dest="cmd", required=True)

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
    s.set_defaults(func=cmd_start)

    s = sub.add_parser("stop", help="stop the broker serving --data-dir")
    s.add_argument("--timeout", type=float, default=120)
    s.set_defaults(func=cmd_stop)

    st = sub.add_parser("status", help="topics and partitions with offsets and sizes")
    st.add_argument("--internal", action="store_true", help="also show internal topics (__consumer_offsets)")
    st.set_defaults(func=cmd_status)

    t = sub.add_parser("topic", help="manage topics")
    tsub = t.add_subparsers(dest="topic_cmd", required=True)
    x = tsub.add_parser("create")
    x.add_argument("name")
    x.add_argument("--partitions", type=int, default=1)
    x.add_argument("--config", action="append", metavar="NAME=VALUE")
    tsub.add_parser("list")
    x = tsub.add_parser("describe")
    x.add_argument("name")
    x = tsub.add_parser("alter")
    x.add_argument("name")
    x.add_argument("--config", action="append", metavar="NAME=VALUE")
    x.add_argument("--delete-config", action="append", metavar="NAME")
    x = tsub.add_parser("delete")
    x.add_argument("name")
    t.set_defaults(func=cmd_topic)

    s = sub.add_parser("compact", help="compact a topic now (its cleanup.policy must contain compact)")
    s.add_argument("topic")
    s.add_argument("--no-roll", action="store_true",
                   help="leave the active segments alone (by default they are closed so all records are cleaned)")
    s.set_defaults(func=cmd_compact)

    s = sub.add_parser("produce", help="produce lines from stdin")
    s.add_argument("topic")
    s.add_argument("--key-separator", default=None)
    s.add_argument("--partition", type=int, default=None)
    s.add_argument("--compression", default="none", choices=["none", "gzip", "snappy", "lz4", "zstd"])
    s.add_argument("--acks", default="1", choices=["0", "1", "-1", "all"])
    s.add_argument("--linger-ms", type=float, default=5)
    s.set_defaults(func=cmd_produce)

    s = sub.add_parser("consume", help="print records as lines")
    s.add_argument("topic")
    s.add_argument("--from-beginning", action="store_true")
    s.add_argument("--max-messages", type=int, default=None)
    s.add_argument("--partition", type=int, default=None)
    s.add_argument("--offset", type=int, default=None)
    s.add_argument("--key-separator", default=None, help="print KEY<sep>VALUE")
    s.add_argument("--timeout-ms", type=int, default=None, help="exit after this long without records")
    s.set_defaults(func=cmd_consume)

    from .group_cli import add_groups_parser

    add_groups_parser(sub).set_defaults(func=cmd_groups)
    from .security_cli import add_acls_parser, add_users_parser

    add_users_parser(sub).set_defaults(func=cmd_users)
    add_acls_parser(sub).set_defaults(func=cmd_acls)
    _add_global_options(p)
    return p


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    """--data-dir, --address and --bootstrap-server on every (sub)command, so they go before or after it.

    Defaults are SUPPRESS so that a value given at one level is not overwritten by
    another level's default; ``main`` fills in what was not given.
    """
    parser.add_argument("--data-dir", default=argparse.SUPPRESS,
                        help="data folder of the broker (default: $LOGAN_RAY_DATA_DIR, else the running broker's, "
                             "else ~/.logan-ray)")
    parser.add_argument("--address", default=argparse.SUPPRESS,
                        help="Ray cluster address to join (start) or attach to (default: the running broker's)")
    parser.add_argument("--bootstrap-server", default=argparse.SUPPRESS, metavar="HOST:PORT",
                        help="talk the Kafka protocol to this logan-ray gateway or Kafka broker instead of Ray "
                             "(topic, produce, consume, groups, status, users, acls)")
    parser.add_argument("--command-config", default=argparse.SUPPRESS, metavar="client.properties",
                        help="with --bootstrap-server: Kafka client settings of the connection (security.protocol, "
                             "sasl.mechanism, sasl.jaas.config, ssl.truststore.location...), as Kafka's tools take")
    parser.add_argument("--security-protocol", default=argparse.SUPPRESS,
                        choices=["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"],
                        help="with --bootstrap-server: the listener's protocol")
    parser.add_argument("--sasl-mechanism", default=argparse.SUPPRESS,
                        choices=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
                        help="with --sasl-username (default SCRAM-SHA-512)")
    parser.add_argument("--sasl-username", default=argparse.SUPPRESS, metavar="USER",
                        help="with --bootstrap-server: log in as USER; the password is read from "
                             "$LOGAN_RAY_SASL_PASSWORD")
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _add_global_options(child)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.data_dir = getattr(args, "data_dir", None)
    if args.data_dir is not None:
        args.data_dir = os.path.abspath(os.path.expanduser(args.data_dir))
    args.address = getattr(args, "address", None)
    args.bootstrap_server = getattr(args, "bootstrap_server", None)
    connection_options = [name for name in ("command_config", "security_protocol", "sasl_mechanism", "sasl_username")
                          if getattr(args, name, None) is not None]
    for name in ("command_config", "security_protocol", "sasl_mechanism", "sasl_username"):
        setattr(args, name, getattr(args, name, None))
    if connection_options and not args.bootstrap_server:
        _err(f"--{connection_options[0].replace('_', '-')} is for the Kafka connection: give --bootstrap-server too")
        return 1
    if getattr(args, "acks", None) is not None and args.acks != "all":
        args.acks = int(args.acks)
    try:
        return args.func(args)
    except (LoganError, ValueError, OSError) as e:
        _err(str(e).splitlines()[0] if str(e) else type(e).__name__)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
