"""The line format of `logan-ray produce` and `consume`, shared by the Ray and the Kafka-protocol backends."""
import io

import pytest

from logan_ray.errors import SerializationError
from logan_ray.line_records import split_line, write_line


def test_a_line_splits_at_the_first_separator_and_loses_its_line_end():
    assert split_line(b"k1\tv\t1\r\n", b"\t", 1) == (b"k1", b"v\t1")
    assert split_line(b"just a value\n", None, 1) == (None, b"just a value")


def test_a_line_without_the_separator_is_refused_with_its_number():
    with pytest.raises(SerializationError, match=r"line 7 has no key separator '\|'"):
        split_line(b"no separator here\n", b"|", 7)


def test_records_print_as_lines_with_empty_text_for_nulls():
    out = io.BytesIO()
    write_line(out, b"k", b"v", b"=")
    write_line(out, None, None, b"=")
    write_line(out, b"ignored", b"v2", None)
    assert out.getvalue() == b"k=v\n=\nv2\n"
