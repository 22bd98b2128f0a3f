"""``logan-ray quotas``: set, describe and delete client quotas in the router's storage (no Ray: the
router's own quota storage, actors.security_meta, stands behind the command)."""
from __future__ import annotations

import asyncio
import json

import pytest

from actors.security_meta import SecurityMetadata
from logan_ray.cli import build_parser, main
from logan_ray.quota_cli import run_quotas


class StoredQuotas(SecurityMetadata):
    """What ``security_cli.RaySecurity`` offers the command, on the router's storage saved to a file."""

    def __init__(self, path) -> None:
        self.path = path
        self._meta = json.loads(path.read_text()) if path.exists() else {}
        self._lock = asyncio.Lock()

    def _save(self) -> None:
        self.path.write_text(json.dumps(self._meta))

    def quotas(self):  # type: ignore[override]  # RaySecurity's synchronous shape
        return asyncio.run(SecurityMetadata.quotas(self))[1]

    def alter_quotas(self, changes):  # type: ignore[override]
        asyncio.run(SecurityMetadata.alter_quotas(self, changes))


def run(sec, capsys, *argv: str) -> list[str]:
    assert run_quotas(sec, build_parser().parse_args(["quotas", *argv])) == 0
    return capsys.readouterr().out.splitlines()


def test_quotas_set_describe_and_delete_by_entity(tmp_path, capsys):
    sec = StoredQuotas(tmp_path / "meta.json")
    assert run(sec, capsys, "set", "--user", "alice", "--client-id-default", "--producer-byte-rate", "1048576") == [
        "set users/alice/clients/<default>: producer_byte_rate=1048576"]
    run(sec, capsys, "set", "--client-id", "app", "--consumer-byte-rate", "2048", "--producer-byte-rate", "1024")
    assert run(sec, capsys, "describe") == ["clients/app: consumer_byte_rate=2048, producer_byte_rate=1024",
                                             "users/alice/clients/<default>: producer_byte_rate=1048576"]
    assert run(sec, capsys, "describe", "--client-id", "app") == [
        "clients/app: consumer_byte_rate=2048, producer_byte_rate=1024"]
    assert run(sec, capsys, "delete", "--client-id", "app", "--producer-byte-rate") == [
        "deleted producer_byte_rate of clients/app"]
    assert run(sec, capsys, "delete", "--user", "alice", "--client-id-default") == [
        "deleted producer_byte_rate of users/alice/clients/<default>"]
    assert run(StoredQuotas(tmp_path / "meta.json"), capsys, "describe") == ["clients/app: consumer_byte_rate=2048"]


@pytest.mark.parametrize("argv, message", [
    (["set", "--producer-byte-rate", "10"], "name the entity"),
    (["set", "--user", "bob"], "give a value to set"),
    (["set", "--user", "bob", "--producer-byte-rate", "1.5"], "must be a Long value"),
    (["set", "--user", "bob", "--consumer-byte-rate", "-1"], "must be positive"),
    (["delete", "--user", "bob"], "users/bob has no quota to delete"),
])
def test_bad_quota_commands_say_what_is_wrong(tmp_path, argv, message):
    with pytest.raises(ValueError, match=message):
        run_quotas(StoredQuotas(tmp_path / "meta.json"), build_parser().parse_args(["quotas", *argv]))


def test_quotas_over_bootstrap_server_is_refused_in_one_line(capsys):
    assert main(["quotas", "describe", "--bootstrap-server", "127.0.0.1:1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "through Ray" in err[0]
