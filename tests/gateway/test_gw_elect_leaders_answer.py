"""ElectLeaders' answer (logan_ray/gateway/leaders.py): grouped by topic, as Kafka words it."""
from __future__ import annotations

from logan_ray.gateway.leaders import results_body

RESULTS = {("a", 0): (0, None), ("a", 1): (84, "leads"), ("b", 0): (80, "not in sync")}


def test_named_partitions_are_all_answered_in_the_order_asked():
    body = results_body([("b", 0), ("a", 1), ("a", 0)], RESULTS)
    assert body == [{"topic": "b", "partition_result": [{"partition_id": 0, "error_code": 80,
                                                          "error_message": "not in sync"}]},
                    {"topic": "a", "partition_result": [
                        {"partition_id": 1, "error_code": 84, "error_message": "leads"},
                        {"partition_id": 0, "error_code": 0, "error_message": None}]}]


def test_an_all_partitions_request_leaves_out_those_whose_election_was_not_needed():
    body = results_body(None, RESULTS)
    assert [(t["topic"], [r["partition_id"] for r in t["partition_result"]]) for t in body] == [("a", [0]), ("b", [0])]
