"""Windowed byte rates and throttle times, as Kafka's ClientQuotaManager computes them.

A rate is the sum of ``quota.window.num`` samples of ``quota.window.size.seconds``
each, over the time they span; while fewer than ``num - 1`` whole windows have
passed since the oldest sample began, the span counts as that many (Kafka's
``Rate.windowSize``), so a new client's first burst is not measured over a few
milliseconds. Bytes are recorded first and the rate checked after, as Kafka's
sensor does; a rate above the bound gives ``(rate - bound) / bound * span`` ms of
throttle (``QuotaUtils.throttleTime``): the time that brings the rate back to the
bound if nothing more arrives. Clock in milliseconds, passed in (testable, no I/O).
"""
from __future__ import annotations

#: Kafka's defaults: quota.window.num, quota.window.size.seconds
WINDOW_NUM = 11
WINDOW_SIZE_MS = 1000


class Rate:
    """One bucket's recent bytes, in ``num`` samples of ``window_ms``."""

    def __init__(self, num: int = WINDOW_NUM, window_ms: int = WINDOW_SIZE_MS) -> None:
        self.num = num
        self.window_ms = window_ms
        self._samples: list[list[float]] = []  # [start ms, value], oldest first

    def _purge(self, now_ms: float) -> None:
        horizon = now_ms - self.num * self.window_ms  # Kafka: obsolete when now - start >= num * window
        while self._samples and self._samples[0][0] <= horizon:
            self._samples.pop(0)

    def record(self, value: float, now_ms: float) -> None:
        self._purge(now_ms)
        if not self._samples or now_ms >= self._samples[-1][0] + self.window_ms:
            self._samples.append([now_ms, 0.0])
            if len(self._samples) > self.num:
                self._samples.pop(0)
        self._samples[-1][1] += value

    def unrecord(self, value: float, now_ms: float) -> None:
        """Take back bytes recorded but not served (a throttled fetch answers empty, as Kafka's does)."""
        if self._samples:
            self._samples[-1][1] -= value

    def idle_since(self, when_ms: float) -> bool:
        """Nothing was recorded at or after ``when_ms``."""
        return not self._samples or self._samples[-1][0] < when_ms

    def span_ms(self, now_ms: float) -> float:
        """The time the rate is measured over (Kafka's Rate.windowSize)."""
        oldest = self._samples[0][0] if self._samples else now_ms
        elapsed = now_ms - oldest
        full = int(elapsed // self.window_ms)
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.window_ms
        return elapsed

    def measure(self, now_ms: float) -> float:
        """Bytes per second."""
        self._purge(now_ms)
        total = sum(v for _, v in self._samples)
        return total / (self.span_ms(now_ms) / 1000.0)

    def throttle_ms(self, bound: float, now_ms: float) -> int:
        """How long the client waits (0 within the bound), Kafka's QuotaUtils.throttleTime."""
        rate = self.measure(now_ms)
        if rate <= bound:
            return 0
        return round((rate - bound) / bound * self.span_ms(now_ms))


class Sensors:
    """The rates of every bucket of one quota type (produce or fetch bytes)."""

    def __init__(self, num: int = WINDOW_NUM, window_ms: int = WINDOW_SIZE_MS) -> None:
        self.num = num
        self.window_ms = window_ms
        self._rates: dict[tuple[str, str], Rate] = {}

    def rate(self, bucket: tuple[str, str]) -> Rate:
        r = self._rates.get(bucket)
        if r is None:
            r = self._rates[bucket] = Rate(self.num, self.window_ms)
        return r

    def record_and_throttle(self, bucket: tuple[str, str], value: float, bound: float, now_ms: float) -> int:
        r = self.rate(bucket)
        r.record(value, now_ms)
        return r.throttle_ms(bound, now_ms)

    def forget_idle(self, now_ms: float) -> None:
        """Drop buckets with nothing in their windows (Kafka expires idle quota sensors)."""
        horizon = now_ms - self.num * self.window_ms
        for bucket in [b for b, r in self._rates.items() if r.idle_since(horizon)]:
            del self._rates[bucket]

    def __len__(self) -> int:
        return len(self._rates)
