"""Transaction markers: Kafka's control record key and EndTransactionMarker value, and the marker batch."""
from __future__ import annotations

import struct

import pytest

from logan_ray.storage.batch_header import parse_header
from logan_ray.storage.control_records import (
    ControlType,
    EndTxnMarker,
    build_marker_batch,
    decode_control_key,
    decode_marker_value,
    encode_control_key,
    encode_marker_value,
    read_marker,
)
from logan_ray.storage.errors import InvalidRecordError
from logan_ray.storage.record_builder import build_batch
from logan_ray.storage.records import decode_batch


def test_control_key_is_version_then_type_as_kafka_lays_it_out():
    # ControlRecordType: version int16 = 0, type int16 (ABORT = 0, COMMIT = 1), big endian
    assert encode_control_key(ControlType.ABORT) == b"\x00\x00\x00\x00"
    assert encode_control_key(ControlType.COMMIT) == b"\x00\x00\x00\x01"
    assert decode_control_key(b"\x00\x00\x00\x01") == (0, 1)
    assert decode_control_key(b"\x00\x00\x00\x00") == (0, 0)


def test_marker_value_is_version_then_coordinator_epoch():
    hand = struct.pack(">h", 0) + struct.pack(">i", 0x01020304)
    assert encode_marker_value(0x01020304) == hand == b"\x00\x00\x01\x02\x03\x04"
    assert decode_marker_value(hand) == (0, 0x01020304)


def test_newer_versions_are_read_by_their_leading_fields():
    assert decode_control_key(b"\x00\x01\x00\x01" + b"extra") == (1, 1)
    assert decode_marker_value(b"\x00\x01\x00\x00\x00\x07" + b"\x00") == (1, 7)


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00", b"\xff\xff\x00\x01"])
def test_malformed_control_keys_are_invalid_records(key):
    with pytest.raises(InvalidRecordError):
        decode_control_key(key)


@pytest.mark.parametrize("value", [None, b"\x00\x00\x00\x01\x02", b"\xff\xfe\x00\x00\x00\x01"])
def test_malformed_marker_values_are_invalid_records(value):
    with pytest.raises(InvalidRecordError):
        decode_marker_value(value)


def test_marker_batch_is_a_transactional_control_batch_of_one_record():
    data = build_marker_batch(42, 3, EndTxnMarker(False, 9), timestamp=1_700_000_000_000)
    h = parse_header(data)
    assert h.is_control and h.is_transactional
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.record_count) == (42, 3, -1, 1)
    _, records = decode_batch(data)
    assert records[0].key == b"\x00\x00\x00\x00"  # ABORT
    assert records[0].value == b"\x00\x00\x00\x00\x00\x09"  # version 0, coordinator epoch 9
    assert records[0].timestamp == 1_700_000_000_000
    assert read_marker(data, 0, h) == EndTxnMarker(False, 9)
    commit = build_marker_batch(42, 3, EndTxnMarker(True, 9), timestamp=1)
    assert read_marker(commit, 0, parse_header(commit)) == EndTxnMarker(True, 9)


def test_a_marker_built_by_hand_from_kafkas_layout_reads_back():
    hand = build_batch([b"\x00\x00\x00\x00\x00\x05"], [b"\x00\x00\x00\x01"], timestamps=5, producer_id=7,
                       producer_epoch=1, is_transactional=True, is_control=True)
    assert read_marker(hand, 0, parse_header(hand)) == EndTxnMarker(True, 5)
    assert hand == build_marker_batch(7, 1, EndTxnMarker(True, 5), timestamp=5)


def test_other_control_records_are_not_transaction_markers():
    leader_change = build_batch([b"\x00\x00"], [b"\x00\x00\x00\x02"], timestamps=5, is_control=True)
    assert read_marker(leader_change, 0, parse_header(leader_change)) is None
    data = build_batch([b"v"], timestamps=5)
    assert read_marker(data, 0, parse_header(data)) is None


def test_a_marker_needs_a_producer():
    with pytest.raises(ValueError):
        build_marker_batch(-1, 0, EndTxnMarker(True, 0), timestamp=1)
