"""Leader epochs on the wire: Metadata, OffsetForLeaderEpoch (API 23), KIP-320 fencing, Fetch diverging epochs.

Raw requests against the real gateway; the partition is given a second leader
epoch by SIGKILLing its actor (Ray starts it again: a new leader incarnation).
"""
from __future__ import annotations

import os
import signal
import time

import pytest
import ray

from logan_ray.protocol import errors as codes
from logan_ray.storage.batch_header import iter_headers
from logan_ray.storage.record_builder import build_batch
from wire_client import Wire, fetch_body, list_offsets_body, metadata_body, produce_body

PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_FOR_LEADER_EPOCH, API_VERSIONS = 0, 1, 2, 3, 23, 18


def epoch_request(topic: str, leader_epoch: int, current: int = -1) -> dict:
    return {"replica_id": -1, "topics": [{"topic": topic, "partitions": [
        {"partition": 0, "current_leader_epoch": current, "leader_epoch": leader_epoch}]}]}


def epoch_answer(w: Wire, version: int, topic: str, leader_epoch: int, current: int = -1) -> tuple[int, int, int]:
    p = w.call(OFFSET_FOR_LEADER_EPOCH, version, epoch_request(topic, leader_epoch, current))["topics"][0][
        "partitions"][0]
    return p["error_code"], p["leader_epoch"], p["end_offset"]


def fetch_part(w: Wire, topic: str, offset: int, current: int, last_fetched: int = -1, version: int = 12) -> dict:
    body = fetch_body(topic, [(0, offset, 1 << 20)])
    part = body["topics"][0]["partitions"][0]
    part["current_leader_epoch"] = current
    part["last_fetched_epoch"] = last_fetched
    return w.call(FETCH, version, body)["responses"][0]["partitions"][0]


def list_part(w: Wire, topic: str, timestamp: int, current: int, version: int = 7) -> dict:
    body = list_offsets_body(topic, 0, timestamp)
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = current
    return w.call(LIST_OFFSETS, version, body)["topics"][0]["partitions"][0]


def metadata_epoch(w: Wire, topic: str) -> int:
    return w.call(METADATA, 12, metadata_body([topic]))["topics"][0]["partitions"][0]["leader_epoch"]


def produce(w: Wire, topic: str, values: list[bytes]) -> None:
    for v in values:
        for _attempt in range(50):  # right after the restart the gateway may still hold the old channel: retry,
            r = w.call(PRODUCE, 9, produce_body(topic, 0, build_batch([v])))  # as a client does on error 6
            code = r["responses"][0]["partition_responses"][0]["error_code"]
            if code != codes.NOT_LEADER_OR_FOLLOWER:
                break
            time.sleep(0.1)
        assert code == 0


@pytest.fixture
def two_epochs(client, gateway, topic_name):
    """Offsets 0-2 written in epoch 0, 3-4 in epoch 1."""
    client.create_topic(topic_name, partitions=1)
    with Wire(gateway) as w:
        assert metadata_epoch(w, topic_name) == 0
        produce(w, topic_name, [b"a0", b"a1", b"a2"])
        actor = client.partition_actor(topic_name, 0)
        pid = ray.get(actor.pid.remote())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while metadata_epoch(w, topic_name) != 1:
            assert time.monotonic() < deadline, "no new epoch after the actor restart"
            time.sleep(0.2)
        produce(w, topic_name, [b"b0", b"b1"])
    return topic_name


def test_api_versions_advertise_offset_for_leader_epoch(gateway):
    with Wire(gateway) as w:
        keys = {k["api_key"]: (k["min_version"], k["max_version"]) for k in w.call(API_VERSIONS, 3, {
            "client_software_name": "t", "client_software_version": "1"})["api_keys"]}
    assert keys[OFFSET_FOR_LEADER_EPOCH] == (0, 4)


@pytest.mark.parametrize("version", [2, 4])
def test_offset_for_leader_epoch_answers_from_the_epoch_cache(gateway, two_epochs, version):
    topic = two_epochs
    with Wire(gateway) as w:
        assert epoch_answer(w, version, topic, 0) == (0, 0, 3)  # epoch 0 ended where epoch 1 began
        assert epoch_answer(w, version, topic, 1, current=1) == (0, 1, 5)  # the current epoch: the log end
        assert epoch_answer(w, version, topic, 9) == (0, -1, -1)  # unknown, larger epoch: undefined
        assert epoch_answer(w, version, topic, 0, current=0)[0] == codes.FENCED_LEADER_EPOCH
        assert epoch_answer(w, version, topic, 0, current=2)[0] == codes.UNKNOWN_LEADER_EPOCH
        assert epoch_answer(w, version, "no-such-topic-" + topic, 0)[0] == codes.UNKNOWN_TOPIC_OR_PARTITION


def test_fetch_fences_stale_and_unknown_leader_epochs(gateway, two_epochs):
    topic = two_epochs
    with Wire(gateway) as w:
        stale = fetch_part(w, topic, 0, current=0)
        assert stale["error_code"] == codes.FENCED_LEADER_EPOCH and not stale["records"]
        assert stale["current_leader"]["leader_epoch"] == 1  # KIP-951 hint: where to go, in which epoch
        assert fetch_part(w, topic, 0, current=2)["error_code"] == codes.UNKNOWN_LEADER_EPOCH
        ok = fetch_part(w, topic, 0, current=1)
        assert ok["error_code"] == 0
        assert [(h.base_offset, h.partition_leader_epoch) for _, h in iter_headers(ok["records"])] == [
            (0, 0), (1, 0), (2, 0), (3, 1), (4, 1)]
        assert fetch_part(w, topic, 0, current=-1, version=8)["error_code"] == 0  # before v9: no fencing


def test_fetch_with_last_fetched_epoch_reports_where_the_fetcher_diverges(gateway, two_epochs):
    topic = two_epochs
    with Wire(gateway) as w:
        # a follower that wrote offsets 3 and 4 in epoch 0 (which ended at 3 here) must truncate to 3
        diverged = fetch_part(w, topic, 5, current=1, last_fetched=0)
        assert diverged["error_code"] == 0 and not diverged["records"]
        assert diverged["diverging_epoch"] == {"epoch": 0, "end_offset": 3}
        assert diverged["high_watermark"] == 5
        same = fetch_part(w, topic, 3, current=1, last_fetched=0)  # consistent: it simply fetches
        assert same["diverging_epoch"] == {"epoch": -1, "end_offset": -1}
        assert [h.base_offset for _, h in iter_headers(same["records"])] == [3, 4]


def test_list_offsets_fences_and_names_the_epoch_of_each_offset(gateway, two_epochs):
    topic = two_epochs
    with Wire(gateway) as w:
        assert list_part(w, topic, -1, current=0)["error_code"] == codes.FENCED_LEADER_EPOCH
        assert list_part(w, topic, -2, current=3)["error_code"] == codes.UNKNOWN_LEADER_EPOCH
        latest = list_part(w, topic, -1, current=1)
        assert (latest["error_code"], latest["offset"], latest["leader_epoch"]) == (0, 5, 1)
        earliest = list_part(w, topic, -2, current=-1)
        assert (earliest["error_code"], earliest["offset"], earliest["leader_epoch"]) == (0, 0, 0)
