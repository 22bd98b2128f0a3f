"""Scaling a pipeline's workers by consumer lag: a small, pure policy the supervisor consults.

Why by lag: lag is what a user waits on (records produced but not yet processed), and it
is measured from the group's commits, so it needs no cooperation from the function. Scaling
up is prompt (one worker per check while the lag per worker is over the target); scaling
down waits for several calm checks in a row, because every change of membership costs the
whole group a rebalance (a pause of seconds). Never more workers than partitions: extra
group members would get none.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Autoscale:
    """Bounds and targets for scaling a pipeline by lag.

    ``lag_per_worker``: records of lag one worker is expected to absorb; ``interval_s``: how
    often the lag is read; ``calm_checks``: consecutive checks under target before one worker goes.
    """

    min_workers: int = 1
    max_workers: int = 4
    lag_per_worker: int = 100_000
    interval_s: float = 5.0
    calm_checks: int = 3

    def __post_init__(self) -> None:
        if not 1 <= self.min_workers <= self.max_workers:
            raise ValueError(f"need 1 <= min_workers <= max_workers, got {self.min_workers}..{self.max_workers}")
        if self.lag_per_worker <= 0 or self.interval_s <= 0 or self.calm_checks < 1:
            raise ValueError("lag_per_worker and interval_s must be positive, calm_checks at least 1")


class Scaler:
    """Remembers the calm checks between calls; ``target`` says how many workers to run next."""

    def __init__(self, policy: Autoscale) -> None:
        self.policy = policy
        self._calm = 0

    def target(self, workers: int, lag: int, partitions: int) -> int:
        p = self.policy
        ceiling = max(p.min_workers, min(p.max_workers, partitions))
        wanted = max(p.min_workers, min(ceiling, -(-lag // p.lag_per_worker)))
        if wanted > workers:
            self._calm = 0
            return min(workers + 1, ceiling)
        if wanted < workers:
            self._calm += 1
            if self._calm >= p.calm_checks:
                self._calm = 0
                return workers - 1
            return workers
        self._calm = 0
        return workers
