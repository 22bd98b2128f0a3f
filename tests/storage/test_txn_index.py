"""The ``.txnindex`` file: Kafka's 34-byte AbortedTxn entries, torn tails, and the fetch-range search."""
from __future__ import annotations

import os
import struct

import pytest

from logan_ray.storage.txn_index import ENTRY_SIZE, AbortedTxn, TxnIndex, collect_aborted


def hand_entry(pid: int, first: int, last: int, lso: int, version: int = 0) -> bytes:
    # Kafka's AbortedTxn: version int16, producerId int64, firstOffset int64, lastOffset int64,
    # lastStableOffset int64, big endian
    return struct.pack(">h", version) + struct.pack(">q", pid) + struct.pack(">q", first) \
        + struct.pack(">q", last) + struct.pack(">q", lso)


def test_entries_are_kafkas_34_byte_layout(tmp_path):
    path = str(tmp_path / "00000000000000000100.txnindex")
    index = TxnIndex(path, 100)
    index.append(AbortedTxn(7, 100, 150, 120))
    index.append(AbortedTxn(9, 90, 160, 161))
    with open(path, "rb") as f:
        data = f.read()
    assert ENTRY_SIZE == 34
    assert data == hand_entry(7, 100, 150, 120) + hand_entry(9, 90, 160, 161)
    again = TxnIndex(path, 100)
    assert again.load() and again.entries == [AbortedTxn(7, 100, 150, 120), AbortedTxn(9, 90, 160, 161)]


def test_a_torn_tail_is_dropped_on_load(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    with open(path, "wb") as f:
        f.write(hand_entry(1, 0, 5, 6) + hand_entry(2, 3, 8, 9) + hand_entry(3, 9, 12, 13)[:20])
    index = TxnIndex(path, 0)
    assert index.load()
    assert index.entries == [AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 8, 9)]
    assert os.path.getsize(path) == 2 * ENTRY_SIZE  # cut on disk too: the next append lands after entry 2
    index.append(AbortedTxn(3, 9, 12, 13))
    reloaded = TxnIndex(path, 0)
    reloaded.load()
    assert [e.producer_id for e in reloaded.entries] == [1, 2, 3]


@pytest.mark.parametrize("bad", [
    hand_entry(3, 9, 12, 13, version=1),  # a version this broker does not know
    hand_entry(3, 9, 4, 13),  # its marker is not after the previous one
    hand_entry(3, 13, 12, 13),  # first offset after the marker
])
def test_an_impossible_entry_ends_the_index(tmp_path, bad):
    path = str(tmp_path / "00000000000000000000.txnindex")
    with open(path, "wb") as f:
        f.write(hand_entry(1, 0, 5, 6) + bad + hand_entry(4, 20, 30, 31))
    index = TxnIndex(path, 0)
    index.load()
    assert index.entries == [AbortedTxn(1, 0, 5, 6)]
    assert os.path.getsize(path) == ENTRY_SIZE


def test_entries_past_the_segment_end_are_cut_on_load(tmp_path):
    path = str(tmp_path / "00000000000000000000.txnindex")
    with open(path, "wb") as f:
        f.write(hand_entry(1, 0, 5, 6) + hand_entry(2, 3, 8, 9))
    index = TxnIndex(path, 0)
    index.load(next_offset=8)  # the record at offset 8 is gone
    assert index.entries == [AbortedTxn(1, 0, 5, 6)]


def test_a_missing_file_is_stale_not_empty(tmp_path):
    index = TxnIndex(str(tmp_path / "00000000000000000000.txnindex"), 0)
    assert not index.load()
    assert index.stale


def test_appends_must_follow_the_last_marker(tmp_path):
    index = TxnIndex(str(tmp_path / "00000000000000000000.txnindex"), 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError):
        index.append(AbortedTxn(2, 0, 5, 6))


def test_collect_returns_overlapping_aborts_and_stops_once_the_lso_passes_the_bound(tmp_path):
    index = TxnIndex(str(tmp_path / "00000000000000000000.txnindex"), 0)
    for e in (AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 9, 10), AbortedTxn(3, 12, 15, 16)):
        index.append(e)
    # 1 ended before 5, 3 starts at 12; 3's LSO (16) proves no later abort overlaps [5, 12)
    assert index.collect(5, 12) == ([AbortedTxn(2, 2, 9, 10)], True)
    assert index.collect(5, 20) == ([AbortedTxn(2, 2, 9, 10), AbortedTxn(3, 12, 15, 16)], False)
    assert index.collect(0, 10) == ([AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 9, 10)], True)


def test_collect_aborted_reads_later_segments_until_complete(tmp_path):
    first = TxnIndex(str(tmp_path / "00000000000000000000.txnindex"), 0)
    second = TxnIndex(str(tmp_path / "00000000000000000010.txnindex"), 10)
    third = TxnIndex(str(tmp_path / "00000000000000000020.txnindex"), 20)
    first.append(AbortedTxn(1, 2, 6, 7))
    second.append(AbortedTxn(2, 5, 12, 13))  # began in the first segment, aborted in the second
    third.append(AbortedTxn(3, 21, 25, 26))
    assert collect_aborted([first, second, third], 3, 15) == [AbortedTxn(1, 2, 6, 7), AbortedTxn(2, 5, 12, 13)]
    assert collect_aborted([second, third], 11, 30) == [AbortedTxn(2, 5, 12, 13), AbortedTxn(3, 21, 25, 26)]
