"""Clocks and move budgets (play/gtp/clock.py), numbers worked out by hand, and a
9x9 game on a short absolute clock against GNU Go with a real (tiny) model."""

from __future__ import annotations

import pytest

from tengen.play.gtp import GtpEngine
from tengen.play.gtp.clock import Clock, TimeSettings, parse_kgs_time_settings, parse_time_settings

BLACK, WHITE = 0, 1


def test_gtp_time_settings_follow_the_spec() -> None:
    assert parse_time_settings(300, 0, 0) == TimeSettings("absolute", 300)
    assert parse_time_settings(0, 0, 0) == TimeSettings("none")  # no time at all: no limit
    assert parse_time_settings(0, 10, 0) == TimeSettings("none")  # byo-yomi time, no stones: no limit
    assert parse_time_settings(600, 300, 25) == TimeSettings("canadian", 600, 300, 25)
    # gtp2ogs's Fischer clock with an increment above the initial time: no main time
    assert parse_time_settings(10 - 30, 30, 1) == TimeSettings("canadian", 0, 30, 1)


def test_kgs_time_settings() -> None:
    assert parse_kgs_time_settings(["none"]) == TimeSettings("none")
    assert parse_kgs_time_settings(["absolute", "60"]) == TimeSettings("absolute", 60)
    assert parse_kgs_time_settings(["byoyomi", "600", "30", "5"]) == TimeSettings("byoyomi", 600, 30, 5)
    assert parse_kgs_time_settings(["canadian", "600", "300", "25"]) == TimeSettings("canadian", 600, 300, 25)
    assert parse_kgs_time_settings(["canadian", "-20", "30", "1"]) == TimeSettings("canadian", 0, 30, 1)
    for bad in (["byoyomi", "600", "30"], ["fischer", "60", "5"], [], ["absolute"]):
        with pytest.raises(ValueError):
            parse_kgs_time_settings(bad)


# Expected own moves left on 9x9 (81 points): max(81 / 8, (60.75 - played) / 2).
#   played 0: 30.375;  played 50: 5.375, so the floor 10.125
@pytest.mark.parametrize(("settings", "left", "played", "budget"), [
    (TimeSettings("none"), None, 0, None),
    # absolute: (main left - lag 0.5) / moves left
    (TimeSettings("absolute", 61.25), None, 0, (61.25 - 0.5) / 30.375),
    (TimeSettings("absolute", 61.25), (20.75, 0), 50, (20.75 - 0.5) / 10.125),
    (TimeSettings("absolute", 61.25), (0.4, 0), 50, 0.0),  # less than the lag: answer at once
    # byo-yomi, 30 s periods: in main time at least one period (less the lag) ...
    (TimeSettings("byoyomi", 60, 30, 5), None, 0, 29.5),
    (TimeSettings("byoyomi", 1200, 30, 5), None, 0, (1200 - 0.5) / 30.375),
    # ... and in the periods one period (KGS sends the periods left as the stones)
    (TimeSettings("byoyomi", 60, 30, 5), (30, 3), 50, 29.5),
    # canadian, 300 s for 25 stones: in main time at least (300 - 0.5) / 25 ...
    (TimeSettings("canadian", 60, 300, 25), None, 0, (300 - 0.5) / 25),
    # ... in overtime the time left over the stones left
    (TimeSettings("canadian", 60, 300, 25), (100.5, 10), 50, 10.0),
])
def test_move_budgets(settings, left, played, budget) -> None:
    clock = Clock(settings, lag=0.5)
    if left is not None:
        clock.time_left(BLACK, *left)
    got = clock.budget(BLACK, board_size=9, moves_played=played)
    assert got == (None if budget is None else pytest.approx(budget))


def test_spending_enters_overtime_and_starts_new_periods() -> None:
    clock = Clock(TimeSettings("byoyomi", 10, 5, 3), lag=0)
    clock.spend(BLACK, 12)  # 10 s of main time, then 2 s of the first period
    assert (clock.sides[BLACK].main, clock.sides[BLACK].count, clock.sides[BLACK].period) == (0, 3, 5)
    clock.spend(BLACK, 6)  # a move longer than a period uses one up
    assert clock.sides[BLACK].count == 2
    assert clock.sides[WHITE].main == 10  # the other clock did not move
    canadian = Clock(TimeSettings("canadian", 0, 20, 2), lag=0)
    canadian.time_left(WHITE, 20, 2)
    canadian.spend(WHITE, 7)
    assert (canadian.sides[WHITE].period, canadian.sides[WHITE].count) == (13, 1)
    canadian.spend(WHITE, 7)  # the period's stones are played: a new period
    assert (canadian.sides[WHITE].period, canadian.sides[WHITE].count) == (20, 2)


def test_moves_that_overrun_their_budgets_on_a_busy_machine_still_finish_the_game_in_time() -> None:
    # Each of 60 moves takes 60 ms past its budget (a loaded machine's last batch and
    # scheduling); the referee sends time_left in whole seconds, as GNU Go's does.
    def game(learn: bool) -> float:
        clock, used = Clock(TimeSettings("absolute", 20), lag=0.3), 0.0
        for move in range(60):
            budget = clock.budget(BLACK, board_size=9, moves_played=2 * move)
            assert budget is not None
            took = budget + 0.06
            used += took
            clock.spend(BLACK, took, budget=budget if learn else None)
            clock.time_left(BLACK, max(0, int(20 - used)), 0)
        return used

    assert game(learn=False) > 20  # the lag kept back once does not cover 60 overruns
    assert game(learn=True) < 20
    clock = Clock(TimeSettings("absolute", 20), lag=0.3)
    clock.spend(BLACK, 1.5, budget=0.5)  # one slow move: a quarter of its overrun is learned
    assert clock.overhead == pytest.approx(0.25)
    assert clock.budget(BLACK, board_size=9, moves_played=0) == pytest.approx((18.5 - 0.3) / 30.375 - 0.25)


def test_the_engine_keeps_its_own_clock_between_time_left_commands() -> None:
    engine = GtpEngine(size=9, seed=0)
    assert engine.handle("time_settings 30 0 0") == "=\n\n"
    assert engine.handle("time_left b 12.5 0") == "=\n\n"
    assert engine.clock.sides[BLACK].main == 12.5
    engine.handle("genmove b")
    assert 12.0 < engine.clock.sides[BLACK].main < 12.5  # its own move's time came off
    assert engine.handle("clear_board") == "=\n\n"
    assert engine.clock.sides[BLACK].main == 30  # a new game starts with full clocks
