"""Transaction markers: the control records that end a transaction in a partition.

Kafka ends a transaction by writing a *control batch* into every partition it
touched: attributes with the control and transactional bits, the producer's id
and epoch, no sequence (-1), and exactly one record whose key says what kind of
control record it is and whose value is the ``EndTransactionMarker``. Readers
(consumers, the producer state, the transaction index) only need these bytes,
so they are declared here once:

* key (``ControlRecordType``): ``version int16 (0) | type int16``, ABORT = 0,
  COMMIT = 1 (other types, e.g. KRaft's LEADER_CHANGE = 2, are not markers);
* value (``EndTransactionMarker``): ``version int16 (0) | coordinator_epoch int32``.

Both are big endian. A newer version is read as version 0 (its fields come
first), as Kafka does; shorter bytes or a negative version are invalid records.
"""
from __future__ import annotations

import struct
from enum import IntEnum
from typing import NamedTuple

from .batch_header import BatchHeader, Buffer
from .errors import CorruptRecordError, InvalidRecordError
from .record_builder import build_batch
from .records import decode_batch

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
CONTROL_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class ControlType(IntEnum):
    """Kafka's ControlRecordType ids that end a transaction."""

    ABORT = 0
    COMMIT = 1


class EndTxnMarker(NamedTuple):
    """What a transaction marker says: commit or abort, and by which coordinator epoch."""

    committed: bool
    coordinator_epoch: int

    @property
    def control_type(self) -> ControlType:
        return ControlType.COMMIT if self.committed else ControlType.ABORT


def encode_control_key(control_type: int, version: int = CONTROL_KEY_VERSION) -> bytes:
    return _KEY.pack(version, control_type)


def _versioned(layout: struct.Struct, data: Buffer | None, what: str, fields: str) -> tuple[int, int]:
    """``(version, field)`` of a two-field control layout; InvalidRecordError if ``data`` cannot be one."""
    if data is None or len(data) < layout.size:
        raise InvalidRecordError(f"{what} of {0 if data is None else len(data)} bytes: it needs {layout.size} "
                                 f"({fields})")
    version, field = layout.unpack_from(data)
    if version < 0:
        raise InvalidRecordError(f"invalid {what} version {version}")
    return version, field


def decode_control_key(key: Buffer | None) -> tuple[int, int]:
    """``(version, type)`` of a control record key; InvalidRecordError if it cannot be one."""
    return _versioned(_KEY, key, "control record key", "version int16, type int16")


def encode_marker_value(coordinator_epoch: int, version: int = END_TXN_MARKER_VERSION) -> bytes:
    return _VALUE.pack(version, coordinator_epoch)


def decode_marker_value(value: Buffer | None) -> tuple[int, int]:
    """``(version, coordinator_epoch)`` of an EndTransactionMarker value."""
    return _versioned(_VALUE, value, "end transaction marker value", "version int16, coordinator_epoch int32")


def build_marker_batch(
    producer_id: int,
    producer_epoch: int,
    marker: EndTxnMarker,
    *,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """The control batch a transaction coordinator appends to end a transaction in one partition."""
    if producer_id < 0 or producer_epoch < 0:
        raise ValueError(f"a transaction marker needs a producer id and epoch, got {producer_id}/{producer_epoch}")
    return build_batch(
        [encode_marker_value(marker.coordinator_epoch)], [encode_control_key(marker.control_type)],
        timestamps=timestamp, base_offset=base_offset, producer_id=producer_id, producer_epoch=producer_epoch,
        is_transactional=True, is_control=True, partition_leader_epoch=partition_leader_epoch,
    )


def read_marker(buf: Buffer, pos: int, h: BatchHeader) -> EndTxnMarker | None:
    """The marker of the control batch at ``pos`` (header ``h``), None if it is another kind of control batch.

    The batch's CRC is not checked again: callers read batches already validated.
    """
    if not h.is_control:
        return None
    try:
        _, records = decode_batch(buf, pos, verify_crc=False)
    except CorruptRecordError as e:
        raise InvalidRecordError(f"control batch at offset {h.base_offset}: {e}") from None
    if len(records) != 1:
        raise InvalidRecordError(f"control batch at offset {h.base_offset} holds {len(records)} records; "
                                 "a control batch holds exactly one")
    _, control_type = decode_control_key(records[0].key)
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    _, coordinator_epoch = decode_marker_value(records[0].value)
    return EndTxnMarker(control_type == ControlType.COMMIT, coordinator_epoch)


__all__ = [
    "ControlType",
    "EndTxnMarker",
    "build_marker_batch",
    "decode_control_key",
    "decode_marker_value",
    "encode_control_key",
    "encode_marker_value",
    "read_marker",
]
