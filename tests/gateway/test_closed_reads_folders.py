"""A gateway serves an inactive partition from the folder its leader leads on: ``<data-dir>/<topic>-<p>``
unless the partition moved to this node (a reassignment of a replication factor 1 topic, a
controlled move, an election), when the router's route names the follower folder it was built in.
Without that, a moved partition's reads woke its actor each time (no default folder here), or read a
stale default folder left by an earlier replica. Pure asyncio over real files: no Ray."""
from __future__ import annotations

import asyncio
import os
import uuid

import pytest

from logan_ray.gateway.closed_reads import ClosedReads, NeedsActor
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.partition_dir import write_topic_id
from logan_ray.storage.record_builder import build_batch


def _closed_log(directory: str, topic_id: str, records: int) -> None:
    os.makedirs(directory)
    write_topic_id(directory, topic_id)
    log = PartitionLog(directory, TopicConfig.from_dict({}))
    for i in range(records):
        log.append(build_batch([b"v%d" % i]))
    log.close()


def _reads(data_dir: str) -> ClosedReads:
    async def data() -> str:
        return data_dir
    return ClosedReads(data)


def test_a_moved_partition_is_read_from_the_folder_the_route_names(tmp_path):
    data_dir, topic_id = str(tmp_path), str(uuid.uuid4())
    moved = os.path.join(data_dir, "replicas", "abcd1234", "t-0")
    _closed_log(moved, topic_id, 5)

    async def run() -> None:
        reads = _reads(data_dir)
        assert await reads.call("t", 0, topic_id, 3, "offsets", (), moved) == (0, 5)
        slices, hw, log_start = await reads.call("t", 0, topic_id, 3, "locate", (0, 1 << 20), moved)
        assert (hw, log_start) == (5, 0) and sum(s[2] for s in slices) > 0
        with pytest.raises(NeedsActor):  # the default folder holds nothing of this topic: its actor must answer
            await _reads(data_dir).call("t", 0, topic_id, 3, "offsets", ())
    asyncio.run(run())


def test_a_stale_default_folder_is_not_read_when_the_route_names_another(tmp_path):
    data_dir, topic_id = str(tmp_path), str(uuid.uuid4())
    _closed_log(os.path.join(data_dir, "t-0"), topic_id, 2)  # left by a replica that moved away and back
    moved = os.path.join(data_dir, "replicas", "abcd1234", "t-0")
    _closed_log(moved, topic_id, 7)

    async def run() -> None:
        reads = _reads(data_dir)
        assert await reads.call("t", 0, topic_id, 3, "offsets", ()) == (0, 2)  # a view of the old folder
        assert await reads.call("t", 0, topic_id, 3, "offsets", (), moved) == (0, 7)  # not kept for the new one
    asyncio.run(run())
