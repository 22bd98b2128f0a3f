"""The queue checker (tests/tooling/queue_checker.py) on synthetic histories: each anomaly class
is found in a history made to have it, and only it; a clean history, with rebalances and failed
sends in it, has none."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tooling"))
from queue_checker import CLASSES, History, check  # noqa: E402


def acked(h: History, producer: str, partition: int, offsets: list[int], prefix: str | None = None) -> list[str]:
    """Sends from ``producer`` to ``partition`` acknowledged at ``offsets``; their values."""
    values = []
    for o in offsets:
        v = f"{prefix or producer}-{o}"
        h.send(producer, "k", v, partition)
        h.ack(v, partition, o)
        values.append(v)
    return values


def only(report, cls: str, also: tuple[str, ...] = ()) -> list[dict]:
    """The examples of ``cls``, after checking that no other class has any (but ``also``)."""
    others = {c: n for c, n in report.counts.items() if n and c != cls and c not in also}
    assert others == {}, others
    assert report.counts[cls] > 0 and not report.valid
    return report.examples[cls]


def clean() -> History:
    h = History()
    a = acked(h, "p0", 0, [0, 1, 2])
    b = acked(h, "p1", 1, [0, 1])
    h.send("p0", "k", "failed", 0)
    h.fail("failed", "NOT_ENOUGH_REPLICAS")
    h.send("p1", "k", "maybe", 1)
    h.indeterminate("maybe", "timed out")  # never written: indeterminate sends may vanish
    h.poll("c0", [(0, 0, a[0]), (0, 1, a[1])], generation=1, assignment=[0, 1])
    h.poll("c0", [(0, 2, a[2]), (1, 0, b[0])], generation=1, assignment=[0, 1])
    # a rebalance: c1 takes partition 1 and restarts below what c0 read (the last commit)
    h.poll("c1", [(1, 0, b[0]), (1, 1, b[1])], generation=2, assignment=[1])
    h.committed("g", 0, 2)
    h.committed("g", 0, 3)
    h.committed("g", 1, -1001)  # none yet
    h.committed("g", 1, 2)
    h.poll("final", [(0, 0, a[0]), (0, 1, a[1]), (0, 2, a[2])], generation="final")
    h.poll("final", [(1, 0, b[0]), (1, 1, b[1])], generation="final")
    return h


def test_a_clean_history_with_rebalances_failures_and_indeterminate_sends_is_valid():
    report = check(clean())
    assert report.valid, report.table()
    assert report.stats["acked"] == 5 and report.stats["failed"] == 1 and report.stats["indeterminate"] == 1
    assert "valid: yes" in report.table()


def test_an_acknowledged_write_below_what_was_read_and_never_read_is_lost():
    h = History()
    a = acked(h, "p0", 0, [0, 1, 2])
    h.poll("c0", [(0, 0, a[0])], generation=1)
    h.poll("c0", [(0, 2, a[2])], generation=1)
    h.poll("final", [(0, 0, a[0]), (0, 2, a[2])], generation="final")
    h.poll("d", [(0, 1, "intruder")], generation=1)  # and offset 1 held another value for reader d
    report = check(h)
    assert report.examples["lost-write"] == [{"partition": 0, "value": "p0-1", "offset": 1, "max_read_offset": 2}]
    assert report.counts["inconsistent-offsets"] == 1


def test_a_lost_write_is_found_without_any_poll_order_anomaly_and_is_also_unseen():
    h = History()
    a = acked(h, "p0", 0, [0, 1, 2])
    b = acked(h, "p1", 0, [3])
    # read by two consumers, each from its first poll: no poll sequence jumps over offset 1
    h.poll("c0", [(0, 0, a[0])], generation=1)
    h.poll("c1", [(0, 2, a[2]), (0, 3, b[0])], generation=1)
    report = check(h)
    examples = only(report, "lost-write", also=("unseen",))  # a lost write is never read, so unseen too
    assert [e["value"] for e in examples] == ["p0-1"]
    assert [e["value"] for e in report.examples["unseen"]] == ["p0-1"]


def test_a_value_at_two_offsets_is_a_duplicate():
    h = History()
    a = acked(h, "p0", 0, [0, 1])
    h.poll("c0", [(0, 0, a[0]), (0, 1, a[1])], generation=1)
    h.poll("c1", [(0, 2, a[0])], generation=1)  # a retried batch written again
    examples = only(check(h), "duplicate")
    assert examples == [{"partition": 0, "value": "p0-0", "offsets": [0, 2]}]


def test_two_values_at_one_offset_are_inconsistent_offsets():
    h = History()
    a = acked(h, "p0", 0, [0])
    h.send("p1", "k", "other", 0)
    h.ack("other", 0, 0)  # acknowledged at the same offset as p0-0
    h.poll("c0", [(0, 0, a[0])], generation=1)
    h.poll("c1", [(0, 0, "other")], generation=1)
    examples = only(check(h), "inconsistent-offsets")
    assert examples == [{"partition": 0, "offset": 0, "values": ["other", "p0-0"]}]


def test_a_producer_whose_later_send_lands_earlier_in_the_partition_is_nonmonotonic_send():
    h = History()
    for v in ("p0-a", "p0-b"):
        h.send("p0", "k", v, 0)
    h.ack("p0-b", 0, 0)
    h.ack("p0-a", 0, 1)  # sent first, written after
    h.poll("c0", [(0, 0, "p0-b"), (0, 1, "p0-a")], generation=1)
    examples = only(check(h), "nonmonotonic-send")
    assert examples[0]["values"] == ["p0-a", "p0-b"] and examples[0]["offsets"] == [1, 0]


def test_a_poll_starting_at_or_before_where_the_previous_poll_ended_is_nonmonotonic():
    h = History()
    a = acked(h, "p0", 0, [0, 1, 2])
    h.poll("c0", [(0, 0, a[0]), (0, 1, a[1])], generation=1)
    h.poll("c0", [(0, 1, a[1]), (0, 2, a[2])], generation=1)  # same generation: no reason to go back
    examples = only(check(h), "nonmonotonic-poll")
    assert examples[0]["values"] == ["p0-1", "p0-1"] and examples[0]["delta"] == 0


def test_a_poll_starting_past_the_next_offset_is_a_poll_skip():
    h = History()
    a = acked(h, "p0", 0, [0, 1, 2, 3])
    h.poll("c0", [(0, 0, a[0]), (0, 1, a[1])], generation=1)
    h.poll("c0", [(0, 3, a[3])], generation=1)
    h.poll("final", [(0, o, a[o]) for o in range(4)], generation="final")
    examples = only(check(h), "poll-skip")
    assert examples[0]["skipped"] == ["p0-2"] and examples[0]["delta"] == 2


def test_records_going_back_inside_one_poll_are_an_int_nonmonotonic_poll():
    h = History()
    a = acked(h, "p0", 0, [0, 1])
    h.poll("c0", [(0, 0, a[0]), (0, 1, a[1]), (0, 0, a[0])], generation=1)
    examples = only(check(h), "int-nonmonotonic-poll")
    assert examples[0]["delta"] == -1


def test_records_jumping_inside_one_poll_are_an_int_poll_skip():
    h = History()
    a = acked(h, "p0", 0, [0, 1, 2])
    h.poll("c0", [(0, 0, a[0]), (0, 2, a[2])], generation=1)
    h.poll("final", [(0, o, a[o]) for o in range(3)], generation="final")
    examples = only(check(h), "int-poll-skip")
    assert examples[0]["skipped"] == ["p0-1"]


def test_an_acknowledged_write_no_poll_ever_read_is_unseen():
    h = History()
    a = acked(h, "p0", 0, [0, 1])
    h.poll("final", [(0, 0, a[0])], generation="final")  # the tail vanished
    examples = only(check(h), "unseen")
    assert examples == [{"partition": 0, "value": "p0-1", "offset": 1}]


def test_a_committed_offset_observed_lower_than_before_is_a_regression():
    h = History()
    h.committed("g", 0, 5)
    h.committed("g", 1, 2)
    h.committed("g", 0, 7)
    h.committed("g", 0, 6)
    h.committed("other", 0, 1)  # another group's offsets are its own
    examples = only(check(h), "committed-offset-regression")
    assert [e["offsets"] for e in examples] == [[7, 6]]


def test_every_class_has_a_row_in_the_table_and_examples_are_capped():
    h = History()
    for i in range(25):
        h.committed("g", 0, 100 - i)
    report = check(h)
    assert report.counts["committed-offset-regression"] == 24
    assert len(report.examples["committed-offset-regression"]) == 10
    table = report.table()
    assert all(c in table for c in CLASSES) and "valid: NO" in table


def test_a_value_sent_twice_is_refused_because_the_analysis_needs_unique_values():
    h = History()
    h.send("p0", "k", "v", 0)
    try:
        h.send("p1", "k", "v", 0)
    except ValueError:
        return
    raise AssertionError("a repeated value was accepted")


def test_a_consumer_reading_a_log_with_a_duplicate_in_order_reports_the_duplicate_alone():
    h = History()
    for v, o in (("p0-a", 0), ("p0-b", 1)):
        h.send("p0", "k", v, 0)
    h.ack("p0-a", 0, 0)
    h.ack("p0-b", 0, 2)  # written at 1 unacknowledged, then again at 2 (a re-sequenced retry)
    h.poll("c0", [(0, 0, "p0-a"), (0, 1, "p0-b")], generation=1)
    h.poll("c0", [(0, 2, "p0-b")], generation=1)  # the next offset: no skip, no going back
    examples = only(check(h), "duplicate")
    assert examples == [{"partition": 0, "value": "p0-b", "offsets": [1, 2]}]


def test_a_send_acknowledged_without_an_offset_is_checked_by_its_value_alone():
    """librdkafka acknowledges some sends without an offset (confluent-kafka's offset() is None):
    the check must not fail on them (CI's run raised TypeError), and they must still be read."""
    h = clean()
    h.send("p0", "k", "no-offset", 0)
    h.ack("no-offset", 0, None)
    h.poll("final", [(0, 3, "no-offset")], generation="final")
    assert check(h).valid
    h.send("p0", "k", "no-offset-never-read", 0)
    h.ack("no-offset-never-read", 0, None)
    assert only(check(h), "unseen")[0]["value"] == "no-offset-never-read"
