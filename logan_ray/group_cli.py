"""``logan-ray groups list|describe|delete|reset-offsets``: consumer groups, like ``kafka-consumer-groups``.

Plain aligned columns (no colours) so the output reads well and parses with
``awk``: ``describe`` prints one row per partition the group has committed or
owns, with the committed offset, the log end offset and the lag ("-" where the
group has committed nothing yet), and the member that owns it.
"""
from __future__ import annotations

import argparse
from typing import Any, Sequence


def add_groups_parser(sub: Any) -> argparse.ArgumentParser:
    g = sub.add_parser("groups", help="consumer groups: list, describe, delete, reset offsets")
    gsub = g.add_subparsers(dest="groups_cmd", required=True)
    gsub.add_parser("list", help="every group with its state")
    x = gsub.add_parser("describe", help="members, committed offsets, end offsets and lag")
    x.add_argument("group")
    x = gsub.add_parser("delete", help="delete an empty group and its committed offsets")
    x.add_argument("group")
    x = gsub.add_parser("reset-offsets", help="move an inactive group's committed offsets")
    x.add_argument("group")
    x.add_argument("--topic", required=True)
    x.add_argument("--partition", type=int, action="append", help="only these partitions (repeatable)")
    where = x.add_mutually_exclusive_group(required=True)
    where.add_argument("--to-earliest", action="store_true")
    where.add_argument("--to-latest", action="store_true")
    where.add_argument("--to-offset", type=int, metavar="N")
    x.add_argument("--dry-run", action="store_true", help="show the new offsets without committing them")
    return g


def _table(header: Sequence[str], rows: list[Sequence[Any]]) -> str:
    cells = [[str(c) for c in header]] + [["-" if c is None else str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in cells)


def run_groups(client: Any, args: argparse.Namespace) -> int:
    admin = client.groups
    if args.groups_cmd == "list":
        groups = admin.list()
        print(_table(["GROUP", "STATE", "PROTOCOL-TYPE"],
                     [(g["group_id"], g["group_state"], g["protocol_type"]) for g in groups]))
    elif args.groups_cmd == "describe":
        print(describe_text(client, args.group))
    elif args.groups_cmd == "delete":
        admin.delete(args.group)
        print(f"deleted consumer group {args.group}")
    elif args.groups_cmd == "reset-offsets":
        to = "earliest" if args.to_earliest else "latest" if args.to_latest else args.to_offset
        moved = admin.reset_offsets(args.group, args.topic, to=to, partitions=args.partition, dry_run=args.dry_run)
        print(_table(["TOPIC", "PARTITION", "OLD-OFFSET", "NEW-OFFSET"],
                     [(args.topic, p, old, new) for p, (old, new) in sorted(moved.items())]))
        if args.dry_run:
            print("(dry run: nothing committed)")
    return 0


def describe_text(client: Any, group_id: str) -> str:
    d = client.groups.describe(group_id)
    owner: dict[tuple[str, int], dict] = {}
    for m in d["members"]:
        for tp in m["assignment"]:
            owner[tuple(tp)] = m
    committed = {(o["topic"], o["partition"]): o for o in d["offsets"]}
    keys = sorted(set(committed) | set(owner))
    ends: dict[tuple[str, int], int] = {}
    for topic in sorted({t for t, _ in keys}):
        try:
            for p, (_start, end) in client.partition_offsets(topic).items():
                ends[(topic, p)] = end
        except Exception:
            pass  # a deleted topic: its committed offsets still show, without an end offset
    rows = []
    for tp in keys:
        c = committed.get(tp)
        end = ends.get(tp)
        lag = None if c is None or end is None else max(0, end - c["committed"])
        m = owner.get(tp)
        rows.append((tp[0], tp[1], c["committed"] if c else None, end, lag,
                     m["member_id"] if m else None, m["client_host"] if m else None, m["client_id"] if m else None))
    head = (f"group {d['group_id']}: state {d['group_state']}, generation {d['generation']}, "
            f"protocol {d['protocol_type'] or '-'}/{d['protocol_data'] or '-'}, {len(d['members'])} members")
    body = _table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                   "CLIENT-ID"], rows)
    return head + "\n" + body
