"""``__transaction_state`` keys and values are Kafka's TransactionLogKey/Value bytes, checked by hand."""
from __future__ import annotations

import struct

import pytest

from logan_ray.transactions.log_codec import (
    TransactionLogError,
    TxnLogRecord,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from logan_ray.transactions.state import TxnMetadata, TxnState

ONGOING = TxnMetadata("tx", producer_id=5, producer_epoch=3, previous_producer_id=4, timeout_ms=1000,
                      state=TxnState.ONGOING, partitions=frozenset({("a", 1), ("a", 0), ("b", 2)}),
                      start_ms=10, last_update_ms=11, transaction_version=2)


def test_key_is_version_0_then_the_transactional_id_as_an_int16_string():
    assert encode_key("tx-\u00e9") == struct.pack(">hh", 0, 5) + "tx-\u00e9".encode()
    assert decode_key(encode_key("tx-\u00e9")) == "tx-\u00e9"


def test_value_version_0_is_kafkas_fixed_layout():
    expected = (struct.pack(">hqhib", 0, 5, 3, 1000, 1) + struct.pack(">i", 2)
                + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 1)
                + struct.pack(">h", 1) + b"b" + struct.pack(">ii", 1, 2)
                + struct.pack(">qq", 11, 10))
    assert encode_value(ONGOING, version=0) == expected
    # version 0 has no previous producer id nor client version: Kafka's defaults come back
    assert decode_value("tx", expected) == TxnMetadata(**{**ONGOING.__dict__, "previous_producer_id": -1,
                                                           "transaction_version": 0})


def test_value_version_1_is_flexible_with_the_kip_890_tagged_fields():
    expected = (struct.pack(">hqhib", 1, 5, 3, 1000, 1) + bytes([3])
                + bytes([2]) + b"a" + bytes([3]) + struct.pack(">ii", 0, 1) + b"\x00"
                + bytes([2]) + b"b" + bytes([2]) + struct.pack(">i", 2) + b"\x00"
                + struct.pack(">qq", 11, 10)
                # two tags: 0 previous producer id (8 bytes), 2 client transaction version (2 bytes);
                # next producer id (tag 1) is at its default -1 and left out
                + bytes([2, 0, 8]) + struct.pack(">q", 4) + bytes([2, 2]) + struct.pack(">h", 2))
    assert encode_value(ONGOING) == expected
    assert decode_value("tx", expected) == ONGOING


def test_an_empty_transaction_stores_null_partitions_and_refuses_partitions():
    empty = TxnMetadata("tx", producer_id=5, producer_epoch=0, state=TxnState.EMPTY)
    assert encode_value(empty, version=0)[17:21] == struct.pack(">i", -1)
    assert decode_value("tx", encode_value(empty)).partitions == frozenset()
    with pytest.raises(ValueError):
        encode_value(TxnMetadata("tx", 5, 0, state=TxnState.EMPTY, partitions=frozenset({("a", 0)})))


def test_a_dead_entry_is_written_as_a_tombstone():
    record = TxnLogRecord.of(TxnMetadata("tx", 5, 0, state=TxnState.DEAD))
    assert (record.key, record.value) == (encode_key("tx"), None)


@pytest.mark.parametrize("data", [
    b"\x00",  # no version
    struct.pack(">h", 2) + encode_value(ONGOING)[2:],  # a version this code does not know
    encode_value(ONGOING)[:-3],  # torn
    encode_value(ONGOING) + b"\x00",  # trailing bytes
    encode_value(ONGOING, version=0)[:16] + b"\x09" + encode_value(ONGOING, version=0)[17:],  # status 9
])
def test_a_value_this_code_cannot_read_is_refused(data):
    with pytest.raises(TransactionLogError):
        decode_value("tx", data)


def test_every_state_survives_the_round_trip_with_its_kafka_id():
    assert [s.value for s in TxnState] == list(range(8))
    assert [s.kafka_name for s in TxnState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence"]
    for state in (TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.COMPLETE_COMMIT,
                  TxnState.COMPLETE_ABORT, TxnState.PREPARE_EPOCH_FENCE):
        meta = TxnMetadata(**{**ONGOING.__dict__, "state": state})
        assert decode_value("tx", encode_value(meta)) == meta


def test_the_next_producer_id_of_an_overflowing_end_is_tag_1():
    meta = TxnMetadata("tx", producer_id=5, producer_epoch=32767, next_producer_id=77, state=TxnState.PREPARE_COMMIT,
                       partitions=frozenset({("a", 0)}), start_ms=1, last_update_ms=2, transaction_version=2)
    data = encode_value(meta)
    assert data.endswith(bytes([2, 1, 8]) + struct.pack(">q", 77) + bytes([2, 2]) + struct.pack(">h", 2))
    assert decode_value("tx", data) == meta
