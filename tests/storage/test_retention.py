import os

import pytest

from logan_ray.storage.config import TopicConfig
from logan_ray.storage.errors import OffsetOutOfRangeError
from logan_ray.storage.retention import SegmentFacts, deletable_prefix

from log_helpers import FakeClock, all_records, batch, log_files, open_log

DAY = 86_400_000


def timed_log(tmp_path, clock, **cfg):
    """Segments of ~3 batches; batch i carries timestamp clock.now + i * 1000."""
    lg = open_log(tmp_path / "t-0", clock=clock, segment_bytes=700, file_delete_delay_ms=0, **cfg)
    for i in range(30):
        lg.append(batch(i, 1, ts=clock.now + i * 1000, pad=150))
    return lg


def test_retention_by_time_deletes_old_closed_segments(tmp_path):
    clock = FakeClock()
    lg = timed_log(tmp_path, clock, retention_ms=10_000)
    n = lg.segment_count
    assert n >= 8
    # Nothing is old yet.
    assert lg.apply_retention() == 0
    # now - retention = start + 15_000: segments whose newest batch is older go.
    clock.advance(25_000)
    horizon = clock.now - 10_000
    before = lg.segments
    expected = next(i for i, s in enumerate(before) if s.max_timestamp >= horizon)
    deleted = lg.apply_retention()
    survivors = lg.segments
    assert deleted == expected == n - len(survivors) and deleted > 0
    assert survivors == before[expected:]
    assert lg.log_start_offset == survivors[0].base_offset
    assert log_files(lg.directory) == [os.path.basename(s.path) for s in survivors]
    assert all_records(lg)[0].offset == lg.log_start_offset
    with pytest.raises(OffsetOutOfRangeError):
        lg.read(0, 100)
    # Far in the future everything closed goes, never the active segment.
    clock.advance(100 * DAY)
    lg.apply_retention()
    assert lg.segment_count == 1 and lg.log_start_offset == lg.segments[0].base_offset
    assert lg.read_records(lg.log_start_offset)[-1].offset == 29
    # The new log start survives a restart.
    start = lg.log_start_offset
    lg.close()
    lg = open_log(tmp_path / "t-0")
    assert lg.log_start_offset == start


def test_retention_by_size_deletes_oldest_first(tmp_path):
    clock = FakeClock()
    lg = timed_log(tmp_path, clock, retention_bytes=2000)
    sizes = [s.size for s in lg.segments]
    lg.apply_retention()
    kept = [s.size for s in lg.segments]
    assert sum(kept) >= 2000 and len(kept) < len(sizes)
    assert sizes[len(sizes) - len(kept):] == kept
    # Deleting one more would go below the limit.
    assert sum(kept) - kept[0] < 2000


def test_retention_disabled_and_compact_only(tmp_path):
    clock = FakeClock()
    lg = timed_log(tmp_path, clock, retention_ms=-1, retention_bytes=-1)
    clock.advance(1000 * DAY)
    assert lg.apply_retention() == 0
    lg2 = open_log(tmp_path / "c-0", clock=clock, segment_bytes=700, retention_ms=1, cleanup_policy="compact")
    for i in range(10):
        lg2.append(batch(i, pad=200, ts=1))
    assert lg2.apply_retention() == 0 and lg2.segment_count > 1


def test_active_segment_is_never_deleted(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock=clock, retention_ms=1, retention_bytes=0, file_delete_delay_ms=0)
    lg.append(batch(0, ts=1))
    clock.advance(DAY)
    assert lg.apply_retention() == 0 and lg.log_end_offset == 1 and lg.read_records(0)[0].offset == 0


def test_file_delete_delay(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock=clock, segment_bytes=700, retention_ms=1000, file_delete_delay_ms=60_000)
    for i in range(10):
        lg.append(batch(i, pad=150, ts=clock.now))
    old = [s.path for s in lg.segments[:-1]]
    clock.advance(5000)
    assert lg.apply_retention() == len(old)
    assert all(os.path.exists(p) for p in old)  # a sendfile of an earlier slice still works
    assert lg.stats()["pending_deletes"] == len(old)
    clock.advance(60_000)
    assert lg.apply_retention() == 0
    assert not any(os.path.exists(p) for p in old)


def test_segment_without_timestamps_uses_file_mtime(tmp_path):
    clock = FakeClock()
    lg = open_log(tmp_path / "t-0", clock=clock, segment_bytes=300, retention_ms=DAY, file_delete_delay_ms=0)
    for i in range(4):
        lg.append(batch(i, pad=150, ts=-1))
    first = lg.segments[0]
    assert first.max_timestamp == -1
    mtime = os.path.getmtime(first.path)
    clock.now = int(mtime * 1000) + DAY // 2
    assert lg.apply_retention() == 0
    clock.now = int(mtime * 1000) + 2 * DAY
    assert lg.apply_retention() >= 1


def test_delete_records(tmp_path):
    d = tmp_path / "t-0"
    lg = open_log(d, segment_bytes=700, file_delete_delay_ms=0)
    for i in range(30):
        lg.append(batch(i, pad=150))
    segs = lg.segments
    target = segs[2].base_offset + 1
    assert lg.delete_records(target) == target
    assert lg.log_start_offset == target
    assert lg.segments[0].base_offset == segs[2].base_offset  # wholly-below segments went
    assert not os.path.exists(segs[0].path) and not os.path.exists(segs[1].path)
    assert lg.read_records(target)[0].offset == target
    with pytest.raises(OffsetOutOfRangeError) as err:
        lg.read(target - 1, 100)
    assert f"{target} (log start)" in str(err.value)
    # Moving backwards is a no-op; the answer is the current low watermark.
    assert lg.delete_records(3) == target
    with pytest.raises(OffsetOutOfRangeError) as err:
        lg.delete_records(31)
    assert "31" in str(err.value) and "high watermark 30" in str(err.value)
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records(-5)
    with pytest.raises(OffsetOutOfRangeError):
        lg.delete_records(25, high_watermark=20)
    # Persisted at once (even without a clean shutdown).
    with open(os.path.join(lg.directory, "log-start-offset-checkpoint")) as f:
        assert int(f.read()) == target
    lg._flusher.stop()
    for s in lg._segments:
        s.close()
    lg._closed = True
    lg = open_log(d, segment_bytes=700)
    assert lg.log_start_offset == target and lg.log_end_offset == 30
    # -1 means "up to the high watermark": everything, the active segment stays (empty of live data).
    assert lg.delete_records(-1) == 30
    assert lg.log_start_offset == lg.log_end_offset == 30
    assert lg.locate(30, 100) == [] and lg.segment_count == 1
    info = lg.append(batch(30))
    assert info.base_offset == 30 and info.log_start_offset == 30


def test_deletable_prefix_policy():
    cfg = TopicConfig.from_dict({"retention.ms": "100", "retention.bytes": "250"})
    segs = [SegmentFacts(i * 10, i * 10 + 10, 100, ts, "x") for i, ts in enumerate([10, 500, 20, 900, 950])]
    # time: only a prefix goes (segment 2 is old but segment 1 is not)
    assert deletable_prefix(segs, cfg.with_overrides({"retention.bytes": "-1"}), 600, 0) == 1
    # size: 500 bytes, limit 250 -> drop while the rest stays >= 250 (2 go, never the active one)
    assert deletable_prefix(segs, cfg.with_overrides({"retention.ms": "-1"}), 0, 0) == 2
    # both, plus the log start offset
    assert deletable_prefix(segs, cfg, 600, 0) == 2
    assert deletable_prefix(segs, cfg.with_overrides({"retention.ms": "-1", "retention.bytes": "-1"}), 0, 35) == 3
    assert deletable_prefix(segs, cfg.with_overrides({"cleanup.policy": "compact"}), 10**9, 0) == 0
    assert deletable_prefix(segs[:1], cfg, 10**9, 10**9) == 0
