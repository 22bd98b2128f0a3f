"""Crash safety with a real process: a child appends and acknowledges, the parent SIGKILLs it.

Every batch the child printed (acknowledged after ``append`` returned, with an
fsync per append in ``flush`` mode) must be intact after reopening, and no
partial batch may ever be visible. The same folder goes through several
kill/recover rounds, so recovery also runs on logs that were recovered before.
"""
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from logan_ray.storage.config import TopicConfig
from logan_ray.storage.log import PartitionLog

CHILD = r"""
import sys
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.record_builder import build_batch

directory, first_seq, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
overrides = {"segment.bytes": "60000", "index.interval.bytes": "512"}
if mode == "flush":
    overrides["flush.messages"] = "1"
log = PartitionLog(directory, TopicConfig.from_dict(overrides))
out = sys.stdout
out.write("ready %d\n" % log.log_end_offset)
out.flush()
seq = first_seq
while True:
    count = 1 + seq % 5
    pad = (seq * 7919) % 4000
    values = [b"%d:%d:" % (seq, j) + bytes([65 + seq % 26]) * pad for j in range(count)]
    info = log.append(build_batch(values, timestamps=seq))
    out.write("%d %d %d\n" % (seq, info.base_offset, count))
    out.flush()
    seq += 1
"""


def expected_values(seq: int, count: int) -> list[bytes]:
    pad = (seq * 7919) % 4000
    return [b"%d:%d:" % (seq, j) + bytes([65 + seq % 26]) * pad for j in range(count)]


def run_and_kill(directory: str, first_seq: int, mode: str, delay: float) -> list[tuple[int, int, int]]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, directory, str(first_seq), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        # Wait until the child is appending (or dies trying), then kill it at a random moment.
        line = child.stdout.readline()
        assert line.startswith(b"ready"), (line, child.stderr.read() if child.poll() is not None else b"")
        time.sleep(delay)
    finally:
        child.send_signal(signal.SIGKILL)
        out, err = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL, err.decode()
    acked = []
    for raw in out.splitlines(keepends=True):
        if not raw.endswith(b"\n"):
            break  # a half-printed line was never a complete acknowledgement
        seq, base, count = map(int, raw.split())
        acked.append((seq, base, count))
    return acked


def check_log(directory: str, acked: list[tuple[int, int, int]]) -> int:
    log = PartitionLog(directory, TopicConfig.from_dict({"segment.bytes": "60000", "index.interval.bytes": "512"}))
    try:
        assert log.verify() == []  # no corrupt or partial batch anywhere
        end = log.log_end_offset
        if acked:
            assert end >= acked[-1][1] + acked[-1][2]
        records = []
        offset = 0
        while offset < end:
            chunk = log.read_records(offset, 1 << 20)
            assert chunk and chunk[0].offset == offset
            records.extend(chunk)
            offset = chunk[-1].offset + 1
        assert [r.offset for r in records] == list(range(end))
        for seq, base, count in acked:
            assert [r.value for r in records[base : base + count]] == expected_values(seq, count), (seq, base)
            assert all(r.timestamp == seq for r in records[base : base + count])
        # Whatever is there beyond the acknowledged batches is whole batches the child wrote.
        return end
    finally:
        # Leave without a clean-shutdown marker, so the next child recovers again.
        log._flusher.stop()
        for seg in log._segments:
            seg.close()
        log._closed = True


@pytest.mark.parametrize("mode", ["flush", "default"])
def test_sigkill_never_loses_acknowledged_batches(tmp_path, mode):
    rng = random.Random(int.from_bytes(os.urandom(4), "big"))
    directory = str(tmp_path / "crash-0")
    acked_all: list[tuple[int, int, int]] = []
    for round_ in range(4):
        acked = run_and_kill(directory, round_ * 1_000_000, mode, rng.uniform(0.05, 0.6))
        acked_all.extend(acked)
        end = check_log(directory, acked_all)
        assert end >= len(acked_all)
    assert len(acked_all) > 4, "the child should have acknowledged some batches"
