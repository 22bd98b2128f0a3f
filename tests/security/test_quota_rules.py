"""Client quota bookkeeping (logan_ray.security.quota, quota_rate): Kafka's precedence, buckets,
validation, DescribeClientQuotas filters, windowed rates and throttle times. Pure, no Ray."""
from __future__ import annotations

import pytest

from logan_ray.security import quota
from logan_ray.security.quota import CLIENT_ID, CONSUMER_BYTE_RATE, PRODUCER_BYTE_RATE, USER, QuotaError, QuotaTable
from logan_ray.security.quota_rate import Rate, Sensors


def table(*rows: tuple[dict, dict]) -> QuotaTable:
    return QuotaTable([(quota.entity(e.items()), v) for e, v in rows])


ALL_LEVELS = table(
    ({USER: "alice", CLIENT_ID: "app"}, {PRODUCER_BYTE_RATE: 1}),
    ({USER: "alice", CLIENT_ID: None}, {PRODUCER_BYTE_RATE: 2}),
    ({USER: "alice"}, {PRODUCER_BYTE_RATE: 3}),
    ({USER: None, CLIENT_ID: "app"}, {PRODUCER_BYTE_RATE: 4}),
    ({USER: None, CLIENT_ID: None}, {PRODUCER_BYTE_RATE: 5}),
    ({USER: None}, {PRODUCER_BYTE_RATE: 6}),
    ({CLIENT_ID: "app"}, {PRODUCER_BYTE_RATE: 7}),
    ({CLIENT_ID: None}, {PRODUCER_BYTE_RATE: 8}),
)


def test_the_most_specific_entity_wins_in_kafkas_order() -> None:
    entries = dict(ALL_LEVELS.entries)
    order = sorted(entries, key=lambda e: entries[e][PRODUCER_BYTE_RATE])
    for expected in range(1, 9):
        t = QuotaTable(entries.items())
        assert t.limit(PRODUCER_BYTE_RATE, "alice", "app").bound == expected
        del entries[order[expected - 1]]
    assert QuotaTable(entries.items()).limit(PRODUCER_BYTE_RATE, "alice", "app") is None


def test_each_quota_type_is_looked_up_on_its_own() -> None:
    t = table(({USER: "alice"}, {PRODUCER_BYTE_RATE: 100}), ({CLIENT_ID: None}, {CONSUMER_BYTE_RATE: 50}))
    assert t.limit(PRODUCER_BYTE_RATE, "alice", "x").bound == 100
    assert t.limit(CONSUMER_BYTE_RATE, "alice", "x").bound == 50
    assert t.limit(PRODUCER_BYTE_RATE, "bob", "x") is None


def test_default_entities_count_each_client_in_its_own_bucket() -> None:
    t = table(({USER: None}, {PRODUCER_BYTE_RATE: 10}), ({CLIENT_ID: None}, {CONSUMER_BYTE_RATE: 10}))
    assert t.limit(PRODUCER_BYTE_RATE, "alice", "a").bucket == ("alice", "")
    assert t.limit(PRODUCER_BYTE_RATE, "bob", "a").bucket == ("bob", "")
    assert t.limit(CONSUMER_BYTE_RATE, "alice", "a").bucket == ("", "a")


@pytest.mark.parametrize("parts, message", [
    ([], "empty"), ([(USER, "a"), (USER, "b")], "Duplicate"), ([("ip", "1.2.3.4")], "not supported"),
    ([("group", "g")], "Unknown client quota entity type"),
])
def test_bad_entities_are_refused(parts: list, message: str) -> None:
    with pytest.raises(QuotaError, match=message):
        quota.entity(parts)


def test_values_are_typed_as_kafka_types_them() -> None:
    assert quota.check_value(PRODUCER_BYTE_RATE, 1024.0) == 1024
    assert quota.check_value("request_percentage", 12.5) == 12.5
    for key, value, message in [(PRODUCER_BYTE_RATE, 1.5, "Long"), (PRODUCER_BYTE_RATE, 0, "positive"),
                                ("bogus", 1, "Unknown client quota key")]:
        with pytest.raises(QuotaError, match=message):
            quota.check_value(key, value)


def test_describe_filters_match_exact_default_and_specified_names() -> None:
    def names(components: list, strict: bool = False) -> list[str]:
        return [quota.describe_entity(e) for e, _ in ALL_LEVELS.matching(components, strict)]

    assert names([(USER, 0, "alice")]) == ["users/alice", "users/alice/clients/<default>", "users/alice/clients/app"]
    assert names([(USER, 0, "alice")], strict=True) == ["users/alice"]
    assert names([(CLIENT_ID, 1, None)], strict=True) == ["clients/<default>"]
    assert names([(USER, 2, None), (CLIENT_ID, 2, None)]) == ["users/alice/clients/app"]
    assert len(names([])) == 8 and names([], strict=True) == []
    with pytest.raises(QuotaError, match="Duplicate"):
        names([(USER, 2, None), (USER, 1, None)])
    with pytest.raises(QuotaError, match="no match name"):
        names([(USER, 0, None)])


def test_a_new_rate_is_measured_over_at_least_ten_windows() -> None:
    r = Rate()
    r.record(10_000, now_ms=0)
    assert r.span_ms(0) == 10_000 and r.measure(0) == 1000.0
    r.record(10_000, now_ms=10_500)
    assert r.span_ms(10_500) == 10_500


def test_samples_older_than_the_windows_are_forgotten() -> None:
    r = Rate()
    r.record(1_000_000, now_ms=0)
    r.record(1, now_ms=11_000)
    assert r.measure(11_000) == pytest.approx(1 / 10.0)


def test_throttle_time_is_the_overshoot_over_the_bound_times_the_window() -> None:
    s = Sensors()
    assert s.record_and_throttle(("u", ""), 5_000, bound=1000, now_ms=0) == 0  # 500 B/s over 10 s
    # 15 000 B over 10 s: 1500 B/s, 50 % over a 1000 B/s bound -> half of the 10 s span
    assert s.record_and_throttle(("u", ""), 10_000, bound=1000, now_ms=0) == 5000
    assert s.record_and_throttle(("other", ""), 10_000, bound=1000, now_ms=0) == 0


def test_throttled_bytes_can_be_taken_back() -> None:
    r = Rate()
    r.record(30_000, now_ms=0)
    assert r.throttle_ms(1000, 0) == 20_000
    r.unrecord(30_000, now_ms=0)
    assert r.throttle_ms(1000, 0) == 0


def test_rates_of_clients_gone_for_all_the_windows_are_forgotten() -> None:
    s = Sensors(num=11, window_ms=1000)
    s.record_and_throttle(("gone", ""), 10, bound=1000, now_ms=0)
    s.record_and_throttle(("here", ""), 10, bound=1000, now_ms=10_000)
    s.forget_idle(now_ms=11_500)
    assert len(s) == 1 and s.rate(("here", "")).measure(11_500) > 0
