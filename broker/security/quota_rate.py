"""A rate over sliding sample windows and the throttle time that brings it back to a quota (Kafka's).

Kafka measures quota rates with `quota.window.num` samples of `quota.window.size.seconds` each: the
rate is everything recorded in the live samples divided by the time they cover, where that time is at
least `num - 1` whole windows (so a fresh client is not measured over a few milliseconds). When a
recording puts the rate O above the quota T, the client must wait X so that O * W / (W + X) = T, i.e.
X = (O - T) / T * W, W being the window the rate was measured over.

Times are injected milliseconds, so tests need no sleeping.
"""

from __future__ import annotations

#: the longest throttle the broker asks for (Kafka's int32 field)
MAX_THROTTLE_MS = 2**31 - 1


class Rate:
    __slots__ = ("_samples", "num", "size_ms")

    def __init__(self, num: int = 11, size_ms: int = 1000) -> None:
        self.num = num
        self.size_ms = size_ms
        self._samples: list[list[float]] = []  # [start ms, amount], oldest first

    def _purge(self, now_ms: int) -> None:
        horizon = now_ms - self.num * self.size_ms
        while self._samples and self._samples[0][0] <= horizon:
            self._samples.pop(0)

    def record(self, amount: float, now_ms: int) -> None:
        self._purge(now_ms)
        if not self._samples or now_ms - self._samples[-1][0] >= self.size_ms:
            self._samples.append([now_ms, 0.0])
            if len(self._samples) > self.num:
                self._samples.pop(0)
        self._samples[-1][1] += amount

    def window_ms(self, now_ms: int) -> int:
        """The time the rate is measured over (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        elapsed = now_ms - self._samples[0][0] if self._samples else 0
        full = elapsed // self.size_ms
        if full < self.num - 1:
            elapsed += (self.num - 1 - full) * self.size_ms
        return int(elapsed)

    def per_second(self, now_ms: int) -> float:
        window = self.window_ms(now_ms)
        return sum(s[1] for s in self._samples) * 1000.0 / window if window > 0 else 0.0

    def idle_since(self, now_ms: int) -> bool:
        self._purge(now_ms)
        return not self._samples


def throttle_ms(rate: Rate, quota: float, now_ms: int) -> int:
    """The throttle Kafka computes once a recording is in `rate`: 0 while at or below `quota`."""
    observed = rate.per_second(now_ms)
    if observed <= quota:
        return 0
    return min(MAX_THROTTLE_MS, round((observed - quota) / quota * rate.window_ms(now_ms)))
