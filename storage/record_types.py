"""The record types of the codec: a decoded :class:`Record`, and :class:`Column` input for building batches."""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple, Sequence, Union

Buffer = Union[bytes, bytearray, memoryview]
Headers = Sequence[tuple[str, Union[bytes, None]]]


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record with its absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    # Hand-written so construction costs half of the generated frozen
    # __init__ (which looks up object.__setattr__ for every field).
    def __init__(
        self,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: tuple[tuple[str, bytes | None], ...] = (),
    ) -> None:
        _setattr(self, "offset", offset)
        _setattr(self, "timestamp", timestamp)
        _setattr(self, "key", key)
        _setattr(self, "value", value)
        _setattr(self, "headers", headers)


_setattr = object.__setattr__
# Slot setters: the decoder fills records through these, skipping __init__.
SET_OFFSET = Record.offset.__set__  # type: ignore[attr-defined]
SET_TIMESTAMP = Record.timestamp.__set__  # type: ignore[attr-defined]
SET_KEY = Record.key.__set__  # type: ignore[attr-defined]
SET_VALUE = Record.value.__set__  # type: ignore[attr-defined]
SET_HEADERS = Record.headers.__set__  # type: ignore[attr-defined]

class Column(NamedTuple):
    """Keys or values as column buffers: row i is ``data[starts[i]:starts[i] + lengths[i]]``.

    ``starts`` and ``lengths`` are native int64 buffers (e.g. numpy arrays);
    length -1 is a null. Lets ``build_batch`` take Arrow/numpy columns without
    a Python object per record.
    """

    starts: Buffer
    lengths: Buffer
    data: Buffer


__all__ = ["Buffer", "Headers", "Record", "Column", "SET_OFFSET", "SET_TIMESTAMP", "SET_KEY", "SET_VALUE", "SET_HEADERS"]
