"""The ``logan-ray`` command: start/stop a broker, admin topics, produce and consume lines.

Commands find the running broker through its runtime file (logan_ray.runtime_file);
``--data-dir``, ``--address`` and ``$LOGAN_RAY_DATA_DIR`` choose another, and
``--bootstrap-server`` talks the Kafka protocol instead of Ray (logan_ray.kafka_backend).
The global options are accepted before or after the subcommand. Errors are one
clear line on stderr and a non-zero exit within seconds, never a traceback or a hang.

One module per command group, each adding its subcommands to the parser:
:mod:`.broker_cli` (start, stop, status), :mod:`.topic_cli` (topic, compact),
:mod:`.produce_consume_cli`, :mod:`.group_cli` (groups), :mod:`.security_cli`
(users, acls), :mod:`.quota_cli` (quotas), :mod:`.node_cli` (node drain, leaders elect), :mod:`.partitions_cli` (partitions reassign,
rebalance), :mod:`.transactions_cli` (transactions list, describe, abort); what they share is :mod:`.cli_common`.
"""
from __future__ import annotations

import argparse
import os
import sys
from typing import Sequence

from .broker_cli import add_broker_parsers
from .cli_common import connect, err
from .errors import LoganError
from .group_cli import add_groups_parser, run_groups
from .node_cli import add_node_parsers
from .partitions_cli import add_partitions_parsers
from .produce_consume_cli import add_produce_consume_parsers
from .quota_cli import add_quotas_parser, run_quotas
from .security_cli import RaySecurity, add_acls_parser, add_users_parser, run_acls, run_users
from .topic_cli import add_topic_parsers
from .transactions_cli import add_transactions_parser


def cmd_groups(args: argparse.Namespace) -> int:
    return run_groups(connect(args), args)


def _security(args: argparse.Namespace):
    """Users and ACLs: Kafka's admin APIs with --bootstrap-server, else the router through Ray."""
    backend = connect(args)
    return backend.security if args.bootstrap_server else RaySecurity(backend)


def cmd_users(args: argparse.Namespace) -> int:
    return run_users(_security(args), args)


def cmd_acls(args: argparse.Namespace) -> int:
    return run_acls(_security(args), args)


def cmd_quotas(args: argparse.Namespace) -> int:
    if args.bootstrap_server:  # librdkafka's admin client has no client quota APIs to send them with
        raise ValueError("logan-ray quotas talks to the broker through Ray: leave out --bootstrap-server "
                         "(or use Kafka's kafka-configs --alter --add-config against the gateway)")
    return run_quotas(RaySecurity(connect(args)), args)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="logan-ray", description="A Kafka-compatible streaming log on Ray.")
    sub = p.add_subparsers(dest="cmd", required=True)
    add_broker_parsers(sub)
    add_topic_parsers(sub)
    add_node_parsers(sub)
    add_partitions_parsers(sub)
    add_produce_consume_parsers(sub)
    add_groups_parser(sub).set_defaults(func=cmd_groups)
    add_users_parser(sub).set_defaults(func=cmd_users)
    add_acls_parser(sub).set_defaults(func=cmd_acls)
    add_quotas_parser(sub).set_defaults(func=cmd_quotas)
    add_transactions_parser(sub)
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
        err(f"--{connection_options[0].replace('_', '-')} is for the Kafka connection: give --bootstrap-server too")
        return 1
    if getattr(args, "acks", None) is not None and args.acks != "all":
        args.acks = int(args.acks)
    try:
        return args.func(args)
    except (LoganError, ValueError, OSError) as e:
        err(str(e).splitlines()[0] if str(e) else type(e).__name__)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
