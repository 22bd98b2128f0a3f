from logan_ray.storage.segment_recovery import scan

from log_helpers import fill, make_segment


def test_scan_rebuilds_the_same_indexes_as_appending(tmp_path):
    seg = make_segment(tmp_path, base=7, interval=200)
    fill(seg, [(i % 5 * 40, 1 + i % 3) for i in range(40)], ts_of=lambda i: 10_000 + (i * 37) % 101)
    seg.seal()
    out = scan(seg, check_crc=True)
    assert out.truncate_at is None and not out.corrupt
    assert out.index.entries() == seg.index.entries()
    assert out.timeindex.last_entry == seg.timeindex.last_entry
    assert out.next_offset == seg.next_offset and out.valid_end == seg.size
    assert out.verified == [(0, seg.size)]


def test_a_scrub_scan_finds_the_same_without_building_indexes(tmp_path):
    seg = make_segment(tmp_path, base=7, interval=200)
    fill(seg, [(i % 5 * 40, 1 + i % 3) for i in range(40)], ts_of=lambda i: 10_000 + (i * 37) % 101)
    seg.seal()
    full, scrub = scan(seg, check_crc=True), scan(seg, check_crc=True, indexes=False)
    assert not scrub.index.entries() and scrub.timeindex.last_entry is None
    assert scrub.verified == full.verified == [(0, seg.size)]
    assert (scrub.next_offset, scrub.valid_end, scrub.batches) == (full.next_offset, full.valid_end, full.batches)
    assert scrub.max_timestamp == full.max_timestamp and full.index.entries()
