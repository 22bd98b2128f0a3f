"""Durability of the partition log: group commit, folder fsyncs, disk errors, a full disk.

EIO is injected through the storage layer's fsync hook (no block device here
can fail on demand); a full disk is real: a small tmpfs filled to the brim.
"""
from __future__ import annotations

import errno
import logging
import os
import subprocess
import threading

import pytest
from log_helpers import FakeClock, all_records, batch, open_log

from logan_ray.storage import sync
from logan_ray.storage.errors import KafkaStorageError
from logan_ray.storage.recovery import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE, read_checkpoint


@pytest.fixture
def syncs():
    """Records every fsync the storage layer makes as (kind, path); ``fail`` makes the next ones fail."""

    class Recorder:
        def __init__(self) -> None:
            self.calls: list[tuple[str, str]] = []
            self.fail: dict[str, int] = {}  # kind -> errno to raise
            self.lock = threading.Lock()

        def __call__(self, kind: str, path: str) -> None:
            with self.lock:
                self.calls.append((kind, path))
            code = self.fail.get(kind)
            if code is not None:
                raise OSError(code, os.strerror(code), path)

        def count(self, kind: str) -> int:
            return sum(1 for k, _ in self.calls if k == kind)

    rec = Recorder()
    sync.set_fault(rec)
    try:
        yield rec
    finally:
        sync.set_fault(None)


# ------------------------------------------------------------------ group commit
def test_flush_to_makes_appends_durable_and_returns_at_once_when_covered(tmp_path, syncs):
    lg = open_log(tmp_path / "p")
    info = lg.append(batch(0, 3))
    assert lg.recovery_point == 0
    assert lg.flush_to(info.last_offset + 1) == 3
    assert syncs.count("data") == 1
    assert lg.flush_to(3) == 3  # already covered: no second fdatasync
    assert syncs.count("data") == 1
    assert read_checkpoint(os.path.join(lg.directory, RECOVERY_POINT_FILE)) == 3
    lg.close()


def test_concurrent_flush_to_calls_share_fdatasyncs(tmp_path, syncs):
    """Callers queued behind a running sync are covered by the next one: far fewer syncs than appends."""
    lg = open_log(tmp_path / "p")
    gate = threading.Event()
    first = threading.Event()
    slow = threading.Event()

    def hook(kind: str, path: str) -> None:
        syncs(kind, path)
        if kind == "data" and not first.is_set():
            first.set()
            gate.wait(5)  # hold the first sync until every writer has appended
            slow.set()

    sync.set_fault(hook)
    done: list[int] = []
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        try:
            info = lg.append(batch(i))
            rp = lg.flush_to(info.last_offset + 1)
            assert rp > info.last_offset
            done.append(info.last_offset)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    assert first.wait(5)
    while lg.log_end_offset < 32:
        threading.Event().wait(0.005)
    gate.set()
    for t in threads:
        t.join(10)
    assert not errors
    assert sorted(done) == list(range(32))
    assert lg.recovery_point == 32
    assert syncs.count("data") <= 3, syncs.calls  # the held one, then one covering the other 31
    lg.close()


def test_roll_fsyncs_the_folder_before_the_recovery_point_passes_the_new_segment(tmp_path, syncs):
    lg = open_log(tmp_path / "p", segment_bytes=200)
    lg.append(batch(0, pad=150))
    lg.flush_to(1)
    lg.flush_to(1)
    before = syncs.calls.count(("dir", lg.directory))
    lg.append(batch(1, pad=150))  # rolls: a new segment file exists now
    assert lg.segment_count == 2
    lg._flusher.stop()
    lg.flush_to(lg.log_end_offset)
    assert syncs.calls.count(("dir", lg.directory)) == before + 1, syncs.calls
    assert lg.recovery_point == 2
    lg.close()


def test_background_flush_of_a_roll_syncs_the_rolled_segment_not_the_new_active_one(tmp_path, syncs):
    """A roll asks for the sealed segment to become durable, nothing more: the records after
    it stay page-cache fast (acks=1, as Kafka). Syncing the active segment as well cost a
    disk write per roll and, when the flusher ran late under load, made an acks=1 tail
    durable by accident (the broker's power-loss test then found nothing lost)."""
    lg = open_log(tmp_path / "p", segment_bytes=200)
    lg.append(batch(0, pad=150))
    lg.append(batch(1, pad=150))  # rolls: the flusher is asked for segment 0
    assert lg.segment_count == 2
    lg._flusher.stop()  # runs the pending request, then ends
    synced = [os.path.basename(path) for kind, path in syncs.calls if kind == "data"]
    assert synced == ["00000000000000000000.log"], syncs.calls
    assert lg.recovery_point == 1
    lg.close()


def test_deleting_segments_fsyncs_the_folder(tmp_path, syncs):
    clock = FakeClock()
    lg = open_log(tmp_path / "p", clock=clock, segment_bytes=200, retention_ms=1000, file_delete_delay_ms=0)
    for i in range(4):
        lg.append(batch(i, pad=150))
    lg.flush()
    before = syncs.count("dir")
    clock.advance(10_000_000)
    assert lg.apply_retention() >= 1
    assert syncs.count("dir") > before
    lg.close()


def test_creating_a_partition_folder_fsyncs_its_parent(tmp_path, syncs):
    lg = open_log(tmp_path / "topic-0")
    assert ("dir", str(tmp_path)) in syncs.calls
    lg.close()


# -------------------------------------------------------------------- EIO
def test_fsync_error_takes_the_log_offline_and_the_recovery_point_stays(tmp_path, syncs):
    lg = open_log(tmp_path / "p")
    lg.append(batch(0))
    lg.flush()
    lg.append(batch(1))
    syncs.fail["data"] = errno.EIO
    with pytest.raises(KafkaStorageError) as e:
        lg.flush_to(2)
    assert e.value.code == 56 and e.value.retriable
    assert lg.offline and lg.recovery_point == 1
    del syncs.fail["data"]  # the disk "works" again: the lost pages must not be vouched for
    for call in (lambda: lg.append(batch(2)), lambda: lg.read(0, 1000), lambda: lg.locate(0, 1000),
                 lambda: lg.flush_to(2), lg.flush, lambda: lg.offset_for_timestamp(0)):
        with pytest.raises(KafkaStorageError):
            call()
    assert lg.recovery_point == 1
    assert read_checkpoint(os.path.join(lg.directory, RECOVERY_POINT_FILE)) == 1
    lg.close()
    assert not os.path.exists(os.path.join(lg.directory, CLEAN_SHUTDOWN_FILE))  # next open recovers
    again = open_log(tmp_path / "p")
    assert not again.offline
    assert again.recovery_report.segments_scanned == 1  # rescanned from the recovery point
    assert [r.value for r in all_records(again)] == [b"value-0", b"value-1"]
    again.close()


def test_failed_background_flush_of_a_rolled_segment_never_moves_the_recovery_point(tmp_path, syncs):
    lg = open_log(tmp_path / "p", segment_bytes=200)
    syncs.fail["data"] = errno.EIO
    lg.append(batch(0, pad=150))
    lg.append(batch(1, pad=150))  # roll: the background flusher fails on segment 0
    lg._flusher.stop()
    del syncs.fail["data"]
    assert lg.offline
    with pytest.raises(KafkaStorageError):
        lg.flush_to(2)  # the old code marked the roll done and this fsync moved the point past lost pages
    assert lg.recovery_point == 0
    lg.close()


def test_flush_error_after_an_append_reports_the_appended_data(tmp_path, syncs):
    lg = open_log(tmp_path / "p", flush_messages=1)
    syncs.fail["data"] = errno.EIO
    with pytest.raises(KafkaStorageError) as e:
        lg.append(batch(0, 2))
    assert e.value.appended is not None
    assert (e.value.appended.base_offset, e.value.appended.last_offset) == (0, 1)
    assert lg.log_end_offset == 2 and lg.recovery_point == 0
    lg.close()


def test_folder_fsync_error_also_takes_the_log_offline(tmp_path, syncs):
    lg = open_log(tmp_path / "p", segment_bytes=200)
    syncs.fail["dir"] = errno.EIO
    lg.append(batch(0, pad=150))
    lg.append(batch(1, pad=150))  # roll: a new file whose name must reach the disk
    with pytest.raises(KafkaStorageError):
        lg.flush_to(2)
    assert lg.offline and lg.recovery_point < 2
    del syncs.fail["dir"]
    lg.close()


# ------------------------------------------------------------------ ENOSPC
@pytest.fixture
def small_fs(tmp_path):
    """A real 2 MiB tmpfs, unmounted afterwards whatever happens."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(path, keep_free: int) -> None:
    """Fill the file system holding ``path`` to the brim, then free ``keep_free`` bytes."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        chunk = b"\1" * 4096
        while True:
            try:
                if os.write(fd, chunk) <= 0:
                    break
            except OSError as e:
                assert e.errno == errno.ENOSPC
                break
    finally:
        os.close(fd)
    size = os.path.getsize(path)
    os.truncate(path, max(0, size - keep_free))


def test_full_disk_fails_appends_with_storage_error_and_resumes_at_the_right_offset(small_fs, caplog):
    lg = open_log(small_fs / "p", segment_bytes=1 << 20)
    acked = []
    for i in range(3):
        info = lg.append(batch(i, pad=1000))
        acked.append(info.base_offset)
    lg.flush()
    _fill(small_fs / "filler", keep_free=12 * 1024)
    caplog.set_level(logging.ERROR, logger="logan_ray.storage.log")
    failures = 0
    i = 3
    while failures < 5:
        try:
            info = lg.append(batch(i, pad=1000))
        except KafkaStorageError as e:
            assert e.code == 56 and e.appended is None
            failures += 1
            continue
        assert failures == 0, "an append succeeded between failures"
        assert info.base_offset == i
        acked.append(info.base_offset)
        i += 1
    assert len(acked) > 3  # some of the remaining space was used
    assert not lg.offline  # a full disk is not a broken disk
    full_msgs = [r for r in caplog.records if "disk full" in r.getMessage()]
    assert len(full_msgs) == 1 and str(small_fs) in full_msgs[0].getMessage()
    assert "bytes free" in full_msgs[0].getMessage()
    # No torn batch: the file holds exactly the acknowledged batches.
    assert os.path.getsize(lg.segments[-1].path) == lg.segments[-1].size
    assert [r.offset for r in all_records(lg)] == acked
    os.remove(small_fs / "filler")  # space returns
    info = lg.append(batch(i, pad=1000))
    assert info.base_offset == i == lg.log_end_offset - 1
    lg.flush()
    lg.close()
    again = open_log(small_fs / "p")
    assert again.recovery_report.truncated_bytes == 0
    assert [r.value for r in all_records(again)] == [b"value-%d" % n + b"x" * 1000 for n in range(i + 1)]
    again.close()


def test_full_disk_during_a_roll_loses_nothing(small_fs):
    lg = open_log(small_fs / "p", segment_bytes=4096, segment_index_bytes=4096, index_interval_bytes=100)
    values = []
    _fill(small_fs / "filler", keep_free=48 * 1024)
    i = 0
    errors = 0
    while errors < 10:
        try:
            lg.append(batch(i, pad=700))
        except KafkaStorageError:
            errors += 1
            continue
        values.append(i)
        i += 1
    assert lg.segment_count > 1
    os.remove(small_fs / "filler")
    lg.append(batch(i, pad=700))
    values.append(i)
    lg.close()
    again = open_log(small_fs / "p", segment_bytes=4096)
    assert again.recovery_report.truncated_bytes == 0
    assert [r.offset for r in all_records(again)] == list(range(len(values)))
    assert [r.value for r in all_records(again)] == [b"value-%d" % n + b"x" * 700 for n in values]
    again.close()
