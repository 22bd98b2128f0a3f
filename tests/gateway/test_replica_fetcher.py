"""The replica fetcher's handling of Fetch answers, on real follower logs (no Ray, no sockets).

The wire exchange itself runs in tests/gateway/test_gw_multinode.py; here the
answers a leader gives are built by hand to reach the paths a healthy cluster
rarely takes: a diverging epoch (the follower holds records the new leader never
had) and a batch cut at the size limit.
"""
from __future__ import annotations

import asyncio

from logan_ray.gateway.replica_fetcher import Follower, ReplicaFetcher, truncation_offset, whole_batches
from logan_ray.storage.hw_checkpoint import read_high_watermark
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_records


def batch(offset: int, epoch: int, *values: bytes) -> bytes:
    return build_batch(list(values), base_offset=offset, partition_leader_epoch=epoch, timestamps=1000)


def answer(records: bytes = b"", hw: int = 0, diverging: dict | None = None) -> dict:
    part = {"partition_index": 0, "error_code": 0, "high_watermark": hw, "records": records}
    if diverging is not None:
        part["diverging_epoch"] = diverging
    return {"error_code": 0, "responses": [{"topic": "t", "partitions": [part]}]}


def test_a_diverging_epoch_cuts_the_follower_back_to_the_new_leaders_log_then_it_continues(tmp_path):
    log_ = PartitionLog(str(tmp_path / "t-0"))
    # epochs 0 and 1 as every replica has them, then epoch 2 records only the old leader had
    log_.append_as_follower(batch(0, 0, b"a", b"b") + batch(2, 1, b"c", b"d") + batch(4, 2, b"lost1", b"lost2"))
    assert log_.leader_epochs.entries == [(0, 0), (1, 2), (2, 4)]
    # the new leader (epoch 3) knows epoch 1 ending at 4: the follower's own end of epoch 1 is 4 too
    assert truncation_offset(log_, 1, 4) == 4
    assert truncation_offset(log_, 1, 3) == 3  # a leader that ended epoch 1 earlier wins

    fetcher = ReplicaFetcher(router=None, node_id="0" * 40)
    f = Follower("t", 0, leader="1" * 40, leader_epoch=3, log=log_)
    fetcher._followers[("t", 0)] = f
    assert asyncio.run(fetcher._apply([f], answer(diverging={"epoch": 1, "end_offset": 4})))
    assert log_.log_end_offset == 4 and log_.leader_epochs.entries == [(0, 0), (1, 2)]
    # the next answer carries the new leader's epoch 3 from offset 4: appended as it is
    assert asyncio.run(fetcher._apply([f], answer(batch(4, 3, b"e"), hw=5)))
    assert log_.log_end_offset == 5 and f.high_watermark == 5
    assert log_.leader_epochs.entries == [(0, 0), (1, 2), (3, 4)]
    assert [r.value for r in decode_records(log_.read(0, 1 << 20))] == [b"a", b"b", b"c", b"d", b"e"]
    # handed over to a new leader on this node: the follower's HW is checkpointed, the log closed
    assert asyncio.run(fetcher.release("t", 0, 4)) and log_.closed
    assert read_high_watermark(str(tmp_path / "t-0")) == 5 and fetcher.state() == {}


def test_a_batch_cut_at_the_size_limit_waits_for_the_next_fetch(tmp_path):
    whole = batch(0, 0, b"x" * 50) + batch(1, 0, b"y" * 50)
    cut = whole + batch(2, 0, b"z" * 50)[:30]
    assert bytes(whole_batches(cut)) == whole
    assert len(whole_batches(b"")) == 0 and len(whole_batches(cut[:11])) == 0

    log_ = PartitionLog(str(tmp_path / "t-0"))
    fetcher = ReplicaFetcher(router=None, node_id="0" * 40)
    f = Follower("t", 0, leader="1" * 40, leader_epoch=0, log=log_)
    fetcher._followers[("t", 0)] = f
    assert asyncio.run(fetcher._apply([f], answer(cut, hw=3)))
    assert log_.log_end_offset == 2 and f.high_watermark == 2  # never above what the follower holds
    log_.close()


def test_an_error_from_the_leader_asks_for_fresh_assignments_and_writes_nothing(tmp_path):
    log_ = PartitionLog(str(tmp_path / "t-0"))
    fetcher = ReplicaFetcher(router=None, node_id="0" * 40)
    f = Follower("t", 0, leader="1" * 40, leader_epoch=0, log=log_)
    fetcher._followers[("t", 0)] = f
    body = answer(batch(0, 0, b"a"))
    body["responses"][0]["partitions"][0]["error_code"] = 74  # FENCED_LEADER_EPOCH: a newer leader exists

    async def run() -> tuple[bool, bool]:
        done = await fetcher._apply([f], body)
        return done, fetcher._stale.is_set()

    assert asyncio.run(run()) == (False, True)
    assert log_.log_end_offset == 0
    log_.close()


def test_a_follower_behind_the_leaders_log_start_restarts_there_and_then_follows_it(tmp_path):
    """OFFSET_OUT_OF_RANGE with the leader's log start past the follower's end (a new replica of a
    partition whose retention moved on): the follower starts over at the leader's log start, fetches
    from there, and later moves its log start with the leader's (DeleteRecords)."""
    log_ = PartitionLog(str(tmp_path / "t-0"))
    log_.append_as_follower(batch(0, 0, b"old"))
    fetcher = ReplicaFetcher(router=None, node_id="0" * 40)
    f = Follower("t", 0, leader="1" * 40, leader_epoch=2, log=log_)
    fetcher._followers[("t", 0)] = f
    body = answer(hw=120)
    body["responses"][0]["partitions"][0].update(error_code=1, log_start_offset=100)
    asyncio.run(fetcher._apply([f], body))
    assert (log_.log_start_offset, log_.log_end_offset) == (100, 100)
    assert fetcher._request([f])["topics"][0]["partitions"][0]["fetch_offset"] == 100
    more = answer(batch(100, 2, b"a", b"b") + batch(102, 2, b"c"), hw=103)
    more["responses"][0]["partitions"][0]["log_start_offset"] = 100
    assert asyncio.run(fetcher._apply([f], more))
    assert log_.log_end_offset == 103 and log_.leader_epochs.entries == [(2, 100)]
    moved = answer(hw=103)
    moved["responses"][0]["partitions"][0]["log_start_offset"] = 102  # DeleteRecords on the leader
    asyncio.run(fetcher._apply([f], moved))
    assert log_.log_start_offset == 102
    assert [r.value for r in decode_records(log_.read(102, 1 << 20))] == [b"c"]
    # an out-of-range answer while the follower is not behind the log start changes nothing
    ahead = answer(hw=103)
    ahead["responses"][0]["partitions"][0].update(error_code=1, log_start_offset=90)
    assert not asyncio.run(fetcher._apply([f], ahead))
    assert (log_.log_start_offset, log_.log_end_offset) == (102, 103)
    log_.close()


def test_a_leaders_log_start_inside_a_batch_restarts_the_empty_follower_at_that_batch(tmp_path):
    """DeleteRecords can put the leader's log start inside a batch; the follower that starts there gets
    the whole batch: it restarts at the batch's base offset, appends it, then moves its log start up to
    the leader's (Kafka's UnexpectedAppendOffsetException case)."""
    log_ = PartitionLog(str(tmp_path / "t-0"))
    fetcher = ReplicaFetcher(router=None, node_id="0" * 40)
    f = Follower("t", 0, leader="1" * 40, leader_epoch=1, log=log_)
    fetcher._followers[("t", 0)] = f
    body = answer(hw=13)
    body["responses"][0]["partitions"][0].update(error_code=1, log_start_offset=11)
    asyncio.run(fetcher._apply([f], body))
    assert log_.log_end_offset == 11
    more = answer(batch(10, 1, b"a", b"b", b"c"), hw=13)  # offsets 10..12: the log start 11 is inside
    more["responses"][0]["partitions"][0]["log_start_offset"] = 11
    assert asyncio.run(fetcher._apply([f], more))
    assert (log_.log_start_offset, log_.log_end_offset) == (11, 13)
    assert [r.offset for r in decode_records(log_.read(11, 1 << 20)) if r.offset >= 11] == [11, 12]
    log_.close()
