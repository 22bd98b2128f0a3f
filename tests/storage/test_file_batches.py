"""FileBatches: the one walk over a segment file's batches, and what it reports when framing fails."""
import os

from logan_ray.storage.batch_header import iter_headers, named
from logan_ray.storage.file_batches import FileBatches, next_offset_after
from logan_ray.storage.record_builder import build_batch


def _file(tmp_path, data: bytes) -> int:
    path = tmp_path / "f.log"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


def _batches(n: int) -> bytes:
    out, offset = [], 0
    for i in range(n):
        out.append(build_batch([b"v%d" % i] * (1 + i % 3), base_offset=offset, timestamps=1_700_000_000_000))
        offset += 1 + i % 3
    return b"".join(out)


def test_walk_yields_the_same_header_fields_as_the_buffer_walk_across_small_windows(tmp_path):
    data = _batches(50)
    fd = _file(tmp_path, data)
    try:
        reader = FileBatches(fd, len(data), window=100)  # smaller than most batches: refills every time
        assert list(reader.walk(0)) == list(iter_headers(data))
        assert reader.problem is None and reader.stop_position == len(data)
    finally:
        os.close(fd)


def test_walk_stops_at_a_torn_tail_and_says_where_and_why(tmp_path):
    data = _batches(3)
    whole = len(data)
    fd = _file(tmp_path, data + data[:30])
    try:
        reader = FileBatches(fd, whole + 30)
        assert len(list(reader.walk(0))) == 3
        assert reader.stop_position == whole and "torn" in str(reader.problem)
    finally:
        os.close(fd)


def test_crc_check_reads_whole_batches_and_catches_a_flipped_byte(tmp_path):
    data = bytearray(_batches(4))
    second = next(p for i, (p, _) in enumerate(iter_headers(data)) if i == 1)
    data[second + 70] ^= 0xFF
    fd = _file(tmp_path, bytes(data))
    try:
        reader = FileBatches(fd, len(data), window=64)
        sound = [reader.sound(p, named(fields)) for p, fields in reader.walk(0)]
        assert sound == [True, False, True, True]
        h = next(h for p, h in iter_headers(data) if p == second)
        assert "CRC" in str(reader.damage(second, h))
        # The checking walk (recovery's) stops right there and says why.
        assert [p for p, _ in reader.walk(0, check_crc=True)] == [0]
        assert reader.stop_position == second and reader.bad == h and "CRC" in str(reader.problem)
    finally:
        os.close(fd)


def test_next_offset_after_ranges_reads_headers_and_gives_up_past_the_limit(tmp_path):
    data = _batches(10)
    fd = _file(tmp_path, data)
    try:
        positions = [p for p, _ in iter_headers(data)]
        last = list(iter_headers(data))[-1][1]
        ranges = [(fd, 0, positions[4]), (fd, positions[4], len(data) - positions[4])]
        assert next_offset_after(ranges, 64) == last.next_offset
        assert next_offset_after(ranges, 9) is None
        assert next_offset_after([(fd, 0, positions[4] + 5)], 64) is None  # not batch aligned
    finally:
        os.close(fd)
