"""Log compaction at the storage level: what survives, where, and how the swap behaves."""
from __future__ import annotations

import os
import random
import struct

import pytest
from compaction_helpers import CODECS, FakeClock, Rec, expected_after, open_log, read_all, seal, write_updates

from logan_ray.storage import compaction
from logan_ray.storage.batch_header import iter_headers, parse_header
from logan_ray.storage.cleanable import dirty_stats
from logan_ray.storage.cleaner_checkpoint import read_checkpoint
from logan_ray.storage.compaction import MapTooSmallError, clean, compact
from logan_ray.storage.errors import CorruptRecordError
from logan_ray.storage.offset_map import ENTRY_BYTES
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_batch, decode_records

DAY = 86_400_000
CFG = dict(cleanup_policy="compact", segment_bytes=8000, index_interval_bytes=300)


def batches_of(lg):
    """(base offset, last offset delta, record count, attributes) of every batch in the log."""
    out = []
    offset = lg.log_start_offset
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1 << 20)
        for _, h in iter_headers(data):
            out.append((h.base_offset, h.last_offset_delta, h.record_count, h.attributes))
            offset = h.next_offset
    return out


def first_from(lg, offset):
    """Offset of the first record at or after ``offset``, stepping over emptied batch ranges like a client."""
    while offset < lg.log_end_offset:
        data = lg.read(offset, 1)
        found = [r.offset for r in decode_records(data) if r.offset >= offset]
        if found:
            return found[0]
        offset = max(h.next_offset for _, h in iter_headers(data))
    return None


def test_latest_value_of_every_key_stays_at_its_original_offset(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock, **CFG)
    rnd = random.Random(7)
    written = write_updates(lg, rnd, 600, 80, clock=clock, tombstones=0.05, codecs=CODECS)
    seal(lg)
    end = lg.log_end_offset
    segments_before = lg.segment_count
    [done] = compact(lg)
    st = done.result.stats
    assert done.swap.installed >= 1 and not st.map_full
    assert st.records_read == len(written) and st.records_removed == len(written) - st.records_kept
    want = expected_after(written, end)
    assert read_all(lg) == want
    assert len({r.key for r in want}) == len(want) == 80  # exactly one record per key, tombstones included
    assert lg.log_end_offset == end and lg.log_start_offset == 0
    assert lg.segment_count < segments_before  # small neighbours were merged
    assert all(s.size <= 8000 for s in lg.segments[:-1])
    # every offset, including those in gaps, finds the next surviving record
    offsets = [r.offset for r in want]
    for o in range(0, end, 7):
        assert first_from(lg, o) == next(x for x in offsets if x >= o)
    # timestamps: the time index of the merged segments still answers ListOffsets
    for r in want[::9]:
        found = lg.offset_for_timestamp(r.timestamp)
        assert found == min(((x.offset, x.timestamp) for x in want if x.timestamp >= r.timestamp))
    lg.close()
    again = open_log(tmp_path / "t-0", clock, **CFG)
    assert read_all(again) == want and again.recovery_report.segments_scanned == 0
    assert again.cleaner_checkpoint.clean_offset == end
    again.close()


def test_batches_keep_base_offset_and_last_offset_delta(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    lg.append(build_batch([b"a1", b"b1", b"a2", b"c1"], [b"a", b"b", b"a", b"c"], timestamps=[10, 11, 12, 13]))
    lg.append(build_batch([b"x1", b"y1"], [b"x", b"y"], timestamps=20))  # untouched: copied verbatim
    lg.append(build_batch([b"b2", b"c2"], [b"b", b"c"], timestamps=30))
    lg.append(build_batch([b"c3"], [b"c"], timestamps=40))
    seal(lg)
    raw_xy = lg.read(4, 1)
    compact(lg)
    assert batches_of(lg) == [(0, 3, 1, 0), (4, 1, 2, 0), (6, 1, 1, 0), (8, 0, 1, 0)]
    first = lg.read(0, 1)
    h, recs = decode_batch(first)
    assert [(r.offset, r.key, r.value, r.timestamp) for r in recs] == [(2, b"a", b"a2", 12)]
    assert h.base_timestamp == 10 and h.max_timestamp == 12  # base kept, max recomputed
    assert lg.read(4, 1) == raw_xy  # a batch with nothing removed is copied byte for byte
    assert [r.offset for r in read_all(lg)] == [2, 4, 5, 6, 8]


def test_consumers_mid_log_keep_working(tmp_path):
    lg = open_log(tmp_path / "t-0", file_delete_delay_ms=DAY, **CFG)
    rnd = random.Random(3)
    written = write_updates(lg, rnd, 300, 30)
    seal(lg)
    end = lg.log_end_offset
    positions = sorted(rnd.sample(range(end), 25))
    old_slices = {p: lg.locate(p, 3000) for p in positions}
    old_bytes = {p: [open(s.path, "rb").read()[s.position:s.position + s.length] for s in sl]
                 for p, sl in old_slices.items()}
    old_views = {p: read_all(lg, p) for p in positions}
    compact(lg)
    want = expected_after(written, end)
    for p in positions:
        # a reader that was at p goes on from p: it sees the survivors at or after p
        assert read_all(lg, p) == [r for r in want if r.offset >= p]
        assert [r.offset for r in read_all(lg, p)] == [r.offset for r in old_views[p] if r in want]
        # slices handed out before the swap still read the old bytes: new files never reuse a name
        for s, data in zip(old_slices[p], old_bytes[p]):
            with open(s.path, "rb") as f:
                f.seek(s.position)
                assert f.read(s.length) == data
    new_paths = {s.path for s in lg.segments}
    assert not new_paths & {s.path for sl in old_slices.values() for s in sl}
    lg.close()  # close() deletes the replaced files and their swap manifests
    names = os.listdir(tmp_path / "t-0")
    assert not [n for n in names if n.endswith((".swap", ".cleaned"))]
    assert sorted(n for n in names if n.endswith(".log")) == sorted(os.path.basename(p) for p in new_paths)


def test_tombstones_go_after_delete_retention_and_not_before(tmp_path):
    clock = FakeClock()
    retention = 10_000
    lg = open_log(tmp_path / "t-0", clock, delete_retention_ms=retention, **CFG)
    lg.append(build_batch([b"a1", b"b1", b"c1"], [b"a", b"b", b"c"], timestamps=clock.now))
    lg.append(build_batch([None, None], [b"a", b"c"], timestamps=clock.now))  # delete a and c
    lg.append(build_batch([b"c2"], [b"c"], timestamps=clock.now))  # c lives again: its tombstone is superseded
    seal(lg)
    compact(lg)
    first_seen = clock.now
    assert [(r.key, r.value) for r in read_all(lg)] == [(b"b", b"b1"), (b"a", None), (b"c", b"c2")]
    for elapsed in (1, retention // 2, retention - 1):
        clock.now = first_seen + elapsed
        [done] = compact(lg)
        assert done.result.stats.tombstones_removed == 0
        assert (b"a", None) in [(r.key, r.value) for r in read_all(lg)]
    clock.now = first_seen + retention
    [done] = compact(lg)
    assert done.result.stats.tombstones_removed == 1
    survivors = read_all(lg)
    assert [(r.key, r.value) for r in survivors] == [(b"b", b"b1"), (b"c", b"c2")]
    assert not [r for r in survivors if r.key == b"a"]  # no older value of a came back


def test_tombstone_seen_in_a_later_pass_is_kept_from_that_pass(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock, delete_retention_ms=1000, **CFG)
    lg.append(build_batch([b"a1"], [b"a"], timestamps=clock.now))
    seal(lg)
    compact(lg)
    clock.advance(5000)
    lg.append(build_batch([None], [b"a"], timestamps=clock.now - 4000))  # an old-looking timestamp does not matter
    seal(lg)
    compact(lg)
    assert [(r.key, r.value) for r in read_all(lg)] == [(b"a", None)]
    clock.advance(999)
    compact(lg)
    assert [(r.key, r.value) for r in read_all(lg)] == [(b"a", None)]
    clock.advance(1)
    compact(lg)
    assert read_all(lg) == []
    assert lg.log_start_offset == 0 and lg.log_end_offset == 2  # compaction never moves the log start
    lg.append(build_batch([b"a3"], [b"a"], timestamps=clock.now))
    lg.close()
    again = open_log(tmp_path / "t-0", clock, **CFG)
    assert again.log_start_offset == 0 and [(r.offset, r.value) for r in read_all(again)] == [(2, b"a3")]
    again.close()


def test_records_without_keys_are_removed_and_control_batches_kept(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    lg.append(build_batch([b"k1", b"nokey", b"k2"], [b"k", None, b"k"], timestamps=1))
    control = build_batch([b"\x00\x00\x00\x00\x00\x00"], [b"\x00\x00\x00\x00"], timestamps=2, is_control=True,
                          producer_id=7, producer_epoch=0)
    lg.append(control)
    lg.append(build_batch([b"t1", b"t2"], [b"t", b"t"], timestamps=3, is_transactional=True, producer_id=7,
                          producer_epoch=0, base_sequence=0))
    lg.append(build_batch([b"\x00\x00\x00\x00\x00\x00"], [b"\x00\x00\x00\x01"], timestamps=4, is_control=True,
                          producer_id=7, producer_epoch=0))  # its COMMIT: an open transaction is never cleaned
    seal(lg)
    [done] = compact(lg)
    assert done.result.stats.keyless_removed == 1 and done.result.stats.control_batches == 2
    got = batches_of(lg)
    assert got[0] == (0, 2, 1, 0)
    assert got[1][0] == 3 and got[1][3] & 0x20  # the control batch, unchanged
    assert lg.read(3, 1) == bytes(struct.pack(">q", 3)) + control[8:]
    assert got[2][:3] == (4, 1, 1) and got[2][3] & 0x10  # transactional: compacted like any batch
    assert [(r.offset, r.value) for r in read_all(lg)] == [(2, b"k2"), (5, b"t2")]


def test_active_segment_and_recent_segments_are_never_cleaned(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock, min_compaction_lag_ms=60_000, **CFG)
    rnd = random.Random(5)
    old = write_updates(lg, rnd, 120, 10, clock=clock)
    seal(lg)
    clock.advance(120_000)
    boundary = lg.log_end_offset
    young = write_updates(lg, rnd, 120, 10, clock=clock)
    seal(lg)
    active = write_updates(lg, rnd, 5, 10, clock=clock)  # stays in the active segment
    active_path = lg.segments[-1].path
    with open(active_path, "rb") as f:
        active_bytes = f.read()
    young_paths = [s.path for s in lg.segments if s.base_offset >= boundary][:-1]
    compact(lg)
    assert lg.cleaner_checkpoint.clean_offset == boundary
    assert read_all(lg) == expected_after(old + young + active, boundary)
    assert [s.path for s in lg.segments if s.base_offset >= boundary] == young_paths + [active_path]
    with open(active_path, "rb") as f:
        assert f.read() == active_bytes


def test_unflushed_segments_are_not_cleaned(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    lg._flusher.stop()  # keep rolled segments from becoming durable behind our back
    rnd = random.Random(11)
    written = write_updates(lg, rnd, 60, 5)
    lg.roll()
    assert lg.segment_count > 3 and lg.recovery_point == 0
    stats = lg.dirty_stats()
    assert stats.first_uncleanable == 0 and stats.dirty_bytes == 0
    assert clean(lg.cleaning_view(), force=True) is None
    lg.flush()
    assert lg.dirty_stats().first_uncleanable == lg.log_end_offset
    compact(lg)
    assert read_all(lg) == expected_after(written, lg.log_end_offset)


def test_dirty_ratio_gates_scheduled_cleaning(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock, min_cleanable_dirty_ratio=0.5, **CFG)
    rnd = random.Random(1)
    write_updates(lg, rnd, 200, 20, clock=clock)
    seal(lg)
    view = lg.cleaning_view()
    ds = dirty_stats(view, view.now_ms)
    assert ds.ratio == 1.0 and ds.clean_bytes == 0 and ds.dirty_bytes == sum(s.size for s in lg.segments[:-1])
    result = clean(view)
    assert result is not None
    lg.install_cleaned(result)
    assert clean(lg.cleaning_view()) is None  # nothing dirty
    write_updates(lg, rnd, 3, 20, clock=clock)
    seal(lg)
    ds = lg.dirty_stats()
    assert 0 < ds.ratio < 0.5
    assert clean(lg.cleaning_view()) is None  # below min.cleanable.dirty.ratio
    assert clean(lg.cleaning_view(), force=True) is not None  # on demand it runs anyway


def test_map_smaller_than_the_keys_cleans_in_several_passes(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    rnd = random.Random(9)
    written = write_updates(lg, rnd, 400, 150, max_records=4)
    seal(lg)
    end = lg.log_end_offset
    map_bytes = 60 * ENTRY_BYTES  # room for 60 keys of the 150
    passes = compact(lg, map_bytes=map_bytes)
    assert len(passes) > 2 and all(p.result.stats.map_full for p in passes[:-1])
    assert not passes[-1].result.stats.map_full
    ends = [p.result.end_offset for p in passes]
    assert ends == sorted(ends) and ends[-1] == end
    assert read_all(lg) == expected_after(written, end)
    with pytest.raises(MapTooSmallError):
        lg.append(build_batch([b"x"] * 5, [b"%d" % i for i in range(5)]))
        seal(lg)
        clean(lg.cleaning_view(), map_bytes=4 * 160, force=True)


def test_compressed_batches_are_rebuilt_with_their_codec(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    for i, codec in enumerate(CODECS):
        lg.append(build_batch([b"old-%d" % i, b"keep-%d" % i], [b"same", b"k%d" % i], timestamps=i, compression=codec))
    lg.append(build_batch([b"newest"], [b"same"], timestamps=99))
    seal(lg)
    compact(lg)
    codecs = [attrs & 7 for _, _, _, attrs in batches_of(lg)]
    assert codecs == [0, 1, 2, 3, 4, 0]
    assert [r.value for r in read_all(lg)] == [b"keep-%d" % i for i in range(5)] + [b"newest"]


def test_a_swap_is_discarded_when_the_log_changed_meanwhile(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    rnd = random.Random(4)
    written = write_updates(lg, rnd, 200, 20)
    seal(lg)
    result = clean(lg.cleaning_view(), force=True)
    assert result is not None and result.groups
    pending = [n for n in os.listdir(tmp_path / "t-0") if n.endswith(".cleaned")]
    assert pending
    new_start = lg.segments[1].base_offset
    lg.delete_records(new_start)  # drops the first segment the cleaner read
    report = lg.install_cleaned(result)
    assert report.installed == 0 and report.discarded == len(result.groups)
    assert not [n for n in os.listdir(tmp_path / "t-0") if n.endswith((".cleaned", ".swap"))]
    assert lg.cleaner_checkpoint.clean_offset == 0
    assert read_all(lg) == [r for r in written if r.offset >= new_start]


def test_corrupt_batch_stops_cleaning_and_changes_nothing(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, **CFG)
    rnd = random.Random(2)
    write_updates(lg, rnd, 120, 10)
    seal(lg)
    victim = lg.segments[1].path
    with open(victim, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    before = sorted(os.listdir(d))
    with pytest.raises(CorruptRecordError):
        clean(lg.cleaning_view(), force=True)
    assert sorted(os.listdir(d)) == before
    assert lg.cleaner_checkpoint.clean_offset == 0


def test_crc_valid_batch_with_malformed_records_is_kept_as_is(tmp_path):
    lg = open_log(tmp_path / "t-0", **CFG)
    good = bytearray(build_batch([b"v1", b"v2"], [b"a", b"a"], timestamps=1))
    h = parse_header(good)
    # claim one more byte of key than there is, then fix up the CRC: valid batch, broken records
    good[61 + 4] = 0x7E  # a key of 63 bytes in a record of a dozen
    import crc32c

    struct.pack_into(">I", good, 17, crc32c.crc32c(bytes(good[21:])))
    lg.append(bytes(good))
    lg.append(build_batch([b"v3"], [b"a"], timestamps=2))
    seal(lg)
    [done] = compact(lg)
    assert done.result.stats.malformed_batches == 1
    assert lg.read(0, 1)[:h.size] == bytes(good)
    assert lg.read(2, 1) and [b for b in batches_of(lg)][0][:3] == (0, 1, 2)


def test_recovery_after_a_crash_inside_the_swap(tmp_path):
    """Each step of the swap, interrupted in-process; a real SIGKILL version lives in test_compaction_crash."""
    from logan_ray.storage.log import PartitionLog

    for step_name in ("group-written", "before-manifest", "manifest-written", "renamed", "checkpoint-written"):
        d = tmp_path / step_name
        lg = open_log(d, file_delete_delay_ms=DAY, **CFG)
        rnd = random.Random(len(step_name))
        written = write_updates(lg, rnd, 150, 12, tombstones=0.1)
        seal(lg)
        end = lg.log_end_offset

        class Crash(Exception):
            pass

        def hook(name, target=step_name):
            if name == target:
                raise Crash(name)

        compaction.crash_hook = hook
        try:
            with pytest.raises(Crash):
                compact(lg)
        finally:
            compaction.crash_hook = None
        lg._flusher.stop()
        for seg in lg._segments:
            seg.close()
        lg._closed = True  # dropped like a killed process: no close(), no purge
        again = PartitionLog(str(d), lg.config)
        names = os.listdir(d)
        assert not [n for n in names if n.endswith((".cleaned", ".swap"))], (step_name, names)
        got = read_all(again)
        committed = step_name in ("manifest-written", "renamed", "checkpoint-written")
        assert got == (expected_after(written, end) if committed else written), step_name
        stems = [os.path.basename(s.path) for s in again.segments]
        assert all("-c" in n for n in stems[:-1]) == committed, (step_name, stems)
        compact(again)  # and cleaning goes on from there
        assert read_all(again) == expected_after(written, end)
        again.close()


def test_record_layout_of_cleaned_files(tmp_path):
    """Cleaned segments carry a generation in their name; indexes are loadable as they are."""
    d = tmp_path / "t-0"
    lg = open_log(d, **CFG)
    write_updates(lg, random.Random(8), 100, 10)
    seal(lg)
    compact(lg)
    write_updates(lg, random.Random(9), 100, 10)
    seal(lg)
    compact(lg)
    names = [os.path.basename(s.path) for s in lg.segments]
    assert names[0] == "00000000000000000000-c2.log" and "-c" not in names[-1]
    assert "00000000000000000000-c1.log" in os.listdir(d)  # replaced, kept for file.delete.delay.ms
    lg.close()
    assert sorted(n for n in os.listdir(d) if n.endswith(".log")) == sorted(names)
    again = open_log(d, **CFG)
    assert again.recovery_report.indexes_rebuilt == 0 and again.recovery_report.segments_trusted == len(names)
    assert read_checkpoint(str(d)) == again.cleaner_checkpoint
    again.close()


def test_records_read_back_equal_model_after_interleaved_appends_and_passes(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock, delete_retention_ms=50, **CFG)
    rnd = random.Random(12)
    written: list[Rec] = []
    for round_ in range(6):
        written += write_updates(lg, rnd, 80, 25, clock=clock, tombstones=0.1, codecs=["none", "lz4"])
        seal(lg)
        horizon = lg.cleaner_checkpoint.tombstone_horizon(clock.now, 50)
        compact(lg)
        end = lg.log_end_offset
        assert read_all(lg) == expected_after(written, end, tombstone_horizon=horizon), round_
        clock.advance(30)
    lg.close()
