"""DescribeTransactions / ListTransactions views, and the error codes older clients understand."""
from __future__ import annotations

import pytest

from logan_ray.protocol import decode_response, encode_response, errors
from logan_ray.transactions import error_for_version
from txn_driver import TIMEOUT_MS, Clock, coordinator, ongoing


def test_describe_shows_an_ongoing_transaction_and_encodes_as_kafkas_response():
    clock = Clock()
    c = coordinator(clock)
    pid, epoch = ongoing(c, partitions=[("b", 1), ("a", 2), ("a", 0)])
    entry = c.describe("tx")
    assert entry == {"error_code": 0, "transactional_id": "tx", "transaction_state": "Ongoing",
                     "transaction_timeout_ms": TIMEOUT_MS, "transaction_start_time_ms": clock.now,
                     "producer_id": pid, "producer_epoch": epoch,
                     "topics": [{"topic": "a", "partitions": [0, 2]}, {"topic": "b", "partitions": [1]}]}
    body = {"throttle_time_ms": 0, "transaction_states": [entry, c.describe("nobody")]}
    frame = b"".join(encode_response(65, 0, 1, body))
    assert decode_response(65, 0, frame[4:])[1] == body


def test_describe_error_codes():
    c = coordinator()
    assert c.describe("nobody")["error_code"] == errors.TRANSACTIONAL_ID_NOT_FOUND
    assert c.describe("")["error_code"] == errors.INVALID_REQUEST


def test_list_filters_by_state_producer_id_and_duration_and_reports_unknown_states():
    clock = Clock()
    c = coordinator(clock)
    old_pid, _ = ongoing(c, "old")
    clock.now += 5_000
    new_pid, _ = ongoing(c, "new")
    c.init_producer_id("idle", TIMEOUT_MS)
    clock.now += 1_000

    def ids(**filters):
        body = c.list_transactions(**filters)
        return [t["transactional_id"] for t in body["transaction_states"]], body["unknown_state_filters"]

    assert ids() == (["idle", "new", "old"], [])
    assert ids(state_filters=["Ongoing", "Bogus"]) == (["new", "old"], ["Bogus"])
    assert ids(producer_id_filters=[old_pid]) == (["old"], [])
    assert ids(state_filters=["Ongoing"], duration_filter_ms=2_000) == (["old"], [])
    assert c.list_transactions()["transaction_states"][1] == {
        "transactional_id": "new", "producer_id": new_pid, "transaction_state": "Ongoing"}


@pytest.mark.parametrize("api_key, first_fenced_version", [(22, 4), (24, 2), (25, 2), (26, 2)])
def test_older_clients_get_invalid_producer_epoch_instead_of_producer_fenced(api_key, first_fenced_version):
    assert error_for_version(api_key, first_fenced_version - 1, errors.PRODUCER_FENCED) == errors.INVALID_PRODUCER_EPOCH
    assert error_for_version(api_key, first_fenced_version, errors.PRODUCER_FENCED) == errors.PRODUCER_FENCED
    assert error_for_version(api_key, 0, errors.CONCURRENT_TRANSACTIONS) == errors.CONCURRENT_TRANSACTIONS
