"""How far cleaning got in one partition, and when: Kafka's cleaner-offset-checkpoint plus pass times.

The pass history lets tombstones be kept ``delete.retention.ms`` after the
pass that first cleaned them without rewriting batch timestamps.
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

from .atomic import atomic_write
from .file_modes import private_opener

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
MAX_PASS_HISTORY = 64


@dataclass(frozen=True)
class CleanerCheckpoint:
    """Where cleaning got to in one partition, persisted in its folder.

    ``clean_offset`` is Kafka's cleaner checkpoint: every offset below it has
    been through a completed pass. ``passes`` holds ``(clean offset reached,
    wall-clock ms)`` of recent passes in ascending order, enough to know when
    each tombstone was first cleaned without touching the batches.
    """

    clean_offset: int = 0
    passes: tuple[tuple[int, int], ...] = ()

    def tombstone_horizon(self, now_ms: int, delete_retention_ms: int) -> int:
        """Tombstones below this offset were first cleaned at least ``delete.retention.ms`` ago."""
        cutoff = now_ms - delete_retention_ms
        horizon = 0
        for end, when in self.passes:
            if when > cutoff:
                break
            horizon = end
        return min(horizon, self.clean_offset)

    def after_pass(self, end: int, now_ms: int, delete_retention_ms: int) -> "CleanerCheckpoint":
        """The checkpoint once a pass covering everything below ``end`` is installed."""
        # Offsets below an existing entry's end were first cleaned at its time; only
        # offsets past every entry are first cleaned now.
        passes: list[tuple[int, int]] = []
        for e, t in self.passes:
            if e >= end:
                passes.append((end, t))
                break
            passes.append((e, t))
        else:
            # One entry per time bucket of delete.retention.ms / (history - 2): a pass in
            # the same bucket as the last entry extends it and lends it its (later) time,
            # so tombstones are kept at most one bucket longer, never shorter, and the
            # history stays bounded however often passes run.
            bucket = max(1, delete_retention_ms // (MAX_PASS_HISTORY - 2))
            if passes and passes[-1][1] // bucket == now_ms // bucket and passes[-1][1] <= now_ms:
                passes[-1] = (end, now_ms)
            else:
                passes.append((end, now_ms))
        cutoff = now_ms - delete_retention_ms
        # Passes old enough to free their tombstones collapse into one entry.
        expired = 0
        while expired < len(passes) and passes[expired][1] <= cutoff:
            expired += 1
        if expired > 1:
            passes = passes[expired - 1:]
        # A hard cap for when delete.retention.ms shrank: the entry closest in time
        # to its successor hands it its offsets (kept longer, never shorter).
        while len(passes) > MAX_PASS_HISTORY:
            gaps = [passes[i + 1][1] - passes[i][1] for i in range(len(passes) - 1)]
            del passes[gaps.index(min(gaps))]
        return CleanerCheckpoint(end, tuple(passes))

    def to_json(self) -> bytes:
        return json.dumps({"version": 1, "clean_offset": self.clean_offset,
                           "passes": [list(p) for p in self.passes]}).encode()

    @classmethod
    def from_json(cls, data: bytes) -> "CleanerCheckpoint":
        doc = json.loads(data)
        passes = tuple((int(e), int(t)) for e, t in doc.get("passes", ()))
        return cls(int(doc["clean_offset"]), passes)


def read_checkpoint(directory: str) -> CleanerCheckpoint:
    """The partition's cleaner checkpoint; a missing or unreadable one means "nothing cleaned yet"."""
    path = os.path.join(directory, CHECKPOINT_FILE)
    try:
        with open(path, "rb") as f:
            return CleanerCheckpoint.from_json(f.read())
    except FileNotFoundError:
        return CleanerCheckpoint()
    except (ValueError, KeyError, TypeError) as e:
        log.warning("ignoring unreadable cleaner checkpoint %s: %s", path, e)
        return CleanerCheckpoint()


def write_checkpoint(directory: str, checkpoint: CleanerCheckpoint, *, durable: bool = False) -> None:
    """Replace the checkpoint (temp file + rename).

    Not fsynced by default, to keep the swap's critical section short: losing
    it to a power cut only moves cleaning back (the next pass rescans more,
    tombstones are kept longer), and an unreadable one reads as "nothing
    cleaned yet". Both are safe.
    """
    path = os.path.join(directory, CHECKPOINT_FILE)
    if durable:
        atomic_write(path, checkpoint.to_json())
        return
    tmp = path + ".tmp"
    with open(tmp, "wb", opener=private_opener) as f:
        f.write(checkpoint.to_json())
    os.replace(tmp, path)
