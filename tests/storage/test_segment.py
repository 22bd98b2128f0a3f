import os
import struct

import pytest

from logan_ray.storage.errors import CorruptRecordError
from logan_ray.storage.segment import Segment

from log_helpers import fill, make_segment


def test_append_indexes_every_interval_and_find(tmp_path):
    seg = make_segment(tmp_path, base=500, interval=300)
    placed = fill(seg, [(100, 3)] * 20)
    # Each batch is > 100 bytes: an index entry roughly every third batch, never for position 0.
    entries = seg.index.entries()
    assert entries and entries[0][1] > 0
    by_pos = {pos: base for pos, base, _, _ in placed}
    for off, pos in entries:
        assert by_pos[pos] == off
    gaps = [b[1] - a[1] for a, b in zip([(500, 0)] + entries, entries)]
    assert all(g > 300 for g in gaps)
    for pos, base, last, size in placed:
        for off in range(base, last + 1):
            assert seg.find(off) == (pos, base)
    assert seg.find(seg.next_offset) == (seg.size, seg.next_offset)
    assert seg.next_offset == 500 + 60
    # The time index grew with the max timestamp and points at batches.
    ts_entries = seg.timeindex.entries()
    assert [t for t, _ in ts_entries] == sorted({t for t, _ in ts_entries})
    assert all(off in by_pos.values() for _, off in ts_entries)


def test_seal_persists_indexes_and_load_trusted_adopts_them(tmp_path):
    seg = make_segment(tmp_path, interval=50)
    fill(seg, [(10, 2)] * 30, ts_of=lambda i: 5000 - (i % 7) * 10 + i)
    seg.seal()
    assert os.path.getsize(seg.index_path) == 8 * len(seg.index)
    assert os.path.getsize(seg.timeindex_path) == 12 * len(seg.timeindex)
    assert seg.timeindex.last_entry == (seg.max_timestamp, seg.offset_of_max)
    seg.close()
    again = Segment(str(tmp_path), 0, index_bytes=1 << 20, index_interval=50)
    assert again.load_trusted()
    assert again.next_offset == seg.next_offset and again.size == seg.size
    assert again.index.entries() == seg.index.entries()
    assert (again.max_timestamp, again.offset_of_max) == (seg.max_timestamp, seg.offset_of_max)


def test_load_trusted_refuses_an_index_that_points_at_the_wrong_batch(tmp_path):
    seg = make_segment(tmp_path, interval=50)
    fill(seg, [(10, 2)] * 30)
    seg.seal()
    seg.close()
    with open(seg.index_path, "r+b") as f:
        f.seek(-8, os.SEEK_END)
        rel, pos = struct.unpack(">II", f.read(8))
        f.seek(-8, os.SEEK_END)
        f.write(struct.pack(">II", rel + 1, pos))  # sorted and in range, but wrong
    again = Segment(str(tmp_path), 0, index_bytes=1 << 20, index_interval=50)
    assert not again.load_trusted()


def test_walk_reports_problems(tmp_path):
    seg = make_segment(tmp_path)
    placed = fill(seg, [(50, 1)] * 5)
    # Flip a payload byte of batch 2: framing intact, CRC wrong.
    pos2 = placed[2][0]
    with open(seg.path, "r+b") as f:
        f.seek(pos2 + 70)
        byte = f.read(1)
        f.seek(pos2 + 70)
        f.write(bytes([byte[0] ^ 0x01]))
    kinds = [(ref.position, kind) for ref, kind, _ in seg.walk(0, check_crc=True, expected=0)]
    assert kinds == [(p[0], "crc" if p[0] == pos2 else None) for p in placed]
    # Header-only walks do not look at the CRC.
    assert all(k is None for _, k, _ in seg.walk(0, expected=0))
    # Bytes appended by this process count as verified (they were checked on append) ...
    assert seg.ensure_verified(0, seg.size) == (seg.size, None)
    # ... but a reopened segment checks what it serves, once.
    seg.seal()
    seg.close()
    seg = Segment(str(tmp_path), 0, index_bytes=1 << 20, index_interval=100)
    assert seg.load_trusted()
    assert seg.ensure_verified(0, pos2) == (pos2, None)
    good_end, bad = seg.ensure_verified(0, seg.size)
    assert good_end == pos2 and bad.position == pos2 and "CRC" in bad.reason
    assert seg.corrupt[pos2] == bad
    # Asking again returns the known bad batch without rescanning the verified prefix.
    assert seg.ensure_verified(0, seg.size)[0] == pos2
    after = placed[3][0]
    assert seg.ensure_verified(after, seg.size) == (seg.size, None)


def test_find_raises_on_broken_framing(tmp_path):
    seg = make_segment(tmp_path, interval=10**6)
    placed = fill(seg, [(50, 1)] * 4)
    with open(seg.path, "r+b") as f:
        f.seek(placed[1][0] + 16)
        f.write(b"\x07")  # magic 7
    assert seg.find(0) == (0, 0)
    with pytest.raises(CorruptRecordError) as err:
        seg.find(3)
    assert err.value.path == seg.path and err.value.position == placed[1][0]
