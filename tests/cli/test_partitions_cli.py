"""``logan-ray partitions reassign | reassignments | rebalance`` (logan_ray/partitions_cli.py) on the session's
single-node broker: what they print, one-line errors with a non-zero exit. The moves themselves, on
several nodes: tests/gateway/test_gw_reassign.py."""
from __future__ import annotations

import pytest
import ray

from logan_ray import cli, partitions_cli
from logan_ray.actors.names import broker_id


@pytest.fixture
def run(client, monkeypatch, capsys):
    monkeypatch.setattr(partitions_cli, "connect", lambda args: client)

    def go(*argv: str) -> tuple[int, str, str]:
        rc = cli.main(list(argv))
        got = capsys.readouterr()
        return rc, got.out, got.err
    return go


def test_list_rebalance_and_refusals(client, run, topic_name):
    client.create_topic(topic_name, partitions=1, activate=False)
    assert run("partitions", "reassignments") == (0, "0 reassignments in progress\n", "")
    rc, out, _err = run("partitions", "rebalance", "--dry-run")
    assert (rc, out) == (0, "0 partitions to move (the replicas are spread evenly)\n")
    me = broker_id(ray.get_runtime_context().get_node_id())
    rc, out, err = run("partitions", "reassign", topic_name, "0", "--replicas", f"{me},{me}")
    assert rc == 1 and out == "" and err.count("\n") == 1 and "duplicate" in err
    # a replication factor 1 partition can be reassigned too; to where it is, nothing moves
    rc, out, err = run("partitions", "reassign", topic_name, "0", "--replicas", str(me))
    assert (rc, err) == (0, "") and "started" in out
    assert run("partitions", "reassignments") == (0, "0 reassignments in progress\n", "")
    rc, _out, err = run("partitions", "reassign", topic_name, "0", "--cancel")
    assert rc == 1 and "no reassignment" in err
    rc, _out, err = run("partitions", "reassign", topic_name, "5", "--cancel")
    assert rc == 1 and f"{topic_name}-5" in err
    rc, _out, err = run("partitions", "reassign", topic_name, "0", "--replicas", "1", "--bootstrap-server", "h:1")
    assert rc == 1 and "works through Ray" in err
