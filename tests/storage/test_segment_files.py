import os

from logan_ray.storage.segment_files import parse_segment_name, segment_name

from log_helpers import make_segment


def test_names_are_20_digit_base_offsets(tmp_path):
    assert segment_name(42) == "00000000000000000042"
    assert parse_segment_name("00000000000000000042.log") == 42
    assert parse_segment_name("00000000000000000042.index", ".index") == 42
    for bad in ("42.log", "0000000000000000004x.log", "00000000000000000042.log.tmp", "00000000000000000042.index"):
        assert parse_segment_name(bad) is None
    seg = make_segment(tmp_path, 1234)
    assert os.path.basename(seg.path) == "00000000000000001234.log"
    assert seg.index_path.endswith("00000000000000001234.index")
    assert seg.timeindex_path.endswith("00000000000000001234.timeindex")
    assert os.path.exists(seg.path)
