"""``logan-ray quotas``: client quotas (KIP-13/55) of the running broker, as Kafka's ``kafka-configs``
sets them for users and client ids.

Through Ray to the router (``security_cli.RaySecurity``), where the quotas are durable
cluster metadata; every gateway applies a change within a second. Entities, keys and
values are checked as the gateway checks AlterClientQuotas (logan_ray.security.quota).
"""
from __future__ import annotations

import argparse
from typing import Any

from .security import quota

_KEY_OPTIONS = (("producer_byte_rate", "bytes per second a client may produce"),
                ("consumer_byte_rate", "bytes per second a client may fetch"),
                ("request_percentage", "stored and described; not enforced by logan-ray"))


def add_quotas_parser(sub: Any) -> argparse.ArgumentParser:
    q = sub.add_parser("quotas", help="client quotas of users and client ids (produce/fetch byte rates)")
    qsub = q.add_subparsers(dest="quotas_cmd", required=True)
    for cmd, text in (("set", "set quota values of an entity"), ("delete", "remove quota values of an entity"),
                      ("describe", "list quotas (all, or those of the entity named)")):
        x = qsub.add_parser(cmd, help=text)
        user = x.add_mutually_exclusive_group()
        user.add_argument("--user", help="a user (the principal's name, e.g. alice for User:alice)")
        user.add_argument("--user-default", action="store_true", help="the default of every user")
        client = x.add_mutually_exclusive_group()
        client.add_argument("--client-id", help="a client id")
        client.add_argument("--client-id-default", action="store_true", help="the default of every client id")
        for key, what in _KEY_OPTIONS:
            if cmd == "set":
                x.add_argument("--" + key.replace("_", "-"), type=float, dest=key, help=what)
            elif cmd == "delete":
                x.add_argument("--" + key.replace("_", "-"), action="store_true", dest=key,
                               help=f"remove {key} (default: every value of the entity)")
    return q


def _entity(args: argparse.Namespace, required: bool) -> quota.Entity | None:
    parts: list[tuple[str, str | None]] = []
    if args.user is not None or args.user_default:
        parts.append((quota.USER, None if args.user_default else args.user))
    if args.client_id is not None or args.client_id_default:
        parts.append((quota.CLIENT_ID, None if args.client_id_default else args.client_id))
    if not parts:
        if required:
            raise ValueError("name the entity: --user NAME or --user-default, and/or --client-id ID or "
                             "--client-id-default")
        return None
    return quota.entity(parts)


def _line(e: quota.Entity, values: dict[str, Any]) -> str:
    shown = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(values.items()))
    return f"{quota.describe_entity(e)}: {shown}"


def run_quotas(sec: Any, args: argparse.Namespace) -> int:
    """``sec``: a ``security_cli.RaySecurity`` (quotas(), alter_quotas())."""
    if args.quotas_cmd == "describe":
        e = _entity(args, required=False)
        table = quota.QuotaTable(sec.quotas())
        for found, values in table.matching([(t, quota.MATCH_EXACT if n is not None else quota.MATCH_DEFAULT, n)
                                             for t, n in (e or ())], strict=e is not None):
            print(_line(found, values))
        return 0
    e = _entity(args, required=True)
    assert e is not None
    if args.quotas_cmd == "set":
        ops = {key: quota.check_value(key, getattr(args, key)) for key, _ in _KEY_OPTIONS
               if getattr(args, key) is not None}
        if not ops:
            raise ValueError("give a value to set: --producer-byte-rate, --consumer-byte-rate or "
                             "--request-percentage")
        sec.alter_quotas([[[list(p) for p in e], ops]])
        print(f"set {_line(e, ops)}")
        return 0
    current = dict(quota.QuotaTable(sec.quotas()).entries.get(e, {}))
    keys = [key for key, _ in _KEY_OPTIONS if getattr(args, key)] or sorted(current)
    missing = [k for k in keys if k not in current]
    if not current or missing:
        raise ValueError(f"{quota.describe_entity(e)} has no {', '.join(missing) or 'quota'} to delete")
    sec.alter_quotas([[[list(p) for p in e], {k: None for k in keys}]])
    print(f"deleted {', '.join(keys)} of {quota.describe_entity(e)}")
    return 0
