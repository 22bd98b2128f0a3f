"""A replica's high watermark on disk, so a restarted leader or follower does not start from nothing.

Kafka keeps every partition's high watermark of a log dir in its
``replication-offset-checkpoint`` file, written every
``replica.high.watermark.checkpoint.interval.ms`` (5000). Here each partition
folder has its own file of that name holding one number (partition actors and the
replica fetcher are different processes, so one shared file would need a writer of
its own). A stale value is safe: it is a high watermark this replica once knew,
so every record below it was on every in-sync replica then, and none of them
truncates below a high watermark.
"""
from __future__ import annotations

import os

from .recovery import read_checkpoint, write_checkpoint

HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
CHECKPOINT_INTERVAL_S = 5.0  # Kafka's replica.high.watermark.checkpoint.interval.ms


def read_high_watermark(directory: str) -> int | None:
    """The checkpointed high watermark of the partition in ``directory``; None when there is none."""
    return read_checkpoint(os.path.join(directory, HW_CHECKPOINT_FILE))


def write_high_watermark(directory: str, high_watermark: int) -> None:
    """Replace the checkpoint atomically and durably."""
    write_checkpoint(os.path.join(directory, HW_CHECKPOINT_FILE), high_watermark, durable=True)
