"""A follower's log: the leader's batches appended byte for byte, and runtime truncation (storage/log_replica.py)."""
from __future__ import annotations

import os

import pytest
from log_helpers import all_records, log_files, lose_power, open_log

from logan_ray.storage.batch_header import header_at, iter_headers
from logan_ray.storage.errors import CorruptRecordError, InvalidRecordError
from logan_ray.storage.log_replica import OffsetMismatchError
from logan_ray.storage.producer_state import OutOfOrderSequenceError
from logan_ray.storage.record_builder import build_batch


def idem(seq: int, n: int = 1, pid: int = 42, pad: int = 0) -> bytes:
    return build_batch([b"v%d" % (seq + i) + b"x" * pad for i in range(n)], producer_id=pid, producer_epoch=0,
                       base_sequence=seq)


def files_of(folder) -> dict[str, bytes]:
    out = {}
    for name in log_files(folder):
        with open(os.path.join(folder, name), "rb") as f:
            out[name] = f.read()
    return out


def replicate(leader, follower, max_bytes: int = 1) -> None:
    """Fetch ``leader`` into ``follower`` as a replica fetcher would, ``max_bytes`` at a time."""
    offset = follower.log_end_offset
    while offset < leader.log_end_offset:
        info = follower.append_as_follower(leader.read(offset, max_bytes))
        assert info.base_offset == offset
        offset = info.last_offset + 1


def leader_with_epochs(path, **cfg):
    """A leader log written in epochs 0, 0, 3, 3, 5 (small segments, so rolls happen)."""
    leader = open_log(path, **cfg)
    for i, epoch in enumerate((0, 0, 3, 3, 5)):
        leader.append(idem(i * 2, 2, pad=200), leader_epoch=epoch)
    return leader


def test_follower_append_copies_the_leader_byte_for_byte_and_its_epochs(tmp_path):
    leader = leader_with_epochs(tmp_path / "leader-0", segment_bytes=700)
    follower = open_log(tmp_path / "follower-0", segment_bytes=700)
    replicate(leader, follower, 800)  # several batches per fetch
    assert follower.log_end_offset == leader.log_end_offset == 10
    assert files_of(follower.directory) == files_of(leader.directory)  # same segments, same bytes
    assert follower.leader_epochs.entries == leader.leader_epochs.entries == [(0, 0), (3, 4), (5, 8)]
    # Producer state follows too: the follower could lead and deduplicate a retried batch.
    state = follower.producer_state
    assert state.check(header_at(idem(8, 2))) == (8, -1)  # a retry of the last batch: a duplicate
    with pytest.raises(OutOfOrderSequenceError):
        state.check(header_at(idem(20, 1)))
    assert state.check(header_at(idem(10, 1))) is None
    assert follower.append(idem(10, 1), leader_epoch=6).base_offset == 10
    # Reopened, the follower keeps everything (checkpoint and indexes agree with the files).
    follower.close()
    again = open_log(tmp_path / "follower-0", segment_bytes=700)
    assert again.leader_epochs.entries == [(0, 0), (3, 4), (5, 8), (6, 10)]
    assert [r.value for r in all_records(again)][:3] == [b"v0" + b"x" * 200, b"v1" + b"x" * 200, b"v2" + b"x" * 200]
    again.close()
    leader.close()


def test_follower_append_refuses_gaps_overlaps_and_corrupt_batches_and_writes_nothing(tmp_path):
    leader = leader_with_epochs(tmp_path / "leader-0")
    follower = open_log(tmp_path / "follower-0")
    follower.append_as_follower(leader.read(0, 1))  # offsets 0..1
    with pytest.raises(OffsetMismatchError):
        follower.append_as_follower(leader.read(4, 1))  # a gap: 2..3 missing
    with pytest.raises(OffsetMismatchError):
        follower.append_as_follower(leader.read(0, 1))  # already here
    two = leader.read(2, 1) + leader.read(6, 1)
    with pytest.raises(OffsetMismatchError):
        follower.append_as_follower(two)  # not contiguous inside one fetch
    bad = bytearray(leader.read(2, 1))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(bad)
    with pytest.raises(InvalidRecordError):
        follower.append_as_follower(b"")
    assert follower.log_end_offset == 2 and follower.leader_epochs.entries == [(0, 0)]
    follower.append_as_follower(leader.read(2, 1 << 20))  # the rest, in one go
    assert follower.log_end_offset == 10
    follower.close()
    leader.close()


def test_truncate_to_cuts_segments_indexes_epochs_and_producer_state_then_appends_continue(tmp_path):
    leader = leader_with_epochs(tmp_path / "leader-0", segment_bytes=700)
    lg = open_log(tmp_path / "follower-0", segment_bytes=700)
    replicate(leader, lg)
    lg.flush()
    assert lg.segment_count >= 3 and lg.recovery_point == 10
    assert lg.truncate_to(10) == 10  # at the end: nothing to do
    assert lg.truncate_to(5) == 4  # offset 5 is inside the batch 4..5: the whole batch goes
    assert lg.log_end_offset == 4 and lg.recovery_point == 4
    assert lg.leader_epochs.entries == [(0, 0)]  # epoch 3 began at 4: gone; epoch 5 too
    assert [s.base_offset for s in lg.segments][-1] <= 4
    assert lg.read_records(0)[-1].offset == 3
    # The producer state is as of offset 4: sequence 4 is next again, 6 is out of order.
    with pytest.raises(OutOfOrderSequenceError):
        lg.producer_state.check(header_at(idem(6, 1)))
    assert lg.producer_state.check(header_at(idem(2, 2))) == (2, -1)
    # A new leader's different history continues from the cut, with its own epoch.
    info = lg.append(idem(4, 3), leader_epoch=4)
    assert (info.base_offset, info.last_offset) == (4, 6)
    assert lg.leader_epochs.entries == [(0, 0), (4, 4)]
    assert lg.offset_for_timestamp(0)[0] == 0
    lg.close()
    again = open_log(tmp_path / "follower-0", segment_bytes=700)
    assert again.recovery_report.truncated_bytes == 0
    assert [r.value[:2] for r in all_records(again)] == [b"v0", b"v1", b"v2", b"v3", b"v4", b"v5", b"v6"]
    assert again.leader_epochs.entries == [(0, 0), (4, 4)]
    again.delete_records(3)
    with pytest.raises(InvalidRecordError):
        again.truncate_to(1)  # below the log start
    again.close()
    leader.close()


def test_truncation_survives_a_power_loss(volatile, tmp_path):
    """The cut is durable when truncate_to returns: a power loss cannot bring the cut records back."""
    src = open_log(tmp_path / "leader-0", segment_bytes=700)
    for i, epoch in enumerate((0, 0, 3, 3, 5)):
        src.append(idem(i * 2, 2, pad=200), leader_epoch=epoch)
    folder = os.path.join(volatile.mountpoint, "follower-0")
    lg = open_log(folder, segment_bytes=700)
    replicate(src, lg)
    lg.flush()  # everything durable, recovery point 10
    assert lg.truncate_to(4) == 4
    lose_power(volatile, lg)
    again = open_log(folder, segment_bytes=700)
    assert again.log_end_offset == 4
    assert again.leader_epochs.entries == [(0, 0)]
    assert [h.partition_leader_epoch for _, h in iter_headers(again.read(0, 1 << 20))] == [0, 0]
    again.close()
    src.close()


def test_truncate_fully_restarts_a_follower_at_the_leaders_log_start(tmp_path):
    """A follower behind the leader's log start (retention moved on) empties its log and starts there:
    segments, epochs and producer state go, the leader's batches from that offset append, a reopen
    keeps it."""
    leader = leader_with_epochs(tmp_path / "leader-0", segment_bytes=700)
    lg = open_log(tmp_path / "follower-0", segment_bytes=700, file_delete_delay_ms=0)
    lg.append_as_follower(leader.read(0, 1))  # the first batch only: offsets 0..1
    assert leader.delete_records(6) == 6
    with pytest.raises(InvalidRecordError):
        lg.truncate_fully_and_start_at(1)  # below its own log end: truncate_to's job
    lg.truncate_fully_and_start_at(6)
    assert (lg.log_start_offset, lg.log_end_offset, lg.recovery_point) == (6, 6, 6)
    assert [s.base_offset for s in lg.segments] == [6]
    assert lg.leader_epochs.entries == [] and len(lg.producer_state) == 0
    replicate(leader, lg)
    assert leader.leader_epochs.entries == lg.leader_epochs.entries == [(3, 6), (5, 8)]
    assert [r.value[:2] for r in all_records(lg)] == [b"v6", b"v7", b"v8", b"v9"]
    lg.apply_retention()  # the delay ran out: the old segment's files go
    assert not any(name.startswith("0" * 20) for name in os.listdir(tmp_path / "follower-0"))
    lg.close()
    again = open_log(tmp_path / "follower-0", segment_bytes=700)
    assert (again.log_start_offset, again.log_end_offset) == (6, 10)
    assert again.leader_epochs.entries == [(3, 6), (5, 8)]
    # the producer state is the leader's batches' from offset 6: a retried batch is a duplicate, the next one fits
    assert again.producer_state.check(header_at(idem(8, 2))) == (8, -1)
    assert again.producer_state.check(header_at(idem(10, 1))) is None
    again.close()
    leader.close()


def test_truncate_fully_survives_a_power_loss_and_never_shows_the_old_records(volatile, tmp_path):
    """Durable when it returns; and a crash right after its first step (the log start checkpoint)
    reopens a log whose old records are gone, not one with a gap."""
    src = leader_with_epochs(tmp_path / "leader-0", segment_bytes=700)
    folder = os.path.join(volatile.mountpoint, "follower-0")
    lg = open_log(folder, segment_bytes=700)
    replicate(src, lg)
    lg.flush()
    lg.truncate_fully_and_start_at(40)
    lose_power(volatile, lg)
    again = open_log(folder, segment_bytes=700)
    assert (again.log_start_offset, again.log_end_offset) == (40, 40)
    assert again.leader_epochs.entries == []
    again.close()
    src.close()


def test_a_crash_between_the_log_start_checkpoint_and_the_new_segment_reopens_empty_at_the_old_end(tmp_path):
    from logan_ray.storage.recovery import LOG_START_FILE, write_checkpoint

    src = leader_with_epochs(tmp_path / "leader-0", segment_bytes=700)
    lg = open_log(tmp_path / "follower-0", segment_bytes=700)
    replicate(src, lg)
    lg.close()
    write_checkpoint(os.path.join(tmp_path / "follower-0", LOG_START_FILE), 40, durable=True)
    again = open_log(tmp_path / "follower-0", segment_bytes=700)
    assert (again.log_start_offset, again.log_end_offset) == (10, 10)  # nothing readable; it asks the leader again
    again.truncate_fully_and_start_at(40)
    assert (again.log_start_offset, again.log_end_offset) == (40, 40)
    again.close()
    src.close()
