"""``logan-ray produce`` (lines from stdin) and ``logan-ray consume`` (records as lines)."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from .cli_common import connect
from .line_records import split_line, write_line


def add_produce_consume_parsers(sub: argparse._SubParsersAction) -> None:
    """The ``produce`` and ``consume`` subcommands."""
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


def cmd_produce(args: argparse.Namespace) -> int:
    c = connect(args)
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
            key, line = split_line(raw, sep, n + 1)
            producer.send(args.topic, line, key, partition=args.partition)
            n += 1
            if n % 10000 == 0:
                rate = n / max(time.monotonic() - started, 1e-9)
                progress.update(task, description=f"produced {n:,} records ({rate:,.0f}/s)")
        producer.close()
    return n


def cmd_consume(args: argparse.Namespace) -> int:
    c = connect(args)
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
            write_line(out, r.key, r.value, sep)
        out.flush()
        n += len(records)
    print(f"consumed {n} records", file=sys.stderr)
    return 0


__all__ = ["add_produce_consume_parsers", "cmd_produce", "cmd_consume"]
