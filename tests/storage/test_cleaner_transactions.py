"""Compaction that respects transactions (issue 35 item 2), as Kafka's LogCleaner does.

Pure storage: a partition log, the cleaner of :mod:`logan_ray.storage.compaction`
and a ``read_committed`` read built from the log's LSO and aborted transactions.
"""
from __future__ import annotations

import random

from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.cleanable import dirty_stats, last_stable_offset, with_high_watermark
from logan_ray.storage.compaction import compact
from logan_ray.storage.control_records import EndTxnMarker, build_marker_batch, read_marker
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_batch

from log_helpers import FakeClock, open_log

RETENTION = 1_000  # delete.retention.ms
CFG = dict(cleanup_policy="compact", segment_bytes=1 << 20, delete_retention_ms=RETENTION, file_delete_delay_ms=0)


class Writer:
    """Appends transactional batches with correct sequences, markers and plain records."""

    def __init__(self, lg: PartitionLog):
        self.lg = lg
        self.seqs: dict[int, int] = {}

    def txn(self, pid: int, pairs: list[tuple[bytes, bytes]], epoch: int = 0) -> int:
        seq = self.seqs.get(pid, 0)
        self.seqs[pid] = seq + len(pairs)
        data = build_batch([v for _, v in pairs], [k for k, _ in pairs], timestamps=1_000, producer_id=pid,
                           producer_epoch=epoch, base_sequence=seq, is_transactional=True)
        return self.lg.append(data).base_offset

    def end(self, pid: int, commit: bool, epoch: int = 0) -> int:
        return self.lg.append(build_marker_batch(pid, epoch, EndTxnMarker(commit, 0), timestamp=1_000)).base_offset

    def plain(self, pairs: list[tuple[bytes, bytes]]) -> int:
        return self.lg.append(build_batch([v for _, v in pairs], [k for k, _ in pairs], timestamps=1_000)).base_offset


def seal(lg: PartitionLog) -> None:
    lg.roll()
    lg.flush()


def batches(lg: PartitionLog) -> list[tuple[int, bool, int]]:
    """(base offset, control?, record count) of every batch from the log start."""
    out, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 20)
        if not data:
            break
        hs = [h for _, h in iter_headers(data) if h.next_offset > offset]
        out.extend((h.base_offset, h.is_control, h.record_count) for h in hs)
        offset = max(h.next_offset for _, h in iter_headers(data))
    return out


def values(lg: PartitionLog) -> list[bytes]:
    """Every record's value from the log start, as a read_uncommitted consumer reads them."""
    out, offset = [], lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 20)
        if not data:
            break
        for pos, h in iter_headers(data):
            if h.next_offset > offset and not h.is_control:
                out.extend(r.value for r in decode_batch(data, pos)[1] if r.offset >= offset)
        offset = max(h.next_offset for _, h in iter_headers(data))
    return out


def markers(lg: PartitionLog) -> list[int]:
    return [b for b, control, _ in batches(lg) if control]


def read_committed(lg: PartitionLog) -> list[tuple[int, bytes, bytes]]:
    """What a Kafka read_committed consumer gets: records below the LSO, aborted ranges dropped as the client does."""
    lso = lg.last_stable_offset(lg.log_end_offset)
    aborted = sorted(lg.aborted_transactions(lg.log_start_offset, lso), key=lambda e: e.first_offset)
    out: list[tuple[int, bytes, bytes]] = []
    active: set[int] = set()
    nxt = 0
    offset = lg.log_start_offset
    while offset < lso:
        data = lg.read(offset, 1 << 20)
        if not data:
            break
        for pos, h in iter_headers(data):
            if h.next_offset <= offset or h.base_offset >= lso:
                continue
            while nxt < len(aborted) and aborted[nxt].first_offset <= h.last_offset:
                active.add(aborted[nxt].producer_id)
                nxt += 1
            if h.is_control:
                m = read_marker(data, pos, h)
                if m is not None and not m.committed:
                    active.discard(h.producer_id)
                continue
            if h.is_transactional and h.producer_id in active:
                continue
            _, recs = decode_batch(data, pos)
            out.extend((r.offset, r.key, r.value) for r in recs if offset <= r.offset < lso)
        offset = max(h.next_offset for _, h in iter_headers(data))
    return out


def latest_by_key(records: list[tuple[int, bytes, bytes]]) -> list[tuple[int, bytes, bytes]]:
    latest = {}
    for r in records:
        latest[r[1]] = r
    return sorted(latest.values())


def test_aborted_records_vanish_and_never_supersede_committed_ones(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    w = Writer(lg)
    w.plain([(b"a", b"a0"), (b"b", b"b0")])  # 0-1
    w.txn(1, [(b"a", b"a-aborted"), (b"c", b"c-aborted")])  # 2-3
    w.txn(2, [(b"b", b"b1"), (b"b", b"b2")])  # 4-5: committed, compacted by key
    w.end(1, commit=False)  # 6
    w.end(2, commit=True)  # 7
    w.txn(1, [(b"d", b"d1"), (b"e", b"e1")])  # 8-9: pid 1's last batch, committed
    w.end(1, commit=True)  # 10
    seal(lg)
    [done] = compact(lg)
    assert done.result.stats.aborted_records_removed == 2
    got = read_committed(lg)
    assert got == [(0, b"a", b"a0"), (5, b"b", b"b2"), (8, b"d", b"d1"), (9, b"e", b"e1")]
    # Not even a read_uncommitted consumer sees the aborted records any more.
    assert 2 not in [b for b, _, _ in batches(lg)]
    lg.close()


def test_nothing_at_or_past_the_last_stable_offset_is_cleaned(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    w = Writer(lg)
    w.plain([(b"x", b"v0")])
    w.plain([(b"x", b"v1")])
    seal(lg)
    w.plain([(b"z", b"z0")])
    open_at = w.txn(3, [(b"y", b"y-open"), (b"w", b"w-open")])  # stays open: the LSO
    seal(lg)
    w.plain([(b"y", b"y-later"), (b"x", b"v2"), (b"z", b"z1")])
    seal(lg)
    assert lg.last_stable_offset(lg.log_end_offset) == open_at
    later = [s.path for s in lg.segments[1:]]
    before = {p: open(p, "rb").read() for p in later}
    compact(lg)
    assert {p: open(p, "rb").read() for p in later} == before  # the LSO's segment and those after: untouched
    got = values(lg)
    assert b"v0" not in got and b"v1" in got  # below the LSO's segment, x=v0 went (x=v1 is the latest there)
    assert b"y-open" in got  # the open transaction's y is not superseded by the later y
    w.end(3, commit=True)
    marker = lg.log_end_offset - 1
    seal(lg)
    view = lg.cleaning_view()
    # A completed transaction stays unstable until the high watermark passes its marker.
    assert last_stable_offset(with_high_watermark(view, marker)) == open_at
    assert dirty_stats(with_high_watermark(view, marker), view.now_ms).first_uncleanable == lg.segments[1].base_offset
    assert last_stable_offset(with_high_watermark(view, marker + 1)) == marker + 1
    compact(lg, high_watermark=marker + 1)
    got = values(lg)
    assert b"y-open" not in got and b"w-open" in got  # committed now: compacted by key
    lg.close()


def test_markers_stay_while_their_transaction_has_data_then_until_delete_retention(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock, **CFG)
    w = Writer(lg)
    w.txn(1, [(b"a", b"a1"), (b"a", b"a2")])  # 0-1, aborted
    abort1 = w.end(1, commit=False)  # 2
    w.txn(2, [(b"b", b"b1"), (b"c", b"c1")])  # 3-4, committed, superseded below
    commit2 = w.end(2, commit=True)  # 5
    seal(lg)
    w.plain([(b"b", b"b2"), (b"c", b"c2")])
    w.txn(1, [(b"d", b"d1"), (b"e", b"e1")])  # committed, stays
    commit1 = w.end(1, commit=True)
    w.txn(2, [(b"f", b"f1"), (b"g", b"g1")])  # committed, stays
    commit2b = w.end(2, commit=True)
    seal(lg)
    all_markers = [abort1, commit2, commit1, commit2b]
    assert markers(lg) == all_markers
    compact(lg)  # pass 1: the transactions' data go, their markers stay (the pass saw data of theirs)
    assert markers(lg) == all_markers
    assert [b for b, c, _ in batches(lg) if not c][:1] == [6]
    assert [(e.producer_id, e.last_offset) for e in lg.aborted_transactions(0, lg.log_end_offset)] == [(1, abort1)]
    clock.advance(RETENTION // 2)
    compact(lg)  # pass 2: no data left, but not delete.retention.ms since they were first cleaned
    assert markers(lg) == all_markers
    clock.advance(RETENTION)
    [done] = compact(lg)  # pass 3: past the delete horizon; markers with data stay
    assert markers(lg) == [commit1, commit2b]
    assert lg.aborted_transactions(0, lg.log_end_offset) == []  # the abort's data and marker are gone
    assert done.result.stats.markers_removed == 2
    assert read_committed(lg) == [(6, b"b", b"b2"), (7, b"c", b"c2"), (8, b"d", b"d1"), (9, b"e", b"e1"),
                                  (11, b"f", b"f1"), (12, b"g", b"g1")]
    lg.close()


def history(lg: PartitionLog, seed: int) -> None:
    """Interleaved transactions of three producers (commits and aborts) and plain writes over few keys."""
    rnd = random.Random(seed)
    w = Writer(lg)
    open_txns: set[int] = set()
    for i in range(300):
        pid = rnd.choice([1, 2, 3, 0])
        if pid == 0:
            w.plain([(b"k%d" % rnd.randrange(8), b"p%d" % i) for _ in range(rnd.randint(1, 3))])
        elif pid in open_txns and rnd.random() < 0.3:
            w.end(pid, commit=rnd.random() < 0.5)
            open_txns.discard(pid)
        else:
            w.txn(pid, [(b"k%d" % rnd.randrange(8), b"t%d-%d" % (pid, i)) for _ in range(rnd.randint(2, 3))])
            open_txns.add(pid)
        if i % 40 == 39:
            lg.roll()
    for pid in sorted(open_txns):
        w.end(pid, commit=rnd.random() < 0.5)
    seal(lg)


def test_read_committed_over_the_cleaned_log_returns_exactly_the_latest_committed_records(tmp_path):
    clock = FakeClock()
    for seed in range(3):
        lg = open_log(tmp_path / f"t-{seed}", clock, **CFG)
        history(lg, seed)
        expected = latest_by_key(read_committed(lg))
        assert lg.aborted_transactions(0, lg.log_end_offset)  # the history has aborts to remove
        compact(lg)
        assert read_committed(lg) == expected
        clock.advance(2 * RETENTION)
        compact(lg)
        compact(lg)  # markers without data are gone now
        assert read_committed(lg) == expected
        lg.close()
        again = open_log(tmp_path / f"t-{seed}", clock, **CFG)
        assert read_committed(again) == expected
        again.close()


def test_a_transactional_producers_epoch_and_sequence_survive_cleaning(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock, **CFG)
    w = Writer(lg)
    w.txn(9, [(b"a", b"a1"), (b"b", b"b1")], epoch=3)  # seq 0-1, committed, superseded below
    w.end(9, commit=True, epoch=3)
    last = w.txn(9, [(b"c", b"c1"), (b"d", b"d1")], epoch=3)  # seq 2-3, aborted: pid 9's last batch
    w.end(9, commit=False, epoch=3)
    seal(lg)
    w.plain([(b"a", b"a2"), (b"b", b"b2")])
    seal(lg)
    compact(lg)
    clock.advance(2 * RETENTION)
    compact(lg)
    assert read_committed(lg) == [(6, b"a", b"a2"), (7, b"b", b"b2")]
    # Kafka's rule: the producer's last batch stays, emptied, with its producer fields (and so its ABORT
    # marker and index entry, since data of the transaction remain), so a replay still knows the producer.
    data = lg.read(last, 1 << 20)
    h = next(h for _, h in iter_headers(data) if h.base_offset == last)
    assert (h.record_count, h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (0, 9, 3, 2, 3)
    assert markers(lg) == [last + 2]
    assert [(e.producer_id, e.first_offset) for e in lg.aborted_transactions(0, lg.log_end_offset)] == [(9, last)]
    lg.close()
    again = open_log(tmp_path / "t-0", clock, **CFG)
    [entry] = [e for e in again.producer_state.entries() if e.producer_id == 9]
    assert entry.epoch == 3 and entry.batches[-1].last_seq == 3
    assert again.ongoing_transactions == {}
    again.close()


def test_retention_past_the_start_of_an_open_transaction_keeps_read_committed_right(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    w = Writer(lg)
    w.plain([(b"p", b"p0")])  # 0
    w.txn(4, [(b"a", b"a1"), (b"b", b"b1")])  # 1-2: aborted below
    w.txn(5, [(b"c", b"c1"), (b"d", b"d1")])  # 3-4: open
    seal(lg)
    w.txn(4, [(b"e", b"e1"), (b"f", b"f1")])  # 5-6, same aborted transaction
    seal(lg)
    assert lg.delete_records(2) == 2  # the log start moves inside both transactions
    # The LSO is never below the log start: a read_committed consumer waits there, in range.
    assert lg.last_stable_offset(lg.log_end_offset) == 2
    w.end(4, commit=False)
    w.end(5, commit=True)
    w.plain([(b"q", b"q1")])
    seal(lg)
    # The abort's entry sits with its marker, after every record of the transaction that is left.
    assert read_committed(lg) == [(3, b"c", b"c1"), (4, b"d", b"d1"), (9, b"q", b"q1")]
    lg.apply_retention()
    compact(lg)
    assert read_committed(lg) == [(3, b"c", b"c1"), (4, b"d", b"d1"), (9, b"q", b"q1")]
    lg.close()


def test_an_abort_whose_marker_is_in_the_active_segment_still_removes_its_cleanable_data(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    w = Writer(lg)
    w.plain([(b"a", b"a0")])  # 0
    seal(lg)
    w.txn(1, [(b"a", b"a-aborted"), (b"b", b"b-aborted")])  # 1-2
    seal(lg)
    w.end(1, commit=False)  # 3, in the active segment
    lg.flush()
    compact(lg)
    assert read_committed(lg) == [(0, b"a", b"a0")]
    assert b"a-aborted" not in values(lg)
    lg.close()
