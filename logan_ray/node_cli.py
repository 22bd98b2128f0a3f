"""``logan-ray node`` (drain, undrain) and ``logan-ray leaders elect``: moving partition leadership by hand.

``node drain`` does what the router does when Ray announces a node's drain (actors/router_drain.py):
every leadership moves off the node by a controlled move, and the node takes no new one until
``node undrain`` (or until Ray forgets the node). ``leaders elect`` is Kafka's
``kafka-leader-election.sh`` (ElectLeaders): preferred by default, ``--unclean`` for
partitions without a leader.
"""
from __future__ import annotations

import argparse

from .cli_common import connect, ray_only
from .errors import LoganError

_NAMES = {0: "moved", 84: "not needed", 80: "preferred replica not available", 83: "no eligible replica",
          3: "unknown partition"}


def add_node_parsers(sub: argparse._SubParsersAction) -> None:
    n = sub.add_parser("node", help="operator actions on a Ray node")
    nsub = n.add_subparsers(dest="node_cmd", required=True)
    for name, text in (("drain", "move every partition leadership off the node (before it leaves)"),
                       ("undrain", "let the node lead partitions again")):
        x = nsub.add_parser(name, help=text)
        x.add_argument("node", help="Ray node id (hex, or its first characters) or Kafka broker id")
    n.set_defaults(func=cmd_node)
    e = sub.add_parser("leaders", help="partition leadership")
    esub = e.add_subparsers(dest="leaders_cmd", required=True)
    x = esub.add_parser("elect", help="preferred-leader election (Kafka's ElectLeaders), or --unclean")
    x.add_argument("--unclean", action="store_true", help="elect any alive replica for partitions without a leader")
    x.add_argument("--topic", help="only this topic (default: every replicated partition)")
    x.add_argument("--partition", type=int, help="only this partition of --topic")
    e.set_defaults(func=cmd_leaders)


def resolve_node(spec: str, alive: list[str]) -> str:
    """The alive node named by a hex id, a unique hex prefix, or a Kafka broker id."""
    from logan_ray.actors.names import broker_id

    found = [n for n in alive if n.startswith(spec.lower())]
    if not found and spec.isdigit():
        found = [n for n in alive if broker_id(n) == int(spec)]
    if len(found) != 1:
        raise LoganError(f"no single alive Ray node matches {spec!r} ({len(found)} do)")
    return found[0]


def cmd_node(args: argparse.Namespace) -> int:
    import ray  # here, not at the top: every command imports this module, and Ray takes a second to import

    from ._ray import get

    ray_only(args, f"node {args.node_cmd}")
    c = connect(args)
    node = resolve_node(args.node, [n["NodeID"] for n in ray.nodes() if n.get("Alive")])
    if args.node_cmd == "undrain":
        was = get(c.router.undrain_node.remote(node))
        print(f"node {node[:8]} may lead partitions again" + ("" if was else " (it was not draining)"))
        return 0
    rows = get(c.router.drain_node.remote(node, "logan-ray node drain"))
    for r in rows:
        to = f" -> {r['to'][:8]}" if r["to"] else ""
        print(f"{r['topic']}-{r['partition']}{to}: {_NAMES.get(r['error_code'], r['error_code'])}")
    stay = sum(r["error_code"] != 0 for r in rows)
    print(f"node {node[:8]} drains: {len(rows) - stay} leaderships moved, {stay} stay")
    return 1 if stay else 0


def cmd_leaders(args: argparse.Namespace) -> int:
    from ._ray import get

    ray_only(args, "leaders elect")
    if args.partition is not None and args.topic is None:
        raise ValueError("--partition needs --topic (the partition of which topic?)")
    c = connect(args)
    asked = None
    if args.topic is not None:
        parts = [args.partition] if args.partition is not None else range(len(c.describe_topic(args.topic)["partitions"]))
        asked = [(args.topic, p) for p in parts]
    results = get(c.router.elect_leaders.remote(1 if args.unclean else 0, asked))
    for (topic, p), (code, message) in sorted(results.items()):
        if asked is not None or code != 84:
            print(f"{topic}-{p}: {_NAMES.get(code, code)}" + (f" ({message})" if message and code not in (0, 84) else ""))
    return 1 if any(code not in (0, 84) for code, _m in results.values()) else 0
