"""Writing one cleaned segment: the ``.cleaned`` log file and its indexes, as appending would build them.

The cleaner streams kept batches in; :meth:`CleanedSegmentWriter.finish`
fsyncs everything so the swap (:mod:`.swap`) can commit it.
"""
from __future__ import annotations

import os

from .config import TopicConfig
from .file_modes import FILE_MODE
from .index import OffsetIndex, TimeIndex
from .segment_files import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, segment_stem
from .swap import PENDING_SUFFIX
from .sync import fsync_path

WRITE_CHUNK = 4 << 20


class CleanedSegmentWriter:
    """Writes one cleaned segment (``.cleaned`` files) and its indexes, as Segment.append would."""

    def __init__(self, directory: str, base_offset: int, generation: int, config: TopicConfig):
        self.stem = segment_stem(base_offset, generation)
        self.base_offset = base_offset
        self.generation = generation
        self.path = os.path.join(directory, self.stem + LOG_SUFFIX + PENDING_SUFFIX)
        self.index = OffsetIndex(os.path.join(directory, self.stem + INDEX_SUFFIX + PENDING_SUFFIX), base_offset,
                                 config.segment_index_bytes)
        self.timeindex = TimeIndex(os.path.join(directory, self.stem + TIMEINDEX_SUFFIX + PENDING_SUFFIX), base_offset,
                                   config.segment_index_bytes)
        self.interval = config.index_interval_bytes
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), FILE_MODE)
        self.buf = bytearray()
        self.position = 0
        self.since_index = 0
        self.max_ts = -1
        self.offset_of_max = -1

    def add(self, data, base: int, max_ts: int) -> None:
        if max_ts > self.max_ts:
            self.max_ts, self.offset_of_max = max_ts, base
        if self.since_index > self.interval:
            self.index.append(base, self.position)
            self.timeindex.maybe_append(self.max_ts, self.offset_of_max)
            self.since_index = 0
        n = len(data)
        self.since_index += n
        self.position += n
        self.buf += data
        if len(self.buf) >= WRITE_CHUNK:
            self._drain()

    def _drain(self) -> None:
        view = memoryview(self.buf)
        done = 0
        while done < len(view):
            done += os.write(self.fd, view[done:])
        view.release()
        self.buf = bytearray()

    def finish(self) -> int:
        """Write everything, fsync, and persist the indexes; returns the file size."""
        self._drain()
        os.fsync(self.fd)
        os.close(self.fd)
        self.fd = -1
        if self.max_ts >= 0:
            self.timeindex.maybe_append(self.max_ts, self.offset_of_max)
        self.index.write(rewrite=True)
        self.timeindex.write(rewrite=True)
        fsync_path(self.index.path)
        fsync_path(self.timeindex.path)
        return self.position

    def abort(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
