import pytest

from logan_ray.storage.cleaner_checkpoint import MAX_PASS_HISTORY, CleanerCheckpoint


@pytest.mark.parametrize("interval,retention", [(10, 1000), (7, 1000), (15_000, 86_400_000), (1000, 10)])
def test_checkpoint_history_is_bounded_and_never_shortens_retention(interval, retention):
    """Pass i cleans offsets up to 100*i at time interval*i; a tombstone below the
    horizon must have been first cleaned at least ``retention`` ago, and the horizon
    must not lag the ideal one by more than a few percent of ``retention``."""
    cp = CleanerCheckpoint()
    now = 0
    for i in range(1, 3000):
        now += interval
        cp = cp.after_pass(i * 100, now, delete_retention_ms=retention)
        assert len(cp.passes) <= MAX_PASS_HISTORY
        horizon = cp.tombstone_horizon(now, retention)
        ideal = max(0, (now - retention) // interval) * 100  # end of the last pass old enough
        assert horizon <= ideal
        if now > 2 * retention:
            assert (ideal - horizon) / 100 * interval <= 0.05 * retention + interval
    assert CleanerCheckpoint.from_json(cp.to_json()) == cp
