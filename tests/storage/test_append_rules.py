"""Client batches the partition refuses before writing: Kafka's LogValidator rules."""
from __future__ import annotations

import time

import pytest

from bombs import zstd_bomb_batch
from logan_ray.storage.append_rules import check_client_batch
from logan_ray.storage.batch_header import parse_header
from logan_ray.storage.errors import CorruptRecordError, InvalidRecordError, InvalidTxnStateError
from logan_ray.storage.records import build_batch


def check(batch: bytes, compacted: bool) -> None:
    check_client_batch(batch, 0, parse_header(batch), compacted)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_keyless_record_on_a_compacted_topic_is_invalid_record(codec):
    batch = build_batch([b"a", b"b", b"c"], [b"k", None, b"k"], compression=codec)
    with pytest.raises(InvalidRecordError, match="without a key") as e:
        check(batch, compacted=True)
    assert e.value.code == 87
    check(batch, compacted=False)  # a delete-policy topic takes it, without looking inside
    check(build_batch([b"a"], [b""], compression=codec), compacted=True)  # an empty key is a key


def test_control_batches_from_clients_are_invalid_record():
    control = build_batch([b"\0" * 6], [b"\0" * 4], is_control=True, producer_id=1, producer_epoch=0)
    with pytest.raises(InvalidRecordError, match="control records") as e:
        check(control, compacted=False)
    assert e.value.code == 87


def test_transactional_batches_are_refused_until_transactions_exist():
    txn = build_batch([b"v"], [b"k"], is_transactional=True, producer_id=1, producer_epoch=0, base_sequence=0)
    with pytest.raises(InvalidTxnStateError, match="transactions") as e:
        check(txn, compacted=False)
    assert e.value.code == 48


def test_zstd_bomb_on_a_compacted_topic_is_corrupt_quickly():
    bomb = zstd_bomb_batch()  # 1 MiB claiming 32 GiB
    started = time.monotonic()
    with pytest.raises(CorruptRecordError, match="decompress to more than"):
        check(bomb, compacted=True)
    assert time.monotonic() - started < 10
    check(bomb, compacted=False)  # not looked into: bytes are stored and served as they are
