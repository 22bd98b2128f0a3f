"""``logan-ray partitions reassign | reassignments | rebalance``: moving partition replicas between nodes.

Kafka's ``kafka-reassign-partitions.sh`` on the controller (the router): ``reassign`` starts (or with
``--cancel`` cancels) the reassignment of one partition to a list of replicas (whatever its topic's
replication factor), ``reassignments`` lists those under way with the replicas being added and
removed, ``rebalance`` spreads the replicas of every topic evenly over the alive nodes (after a node
joined) by reassignments. The data
moves by fetching (docs/replication.md). Through Ray only: Kafka tools reach the same through the
gateway (AlterPartitionReassignments / ListPartitionReassignments).
"""
from __future__ import annotations

import argparse

from .cli_common import connect, ray_only


def add_partitions_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("partitions", help="move partition replicas between nodes (reassign, rebalance)")
    psub = p.add_subparsers(dest="partitions_cmd", required=True)
    x = psub.add_parser("reassign", help="move a partition's replicas to other nodes (Kafka's partition reassignment)")
    x.add_argument("topic")
    x.add_argument("partition", type=int)
    how = x.add_mutually_exclusive_group(required=True)
    how.add_argument("--replicas", metavar="B1,B2,...",
                     help="the target replicas, broker ids or Ray node ids (or their first characters); "
                          "the first is the preferred leader")
    how.add_argument("--cancel", action="store_true", help="cancel the partition's reassignment under way")
    psub.add_parser("reassignments", help="list the reassignments under way")
    r = psub.add_parser("rebalance", help="spread every topic's replicas evenly over the alive nodes")
    r.add_argument("--dry-run", action="store_true", help="only print the moves")
    p.set_defaults(func=cmd_partitions)


def _brokers(nodes: list[str]) -> str:
    from logan_ray.actors.names import broker_id

    return ",".join(str(broker_id(n)) for n in nodes)


def _target(text: str) -> list[int | str]:
    items = [s.strip() for s in text.split(",") if s.strip()]
    return [int(s) if s.isdigit() else s for s in items]


def cmd_partitions(args: argparse.Namespace) -> int:
    ray_only(args, f"partitions {args.partitions_cmd}")
    c = connect(args)
    if args.partitions_cmd == "reassign":
        c.reassign_partitions({(args.topic, args.partition): None if args.cancel else _target(args.replicas)})
        if args.cancel:
            print(f"reassignment of {args.topic}-{args.partition} cancelled: back to its original replicas")
        else:
            print(f"reassignment of {args.topic}-{args.partition} to {args.replicas} started "
                  "(logan-ray partitions reassignments shows it until it is done)")
        return 0
    if args.partitions_cmd == "reassignments":
        ongoing = c.list_reassignments()
        for (topic, p), r in ongoing.items():
            print(f"{topic}-{p}: replicas {_brokers(r['replicas'])}, adding {_brokers(r['adding']) or '-'}, "
                  f"removing {_brokers(r['removing']) or '-'}")
        print(f"{len(ongoing)} reassignments in progress")
        return 0
    moves = c.rebalance_replicas(dry_run=args.dry_run)
    for (topic, p), m in moves.items():
        outcome = "would move" if args.dry_run else "moving" if m["error_code"] == 0 else \
            f"not moved ({m['error_message']})"
        print(f"{topic}-{p}: {_brokers(m['from'])} -> {_brokers(m['to'])}: {outcome}")
    failed = sum(m["error_code"] != 0 for m in moves.values())
    print(f"{len(moves) - failed} partitions {'to move' if args.dry_run else 'reassigned'}"
          + (f", {failed} refused" if failed else "") + ("" if moves else " (the replicas are spread evenly)"))
    return 1 if failed else 0
