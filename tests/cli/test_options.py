"""Global options (--data-dir, --address, --bootstrap-server) go before or after the subcommand."""
from __future__ import annotations

import pytest

from logan_ray.cli import build_parser


@pytest.mark.parametrize("argv", [
    ["--data-dir", "/d", "--address", "h:1", "--bootstrap-server", "k:9", "start", "--foreground"],
    ["start", "--data-dir", "/d", "--foreground", "--address", "h:1", "--bootstrap-server", "k:9"],
    ["--data-dir", "/d", "start", "--address", "h:1", "--bootstrap-server", "k:9", "--foreground"],
])
def test_global_options_before_or_after_the_subcommand(argv):
    args = build_parser().parse_args(argv)
    assert (args.data_dir, args.address, args.bootstrap_server, args.foreground) == ("/d", "h:1", "k:9", True)


@pytest.mark.parametrize("argv", [
    ["topic", "create", "t", "--data-dir", "/d"],
    ["topic", "--data-dir", "/d", "create", "t"],
    ["--data-dir", "/d", "topic", "create", "t"],
    ["groups", "describe", "g", "--data-dir", "/d"],
    ["consume", "t", "--data-dir", "/d"],
])
def test_global_options_on_nested_subcommands(argv):
    assert build_parser().parse_args(argv).data_dir == "/d"


def test_a_value_given_once_is_not_reset_by_another_level():
    args = build_parser().parse_args(["--data-dir", "/top", "stop"])
    assert args.data_dir == "/top"
    args = build_parser().parse_args(["stop"])
    assert not hasattr(args, "data_dir")  # main() fills in: None means "find the running broker"
