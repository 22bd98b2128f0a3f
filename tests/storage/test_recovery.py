import os
import struct

import pytest

from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.errors import CorruptRecordError
from logan_ray.storage.record_builder import build_batch

from log_helpers import all_records, batch, disk_state, log_files, open_log

CFG = dict(segment_bytes=1500, index_interval_bytes=100)


def crash(lg):
    """Drop a log like a killed process would: no flush, no indexes, no marker."""
    lg._flusher.stop()
    for seg in lg._segments:
        seg.close()
    lg._closed = True


def fill(lg, n, start=0, pad=40):
    infos = [lg.append(batch(start + i, 2, ts=1000 + start + i, pad=pad)) for i in range(n)]
    return infos


def batch_positions(path):
    with open(path, "rb") as f:
        data = f.read()
    return [(p, h) for p, h in iter_headers(data)]


def flip(path, position, bit=0x10):
    with open(path, "r+b") as f:
        f.seek(position)
        b = f.read(1)
        f.seek(position)
        f.write(bytes([b[0] ^ bit]))


def test_unclean_reopen_keeps_everything_and_rescans_from_the_recovery_point(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, **CFG)
    fill(lg, 30)
    lg.flush()
    fill(lg, 10, start=30)
    end, size = lg.log_end_offset, lg.size_bytes
    crash(lg)
    rp = lg.recovery_point  # the flush, or a later background flush of a rolled segment
    assert 60 <= rp < end
    lg = open_log(d, **CFG)
    rep = lg.recovery_report
    assert not rep.clean_shutdown and rep.recovery_point == rp
    assert rep.truncated_bytes == 0 and not rep.corrupt
    first_scanned = max(s.base_offset for s in lg.segments if s.base_offset <= rp)
    assert rep.segments_scanned == sum(1 for s in lg.segments if s.base_offset >= first_scanned)
    assert rep.segments_trusted == lg.segment_count - rep.segments_scanned
    assert (lg.log_end_offset, lg.size_bytes) == (end, size)
    recs = all_records(lg)
    assert [r.offset for r in recs] == list(range(80))
    assert [r.value for r in recs[::2]] == [b"value-%d" % i + b"x" * 40 for i in range(40)]
    assert lg.offset_for_timestamp(1035) == (70, 1035)
    # Recovered data is not durable yet: the recovery point stays until the next flush.
    assert lg.recovery_point == rp
    lg.flush()
    assert lg.recovery_point == end


@pytest.mark.parametrize("tail", ["half-batch", "garbage", "header-only", "zeros"])
def test_torn_tail_is_truncated(tmp_path, tail):
    d = tmp_path / "t-0"
    lg = open_log(d, **CFG)
    fill(lg, 12)
    lg.flush()
    end, size, files = lg.log_end_offset, lg.size_bytes, log_files(d)
    last = os.path.join(d, files[-1])
    crash(lg)
    b = bytearray(batch(99, 3))
    struct.pack_into(">q", b, 0, end)
    extra = {
        "half-batch": bytes(b[: len(b) // 2]),
        "garbage": os.urandom(37),
        "header-only": bytes(b[:61]),
        "zeros": b"\x00" * 200,
    }[tail]
    with open(last, "ab") as f:
        f.write(extra)
    lg = open_log(d, **CFG)
    rep = lg.recovery_report
    assert rep.truncated_bytes == len(extra) and rep.truncate_reason
    assert (lg.log_end_offset, lg.size_bytes, log_files(d)) == (end, size, files)
    assert os.path.getsize(last) == size - sum(s.size for s in lg.segments[:-1])
    assert lg.verify() == []
    info = lg.append(batch(12))
    assert info.base_offset == end
    assert [r.offset for r in all_records(lg)] == list(range(end + 1))


def test_corrupt_unflushed_batch_truncates_it_and_everything_after(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, segment_bytes=10**6, index_interval_bytes=100)
    fill(lg, 10)
    lg.flush()
    rp = lg.recovery_point
    fill(lg, 10, start=10)
    path = lg.segments[-1].path
    crash(lg)
    positions = batch_positions(path)
    pos, h = positions[13]  # unflushed (offsets 26, 27)
    assert h.base_offset >= rp
    flip(path, pos + 80)
    size_before = os.path.getsize(path)
    lg = open_log(d, segment_bytes=10**6, index_interval_bytes=100)
    rep = lg.recovery_report
    assert lg.log_end_offset == h.base_offset == 26
    assert rep.truncated_at_offset == 26 and "CRC" in rep.truncate_reason
    assert rep.truncated_bytes == size_before - pos
    assert os.path.getsize(path) == pos
    assert [r.offset for r in all_records(lg)] == list(range(26))


def test_truncation_in_an_earlier_segment_drops_later_segments(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, **CFG)
    fill(lg, 40)
    assert lg.segment_count >= 3
    second = lg.segments[1]
    crash(lg)
    # As if the process died before any flush (rolled segments are fsynced in the background).
    with open(os.path.join(d, "recovery-point-offset-checkpoint"), "w") as f:
        f.write("0\n")
    pos, h = batch_positions(second.path)[1]
    flip(second.path, pos + 70)
    lg = open_log(d, **CFG)
    assert lg.log_end_offset == h.base_offset
    assert lg.segment_count == 2
    assert log_files(d) == [f"{0:020d}.log", f"{second.base_offset:020d}.log"]
    assert lg.recovery_report.deleted_segments == [s for s in lg.recovery_report.deleted_segments if s > second.base_offset]
    assert len(lg.recovery_report.deleted_segments) >= 1


def test_flipped_bit_in_flushed_segment_is_reported_not_truncated(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, **CFG)
    fill(lg, 40)
    lg.close()
    seg_path = os.path.join(d, log_files(d)[1])
    positions = batch_positions(seg_path)
    pos, h = positions[len(positions) // 2]
    flip(seg_path, pos + 90)  # inside the records: framing intact, CRC wrong
    before = disk_state(d)

    lg = open_log(d, **CFG)  # clean shutdown: nothing rescanned, nothing noticed yet
    assert lg.recovery_report.corrupt == []
    end = lg.log_end_offset
    for off in (h.base_offset, h.base_offset + 1):
        with pytest.raises(CorruptRecordError) as err:
            lg.read(off, 1 << 20)
        assert err.value.path == seg_path and err.value.position == pos
        assert seg_path in str(err.value) and str(pos) in str(err.value)
        with pytest.raises(CorruptRecordError):
            lg.locate(off, 1 << 20)
    # Data before it is served up to the bad batch, data after it is served too.
    data = lg.read(h.base_offset - 4, 1 << 20)
    assert [hh.base_offset for _, hh in iter_headers(data)] == [h.base_offset - 4, h.base_offset - 2]
    assert lg.read_records(h.base_offset + 2, 100)[0].offset == h.base_offset + 2
    bad = lg.verify()
    assert [(c.path, c.position, c.offset) for c in bad] == [(seg_path, pos, h.base_offset)]
    assert "CRC" in bad[0].reason
    lg.close()

    lg = open_log(d, verify="full", **CFG)
    rep = lg.recovery_report
    assert rep.full_verification and [(c.path, c.position) for c in rep.corrupt] == [(seg_path, pos)]
    assert rep.truncated_bytes == 0 and lg.log_end_offset == end
    with pytest.raises(CorruptRecordError):
        lg.read(h.base_offset, 100)
    lg.close()
    after = disk_state(d)
    assert {k: v for k, v in after.items() if k.endswith(".log")} == {k: v for k, v in before.items() if k.endswith(".log")}


def test_corrupt_acknowledged_batch_in_rescanned_segment_is_kept(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, segment_bytes=10**6, index_interval_bytes=100)
    fill(lg, 10)
    lg.flush()  # acknowledged as durable
    fill(lg, 5, start=10)
    path = lg.segments[-1].path
    crash(lg)
    pos, h = batch_positions(path)[4]
    flip(path, pos + 75)
    lg = open_log(d, segment_bytes=10**6, index_interval_bytes=100)
    rep = lg.recovery_report
    assert rep.truncated_bytes == 0 and lg.log_end_offset == 30
    assert [(c.position, c.offset) for c in rep.corrupt] == [(pos, h.base_offset)]
    with pytest.raises(CorruptRecordError):
        lg.read(h.base_offset, 100)
    assert lg.read_records(h.base_offset + 2, 100)[0].offset == h.base_offset + 2


def test_broken_length_field_resynchronises_on_the_next_batch(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, **CFG)
    fill(lg, 40)
    lg.close()
    seg_path = os.path.join(d, log_files(d)[1])
    positions = batch_positions(seg_path)
    pos, h = positions[3]
    with open(seg_path, "r+b") as f:
        f.seek(pos + 8)
        f.write(struct.pack(">i", 0x7FFFFF00))  # batch length: far beyond the file
    lg = open_log(d, verify="full", **CFG)
    rep = lg.recovery_report
    assert [(c.position, c.offset) for c in rep.corrupt] == [(pos, h.base_offset)]
    assert rep.truncated_bytes == 0 and lg.log_end_offset == 80
    with pytest.raises(CorruptRecordError) as err:
        lg.read(h.base_offset, 100)
    assert err.value.position == pos
    nxt = positions[4][1].base_offset
    assert lg.read_records(nxt, 100)[0].offset == nxt
    assert lg.read_records(h.base_offset - 2, 10**6)[-1].offset == h.base_offset - 1  # stops before the hole
    lg.close()


@pytest.mark.parametrize("damage", ["delete", "truncate", "garbage", "wrong"])
def test_damaged_indexes_are_rebuilt(tmp_path, damage):
    d = tmp_path / "t-0"
    lg = open_log(d, **CFG)
    fill(lg, 40)
    expected = [lg.read(o, 1) for o in range(0, 80, 3)]
    ts_answers = [lg.offset_for_timestamp(t) for t in range(995, 1045, 3)]
    lg.close()
    target = os.path.join(d, log_files(d, ".index")[0])
    ttarget = target[: -len(".index")] + ".timeindex"
    if damage == "delete":
        os.remove(target)
        os.remove(ttarget)
    elif damage == "truncate":
        with open(target, "r+b") as f:
            f.truncate(os.path.getsize(target) - 3)
        with open(ttarget, "r+b") as f:
            f.truncate(5)
    elif damage == "garbage":
        with open(target, "wb") as f:
            f.write(os.urandom(64))
    else:
        with open(target, "r+b") as f:  # sorted, in range, but pointing at the wrong batch
            f.seek(-8, os.SEEK_END)
            rel, p = struct.unpack(">II", f.read(8))
            f.seek(-8, os.SEEK_END)
            f.write(struct.pack(">II", rel - 1, p))
    lg = open_log(d, **CFG)
    assert lg.recovery_report.indexes_rebuilt >= 1
    assert [lg.read(o, 1) for o in range(0, 80, 3)] == expected
    assert [lg.offset_for_timestamp(t) for t in range(995, 1045, 3)] == ts_answers
    lg.close()
    lg = open_log(d, **CFG)  # and the rebuilt files were written back
    assert lg.recovery_report.indexes_rebuilt == 0


def test_leftovers_are_cleaned_on_open(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, file_delete_delay_ms=10**9, **CFG)
    fill(lg, 40)
    first_two = [s.path for s in lg.segments[:2]]
    lg.delete_records(lg.segments[2].base_offset)
    assert all(os.path.exists(p) for p in first_two)  # deletion delayed for in-flight readers
    start = lg.log_start_offset
    crash(lg)
    for name in ("00000000000000099999.index", "foo.tmp", "00000000000000000000.log.deleted"):
        with open(os.path.join(d, name), "wb") as f:
            f.write(b"junk")
    lg = open_log(d, **CFG)
    assert lg.log_start_offset == start
    assert not any(os.path.exists(p) for p in first_two)
    names = os.listdir(d)
    assert "foo.tmp" not in names and "00000000000000099999.index" not in names
    assert not any(n.endswith(".deleted") for n in names)


def test_unreadable_recovery_point_means_full_rescan(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, **CFG)
    fill(lg, 40)
    lg.flush()
    crash(lg)
    with open(os.path.join(d, "recovery-point-offset-checkpoint"), "w") as f:
        f.write("not a number")
    lg = open_log(d, **CFG)
    assert lg.recovery_report.segments_scanned == lg.segment_count
    assert lg.log_end_offset == 80


def test_recovery_point_beyond_the_log_is_clamped(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, **CFG)
    fill(lg, 3)
    crash(lg)
    with open(os.path.join(d, "recovery-point-offset-checkpoint"), "w") as f:
        f.write("1000\n")
    lg = open_log(d, **CFG)
    assert lg.log_end_offset == 6 and lg.recovery_point == 6


def test_empty_folder_and_log_start_only(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d)
    assert lg.log_end_offset == 0 and lg.segment_count == 1
    lg.close()
    lg = open_log(d)
    assert lg.log_end_offset == 0 and lg.recovery_report.clean_shutdown
    lg.append(batch(0))
    assert lg.read_records(0)[0].value == b"value-0"


def test_batches_larger_than_the_scan_buffer(tmp_path):
    d = tmp_path / "t-0"
    cfg = dict(max_message_bytes=20 << 20, segment_bytes=64 << 20)
    lg = open_log(d, **cfg)
    big = [os.urandom(1 << 20) for _ in range(10)]  # one 10 MiB batch, more than the 8 MiB read chunk
    lg.append(build_batch(big, timestamps=5))
    lg.append(batch(10, 2))
    crash(lg)
    with open(os.path.join(d, "recovery-point-offset-checkpoint"), "w") as f:
        f.write("0\n")
    lg = open_log(d, **cfg)
    assert lg.recovery_report.batches_scanned == 2 and lg.log_end_offset == 12
    assert [r.value for r in lg.read_records(3, 1)] == big[3:]
    lg.close()
    lg = open_log(d, **cfg)  # clean: the first read CRC-checks the big batch through the walker
    assert len(lg.read(0, 1)) > 10 << 20
    assert lg.verify() == []
