"""Producer-state snapshots: written at roll and close, loaded at open instead of rescanning the log."""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys

import crc32c
import pytest

from logan_ray.storage.batch_header import parse_header
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.producer_snapshot import (
    list_snapshots,
    load_producer_state,
    snapshot_path,
    write_snapshot,
)
from logan_ray.storage.producer_state import OutOfOrderSequenceError, ProducerStateTable
from logan_ray.storage.record_builder import build_batch

from log_helpers import FakeClock

DAY = 86_400_000


def idem(pid: int, seq: int, n: int = 2, ts: int = 1_700_000_000_000, pad: int = 0) -> bytes:
    return build_batch([b"p%d-s%d-%d" % (pid, seq, i) + b"x" * pad for i in range(n)], timestamps=ts,
                       producer_id=pid, producer_epoch=0, base_sequence=seq)


def open_log(path, clock=None, **config) -> PartitionLog:
    return PartitionLog(str(path), TopicConfig.from_dict({k.replace("_", "."): v for k, v in config.items()}), clock=clock)


def fill(lg: PartitionLog, producers: int, batches: int, n: int = 2, pad: int = 0) -> dict[tuple[int, int], int]:
    """Round-robin idempotent batches; {(pid, seq): base offset}."""
    offsets = {}
    for i in range(batches):
        for pid in range(producers):
            seq = i * n
            offsets[(pid, seq)] = lg.append(idem(pid, seq, n, pad=pad)).base_offset
    return offsets


def assert_duplicates_known(table: ProducerStateTable, offsets: dict, pid: int, last_batches: list[int], n: int = 2):
    for seq in last_batches:
        assert table.check(parse_header(idem(pid, seq, n))) == (offsets[(pid, seq)], -1), (pid, seq)


def test_clean_restart_loads_the_snapshot_and_reads_no_log_data(tmp_path):
    lg = open_log(tmp_path / "t-0")
    offsets = fill(lg, producers=3, batches=2000)  # 6000 batches in the active segment
    end = lg.log_end_offset
    lg.close()
    assert list_snapshots(str(tmp_path / "t-0")) == [end]

    lg = open_log(tmp_path / "t-0")
    assert lg.producer_load.snapshot_offset == end
    assert lg.producer_load.batches_replayed == 0
    assert lg.stats()["producer_replay_bytes"] == 0
    for pid in range(3):
        assert_duplicates_known(lg.producer_state, offsets, pid, [2 * i for i in range(1995, 2000)])
        assert lg.producer_state.check(parse_header(idem(pid, 4000))) is None  # the next sequence
        with pytest.raises(OutOfOrderSequenceError):
            lg.producer_state.check(parse_header(idem(pid, 4010)))
    lg.close()

    # Contrast: without snapshots the same open reads every batch of the segment.
    for offset in list_snapshots(str(tmp_path / "t-0")):
        os.remove(snapshot_path(str(tmp_path / "t-0"), offset))
    lg = open_log(tmp_path / "t-0")
    assert lg.producer_load.snapshot_offset is None
    assert lg.producer_load.batches_replayed == 6000
    assert lg.stats()["producer_replay_bytes"] > 0
    lg.close()


CHILD = r"""
import os, signal, sys
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.record_builder import build_batch

directory, flush = sys.argv[1], sys.argv[2] == "flush"
lg = PartitionLog(directory, TopicConfig.from_dict({"segment.bytes": "40000"}))
seq = 0
out = sys.stdout
while lg.segment_count < 3 or lg.log_end_offset - lg.segments[-1].base_offset < 6:
    data = build_batch([b"s%d-%d" % (seq, i) for i in range(2)], timestamps=1_700_000_000_000,
                       producer_id=42, producer_epoch=0, base_sequence=seq)
    info = lg.append(data)
    if flush:
        lg.flush()
    out.write("%d %d\n" % (seq, info.base_offset))
    out.flush()
    seq += 2
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("flush", ["flush", "no-flush"])
def test_sigkill_after_a_roll_replays_only_the_tail_and_keeps_duplicates(tmp_path, flush):
    """Without flushes (acks=1) recovery rescans every segment after the recovery point; with no
    transaction marker in them their indexes stay whole, and the newest snapshot is still used."""
    directory = str(tmp_path / "t-0")
    child = subprocess.run([sys.executable, "-c", CHILD, directory, flush], capture_output=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr.decode()[-2000:]
    acked = {}
    for line in child.stdout.decode().split("\n"):
        if line:
            seq, offset = map(int, line.split())
            acked[(42, seq)] = offset
    lg = open_log(tmp_path / "t-0", segment_bytes=40000)
    active_base = lg.segments[-1].base_offset
    assert lg.producer_load.snapshot_offset == active_base  # the snapshot of the last roll
    tail = [s for (_, s), o in acked.items() if o >= active_base]
    assert lg.producer_load.batches_replayed == len(tail) == 3  # only the batches after it were read
    last_five = sorted(s for _, s in acked)[-5:]  # two from the snapshot, three from the tail
    assert_duplicates_known(lg.producer_state, acked, 42, last_five)
    next_seq = max(s for _, s in acked) + 2
    assert lg.producer_state.check(parse_header(idem(42, next_seq))) is None
    lg.close()


def crashed_log_with_three_snapshots(tmp_path):
    lg = open_log(tmp_path / "t-0")
    offsets = {}
    snaps = []
    for round_ in range(3):
        offsets.update({(7, seq): lg.append(idem(7, seq)).base_offset for seq in range(round_ * 20, round_ * 20 + 20, 2)})
        lg.roll()
        snaps.append(lg.log_end_offset)
    offsets.update({(7, seq): lg.append(idem(7, seq)).base_offset for seq in range(60, 66, 2)})
    lg.flush()  # no close(): like a crash, the last snapshot is older than the tail
    return lg, offsets, snaps


def test_corrupt_or_torn_newest_snapshot_falls_back_to_an_older_one(tmp_path):
    lg, offsets, snaps = crashed_log_with_three_snapshots(tmp_path)
    directory = str(tmp_path / "t-0")
    assert list_snapshots(directory) == snaps
    with open(snapshot_path(directory, snaps[-1]), "r+b") as f:  # a flipped bit
        f.seek(20)
        byte = f.read(1)
        f.seek(20)
        f.write(bytes([byte[0] ^ 1]))
    with open(snapshot_path(directory, snaps[-2]), "r+b") as f:  # torn: half the file
        f.truncate(os.path.getsize(snapshot_path(directory, snaps[-2])) // 2)
    lg2 = open_log(tmp_path / "t-0")
    load = lg2.producer_load
    assert load.corrupt_snapshots == [snaps[-1], snaps[-2]]
    assert load.snapshot_offset == snaps[0]
    assert load.batches_replayed == 10 + 10 + 3  # the second and third rounds, then the tail
    assert_duplicates_known(lg2.producer_state, offsets, 7, list(range(56, 66, 2)))
    assert lg2.producer_state.check(parse_header(idem(7, 66))) is None
    lg2.close()


def test_unreadable_snapshots_everywhere_fall_back_to_the_newest_segment(tmp_path):
    lg, offsets, snaps = crashed_log_with_three_snapshots(tmp_path)
    directory = str(tmp_path / "t-0")
    for offset in snaps:
        with open(snapshot_path(directory, offset), "wb") as f:
            f.write(b"\0" * 7)
    lg2 = open_log(tmp_path / "t-0")
    assert lg2.producer_load.snapshot_offset is None
    assert lg2.producer_load.batches_replayed == 3
    assert_duplicates_known(lg2.producer_state, offsets, 7, [60, 62, 64])
    lg2.close()


def test_snapshots_above_the_log_end_are_deleted_at_open(tmp_path):
    lg = open_log(tmp_path / "t-0")
    offsets = fill(lg, producers=1, batches=5)
    lg.close()
    directory = str(tmp_path / "t-0")
    # A snapshot from a log that a crash cut back: it describes batches that no longer exist.
    ghost = ProducerStateTable()
    ghost.record(parse_header(idem(0, 10)), 500)
    write_snapshot(directory, 500, ghost, durable=False)
    lg = open_log(tmp_path / "t-0")
    assert lg.producer_load.stale_snapshots == [500]
    assert 500 not in list_snapshots(directory)
    assert lg.producer_state.check(parse_header(idem(0, 10))) is None  # expected next, not a "duplicate"
    assert_duplicates_known(lg.producer_state, offsets, 0, [0, 2, 4, 6, 8])
    lg.close()


def test_retention_and_delete_records_remove_snapshots_below_the_log_start_but_the_newest(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock=clock, segment_bytes=600, retention_bytes=1500, file_delete_delay_ms=0)
    for seq in range(0, 80, 2):
        lg.append(idem(3, seq, pad=100))
    directory = str(tmp_path / "t-0")
    before = list_snapshots(directory)
    assert len(before) >= 8 and before == [s.base_offset for s in lg.segments[1:]]
    assert lg.apply_retention() > 0
    start = lg.log_start_offset
    assert all(o >= start for o in list_snapshots(directory))
    assert list_snapshots(directory)[-1] == before[-1]
    lg.delete_records(-1)  # log start = log end, past every snapshot
    assert list_snapshots(directory) == [before[-1]]  # the newest stays: producers outlive their records
    lg.close()
    lg = open_log(tmp_path / "t-0", clock=clock, segment_bytes=600)
    assert lg.producer_state.check(parse_header(idem(3, 78))) is not None  # still a known duplicate
    lg.close()


def test_producers_expire_after_producer_id_expiration_ms(tmp_path):
    clock = FakeClock()
    lg = PartitionLog(str(tmp_path / "t-0"), TopicConfig(), clock=clock, producer_id_expiration_ms=DAY)
    lg.append(idem(1, 0))
    clock.advance(DAY - 60_000)
    lg.append(idem(2, 0))
    clock.advance(60_000)
    assert len(lg.expire_producers()) == 1  # producer 1 idle for a day, producer 2 for a minute
    with pytest.raises(OutOfOrderSequenceError) as unknown:
        lg.producer_state.check(parse_header(idem(1, 2)))
    assert unknown.value.unknown_producer
    assert lg.producer_state.check(parse_header(idem(2, 0))) is not None
    lg.close()
    clock.advance(DAY)  # a restart a day later: producer 2 expires while loading the snapshot
    lg = PartitionLog(str(tmp_path / "t-0"), TopicConfig(), clock=clock, producer_id_expiration_ms=DAY)
    assert lg.producer_load.expired == 1 and len(lg.producer_state) == 0
    lg.close()


def test_expiration_counts_from_the_last_append_not_old_record_timestamps(tmp_path):
    clock = FakeClock()
    lg = PartitionLog(str(tmp_path / "t-0"), TopicConfig(), clock=clock, producer_id_expiration_ms=DAY)
    lg.append(idem(1, 0, ts=clock.now - 30 * DAY))  # historic CreateTime timestamps
    assert lg.expire_producers() == []
    lg.close()


def test_replay_across_cleaned_segments_forgets_producers_it_cannot_vouch_for(tmp_path):
    directory = str(tmp_path / "t-0")
    os.makedirs(directory)
    snap = ProducerStateTable()
    for pid in (1, 2, 3):
        snap.record(parse_header(idem(pid, 0)), pid * 10, now_ms=1)
    write_snapshot(directory, 100, snap, durable=False)

    def header_at(pid: int, seq: int, offset: int):
        data = bytearray(idem(pid, seq))
        data[0:8] = struct.pack(">q", offset)
        return parse_header(bytes(data))

    def replay(offset):
        assert offset == 100
        yield header_at(1, 2, 100), True  # producer 1: newest batch in a cleaned segment
        yield header_at(2, 2, 102), True
        yield header_at(2, 4, 104), False  # producer 2: newest batch in an untouched segment

    table, load = load_producer_state(directory, log_end=106, fallback_from=104, replay=replay, now_ms=2)
    assert load.snapshot_offset == 100 and load.batches_replayed == 3
    assert sorted(e.producer_id for e in table.entries()) == [2]
    assert load.forgotten_after_compaction == 2


def test_snapshot_files_use_kafkas_layout(tmp_path):
    directory = str(tmp_path)
    table = ProducerStateTable()
    table.record(parse_header(idem(9, 0, n=3)), 40, now_ms=1234)
    table.record(parse_header(idem(9, 3, n=2)), 43, now_ms=1300)
    path = write_snapshot(directory, 45, table, durable=True)
    assert os.path.basename(path) == "00000000000000000045.snapshot"
    data = open(path, "rb").read()
    version, crc, count = struct.unpack_from(">hIi", data)
    assert version == 1 and crc == crc32c.crc32c(data[6:]) and count == 2
    rows = list(struct.iter_unpack(">qhiqiqiq", data[10:]))
    # producer id, epoch, last sequence, last offset, offset delta, timestamp, coordinator epoch, txn start
    assert rows == [(9, 0, 2, 42, 2, 1300, -1, -1), (9, 0, 4, 44, 1, 1300, -1, -1)]
