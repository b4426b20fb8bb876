"""A clock that a test moves by hand, for the parts that take one (``clock=``, and
``sleep=`` where they wait): the test says how much time passed and asserts what the
part did, never how long the machine took."""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """Seconds on a monotonic scale that move only when told: ``advance(s)``, or a
    ``sleep(s)`` of the part under test, which returns at once and is recorded."""

    def __init__(self, start: float = 1000.0):
        self.now = float(start)
        #: every sleep the part asked for, in order
        self.sleeps: list[float] = []
        #: how many times the part has read the clock (it looked, and decided)
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now

    def advance(self, seconds: float) -> None:
        assert seconds >= 0, "a monotonic clock does not go back"
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.advance(max(0.0, seconds))
