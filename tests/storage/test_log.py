import os
import socket
import threading

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logan_ray.storage import segment as segment_module
from logan_ray.storage.batch_header import iter_headers, parse_header, validate_batch
from logan_ray.storage.errors import InvalidTimestampError, LogClosedError, OffsetOutOfRangeError
from logan_ray.storage.log import AppendInfo, FileSlice, PartitionLog
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_records

from log_helpers import FakeClock, all_records, batch, log_files, open_log


def read_slices(slices):
    out = b""
    for s in slices:
        with open(s.path, "rb") as f:
            f.seek(s.position)
            out += f.read(s.length)
    return out


def test_append_assigns_offsets_and_stores_bytes_as_received(tmp_path):
    lg = open_log(tmp_path / "t-0")
    assert (lg.log_start_offset, lg.log_end_offset, lg.segment_count) == (0, 0, 1)
    b1 = batch(0, 3, ts=[10, 30, 20])
    info = lg.append(b1)
    assert info == AppendInfo(0, 2, -1, 0, 3, len(b1))
    # A produce request may carry several batches: one append, consecutive offsets.
    b2, b3 = batch(3, 2), batch(5, 4)
    info = lg.append(b2 + b3)
    assert info == AppendInfo(3, 8, -1, 0, 6, len(b2) + len(b3))
    assert lg.log_end_offset == 9
    with open(os.path.join(lg.directory, log_files(lg.directory)[0]), "rb") as f:
        data = f.read()
    # Bytes on disk equal the input with only the base offset patched (outside the CRC).
    assert data[8:len(b1)] == b1[8:]
    assert [(p, h.base_offset) for p, h in iter_headers(data)] == [(0, 0), (len(b1), 3), (len(b1) + len(b2), 5)]
    assert data[len(b1) + 8 : len(b1) + len(b2)] == b2[8:]
    assert data[len(b1) + len(b2) + 8 :] == b3[8:]
    for pos, _ in iter_headers(data):
        validate_batch(data, pos)
    assert [r.value for r in all_records(lg)] == [b"value-%d" % i for i in range(9)]
    assert [r.timestamp for r in lg.read_records(0, 100)[:3]] == [10, 30, 20]


def test_one_write_call_per_append(tmp_path, monkeypatch):
    lg = open_log(tmp_path / "t-0")
    calls = []
    real = os.pwrite

    def counting(fd, data, pos):
        calls.append(len(data))
        return real(fd, data, pos)

    monkeypatch.setattr(segment_module.os, "pwrite", counting)
    data = b"".join(batch(i, 2) for i in range(10))
    lg.append(data)
    assert calls == [len(data)]


def test_leader_epoch_is_patched(tmp_path):
    lg = open_log(tmp_path / "t-0")
    lg.append(batch(0), leader_epoch=7)
    assert parse_header(lg.read(0, 1000)).partition_leader_epoch == 7


def test_roll_by_size(tmp_path):
    lg = open_log(tmp_path / "t-0", segment_bytes=1000)
    sizes = []
    for i in range(40):
        b = batch(i, 1, pad=100)
        sizes.append(len(b))
        lg.append(b)
    assert lg.segment_count > 5
    infos = lg.segments
    assert [s.base_offset for s in infos] == sorted(s.base_offset for s in infos)
    for s, nxt in zip(infos, infos[1:]):
        assert s.next_offset == nxt.base_offset
        assert s.size <= 1000 and s.size + sizes[0] > 1000  # full: the next batch would not fit
        assert os.path.basename(s.path) == f"{s.base_offset:020d}.log"
    assert log_files(lg.directory) == [os.path.basename(s.path) for s in infos]
    assert lg.size_bytes == sum(sizes)
    # A single append larger than segment.bytes still goes in (into a fresh segment).
    big = batch(99, 1, pad=3000)
    info = lg.append(big)
    assert lg.segments[-1].base_offset == info.base_offset and lg.segments[-1].size == len(big)
    assert [r.value[:9] for r in all_records(lg)][-1] == b"value-99x"


def test_roll_by_time_uses_the_clock(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock=clock, segment_ms=1000)
    lg.append(batch(0))
    clock.advance(999)
    lg.append(batch(1))
    assert lg.segment_count == 1
    clock.advance(1)  # 1000 ms since the segment's first batch
    lg.append(batch(2))
    assert lg.segment_count == 2 and lg.segments[-1].base_offset == 2
    clock.advance(500)
    lg.append(batch(3))
    assert lg.segment_count == 2
    clock.advance(10_000)  # no append: no roll (an empty segment is never created by time alone)
    assert lg.segment_count == 2
    lg.append(batch(4))
    assert [s.base_offset for s in lg.segments] == [0, 2, 4]


def test_roll_when_index_full(tmp_path):
    lg = open_log(tmp_path / "t-0", segment_index_bytes=24, index_interval_bytes=0)  # 3 offset / 2 time entries
    for i in range(20):
        lg.append(batch(i, ts=1000 + i))
    assert lg.segment_count > 3
    assert [r.offset for r in all_records(lg)] == list(range(20))


def test_log_append_time(tmp_path):
    clock = FakeClock(1_234_567)
    lg = open_log(tmp_path / "t-0", clock=clock, message_timestamp_type="LogAppendTime")
    info = lg.append(batch(0, 3, ts=[5, 6, 7]))
    assert info.log_append_time == 1_234_567
    data = lg.read(0, 1 << 20)
    h = validate_batch(data)  # CRC was recomputed
    assert h.is_log_append_time and h.max_timestamp == 1_234_567
    assert [r.timestamp for r in decode_records(data)] == [1_234_567] * 3
    clock.advance(10)
    lg.append(batch(3))
    assert lg.offset_for_timestamp(1_234_568) == (3, 1_234_577)
    assert lg.offset_for_timestamp(0) == (0, 1_234_567)
    assert lg.max_timestamp_offset() == (3, 1_234_577)
    lg2 = open_log(tmp_path / "t-1", clock=clock)
    assert lg2.append(batch(0)).log_append_time == -1


def test_locate_semantics(tmp_path):
    lg = open_log(tmp_path / "t-0", segment_bytes=600)
    sizes = {}
    for i in range(0, 30, 3):
        b = batch(i, 3, pad=40)
        sizes[i] = len(b)
        lg.append(b)
    assert lg.segment_count > 2
    end = lg.log_end_offset
    assert end == 30
    # An offset inside a batch returns the whole batch.
    s = lg.locate(4, 1)
    assert len(s) == 1 and s[0].length == sizes[3]
    assert parse_header(read_slices(s)).base_offset == 3
    # min_one: first batch even if larger than max_bytes; without it, nothing.
    assert lg.locate(4, 0) == s
    assert lg.locate(4, sizes[3] - 1, min_one=False) == []
    # Spanning segments: slices from several files, batch aligned, in order.
    s = lg.locate(0, 10**6)
    assert len({x.path for x in s}) == lg.segment_count and isinstance(s[0], FileSlice)
    data = read_slices(s)
    assert [h.base_offset for _, h in iter_headers(data)] == list(range(0, 30, 3))
    assert data == lg.read(0, 10**6)
    # max_bytes stops at batch boundaries.
    s = lg.locate(0, sizes[0] * 2 + 5)
    assert sum(x.length for x in s) == sizes[0] * 2
    # max_offset is exclusive and only whole batches below it are served.
    assert [h.base_offset for _, h in iter_headers(read_slices(lg.locate(0, 10**6, max_offset=9)))] == [0, 3, 6]
    assert [h.base_offset for _, h in iter_headers(read_slices(lg.locate(0, 10**6, max_offset=10)))] == [0, 3, 6]
    assert lg.locate(9, 10**6, max_offset=9) == []
    # At the log end: nothing; beyond: out of range with a helpful message.
    assert lg.locate(end, 100) == [] and lg.read(end, 100) == b""
    for bad in (end + 1, -1, 10**12):
        with pytest.raises(OffsetOutOfRangeError) as err:
            lg.locate(bad, 100)
        assert str(bad) in str(err.value) and "0 (log start)" in str(err.value) and f"{end} (log end)" in str(err.value)
    with pytest.raises(OffsetOutOfRangeError):
        lg.read_records(end + 1)


def test_sendfile_of_slices(tmp_path):
    lg = open_log(tmp_path / "t-0", segment_bytes=2000)
    for i in range(30):
        lg.append(batch(i, 1, pad=100))
    slices = lg.locate(5, 10**6)
    a, b = socket.socketpair()
    try:
        total = sum(s.length for s in slices)
        got = bytearray()

        def reader():
            while len(got) < total:
                got.extend(b.recv(65536))

        t = threading.Thread(target=reader)
        t.start()
        for s in slices:
            with open(s.path, "rb") as f:
                sent = 0
                while sent < s.length:
                    sent += os.sendfile(a.fileno(), f.fileno(), s.position + sent, s.length - sent)
        t.join(10)
        assert bytes(got) == lg.read(5, 10**6)
    finally:
        a.close()
        b.close()


def test_read_records_drops_records_before_the_offset(tmp_path):
    lg = open_log(tmp_path / "t-0")
    lg.append(batch(0, 5))
    lg.append(batch(5, 5))
    recs = lg.read_records(3, 1 << 20)
    assert [r.offset for r in recs] == list(range(3, 10))
    assert [r.value for r in recs] == [b"value-%d" % i for i in range(3, 10)]


def test_offset_for_timestamp_and_max(tmp_path):
    lg = open_log(tmp_path / "t-0", segment_bytes=500, index_interval_bytes=50)
    # Non-monotonic CreateTime timestamps, across segments.
    ts = [100, 300, 200, 250, 600, 500, 550, 900, 50, 700]
    for i, t in enumerate(ts):
        lg.append(batch(i, 1, ts=t, pad=60))
    assert lg.segment_count > 2
    assert lg.offset_for_timestamp(0) == (0, 100)
    assert lg.offset_for_timestamp(100) == (0, 100)
    assert lg.offset_for_timestamp(101) == (1, 300)
    assert lg.offset_for_timestamp(260) == (1, 300)
    assert lg.offset_for_timestamp(301) == (4, 600)
    assert lg.offset_for_timestamp(650) == (7, 900)
    assert lg.offset_for_timestamp(901) is None
    assert lg.max_timestamp_offset() == (7, 900)
    assert lg.offset_for_timestamp(-1) == (10, -1) and lg.offset_for_timestamp(-2) == (0, -1)
    assert lg.offset_for_timestamp(-3) == (7, 900)
    with pytest.raises(InvalidTimestampError):
        lg.offset_for_timestamp(-7)
    # Records before the log start are not candidates.
    lg.delete_records(8)
    assert lg.offset_for_timestamp(0) == (8, 50)
    assert lg.max_timestamp_offset() == (9, 700)
    empty = open_log(tmp_path / "t-1")
    assert empty.offset_for_timestamp(0) is None and empty.max_timestamp_offset() is None


def test_timestamp_lookup_inside_multi_record_batches(tmp_path):
    lg = open_log(tmp_path / "t-0")
    lg.append(batch(0, 4, ts=[10, 40, 20, 40]))
    lg.append(batch(4, 3, ts=[5, 60, 60]))
    assert lg.offset_for_timestamp(15) == (1, 40)
    assert lg.offset_for_timestamp(41) == (5, 60)
    assert lg.max_timestamp_offset() == (5, 60)


@st.composite
def log_contents(draw):
    n = draw(st.integers(1, 60))
    batches = []
    for _ in range(n):
        count = draw(st.integers(1, 4))
        ts = draw(st.lists(st.integers(0, 5000), min_size=count, max_size=count))
        pad = draw(st.integers(0, 200))
        batches.append((count, ts, pad))
    return batches


@given(
    contents=log_contents(),
    segment_bytes=st.integers(200, 3000),
    interval=st.integers(0, 600),
    probes=st.lists(st.integers(0, 300), min_size=1, max_size=20),
    ts_probes=st.lists(st.integers(0, 5100), min_size=1, max_size=20),
    reopen=st.booleans(),
)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_index_lookups_match_brute_force(tmp_path_factory, contents, segment_bytes, interval, probes, ts_probes, reopen):
    d = tmp_path_factory.mktemp("prop") / "t-0"
    lg = open_log(d, segment_bytes=segment_bytes, index_interval_bytes=interval)
    records = []  # (offset, timestamp, batch base, batch bytes)
    for count, ts, pad in contents:
        b = build_batch([b"p" * pad] * count, timestamps=ts)
        info = lg.append(b)
        for i in range(count):
            records.append((info.base_offset + i, ts[i], info.base_offset))
    if reopen:
        lg.close()
        lg = open_log(d, segment_bytes=segment_bytes, index_interval_bytes=interval)
    end = lg.log_end_offset
    assert end == len(records)
    for p in probes:
        off = p % (end + 1)
        slices = lg.locate(off, 1)
        if off == end:
            assert slices == []
            continue
        h = parse_header(read_slices(slices))
        assert h.base_offset == records[off][2]  # the batch containing off
        assert h.base_offset <= off <= h.last_offset
    for t in ts_probes:
        expected = next(((o, ts) for o, ts, _ in records if ts >= t), None)
        assert lg.offset_for_timestamp(t) == expected
    best = max(ts for _, ts, _ in records)
    assert lg.max_timestamp_offset() == next((o, ts) for o, ts, _ in records if ts == best)
    lg.close()


def test_reopen_after_clean_close(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, segment_bytes=700, index_interval_bytes=100)
    for i in range(50):
        lg.append(batch(i, 2, ts=1000 + i, pad=20))
    before = (lg.log_end_offset, lg.size_bytes, lg.segments)
    data = lg.read(0, 10**6)
    lg.close()
    assert os.path.exists(os.path.join(d, ".clean-shutdown"))
    with pytest.raises(LogClosedError):
        lg.append(batch(0))
    with pytest.raises(LogClosedError):
        lg.read(0, 10)
    lg.close()  # idempotent
    lg = open_log(d, segment_bytes=700, index_interval_bytes=100)
    rep = lg.recovery_report
    assert rep.clean_shutdown and rep.segments_scanned == 0 and rep.segments_trusted == lg.segment_count
    assert not os.path.exists(os.path.join(d, ".clean-shutdown"))
    assert (lg.log_end_offset, lg.size_bytes, lg.segments) == before
    assert lg.recovery_point == lg.log_end_offset
    assert lg.read(0, 10**6) == data
    assert lg.offset_for_timestamp(1025) == (50, 1025)
    info = lg.append(batch(100))
    assert info.base_offset == 100


def test_flush_policy_and_recovery_point(tmp_path):
    lg = open_log(tmp_path / "a")
    lg.append(batch(0))
    assert lg.recovery_point == 0  # default: never by count
    lg.flush()
    assert lg.recovery_point == 1
    with open(os.path.join(lg.directory, "recovery-point-offset-checkpoint")) as f:
        assert f.read().strip() == "1"
    lg2 = open_log(tmp_path / "b", flush_messages=3)
    for i in range(5):
        lg2.append(batch(i))
    assert lg2.recovery_point == 3
    lg3 = open_log(tmp_path / "c", flush_messages=1)
    lg3.append(batch(0, 4))
    assert lg3.recovery_point == 4
    clock = FakeClock()
    lg4 = open_log(tmp_path / "d", clock=clock, flush_ms=1000)
    lg4.append(batch(0))
    assert lg4.recovery_point == 0
    clock.advance(1000)
    lg4.append(batch(1))
    assert lg4.recovery_point == 2
    assert lg4.stats()["flushes"] == 1


def test_rolled_segments_are_flushed_in_the_background(tmp_path):
    lg = open_log(tmp_path / "t-0", segment_bytes=300)
    for i in range(10):
        lg.append(batch(i, pad=100))
    lg._flusher.stop()  # waits for queued background flushes
    assert lg.recovery_point == lg.segments[-1].base_offset
    assert all(s.durable for s in lg._segments[:-1])
    lg.close()


def test_concurrent_appends_reads_and_flushes(tmp_path):
    lg = open_log(tmp_path / "t-0", segment_bytes=4000)
    errors = []
    done = threading.Event()

    def appender(tag):
        try:
            for i in range(150):
                lg.append(build_batch([b"%s-%d" % (tag, i)], timestamps=1))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    def reader():
        try:
            while not done.is_set():
                end = lg.log_end_offset
                if end:
                    data = lg.read(0, 10**6)
                    offs = [h.base_offset for _, h in iter_headers(data)]
                    assert offs == list(range(len(offs)))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    def flusher():
        while not done.is_set():
            lg.flush()

    threads = [threading.Thread(target=appender, args=(t,)) for t in (b"a", b"b")]
    extra = [threading.Thread(target=reader), threading.Thread(target=flusher)]
    for t in threads + extra:
        t.start()
    for t in threads:
        t.join()
    done.set()
    for t in extra:
        t.join()
    assert not errors
    values = [r.value for r in all_records(lg)]
    assert len(values) == 300
    assert [v for v in values if v.startswith(b"a-")] == [b"a-%d" % i for i in range(150)]
    assert [v for v in values if v.startswith(b"b-")] == [b"b-%d" % i for i in range(150)]
    lg.close()


def test_stats_segments_and_delete(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, segment_bytes=300)
    for i in range(6):
        lg.append(batch(i, pad=100))
    st_ = lg.stats()
    for key in ("log_start_offset", "log_end_offset", "size_bytes", "segment_count", "appends", "rolls", "recovery_point"):
        assert key in st_
    assert st_["appends"] == 6 and st_["log_end_offset"] == 6 and st_["segment_count"] == lg.segment_count
    info = lg.segments[0]
    assert info.base_offset == 0 and info.max_timestamp == 1000 and info.path.endswith(".log")
    lg.update_config(lg.config.with_overrides({"retention.ms": "5"}))
    assert lg.config.retention_ms == 5
    lg.delete()
    assert not os.path.exists(d)
    with pytest.raises(LogClosedError):
        lg.append(batch(0))


def test_verify_argument_checked(tmp_path):
    with pytest.raises(ValueError):
        PartitionLog(str(tmp_path / "x"), verify="sometimes")
