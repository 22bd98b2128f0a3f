import os
import struct

from logan_ray.storage.index import OffsetIndex, TimeIndex


def test_offset_index_lookup_and_file_format(tmp_path):
    p = str(tmp_path / "00000000000000000100.index")
    idx = OffsetIndex(p, 100, 1024)
    assert idx.lookup(150) == (100, 0)  # empty: segment start
    for off, pos in [(110, 4000), (120, 8100), (135, 12300)]:
        idx.append(off, pos)
    idx.append(135, 99999)  # not increasing: ignored
    idx.append(140, 12300)  # position not increasing: ignored
    assert len(idx) == 3 and idx.capacity == 128
    assert idx.lookup(100) == (100, 0)
    assert idx.lookup(109) == (100, 0)
    assert idx.lookup(110) == (110, 4000)
    assert idx.lookup(134) == (120, 8100)
    assert idx.lookup(10**9) == (135, 12300)
    assert idx.lookup_position(8100) == (120, 8100)
    assert idx.first_after_position(8100) == (135, 12300)
    idx.write()
    with open(p, "rb") as f:
        data = f.read()
    assert data == struct.pack(">IIIIII", 10, 4000, 20, 8100, 35, 12300)
    idx.append(150, 20000)
    idx.write()  # appends only the new entry
    assert os.path.getsize(p) == 32
    loaded = OffsetIndex.load(p, 100, 1024, log_size=30000)
    assert loaded is not None and loaded.entries() == idx.entries()


def test_offset_index_truncate_rewrites(tmp_path):
    p = str(tmp_path / "x.index")
    idx = OffsetIndex(p, 0, 1 << 20)
    for i in range(1, 6):
        idx.append(i * 10, i * 1000)
    idx.write()
    idx.truncate_to_position(3000)
    assert idx.entries() == [(10, 1000), (20, 2000)]
    idx.append(25, 2500)
    idx.write()
    assert OffsetIndex.load(p, 0, 1 << 20, 10**6).entries() == [(10, 1000), (20, 2000), (25, 2500)]


def test_offset_index_load_rejects_inconsistent_files(tmp_path):
    p = str(tmp_path / "x.index")
    assert OffsetIndex.load(p, 0, 4096, 100) is None  # missing
    cases = {
        "partial entry": struct.pack(">II", 1, 10) + b"\x00\x00\x00",
        "offsets not increasing": struct.pack(">IIII", 5, 10, 5, 20),
        "positions not increasing": struct.pack(">IIII", 5, 20, 6, 20),
        "position beyond the log": struct.pack(">II", 5, 5000),
        "zero fill": b"\x00" * 32,
    }
    for why, data in cases.items():
        with open(p, "wb") as f:
            f.write(data)
        assert OffsetIndex.load(p, 0, 4096, log_size=1000) is None, why
    with open(p, "wb") as f:
        f.write(b"")
    assert OffsetIndex.load(p, 0, 4096, 1000).entries() == []


def test_capacity_and_full():
    idx = OffsetIndex("unused", 0, 20)  # 20 bytes -> 2 entries
    assert idx.capacity == 2 and not idx.is_full
    idx.append(1, 1)
    idx.append(2, 2)
    assert idx.is_full
    assert OffsetIndex("unused", 0, 4).capacity == 1
    t = TimeIndex("unused", 0, 24)
    assert t.capacity == 2


def test_time_index_only_grows_and_lookup(tmp_path):
    p = str(tmp_path / "00000000000000000000.timeindex")
    t = TimeIndex(p, 0, 1 << 20)
    t.maybe_append(1000, 0)
    t.maybe_append(900, 5)  # not larger: skipped
    t.maybe_append(1000, 6)  # equal: skipped
    t.maybe_append(2000, 10)
    t.maybe_append(3000, 20)
    assert t.entries() == [(1000, 0), (2000, 10), (3000, 20)]
    assert t.last_entry == (3000, 20)
    # start of a search for ts >= x: last entry with timestamp < x
    assert t.lookup_before(500) == 0
    assert t.lookup_before(1000) == 0
    assert t.lookup_before(1001) == 0
    assert t.lookup_before(2000) == 0
    assert t.lookup_before(2001) == 10
    assert t.lookup_before(10**12) == 20
    t.write()
    with open(p, "rb") as f:
        assert f.read() == struct.pack(">qIqIqI", 1000, 0, 2000, 10, 3000, 20)
    loaded = TimeIndex.load(p, 0, 1 << 20)
    assert loaded.entries() == t.entries()
    t.truncate_to_offset(10)
    t.write()
    assert TimeIndex.load(p, 0, 1 << 20).entries() == [(1000, 0)]


def test_time_index_load_rejects_bad_files(tmp_path):
    p = str(tmp_path / "t.timeindex")
    assert TimeIndex.load(p, 0, 100) is None
    for data in (b"\x01" * 13, struct.pack(">qIqI", 2000, 1, 1000, 2), struct.pack(">qIqI", 1000, 5, 2000, 1)):
        with open(p, "wb") as f:
            f.write(data)
        assert TimeIndex.load(p, 0, 100) is None
