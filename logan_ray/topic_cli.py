"""``logan-ray topic`` (create, list, describe, alter, delete) and ``logan-ray compact``."""
from __future__ import annotations

import argparse
import json
from typing import Any

from .cli_common import connect, human, parse_configs, ray_only


def add_topic_parsers(sub: argparse._SubParsersAction) -> None:
    """The ``topic`` and ``compact`` subcommands."""
    t = sub.add_parser("topic", help="manage topics")
    tsub = t.add_subparsers(dest="topic_cmd", required=True)
    x = tsub.add_parser("create")
    x.add_argument("name")
    x.add_argument("--partitions", type=int, default=1)
    x.add_argument("--replication-factor", type=int, default=-1,
                   help="replicas on distinct nodes (default: the broker's default.replication.factor)")
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

    r = sub.add_parser("partition", help="operator actions on one partition")
    rsub = r.add_subparsers(dest="partition_cmd", required=True)
    x = rsub.add_parser("reopen", help="bring a partition a disk error took offline (KAFKA_STORAGE_ERROR) back: "
                                       "its log is opened again from what the disk holds")
    x.add_argument("topic")
    x.add_argument("partition", type=int)
    r.set_defaults(func=cmd_partition)


def cmd_topic(args: argparse.Namespace) -> int:
    c = connect(args)
    if args.topic_cmd == "create":
        info = c.create_topic(args.name, args.partitions, parse_configs(args.config), activate=False,
                              replication_factor=args.replication_factor)
        factor = info.get("replication_factor", 1)
        print(f"created topic {info['name']} with {len(info['partitions'])} partitions"
              + (f", replication factor {factor}" if factor > 1 else ""))
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
            replicas = p.get("replicas") or [p["node_id"]]
            extra = (f" replicas {','.join(n[:12] for n in replicas)} isr {','.join(n[:12] for n in p.get('isr', []))}"
                     if len(replicas) > 1 else "")
            print(f"  partition {p['partition']}: node {p['node_id'][:12]} offsets [{start}, {end}){extra}")
    elif args.topic_cmd == "alter":
        changes: dict[str, Any] = parse_configs(args.config)
        changes.update({k: None for k in args.delete_config or ()})
        overrides = c.alter_topic(args.name, changes)
        print(f"altered {args.name}: overrides now {json.dumps(overrides, sort_keys=True)}")
    elif args.topic_cmd == "delete":
        c.delete_topic(args.name)
        print(f"deleted topic {args.name}")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    ray_only(args, "compact")
    c = connect(args)
    for r in c.compact(args.topic, roll=not args.no_roll):
        print(f"{args.topic}-{r['partition']}: {r['passes']} passes, {human(r['bytes_before'])} -> "
              f"{human(r['bytes_after'])} in {r['segments_after']} segments, {r['records_removed']} records removed "
              f"({r['tombstones_removed']} tombstones) in {r['duration_s']:.2f} s")
    return 0


def cmd_partition(args: argparse.Namespace) -> int:
    ray_only(args, "partition reopen")
    start, end = connect(args).reopen_partition(args.topic, args.partition)
    print(f"reopened {args.topic}-{args.partition}: offsets [{start}, {end})")
    return 0


__all__ = ["add_topic_parsers", "cmd_topic", "cmd_compact", "cmd_partition"]
