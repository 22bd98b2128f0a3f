"""A replicated leader's starting high watermark and its checkpoint (no Ray: the bookkeeping alone)."""
from __future__ import annotations

import asyncio

from logan_ray.actors.leader_replication import LeaderReplication
from logan_ray.storage.hw_checkpoint import read_high_watermark, write_high_watermark


def leader(directory: str, isr: list[str], log_end: int = 10, log_start: int = 2) -> LeaderReplication:
    return LeaderReplication("t-0", None, "t", 0, "L", ["L", "F"], isr, log_start=log_start,
                             log_end=lambda: log_end, epoch=1, directory=directory)


def test_a_restarted_leader_starts_its_high_watermark_at_the_checkpoint_never_past_its_log(tmp_path):
    d = str(tmp_path)
    assert leader(d, ["L", "F"]).high_watermark == 2  # no checkpoint: the log start, until followers report
    assert leader(d, ["L"]).high_watermark == 10  # alone in sync: the log end
    write_high_watermark(d, 7)
    assert leader(d, ["L", "F"]).high_watermark == 7
    write_high_watermark(d, 12)  # a checkpoint ahead of a log that lost its unsynced tail
    assert leader(d, ["L", "F"]).high_watermark == 10


def test_the_high_watermark_is_checkpointed_when_it_moved(tmp_path):
    d = str(tmp_path)
    lr = leader(d, ["L", "F"])

    async def run() -> None:
        await lr.checkpoint()
        assert read_high_watermark(d) == 2
        lr.states.fetched("F", 9, 10, 0)  # the follower reports its log end 9
        await lr.checkpoint()

    asyncio.run(run())
    assert read_high_watermark(d) == 9
