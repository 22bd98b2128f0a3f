"""The node's broker lease as partition actors read it (actors/lease_board.py): no Ray, real shared maps."""
from __future__ import annotations

import pytest

from logan_ray.actors import lease_board
from logan_ray.actors.lease_board import LeaseReader, LeaseWriter

NODE = "f" * 56


@pytest.fixture(autouse=True)
def private_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(lease_board, "channel_dir", lambda: str(tmp_path))


def test_a_replicated_write_is_refused_once_the_published_lease_ran_out():
    writer, reader = LeaseWriter(NODE), LeaseReader(NODE)
    assert reader.lapsed(now=1.0)  # a board before the first answered heartbeat grants nothing
    writer.publish(until=102.5, broker_epoch=7)
    assert not reader.lapsed(now=100.0) and not reader.lapsed(now=102.49)
    assert reader.lapsed(now=102.5)


def test_a_node_without_a_gateway_lease_fences_nothing():
    assert not LeaseReader(NODE).lapsed(now=1e9)
    writer, reader = LeaseWriter(NODE), LeaseReader(NODE)
    writer.publish(until=5.0, broker_epoch=1)
    assert reader.lapsed(now=6.0)
    writer.retire()  # the gateway stopped on purpose: its session ended without fencing
    assert not reader.lapsed(now=6.0)


def test_a_gateway_restarted_by_ray_publishes_on_a_new_board_that_readers_follow():
    old, reader = LeaseWriter(NODE), LeaseReader(NODE)
    old.publish(until=10.0, broker_epoch=1)
    assert reader.lapsed(now=11.0)
    new = LeaseWriter(NODE)  # the old process died without retiring its board
    new.publish(until=20.0, broker_epoch=2)
    assert not reader.lapsed(now=11.0)
