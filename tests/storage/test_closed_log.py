"""ClosedLog: a cleanly closed partition folder answers fetches and ListOffsets without being opened,
exactly as the live log would, changes nothing on disk, and knows when an actor opened it since."""
from __future__ import annotations

import os

import pytest
from log_helpers import FakeClock, batch, disk_state, open_log

from logan_ray.storage.closed_log import ClosedLog
from logan_ray.storage.errors import OffsetOutOfRangeError


def _filled(path, clock=None, records: int = 40, **overrides):
    log = open_log(path, clock=clock, segment_bytes=600, **overrides)
    for i in range(records):
        log.append(batch(i, ts=1_000 + i * 10), leader_epoch=3 if i < 20 else 5)
    return log


def test_a_closed_folder_answers_like_the_live_log_and_is_left_untouched(tmp_path):
    log = _filled(tmp_path)
    assert len(log.segments) > 3
    expected = {o: log.locate(o, 500) for o in (0, 7, 19, 39, 40)}
    times = {t: log.offset_for_timestamp(t) for t in (-1, -2, -3, 0, 1_095, 1_200, 10_000)}
    epochs = {o: log.epoch_for_offset(o) for o in (0, 19, 20, 39)}
    ends = {e: log.end_offset_for_epoch(e) for e in (3, 4, 5, 6)}
    bounds = (log.log_start_offset, log.log_end_offset)
    log.close()
    before = disk_state(tmp_path)

    view = ClosedLog.open(str(tmp_path))
    assert view is not None and view.current()
    assert (view.log_start_offset, view.log_end_offset) == bounds
    assert {o: view.locate(o, 500) for o in expected} == expected
    assert {t: view.offset_for_timestamp(t) for t in times} == times
    assert {o: view.epoch_for_offset(o) for o in epochs} == epochs
    assert {e: view.end_offset_for_epoch(e) for e in ends} == ends
    with pytest.raises(OffsetOutOfRangeError):
        view.locate(41, 500)
    view.close()
    assert disk_state(tmp_path) == before


def test_opening_the_folder_makes_the_view_stale_and_a_new_close_gives_a_new_view(tmp_path):
    _filled(tmp_path, records=5).close()
    view = ClosedLog.open(str(tmp_path))
    assert view is not None and view.log_end_offset == 5
    log = open_log(tmp_path, segment_bytes=600)  # the actor woke: the marker is gone
    assert not view.current()
    assert ClosedLog.open(str(tmp_path)) is None  # open now: only its owner reads it
    log.append(batch(5))
    log.close()
    assert not view.current()  # a new marker is not the one the old view saw
    fresh = ClosedLog.open(str(tmp_path))
    assert fresh is not None and fresh.log_end_offset == 6


def test_a_recent_check_is_trusted_for_its_age_then_the_folder_is_looked_at_again(tmp_path, monkeypatch):
    import time

    _filled(tmp_path, records=5).close()
    view = ClosedLog.open(str(tmp_path))
    assert view is not None and view.current()  # checked now
    log = open_log(tmp_path, segment_bytes=600)  # the actor woke: the marker is gone
    assert view.current(60.0)  # a check younger than a minute is trusted: no system call
    assert not view.current()  # asked to look: stale
    assert not view.current(60.0)  # and stale for good, whatever age is trusted
    log.close()
    _filled(tmp_path / "b", records=5).close()
    other = ClosedLog.open(str(tmp_path / "b"))
    assert other is not None and other.current()
    log = open_log(tmp_path / "b", segment_bytes=600)
    now = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: now + 120.0)
    assert not other.current(60.0)  # the last check that found it unchanged is too old: looked at again
    log.close()


def test_a_folder_not_closed_cleanly_has_no_view(tmp_path):
    log = _filled(tmp_path, records=5)
    log.flush()  # data on disk, but no clean-shutdown marker: a crash would look like this
    assert ClosedLog.open(str(tmp_path)) is None
    log.close()
    assert ClosedLog.open(str(tmp_path)) is not None


def test_a_never_opened_folder_is_an_empty_log_until_an_actor_opens_it(tmp_path):
    folder = tmp_path / "t-0"
    folder.mkdir()
    view = ClosedLog.open(str(folder))
    assert view is not None
    assert (view.log_start_offset, view.log_end_offset) == (0, 0)
    assert view.locate(0, 100) == [] and view.offset_for_timestamp(-1) == (0, -1)
    assert view.offset_for_timestamp(5) is None
    log = open_log(folder)
    assert not view.current()
    log.close()


def test_retention_under_a_view_deletes_files_its_slices_name_and_the_next_view_serves_again(tmp_path):
    clock = FakeClock()
    _filled(tmp_path, clock, retention_ms=1).close()
    view = ClosedLog.open(str(tmp_path))
    old = view.locate(0, 100)
    log = open_log(tmp_path, clock, segment_bytes=600, retention_ms=1)  # woken to apply retention
    clock.advance(10_000_000)
    assert log.apply_retention() > 0
    log.close()
    assert not view.current()
    with pytest.raises(FileNotFoundError):
        open(old[0].path, "rb")
    fresh = ClosedLog.open(str(tmp_path))
    start = fresh.log_start_offset
    assert start > 0 and fresh.locate(start, 100)[0].path != old[0].path
    with pytest.raises(OffsetOutOfRangeError):
        fresh.locate(0, 100)
    assert os.path.exists(fresh.locate(start, 100)[0].path)
