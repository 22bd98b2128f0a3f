"""Transactions in a partition log: open transactions, the LSO, aborted-transaction indexes, recovery."""
from __future__ import annotations

import os

import pytest

from logan_ray.storage.batch_header import parse_header
from logan_ray.storage.control_records import EndTxnMarker, build_marker_batch
from logan_ray.storage.errors import InvalidTxnStateError
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.producer_state import InvalidProducerEpochError, TransactionCoordinatorFencedError
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.txn_index import AbortedTxn

from log_helpers import FakeClock, batch, log_files, open_log

_seqs: dict[int, int] = {}


def txn(lg: PartitionLog, pid: int, count: int = 1, epoch: int = 0) -> int:
    """Append a transactional batch of ``pid``; returns its base offset."""
    seq = _seqs.get(pid, 0)
    _seqs[pid] = seq + count
    data = build_batch([b"t%d" % i for i in range(count)], timestamps=1_000, producer_id=pid, producer_epoch=epoch,
                       base_sequence=seq, is_transactional=True)
    return lg.append(data).base_offset


def end(lg: PartitionLog, pid: int, commit: bool, epoch: int = 0, coordinator_epoch: int = 0) -> int:
    return lg.append(build_marker_batch(pid, epoch, EndTxnMarker(commit, coordinator_epoch), timestamp=1_000)).base_offset


def plain(lg: PartitionLog, count: int = 1) -> int:
    return lg.append(batch(0, count)).base_offset


def crash(lg: PartitionLog) -> None:
    """Drop the log like a killed process: no close(), no clean-shutdown marker."""
    lg._flusher.stop()
    for seg in lg._segments:
        seg.close()
    lg._closed = True


@pytest.fixture(autouse=True)
def fresh_sequences():
    _seqs.clear()


def test_an_open_transaction_holds_the_lso_until_its_commit_is_replicated(tmp_path):
    lg = open_log(tmp_path / "p")
    plain(lg, 2)
    first = txn(lg, 7, 2)
    plain(lg)
    assert lg.ongoing_transactions == {7: first}
    assert lg.last_stable_offset(lg.log_end_offset) == first == 2
    marker = end(lg, 7, commit=True)
    assert lg.ongoing_transactions == {}
    # the marker is not below the high watermark yet: the transaction is still unstable
    assert lg.last_stable_offset(marker) == first
    assert lg.last_stable_offset(marker + 1) == marker + 1
    assert lg.aborted_transactions(0, lg.log_end_offset) == []
    lg.close()


def test_without_transactions_the_lso_is_the_high_watermark(tmp_path):
    lg = open_log(tmp_path / "p")
    plain(lg, 5)
    assert lg.last_stable_offset(3) == 3
    assert lg.last_stable_offset(5) == 5
    lg.close()


def test_an_abort_is_indexed_with_the_lso_kafka_records(tmp_path):
    lg = open_log(tmp_path / "p")
    a = txn(lg, 1)
    b = txn(lg, 2, 3)
    abort_a = end(lg, 1, commit=False)
    # producer 2's transaction is still open: the LSO after the abort is its first offset
    assert lg.aborted_transactions(0, lg.log_end_offset) == [AbortedTxn(1, a, abort_a, b)]
    assert lg.last_stable_offset(lg.log_end_offset) == b
    abort_b = end(lg, 2, commit=False)
    assert lg.aborted_transactions(0, lg.log_end_offset) == [AbortedTxn(1, a, abort_a, b),
                                                             AbortedTxn(2, b, abort_b, abort_b + 1)]
    assert lg.last_stable_offset(lg.log_end_offset) == lg.log_end_offset
    name = os.path.join(lg.directory, "00000000000000000000.txnindex")
    with open(name, "rb") as f:
        assert len(f.read()) == 2 * 34
    lg.close()


def test_aborted_ranges_are_collected_for_a_fetch_across_two_segments(tmp_path):
    lg = open_log(tmp_path / "p")
    plain(lg, 3)
    a = txn(lg, 1)
    b = txn(lg, 2)
    abort_a = end(lg, 1, commit=False)
    lg.roll()
    second = lg.segments[-1].base_offset
    plain(lg)
    abort_b = end(lg, 2, commit=False)  # began in the first segment
    c = txn(lg, 3)
    abort_c = end(lg, 3, commit=False)
    entries = [AbortedTxn(1, a, abort_a, b), AbortedTxn(2, b, abort_b, abort_b + 1), AbortedTxn(3, c, abort_c, abort_c + 1)]
    assert lg.aborted_transactions(0, lg.log_end_offset) == entries
    assert lg.aborted_transactions(0, a) == []  # nothing aborted overlaps [0, a)
    assert lg.aborted_transactions(second, lg.log_end_offset) == entries[1:]
    assert lg.aborted_transactions(abort_a + 1, c) == entries[1:2]
    # each abort is in the index of its marker's segment
    assert log_files(lg.directory, ".txnindex") == ["00000000000000000000.txnindex", f"{second:020d}.txnindex"]
    assert os.path.getsize(os.path.join(lg.directory, f"{second:020d}.txnindex")) == 2 * 34
    lg.close()


def test_a_plain_batch_inside_a_transaction_is_refused():
    from logan_ray.storage.producer_state import ProducerStateTable

    table = ProducerStateTable()
    first = parse_header(build_batch([b"a"], producer_id=5, producer_epoch=0, base_sequence=0, is_transactional=True))
    table.record(first, 10)
    plain_next = parse_header(build_batch([b"b"], producer_id=5, producer_epoch=0, base_sequence=1))
    with pytest.raises(InvalidTxnStateError):
        table.check(plain_next)
    marker = parse_header(build_marker_batch(5, 0, EndTxnMarker(True, 0), timestamp=1))
    table.complete_txn(marker, 11, EndTxnMarker(True, 0))
    assert table.check(plain_next) is None


def test_markers_from_an_old_producer_or_coordinator_epoch_are_fenced():
    from logan_ray.storage.producer_state import ProducerStateTable

    table = ProducerStateTable()
    table.record(parse_header(build_batch([b"a"], producer_id=5, producer_epoch=2, base_sequence=0,
                                          is_transactional=True)), 0)
    table.complete_txn(parse_header(build_marker_batch(5, 2, EndTxnMarker(False, 4), timestamp=1)), 1,
                       EndTxnMarker(False, 4))
    with pytest.raises(InvalidProducerEpochError):
        table.check_marker(parse_header(build_marker_batch(5, 1, EndTxnMarker(True, 4), timestamp=1)),
                           EndTxnMarker(True, 4))
    with pytest.raises(TransactionCoordinatorFencedError):
        table.check_marker(parse_header(build_marker_batch(5, 2, EndTxnMarker(True, 3), timestamp=1)),
                           EndTxnMarker(True, 3))
    table.check_marker(parse_header(build_marker_batch(5, 2, EndTxnMarker(True, 4), timestamp=1)),
                       EndTxnMarker(True, 4))


def test_a_producer_with_an_open_transaction_does_not_expire(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "p", clock)
    txn(lg, 1)
    txn(lg, 2)
    end(lg, 2, commit=True)
    clock.advance(10 * 86_400_000)
    assert lg.expire_producers() == [2]
    assert lg.ongoing_transactions == {1: 0}
    lg.close()


def test_open_transactions_survive_a_clean_restart(tmp_path):
    lg = open_log(tmp_path / "p")
    plain(lg)
    a = txn(lg, 1)
    end(lg, 1, commit=False)
    b = txn(lg, 2)
    lg.close()
    again = open_log(tmp_path / "p")
    assert again.producer_load.batches_replayed == 0  # all of it came from the snapshot
    assert again.ongoing_transactions == {2: b}
    assert again.last_stable_offset(again.log_end_offset) == b
    assert [e.first_offset for e in again.aborted_transactions(0, again.log_end_offset)] == [a]
    again.close()


def build_history(lg: PartitionLog) -> None:
    """Aborts and commits over three segments, transactions spanning rolls, two left open."""
    plain(lg, 2)
    txn(lg, 1)
    txn(lg, 2, 2)
    end(lg, 1, commit=False)
    txn(lg, 3)
    lg.roll()
    plain(lg)
    end(lg, 2, commit=False)
    end(lg, 3, commit=True)
    txn(lg, 4)
    txn(lg, 1)
    lg.roll()
    end(lg, 1, commit=False)
    txn(lg, 5, 3)
    plain(lg)


def state(lg: PartitionLog):
    return (lg.aborted_transactions(0, lg.log_end_offset), lg.ongoing_transactions,
            lg.last_stable_offset(lg.log_end_offset))


def test_a_crash_that_lost_every_txnindex_rebuilds_the_same_entries_and_open_transactions(tmp_path):
    lg = open_log(tmp_path / "p")
    build_history(lg)
    before = state(lg)
    assert len(before[0]) == 3 and sorted(before[1]) == [4, 5]
    lg.flush()  # every segment below the recovery point: trusted, only their indexes are gone
    crash(lg)
    for name in log_files(tmp_path / "p", ".txnindex"):
        os.remove(tmp_path / "p" / name)
    again = open_log(tmp_path / "p")
    assert state(again) == before
    assert len(log_files(tmp_path / "p", ".txnindex")) == 3
    again.close()
    third = open_log(tmp_path / "p")
    assert state(third) == before
    third.close()


def test_a_lost_txnindex_of_an_old_segment_is_rebuilt_after_a_clean_shutdown(tmp_path):
    lg = open_log(tmp_path / "p")
    build_history(lg)
    before = state(lg)
    lg.close()
    os.remove(tmp_path / "p" / "00000000000000000000.txnindex")
    again = open_log(tmp_path / "p")
    assert state(again) == before
    again.close()


def test_a_torn_marker_at_the_tail_is_cut_and_its_transaction_is_open_again(tmp_path):
    lg = open_log(tmp_path / "p")
    build_history(lg)
    lg.flush()
    before = state(lg)
    marker = end(lg, 5, commit=False)  # not flushed: never acknowledged as durable
    assert len(state(lg)[0]) == 4
    active = lg.segments[-1].path
    crash(lg)
    os.truncate(active, os.path.getsize(active) - 5)  # the marker's write was torn
    again = open_log(tmp_path / "p")
    assert again.log_end_offset == marker
    assert again.recovery_report.truncated_bytes > 0
    assert state(again) == before  # the abort's index entry went with its marker; 5 is open again
    again.close()


def test_follower_truncation_drops_aborts_past_the_cut(tmp_path):
    lg = open_log(tmp_path / "p")
    a = txn(lg, 1)
    abort = end(lg, 1, commit=False)
    plain(lg)
    lg.truncate_to(abort)
    assert lg.aborted_transactions(0, lg.log_end_offset + 10) == []
    assert lg.ongoing_transactions == {1: a}
    with open(os.path.join(lg.directory, "00000000000000000000.txnindex"), "rb") as f:
        assert f.read() == b""
    lg.close()


def test_retention_deletes_a_segments_txnindex_with_it(tmp_path):
    lg = open_log(tmp_path / "p", file_delete_delay_ms=0)
    txn(lg, 1)
    end(lg, 1, commit=False)
    lg.roll()
    second = lg.segments[-1].base_offset
    txn(lg, 2)
    end(lg, 2, commit=False)
    assert log_files(lg.directory, ".txnindex") == ["00000000000000000000.txnindex", f"{second:020d}.txnindex"]
    lg.delete_records(second)
    assert log_files(lg.directory, ".log") == [f"{second:020d}.log"]
    assert log_files(lg.directory, ".txnindex") == [f"{second:020d}.txnindex"]
    assert [e.producer_id for e in lg.aborted_transactions(second, lg.log_end_offset)] == [2]
    lg.close()


def test_an_orphaned_txnindex_is_removed_at_open(tmp_path):
    lg = open_log(tmp_path / "p")
    plain(lg)
    lg.close()
    stray = tmp_path / "p" / "00000000000000000777.txnindex"
    stray.write_bytes(b"\x00" * 34)
    open_log(tmp_path / "p").close()
    assert not stray.exists()


def test_a_compaction_swap_keeps_the_aborts_and_deletes_the_replaced_txnindex_files(tmp_path):
    from logan_ray.storage.compaction import compact

    lg = open_log(tmp_path / "p", cleanup_policy="compact", segment_bytes=2000, file_delete_delay_ms=0)
    for round_ in range(3):
        for k in range(10):
            lg.append(build_batch([b"v%d" % round_], [b"k%d" % k], timestamps=1_000))
        lg.append(build_batch([b"t"], [b"tk%d" % round_], timestamps=1_000, producer_id=round_ + 1,
                                      producer_epoch=0, base_sequence=0, is_transactional=True)).base_offset
        end(lg, round_ + 1, commit=False)
        lg.roll()
    lg.flush()
    before = lg.aborted_transactions(0, lg.log_end_offset)
    old = log_files(lg.directory, ".txnindex")
    assert len(before) == 3 and len(old) >= 3
    compact(lg)
    stems = [os.path.basename(s.path)[:-4] for s in lg.segments]
    assert any("-c" in s for s in stems)  # a swap happened
    assert lg.aborted_transactions(0, lg.log_end_offset) == before
    assert sorted(log_files(lg.directory, ".txnindex")) == sorted(s + ".txnindex" for s in stems)
    lg.close()
    again = open_log(tmp_path / "p", cleanup_policy="compact", segment_bytes=2000)
    assert again.aborted_transactions(0, again.log_end_offset) == before
    assert again.producer_load.batches_replayed == 0  # nothing was stale: no replay over cleaned segments
    again.close()


def test_a_folder_without_txnindex_files_gets_them_once(tmp_path):
    lg = open_log(tmp_path / "p")
    plain(lg, 3)
    lg.roll()
    plain(lg, 2)
    lg.close()
    for name in log_files(tmp_path / "p", ".txnindex"):
        os.remove(tmp_path / "p" / name)  # as written before transaction indexes existed
    again = open_log(tmp_path / "p")
    assert again.producer_load.batches_replayed == 2  # both segments' batches, once
    assert len(log_files(tmp_path / "p", ".txnindex")) == 2
    again.close()
    third = open_log(tmp_path / "p")
    assert third.producer_load.batches_replayed == 0
    third.close()


def test_snapshot_rows_carry_the_open_transaction_and_the_coordinator_epoch():
    import struct

    from logan_ray.storage.producer_snapshot import decode, encode
    from logan_ray.storage.producer_state import ProducerBatch, ProducerEntry

    entries = [ProducerEntry(5, 1, 1000, (ProducerBatch(0, 2, 40, -1),), 40, 3),
               ProducerEntry(6, 2, 2000, (), -1, 7)]  # only markers so far: no batch to keep
    data = encode(entries)
    # Kafka's entry: producer id, epoch, last sequence, last offset, offset delta, timestamp,
    # coordinator epoch, current txn first offset
    row = struct.Struct(">qhiqiqiq")
    assert data[10:] == row.pack(5, 1, 2, 42, 2, 1000, 3, 40) + row.pack(6, 2, -1, -1, 0, 2000, 7, -1)
    assert decode(data) == entries
