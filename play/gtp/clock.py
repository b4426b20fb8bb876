"""Clocks for a GTP engine: the time systems controllers set, what is left on each
player's clock, and how long the next move may think.

Systems (GTP's ``time_settings``, KGS's ``kgs-time_settings``): ``none``;
``absolute`` (main time only); ``byoyomi`` (main time, then periods of fixed length
that are used up one at a time, each reset by a move played within it); ``canadian``
(main time, then a period of fixed length for a fixed number of stones).

The budget rule is Leela Zero's in spirit, simple and safe: keep ``lag`` seconds
back for the controller and the network, then

- in main time: the main time left over the moves still expected of this player,
  ``max(N * N / 8, (0.75 * N * N - moves played) / 2)``, or the overtime budget
  when that is longer (overtime follows, so spending it now cannot lose);
- in byo-yomi: one period;
- in Canadian overtime: the time left over the stones still to play in the period.

Each move spends a fraction of what is left, so the clock never runs out as long as
a move stops within its budget plus ``lag``; the search stops by wall clock. What a
move takes past its budget (the last batch, the answer, a loaded machine's scheduling)
is learned as it happens (``Clock.overhead``) and taken off every budget: on a busy
machine those overruns, each small, added up to 3.5 s of a 20 s game.

``ClockCommands`` answers the three commands that set the clocks (``time_settings``,
``kgs-time_settings``, ``time_left``); it needs the clock alone, not the session.
"""

from __future__ import annotations

from dataclasses import dataclass

from tengen.play.gtp.commands import GtpError, color, expect

__all__ = ["TimeSettings", "Clock", "ClockCommands", "SYSTEMS", "parse_time_settings", "parse_kgs_time_settings"]

SYSTEMS = ("none", "absolute", "byoyomi", "canadian")
#: the longest time a controller may set (about 115 days; more is a typo or an attack,
#: and arithmetic on 1e308 ends in inf)
MAX_SECONDS = 1e7
#: the most stones or periods it may set
MAX_COUNT = 1_000_000
#: how much of each move's overrun the learned overhead takes in (a moving average:
#: one slow first move fades, a steady overrun is learned within a few moves)
OVERHEAD_WEIGHT = 0.25


class TimeRangeError(ValueError):
    """A time or count that parses but is out of range."""


def check_time(seconds: float, stones: int) -> None:
    """A TimeRangeError unless ``seconds`` is within 0..MAX_SECONDS and ``stones`` within
    0..MAX_COUNT (NaN is in neither)."""
    if not 0 <= seconds <= MAX_SECONDS:
        raise TimeRangeError(f"time {seconds:g} s is outside 0..{MAX_SECONDS:g}")
    if not 0 <= stones <= MAX_COUNT:
        raise TimeRangeError(f"count {stones} is outside 0..{MAX_COUNT}")


@dataclass(frozen=True)
class TimeSettings:
    """``system`` (one of SYSTEMS), ``main`` seconds, ``period`` seconds, and
    ``count``: stones per period (canadian) or number of periods (byoyomi)."""

    system: str = "none"
    main: float = 0.0
    period: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if self.system not in SYSTEMS:
            raise ValueError(f"unknown time system {self.system!r}")
        check_time(self.main, self.count)
        check_time(self.period, 0)
        if self.system in ("byoyomi", "canadian") and (self.period <= 0 or self.count <= 0):
            raise ValueError(f"{self.system} needs a positive period and count")


def parse_time_settings(main: float, period: float, stones: int) -> TimeSettings:
    """GTP 2 ``time_settings``: byo-yomi time 0 is absolute time; a byo-yomi time
    with 0 stones means no limit; otherwise Canadian overtime (a negative main time
    there is none: ``_overtime_main``)."""
    if period > 0 and stones == 0:
        return TimeSettings("none")
    if period == 0:
        return TimeSettings("absolute", main) if main > 0 else TimeSettings("none")
    return TimeSettings("canadian", _overtime_main(main), period, stones)


def _overtime_main(main: float) -> float:
    """The main time before Canadian overtime, a negative one as none: gtp2ogs sends
    a Fischer clock as Canadian overtime of one stone per increment after the initial
    time less the increment, which is negative when the increment is the larger (it
    checks a challenge's increment, never its initial time)."""
    return max(main, 0.0)


def parse_kgs_time_settings(words: list[str]) -> TimeSettings:
    """``kgs-time_settings none | absolute MAIN | byoyomi MAIN PERIOD PERIODS |
    canadian MAIN PERIOD STONES``; raises ValueError on anything else."""
    if not words:
        raise ValueError("missing time system")
    system, args = words[0].lower(), words[1:]
    arity = {"none": 0, "absolute": 1, "byoyomi": 3, "canadian": 3}
    if system not in arity or len(args) != arity[system]:
        raise ValueError(f"bad kgs-time_settings: {' '.join(words)}")
    if system == "none":
        return TimeSettings("none")
    if system == "absolute":
        return TimeSettings("absolute", float(args[0]))
    main = float(args[0])
    return TimeSettings(system, _overtime_main(main) if system == "canadian" else main, float(args[1]), int(args[2]))


@dataclass
class _Side:
    main: float  # main time left
    period: float  # time left in the current overtime period (when in overtime)
    count: int  # byoyomi: periods left; canadian: stones left in the period; 0: in main time


class Clock:
    """Both players' clocks under one ``TimeSettings``, set by ``time_left`` or, when
    the controller sends none, by the engine's own accounting of its moves."""

    def __init__(self, settings: TimeSettings | None = None, *, lag: float = 0.5):
        if lag < 0:
            raise ValueError("lag must not be negative")
        self.lag = lag
        self.settings = settings or TimeSettings()
        self.sides = [self._fresh(), self._fresh()]
        #: seconds a move takes past its budget, learned from the moves played (this
        #: machine's, so it outlives a game)
        self.overhead = 0.0

    def _fresh(self) -> _Side:
        return _Side(self.settings.main, 0.0, 0)

    def reset(self, settings: TimeSettings | None = None) -> None:
        """New settings (or the same) with both clocks full, as at a new game."""
        if settings is not None:
            self.settings = settings
        self.sides = [self._fresh(), self._fresh()]

    @property
    def limited(self) -> bool:
        return self.settings.system != "none"

    def time_left(self, color: int, seconds: float, stones: int) -> None:
        """GTP ``time_left``: ``seconds`` left in the current period (main time when
        ``stones`` is 0); ``stones`` left in the Canadian period, or for byo-yomi the
        periods left (KGS's convention)."""
        side = self.sides[color]
        if stones == 0 or self.settings.system in ("none", "absolute"):
            side.main, side.period, side.count = seconds, 0.0, 0
        else:
            side.main, side.period, side.count = 0.0, seconds, stones

    def spend(self, color: int, seconds: float, *, budget: float | None = None) -> None:
        """Take a move's ``seconds`` off ``color``'s clock, entering overtime and
        starting new periods as the system says; with the ``budget`` the move had,
        learn what it took past it."""
        s, side = self.settings, self.sides[color]
        if s.system == "none":
            return
        if budget is not None:
            self.overhead += OVERHEAD_WEIGHT * (max(0.0, seconds - budget) - self.overhead)
        if side.count == 0:
            used = min(seconds, side.main)
            side.main -= used
            seconds -= used
            if side.main > 0 or s.system == "absolute":
                return
            # Main time is gone: overtime starts with a full period.
            side.count = s.count
            side.period = s.period
            if seconds <= 0:
                return
        if s.system == "byoyomi":
            while seconds >= side.period and side.count > 0:
                seconds -= side.period
                side.count -= 1
                side.period = s.period
            side.period = s.period  # a move inside a period resets it
        else:  # canadian
            side.period -= seconds
            side.count -= 1
            if side.count <= 0:
                side.count, side.period = s.count, s.period

    def budget(self, color: int, *, board_size: int, moves_played: int) -> float | None:
        """Seconds the next move of ``color`` may think (0: answer at once), or None
        without a time limit."""
        s = self.settings
        if s.system == "none":
            return None
        return max(0.0, self._share(color, board_size, moves_played) - self.overhead)

    def _share(self, color: int, board_size: int, moves_played: int) -> float:
        # the rule's share of the time left for the next move, before the overhead
        s, side = self.settings, self.sides[color]
        points = board_size * board_size
        moves_left = max(points / 8, (0.75 * points - moves_played) / 2)
        if s.system == "absolute":
            return max(0.0, (side.main - self.lag) / moves_left)
        overtime = max(0.0, s.period - self.lag) if s.system == "byoyomi" else max(0.0, s.period - self.lag) / s.count
        if side.count == 0:
            return max(max(0.0, side.main - self.lag) / moves_left, overtime)
        if s.system == "byoyomi":
            return max(0.0, side.period - self.lag)
        return max(0.0, side.period - self.lag) / side.count


class ClockCommands:
    """GTP's clock commands on one ``Clock`` (the session's)."""

    def __init__(self, clock: Clock):
        self.clock = clock

    def time_settings(self, args: list[str]) -> str:
        expect(args, 3)
        try:
            main, period, stones = float(args[0]), float(args[1]), int(args[2])
        except ValueError:
            raise GtpError("syntax error") from None
        try:
            settings = parse_time_settings(main, period, stones)
        except ValueError as e:
            raise GtpError(str(e)) from None
        self.clock.reset(settings)
        return ""

    def kgs_time_settings(self, args: list[str]) -> str:
        try:
            settings = parse_kgs_time_settings(args)
        except TimeRangeError as e:
            raise GtpError(str(e)) from None
        except ValueError:
            raise GtpError("syntax error") from None
        self.clock.reset(settings)
        return ""

    def time_left(self, args: list[str]) -> str:
        expect(args, 3)
        player = color(args[0])
        try:
            seconds, stones = float(args[1]), int(args[2])
        except ValueError:
            raise GtpError("syntax error") from None
        if seconds < 0 or stones < 0:
            raise GtpError("syntax error")
        try:
            check_time(seconds, stones)
        except TimeRangeError as e:
            raise GtpError(str(e)) from None
        self.clock.time_left(player, seconds, stones)
        return ""
