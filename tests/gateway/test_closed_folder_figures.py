"""The gauges' figures of inactive partitions: a closed folder is read again only when it changed,
so an idle broker's gateway does not read a thousand folders every ten seconds."""
from __future__ import annotations

import os
import time

from logan_ray.gateway import partition_gauges
from logan_ray.gateway.partition_gauges import ClosedFolderFigures
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.log import PartitionLog
from logan_ray.storage.record_builder import build_batch


def _closed_folder(path, records: int) -> str:
    log = PartitionLog(str(path), TopicConfig.from_dict({"segment.bytes": "600"}))
    for i in range(records):
        log.append(build_batch([b"v%d" % i], timestamps=1_000 + i))
    log.close()
    return str(path)


def _settle(directory: str) -> None:
    """As if the folder's last change was a minute ago (the figures of a settled folder are kept)."""
    past = time.time() - 60
    os.utime(directory, (past, past))


def _counting(monkeypatch) -> list[str]:
    reads: list[str] = []
    real = partition_gauges.closed_folder_stats

    def counted(directory: str):
        reads.append(directory)
        return real(directory)

    monkeypatch.setattr(partition_gauges, "closed_folder_stats", counted)
    return reads


def test_an_unchanged_closed_folder_is_read_once(tmp_path, monkeypatch):
    folder = _closed_folder(tmp_path / "t-0", 30)
    _settle(folder)
    reads = _counting(monkeypatch)
    figures = ClosedFolderFigures()
    first = figures.read([folder])
    second = figures.read([folder])
    assert first == second and first[0]["log_end_offset"] == 30
    assert reads == [folder]


def test_a_folder_opened_and_closed_again_is_read_again_with_its_new_figures(tmp_path, monkeypatch):
    folder = _closed_folder(tmp_path / "t-0", 10)
    _settle(folder)
    reads = _counting(monkeypatch)
    figures = ClosedFolderFigures()
    assert figures.read([folder])[0]["log_end_offset"] == 10
    log = PartitionLog(folder, TopicConfig.from_dict({"segment.bytes": "600"}))  # woken, appended, hibernated
    log.append(build_batch([b"more"], timestamps=5_000))
    log.close()
    assert figures.read([folder])[0]["log_end_offset"] == 11
    assert len(reads) == 2


def test_a_folder_changed_moments_ago_is_read_again_next_round(tmp_path, monkeypatch):
    """Two changes within the file system's timestamp granularity can leave one mtime: a folder
    that changed just now is not known by it yet."""
    folder = _closed_folder(tmp_path / "t-0", 5)
    now = time.time()
    os.utime(folder, (now, now))
    reads = _counting(monkeypatch)
    figures = ClosedFolderFigures()
    figures.read([folder])
    figures.read([folder])
    assert reads == [folder, folder]


def test_a_folder_gone_has_no_figures(tmp_path):
    assert ClosedFolderFigures().read([str(tmp_path / "missing")]) == [None]
