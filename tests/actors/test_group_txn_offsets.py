"""The offsets transactions hold (actors/group_txn_offsets.py), without Ray: held until the marker,
applied by a commit of the group's own ``__consumer_offsets`` partition, dropped by an abort, and
kept for the retried marker when the write fails."""
from __future__ import annotations

import asyncio

import pytest

from logan_ray.actors.group_txn_offsets import TxnOffsets
from logan_ray.groups.offsets_log import OffsetEntry


class _Coord:
    def __init__(self) -> None:
        self.applied: list[tuple[str, list]] = []

    def validate_commit(self, gid, generation, member, instance, parts, unknown, transactional=False):
        assert transactional
        return {}, [(t, p, OffsetEntry(off, -1, "", 0)) for t, p, off in parts]

    def apply_commit(self, gid, accepted) -> None:
        self.applied.append((gid, accepted))


def _offsets(fail_writes: int = 0) -> tuple[TxnOffsets, _Coord, list]:
    coord, written = _Coord(), []
    failures = [fail_writes]

    async def own(gid):
        return 0

    async def commit_parts(body):
        return [(t["name"], p["partition_index"], p["committed_offset"]) for t in body["topics"]
                for p in t["partitions"]], set()

    async def write(records):
        if failures[0]:
            failures[0] -= 1
            raise OSError("not enough replicas")
        written.extend(records)

    partition_of = {"g-a": 0, "g-b": 1}.__getitem__
    return TxnOffsets(coord, own, commit_parts, partition_of, write), coord, written


def _request(gid: str, offset: int, producer_id: int = 7) -> dict:
    return {"group_id": gid, "producer_id": producer_id, "generation_id": -1, "member_id": "",
            "topics": [{"name": "in", "partitions": [{"partition_index": 0, "committed_offset": offset}]}]}


def test_held_offsets_apply_only_when_their_partitions_marker_commits():
    txn, coord, written = _offsets()

    async def run() -> tuple[int, int]:
        answer = await txn.commit_request(_request("g-a", 10))
        assert answer["topics"][0]["partitions"][0]["error_code"] == 0
        await txn.commit_request(_request("g-b", 20))
        assert coord.applied == [] and written == []  # nothing before the marker
        other = await txn.complete(partition=1, producer_id=7, commit=True)  # g-b's partition only
        return other, await txn.complete(partition=0, producer_id=7, commit=True)

    assert asyncio.run(run()) == (1, 1)
    assert [gid for gid, _ in coord.applied] == ["g-b", "g-a"] and len(written) == 2


def test_an_abort_drops_what_the_transaction_held():
    txn, coord, written = _offsets()

    async def run() -> int:
        await txn.commit_request(_request("g-a", 10))
        return await txn.complete(partition=0, producer_id=7, commit=False)

    assert asyncio.run(run()) == 0
    assert coord.applied == [] and written == [] and txn.held(7) == []


def test_a_failed_write_keeps_the_offsets_for_the_retried_marker():
    txn, coord, written = _offsets(fail_writes=1)

    async def run() -> int:
        await txn.commit_request(_request("g-a", 10))
        with pytest.raises(OSError):
            await txn.complete(partition=0, producer_id=7, commit=True)
        assert txn.held(7) and coord.applied == []
        return await txn.complete(partition=0, producer_id=7, commit=True)

    assert asyncio.run(run()) == 1
    assert len(coord.applied) == 1 and txn.held(7) == []
