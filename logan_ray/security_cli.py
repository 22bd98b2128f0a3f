"""``logan-ray users`` and ``logan-ray acls``: SCRAM credentials and ACLs of the running broker.

Both talk to the router through Ray (the operator's side of the cluster, like
Kafka's ``kafka-configs --bootstrap-controller``), or with ``--bootstrap-server`` to
a gateway through Kafka's own admin APIs (``kafka_backend.KafkaSecurity``), as the
logged-in principal. Passwords are read from stdin or a prompt and never sent or
stored in clear (salted SCRAM credentials over Ray, Kafka's SaltedPassword over Kafka).
"""
from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any

from .errors import LoganError
from .security import scram


def get(ref: Any) -> Any:
    """logan_ray._ray.get, imported at the first call: every command imports this module, and Ray
    takes a second to import (``logan-ray start`` takes its signals before that)."""
    from ._ray import get as ray_get

    return ray_get(ref)


def add_users_parser(sub: Any) -> argparse.ArgumentParser:
    u = sub.add_parser("users", help="SCRAM users of SASL listeners (credentials stored salted and hashed)")
    usub = u.add_subparsers(dest="users_cmd", required=True)
    x = usub.add_parser("set", help="create or change a user's password")
    x.add_argument("name")
    x.add_argument("--mechanism", action="append", choices=sorted(scram.MECHANISMS),
                   help="SCRAM mechanism(s) to store (default both SCRAM-SHA-256 and SCRAM-SHA-512)")
    x.add_argument("--iterations", type=int, default=scram.DEFAULT_ITERATIONS,
                   help=f"PBKDF2 iterations ({scram.MIN_ITERATIONS}..{scram.MAX_ITERATIONS})")
    x.add_argument("--password-stdin", action="store_true", help="read the password from stdin's first line")
    x = usub.add_parser("delete", help="remove a user's credentials")
    x.add_argument("name")
    x.add_argument("--mechanism", action="append", choices=sorted(scram.MECHANISMS))
    usub.add_parser("list", help="users and their SCRAM mechanisms")
    return u


def _password(args: argparse.Namespace) -> str:
    if args.password_stdin or not sys.stdin.isatty():
        line = sys.stdin.readline().rstrip("\r\n")
    else:
        line = getpass.getpass(f"password for {args.name}: ")
    if not line:
        raise ValueError("the password is empty")
    return line


class RaySecurity:
    """Users, ACLs and client quotas through the router's actor (Ray); ``kafka_backend.KafkaSecurity`` is the
    same for users and ACLs over Kafka."""

    def __init__(self, client: Any) -> None:
        self._router = client.router

    def users(self, names: list[str] | None = None) -> list[tuple[str, list[tuple[str, int]]]]:
        return [(r["user"], [(scram.BY_CODE[c["mechanism"]], c["iterations"]) for c in r["credential_infos"]])
                for r in get(self._router.describe_scram.remote(names)) if not r["error_code"]]

    def _alter(self, deletions: list[dict], upserts: list[dict]) -> None:
        for r in get(self._router.alter_scram.remote(deletions, upserts)):
            if r["error_code"]:
                raise ValueError(f"user {r['user']}: {r['error_message']}")

    def set_user(self, name: str, mechanisms: list[str], iterations: int, password: str) -> None:
        self._alter([], [{"name": name, "mechanism": scram.MECHANISMS[m][0], "iterations": iterations,
                          "credential": scram.new_credential(m, password, iterations)} for m in mechanisms])

    def delete_user(self, name: str, mechanisms: list[str]) -> None:
        self._alter([{"name": name, "mechanism": scram.MECHANISMS[m][0]} for m in mechanisms], [])

    def acls(self, principal: str | None = None) -> list[list[Any]]:
        _version, bindings = get(self._router.acls.remote())
        return [b for b in bindings if principal is None or b[3] == principal]

    def add_acls(self, bindings: list[list[Any]]) -> None:
        get(self._router.add_acls.remote(bindings))

    def remove_acls(self, bindings: list[list[Any]]) -> list[list[Any]]:
        return get(self._router.remove_acls.remote(bindings))

    def quotas(self) -> list[list[Any]]:
        """[[entity, values], ...] of every client quota (logan_ray.quota_cli)."""
        _version, entries = get(self._router.quotas.remote())
        return entries

    def alter_quotas(self, changes: list[list[Any]]) -> None:
        get(self._router.alter_quotas.remote(changes))


def run_users(sec: Any, args: argparse.Namespace) -> int:
    """``sec``: a :class:`RaySecurity` or a ``kafka_backend.KafkaSecurity``."""
    if args.users_cmd == "list":
        for user, creds in sec.users():
            print(f"{user}: " + ", ".join(f"{m} ({n} iterations)" for m, n in creds))
        return 0
    mechanisms = args.mechanism or sorted(scram.MECHANISMS)
    if args.users_cmd == "set":
        if not scram.MIN_ITERATIONS <= args.iterations <= scram.MAX_ITERATIONS:
            raise ValueError(f"--iterations must be in [{scram.MIN_ITERATIONS}, {scram.MAX_ITERATIONS}]")
        sec.set_user(args.name, mechanisms, args.iterations, _password(args))
        print(f"set the {', '.join(mechanisms)} credentials of {args.name}")
        return 0
    if not args.mechanism:  # "delete NAME": whatever mechanisms it has
        try:
            mechanisms = [m for user, creds in sec.users([args.name]) for m, _ in creds]
        except LoganError:  # Kafka answers RESOURCE_NOT_FOUND for a user without credentials
            mechanisms = []
        if not mechanisms:
            raise ValueError(f"user {args.name!r} has no SCRAM credentials")
    sec.delete_user(args.name, mechanisms)
    print(f"deleted the SCRAM credentials of {args.name}")
    return 0


# ------------------------------------------------------------------------ ACLs
def add_acls_parser(sub: Any) -> argparse.ArgumentParser:
    from .security import acl

    a = sub.add_parser("acls", help="Kafka ACLs (applied when authorizer.class.name is set)")
    asub = a.add_subparsers(dest="acls_cmd", required=True)
    for cmd, text in (("add", "add an ACL"), ("remove", "remove an ACL (all fields must match)")):
        x = asub.add_parser(cmd, help=text)
        x.add_argument("--principal", required=True, help="e.g. User:alice, User:* for everyone")
        x.add_argument("--operation", required=True, action="append", choices=sorted(acl.OPERATIONS),
                       help="repeatable")
        where = x.add_mutually_exclusive_group(required=True)
        where.add_argument("--topic")
        where.add_argument("--group")
        where.add_argument("--transactional-id")
        where.add_argument("--cluster", action="store_true")
        x.add_argument("--prefixed", action="store_true", help="the name is a prefix (PREFIXED pattern)")
        x.add_argument("--deny", action="store_true", help="a DENY ACL (default ALLOW)")
        x.add_argument("--host", default="*", help="client address the ACL applies to (default *)")
    x = asub.add_parser("list", help="list ACLs")
    x.add_argument("--principal", default=None)
    return a


def _bindings(args: argparse.Namespace) -> list[list[Any]]:
    from .security import acl

    if args.topic is not None:
        rtype, name = acl.TOPIC, args.topic
    elif args.group is not None:
        rtype, name = acl.GROUP, args.group
    elif args.transactional_id is not None:
        rtype, name = acl.TRANSACTIONAL_ID, args.transactional_id
    else:
        rtype, name = acl.CLUSTER, acl.CLUSTER_NAME
    out = []
    for op in args.operation:
        b = acl.Binding(rtype, name, acl.PREFIXED if args.prefixed else acl.LITERAL, args.principal, args.host,
                        acl.OPERATIONS[op], acl.DENY if args.deny else acl.ALLOW)
        try:
            acl.validate(b)
        except acl.AclError as e:
            raise ValueError(str(e)) from None
        out.append(list(b))
    return out


def _describe(b: Any) -> str:
    from .security import acl

    rtypes = {v: k for k, v in acl.RESOURCE_TYPES.items()}
    ops = {v: k for k, v in acl.OPERATIONS.items()}
    pattern = "prefixed" if b[2] == acl.PREFIXED else "literal"
    perm = "DENY" if b[6] == acl.DENY else "ALLOW"
    return f"{perm} {b[3]} {ops.get(b[5], b[5])} on {rtypes.get(b[0], b[0])} {b[1]} ({pattern}) from host {b[4]}"


def run_acls(sec: Any, args: argparse.Namespace) -> int:
    """``sec``: a :class:`RaySecurity` or a ``kafka_backend.KafkaSecurity``."""
    if args.acls_cmd == "list":
        for b in sec.acls(args.principal):
            print(_describe(b))
        return 0
    bindings = _bindings(args)
    if args.acls_cmd == "add":
        sec.add_acls(bindings)
        for b in bindings:
            print(f"added: {_describe(b)}")
        return 0
    removed = sec.remove_acls(bindings)
    if not removed:
        raise ValueError("no such ACL")
    for b in removed:
        print(f"removed: {_describe(b)}")
    return 0
