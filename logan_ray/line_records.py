"""Records as text lines, both ways: what ``logan-ray produce`` reads and ``consume`` prints.

One place for the line format, whichever backend carries the records (Ray, or
the Kafka protocol with ``--bootstrap-server``).
"""
from __future__ import annotations

from typing import BinaryIO

from .errors import SerializationError


def split_line(raw: bytes, key_separator: bytes | None, line_number: int) -> tuple[bytes | None, bytes]:
    """``(key, value)`` of one input line (``KEY<sep>VALUE`` when a separator is given, else no key)."""
    line = raw.rstrip(b"\r\n")
    if key_separator is None:
        return None, line
    if key_separator not in line:
        raise SerializationError(f"line {line_number} has no key separator {key_separator.decode()!r}")
    key, value = line.split(key_separator, 1)
    return key, value


def write_line(out: BinaryIO, key: bytes | None, value: bytes | None, key_separator: bytes | None) -> None:
    """One record as a line; a null key or value prints as empty."""
    if key_separator is not None:
        out.write((key or b"") + key_separator)
    out.write((value or b"") + b"\n")


__all__ = ["split_line", "write_line"]
