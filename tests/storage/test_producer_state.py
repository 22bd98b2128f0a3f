"""Idempotent-producer sequence rules, on batch headers only."""
from __future__ import annotations

import pytest

from logan_ray.storage.batch_header import parse_header
from logan_ray.storage.producer_state import InvalidProducerEpochError, OutOfOrderSequenceError, ProducerStateTable
from logan_ray.storage.record_builder import build_batch


def header(seq: int, n: int = 3, pid: int = 7, epoch: int = 0):
    return parse_header(build_batch([b"v"] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq))


def test_in_order_duplicates_and_gaps():
    t = ProducerStateTable()
    assert t.check(header(0)) is None
    t.record(header(0), base_offset=100)
    assert t.check(header(3)) is None
    t.record(header(3), base_offset=103, log_append_time=55)
    assert t.check(header(0)) == (100, -1)  # a retry of an acknowledged batch
    assert t.check(header(3)) == (103, 55)
    with pytest.raises(OutOfOrderSequenceError) as gap:
        t.check(header(9))
    assert gap.value.ahead and not gap.value.unknown_producer
    with pytest.raises(OutOfOrderSequenceError) as behind:
        t.record(header(6), 106)
        t.record(header(9), 109)
        t.record(header(12), 112)
        t.record(header(15), 115)
        t.record(header(18), 118)
        t.check(header(0))  # older than the five retained batches
    assert not behind.value.ahead


def test_unknown_producer_must_start_at_zero_or_wait():
    t = ProducerStateTable()
    with pytest.raises(OutOfOrderSequenceError) as e:
        t.check(header(30))
    assert e.value.ahead and e.value.unknown_producer
    assert t.check(header(0, pid=8)) is None


def test_epoch_fencing_and_bump():
    t = ProducerStateTable()
    t.record(header(0, epoch=2), 0)
    with pytest.raises(InvalidProducerEpochError):
        t.check(header(3, epoch=1))
    assert t.check(header(0, epoch=3)) is None
    with pytest.raises(OutOfOrderSequenceError):
        t.check(header(5, epoch=3))


def test_non_idempotent_batches_ignored_and_rebuild():
    t = ProducerStateTable()
    plain = parse_header(build_batch([b"v"]))
    assert t.check(plain) is None
    t.record(plain, 0)
    assert len(t) == 0
    rebuilt = ProducerStateTable.rebuild([header(0), header(3)])
    assert rebuilt.check(header(6)) is None
