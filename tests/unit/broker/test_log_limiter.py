"""Rate-limited warnings: the first lines of each kind in full, then one count of what was suppressed."""

from __future__ import annotations

from typing import Any

from pybroker.broker.loggers.limiter import RateLimitedLog


class _Recorder:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **context: Any) -> None:
        self.lines.append((event, context))


def test_each_kind_writes_its_share_then_one_summary_per_interval() -> None:
    now = [0.0]
    out = _Recorder()
    limiter = RateLimitedLog(out, lines=3, interval_s=10, clock=lambda: now[0])
    for i in range(1000):
        limiter.warning("bad frame", "closing connection: bad frame", n=i)
    limiter.warning("refused", "connection refused")
    assert [c["n"] for e, c in out.lines if e.endswith("bad frame")] == [0, 1, 2]
    assert len(out.lines) == 4
    limiter.flush()  # the interval is not over: nothing yet
    assert len(out.lines) == 4
    now[0] = 10.0
    limiter.flush()
    summaries = [c for e, c in out.lines if e == "similar warnings suppressed"]
    assert summaries == [{"kind": "bad frame", "suppressed": 997, "interval_s": 10, "logged": 3}]
    limiter.warning("bad frame", "closing connection: bad frame", n=1000)  # a new interval logs again
    assert out.lines[-1][1] == {"n": 1000}


def test_a_new_interval_summarizes_the_last_one_when_the_next_warning_comes_first() -> None:
    now = [0.0]
    out = _Recorder()
    limiter = RateLimitedLog(out, lines=1, interval_s=5, clock=lambda: now[0])
    limiter.warning("k", "e")
    limiter.warning("k", "e")
    now[0] = 6.0
    limiter.warning("k", "e")
    assert [e for e, _ in out.lines] == ["e", "similar warnings suppressed", "e"]
