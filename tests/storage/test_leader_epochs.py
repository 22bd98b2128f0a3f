"""The leader-epoch cache (Kafka's LeaderEpochFileCache) and its checkpoint, alone and inside PartitionLog."""
from __future__ import annotations

import os

import pytest
from log_helpers import batch, lose_power, open_log

from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.errors import FencedLeaderEpochError
from logan_ray.storage.leader_epochs import (
    CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCache,
    load_leader_epochs,
    parse_checkpoint,
)



def cache_of(tmp_path, *pairs) -> LeaderEpochCache:
    c = LeaderEpochCache(str(tmp_path))
    for e, o in pairs:
        c.assign(e, o)
    return c


# ------------------------------------------------------------ end offsets (Kafka's cases)
def test_end_offset_for_follows_kafkas_rules(tmp_path):
    c = cache_of(tmp_path, (2, 10), (4, 25), (7, 40))
    log_end = 55
    assert c.end_offset_for(-1, log_end) == (-1, -1)  # undefined epoch
    assert c.end_offset_for(7, log_end) == (7, 55)  # the latest epoch ends at the log end
    assert c.end_offset_for(4, log_end) == (4, 40)  # ends where the next epoch starts
    assert c.end_offset_for(5, log_end) == (4, 40)  # unknown epoch in between: largest epoch below it
    assert c.end_offset_for(6, log_end) == (4, 40)
    assert c.end_offset_for(1, log_end) == (1, 10)  # below every epoch: the first start offset
    assert c.end_offset_for(8, log_end) == (-1, -1)  # above every epoch: undefined
    assert LeaderEpochCache(str(tmp_path / "empty")).end_offset_for(0, 5) == (-1, -1)


def test_epoch_for_offset_is_the_epoch_that_wrote_it(tmp_path):
    c = cache_of(tmp_path, (2, 10), (4, 25))
    assert [c.epoch_for_offset(o) for o in (0, 10, 24, 25, 99)] == [-1, 2, 2, 4, 4]


# ------------------------------------------------------------ assign
def test_assign_takes_new_larger_epochs_only_and_keeps_entries_monotonic(tmp_path):
    c = cache_of(tmp_path, (1, 0), (3, 5))
    assert not c.assign(3, 9)  # same epoch, later offset: nothing new
    assert c.entries == [(1, 0), (3, 5)]
    assert c.assign(5, 9)
    # Kafka: an entry whose epoch or start is not below the new one's is dropped first.
    assert c.assign(4, 7)
    assert c.entries == [(1, 0), (3, 5), (4, 7)]
    assert c.assign(3, 2)  # same epoch moved earlier
    assert c.entries == [(1, 0), (3, 2)]
    with pytest.raises(ValueError):
        c.assign(-1, 3)


def test_checkpoint_is_kafkas_text_format_and_survives_reopening(tmp_path):
    cache_of(tmp_path, (0, 0), (2, 17))
    with open(tmp_path / CHECKPOINT_FILE) as f:
        assert f.read() == "0\n2\n0 0\n2 17\n"
    assert LeaderEpochCache(str(tmp_path)).entries == [(0, 0), (2, 17)]
    assert not os.path.exists(str(tmp_path / CHECKPOINT_FILE) + ".tmp")  # replaced by rename, no leftover
    assert parse_checkpoint("0\n1\n5 100\n") == [EpochEntry(5, 100)]
    for bad in ("", "1\n0\n", "0\n2\n1 1\n", "0\n1\nx 1\n"):
        with pytest.raises(ValueError):
            parse_checkpoint(bad)


# ------------------------------------------------------------ truncation
def test_truncate_from_end_drops_epochs_starting_at_or_after_the_new_end(tmp_path):
    c = cache_of(tmp_path, (1, 0), (2, 10), (3, 20))
    assert not c.truncate_from_end(21)
    assert c.truncate_from_end(20)
    assert c.entries == [(1, 0), (2, 10)]
    assert c.truncate_from_end(5)
    assert c.entries == [(1, 0)]
    assert LeaderEpochCache(str(tmp_path)).entries == [(1, 0)]  # written through


def test_truncate_from_start_moves_the_first_epoch_to_the_new_start(tmp_path):
    c = cache_of(tmp_path, (1, 0), (2, 10), (3, 20))
    assert c.truncate_from_start(15)
    assert c.entries == [(2, 15), (3, 20)]
    assert not c.truncate_from_start(15)
    assert c.truncate_from_start(20)  # exclusive: the entry starting exactly there stays
    assert c.entries == [(3, 20)]
    assert LeaderEpochCache(str(tmp_path)).entries == [(3, 20)]


# ------------------------------------------------------------ inside the log
def stored_epochs(lg) -> list[tuple[int, int]]:
    data = lg.read(lg.log_start_offset, 1 << 30)
    return [(h.base_offset, h.partition_leader_epoch) for _, h in iter_headers(data)]


def test_appends_are_stamped_with_the_leader_epoch_whatever_the_client_sent(tmp_path):
    lg = open_log(tmp_path / "t-0")
    client_sent = bytearray(batch(0))
    client_sent[12:16] = (99).to_bytes(4, "big")  # outside the CRC: still a valid batch
    lg.append(client_sent)  # no epoch yet: -1, as Kafka's "no partition leader epoch"
    lg.start_leader_epoch(0)
    lg.append(batch(1), leader_epoch=0)
    lg.start_leader_epoch(3)
    lg.start_leader_epoch(3)  # idempotent
    lg.append(bytes(client_sent))  # None: the log's current epoch
    assert stored_epochs(lg) == [(0, -1), (1, 0), (2, 3)]
    assert lg.leader_epochs.entries == [(0, 1), (3, 2)]
    with pytest.raises(FencedLeaderEpochError):
        lg.append(batch(9), leader_epoch=2)
    with pytest.raises(FencedLeaderEpochError):
        lg.start_leader_epoch(1)
    assert lg.end_offset_for_epoch(0) == (0, 2)
    assert lg.end_offset_for_epoch(3) == (3, 3)
    lg.close()
    again = open_log(tmp_path / "t-0")
    assert again.leader_epochs.entries == [(0, 1), (3, 2)]
    again.close()


def test_missing_or_unreadable_checkpoint_is_rebuilt_from_the_batches(tmp_path):
    folder = tmp_path / "t-0"
    lg = open_log(folder, segment_bytes=200)
    for epoch in (0, 0, 2, 2, 5):
        lg.start_leader_epoch(epoch)
        lg.append(batch(epoch), leader_epoch=epoch)
    assert lg.segment_count > 2
    expected = lg.leader_epochs.entries
    lg.close()
    os.remove(folder / CHECKPOINT_FILE)
    again = open_log(folder, segment_bytes=200)
    assert again.leader_epochs.entries == expected == [(0, 0), (2, 2), (5, 4)]
    again.close()
    with open(folder / CHECKPOINT_FILE, "w") as f:
        f.write("garbage")
    again = open_log(folder, segment_bytes=200)
    assert again.leader_epochs.entries == expected
    again.close()


def test_retention_and_delete_records_move_the_first_epoch(tmp_path):
    lg = open_log(tmp_path / "t-0", segment_bytes=200)
    for epoch in (0, 1, 1, 2, 2):
        lg.start_leader_epoch(epoch)
        lg.append(batch(epoch), leader_epoch=epoch)
    assert lg.delete_records(2) == 2
    assert lg.leader_epochs.entries == [(1, 2), (2, 3)]
    assert lg.delete_records(3) == 3
    assert lg.leader_epochs.entries == [(2, 3)]
    lg.close()


def test_loader_cuts_a_checkpoint_ahead_of_the_log_and_rebuilds_a_missing_one_from_headers(tmp_path):
    folder = str(tmp_path)
    cache_of(tmp_path, (1, 0), (4, 50), (6, 90))
    walked = []
    c = load_leader_epochs(folder, log_start=10, log_end=85, headers_from=walked.append)
    assert c.entries == [(1, 10), (4, 50)] and not walked  # a present checkpoint needs no walk of the log
    assert LeaderEpochCache(folder).entries == c.entries
    os.remove(os.path.join(folder, CHECKPOINT_FILE))
    headers = {10: [(-1, 10), (4, 80), (5, 82), (5, 83)]}
    c = load_leader_epochs(folder, log_start=10, log_end=85, headers_from=lambda o: headers[o])
    assert c.entries == [(4, 80), (5, 82)]
    assert LeaderEpochCache(folder).entries == c.entries


# ------------------------------------------------------------ real fault: lost unsynced writes
def test_power_loss_leaves_no_epoch_ahead_of_the_recovered_log(volatile):
    """The epoch-1 entry is fsynced at offset 10, but offsets 5..9 under it were never synced."""
    folder = os.path.join(volatile.mountpoint, "t-0")
    lg = open_log(folder)
    lg.start_leader_epoch(0)
    for i in range(5):
        lg.append(batch(i), leader_epoch=0)
    lg.flush()
    for i in range(5, 10):
        lg.append(batch(i), leader_epoch=0)  # acks=1: page cache only
    lg.start_leader_epoch(1)  # the checkpoint (1, 10) is durable
    assert lg.leader_epochs.entries == [(0, 0), (1, 10)]
    lose_power(volatile, lg)
    again = open_log(folder)
    assert again.log_end_offset == 5
    assert again.leader_epochs.entries == [(0, 0)]
    assert again.end_offset_for_epoch(1) == (-1, -1)
    again.start_leader_epoch(2)
    again.append(batch(50), leader_epoch=2)
    assert again.end_offset_for_epoch(0) == (0, 5)  # a reader of epoch 0 past offset 5 sees the truncation
    again.close()
