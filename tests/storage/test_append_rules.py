"""Client batches the partition refuses before writing: Kafka's LogValidator rules."""
from __future__ import annotations

import time

import pytest

from bombs import zstd_bomb_batch
from logan_ray.storage.append_rules import check_client_batch
from logan_ray.storage.batch_header import parse_header
from logan_ray.storage.config import TopicConfig
from logan_ray.storage.errors import CorruptRecordError, InvalidRecordError, InvalidTimestampError, InvalidTxnStateError
from logan_ray.storage.record_builder import build_batch


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


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_record_timestamps_outside_the_topic_window_are_invalid_timestamp(codec):
    now = 1_700_000_000_000
    config = TopicConfig.from_dict({"message.timestamp.before.max.ms": "60000",
                                    "message.timestamp.after.max.ms": "1000"})
    window = config.timestamp_window(now)
    assert window == (now - 60_000, now + 1_000)
    inside = build_batch([b"a", b"b"], [b"k", b"k"], timestamps=[now - 59_000, now + 1_000], compression=codec)
    check_client_batch(inside, 0, parse_header(inside), False, window=window)
    # the second record is older than its batch's base timestamp: only a look inside finds it
    old = build_batch([b"a", b"b"], [b"k", b"k"], timestamps=[now, now - 61_000], compression=codec)
    future = build_batch([b"a"], [b"k"], timestamps=[now + 1_001], compression=codec)
    for batch in (old, future):
        with pytest.raises(InvalidTimestampError, match="out of range") as e:
            check_client_batch(batch, 0, parse_header(batch), False, window=window)
        assert e.value.code == 32


def test_timestamp_window_follows_kafkas_config_precedence():
    now = 10**12
    assert TopicConfig().timestamp_window(now) is None  # Kafka 3.x defaults: unlimited
    legacy = TopicConfig.from_dict({"message.timestamp.difference.max.ms": "5000"})
    assert legacy.timestamp_window(now) == (now - 5000, now + 5000)
    both = TopicConfig.from_dict({"message.timestamp.difference.max.ms": "5000",
                                  "message.timestamp.after.max.ms": "100"})
    assert both.timestamp_window(now) == (now - 5000, now + 100)
    append_time = TopicConfig.from_dict({"message.timestamp.type": "LogAppendTime",
                                         "message.timestamp.before.max.ms": "1"})
    assert append_time.timestamp_window(now) is None  # the broker overwrites the timestamps


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


def test_transactional_batches_pass_once_the_partition_turns_transactions_on():
    txn = build_batch([b"v"], [b"k"], is_transactional=True, producer_id=1, producer_epoch=0, base_sequence=0)
    check_client_batch(txn, 0, parse_header(txn), False, transactions=True)
    control = build_batch([b"\0" * 6], [b"\0" * 4], is_control=True, is_transactional=True, producer_id=1,
                          producer_epoch=0)
    with pytest.raises(InvalidRecordError, match="control records"):  # markers stay the coordinator's
        check_client_batch(control, 0, parse_header(control), False, transactions=True)


def test_zstd_bomb_on_a_compacted_topic_is_corrupt_quickly():
    bomb = zstd_bomb_batch()  # 1 MiB claiming 32 GiB
    started = time.monotonic()
    with pytest.raises(CorruptRecordError, match="decompress to more than"):
        check(bomb, compacted=True)
    assert time.monotonic() - started < 10
    check(bomb, compacted=False)  # not looked into: bytes are stored and served as they are
