"""tengen's GTP engine against GNU Go 3.8 (``--chinese-rules``), the reference
implementation of GTP 2: whole games through a referee with KGS's cleanup phase,
the dead stones and final scores of GNU Go's own games, and the fixed handicap
points. GNU Go is Debian's package, fetched by tests/gtp_referee.py."""

from __future__ import annotations

import pytest
from gtp_referee import Engine, GtpFailure, fetch_gnugo, play_game, tengen_command

pytestmark = pytest.mark.slow  # GNU Go fetched, whole games


@pytest.fixture(scope="module")
def gnugo() -> list[str]:
    return [str(fetch_gnugo()), "--mode", "gtp", "--chinese-rules", "--level", "1"]


@pytest.fixture
def engines():
    started: list[Engine] = []

    def start(argv: list[str], name: str) -> Engine:
        engine = Engine(argv, name)
        started.append(engine)
        return engine

    yield start
    for engine in started:
        engine.close()


@pytest.mark.parametrize(("tengen_color", "seed", "cleanup"), [
    ("black", 1, "on disagreement"),
    ("white", 2, "on disagreement"),
    ("black", 3, "always"),
])
def test_games_against_gnugo_end_and_agree_on_the_score(gnugo, engines, tengen_color, seed, cleanup) -> None:
    # --no-resign: behind GNU Go when it passes, the random player would resign the
    # count (moves.py) and leave no score to compare.
    us = engines(tengen_command("--seed", str(seed), "--no-resign"), "tengen")
    them = engines(gnugo, "gnugo")
    black, white = (us, them) if tengen_color == "black" else (them, us)
    result = play_game(black, white, cleanup=cleanup)
    assert result.resigned is None
    assert result.moves[-2:] == ["PASS", "PASS"], "the game ends by two passes"
    if result.cleanup_moves:
        assert result.cleanup_moves[-2:] == ["PASS", "PASS"]
        # After the cleanup GNU Go has taken the random player's dead stones off.
        assert result.dead == {"tengen": set(), "gnugo": set()}
    assert result.dead["tengen"] == result.dead["gnugo"]
    assert result.scores["tengen"] == result.scores["gnugo"]
    assert result.scores["gnugo"].startswith("W+" if tengen_color == "black" else "B+")


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_dead_stones_and_score_of_gnugo_games_agree_with_gnugo(gnugo, engines, seed) -> None:
    # GNU Go plays itself (no cleanup: its final position still holds dead stones)
    # while tengen watches every move; then both judge the final position.
    black = engines([*gnugo, "--seed", str(seed)], "gnugo")
    white = engines([*gnugo, "--seed", str(seed + 100)], "gnugo-white")
    watcher = engines(tengen_command(), "tengen")
    result = play_game(black, white, komi=6.5, cleanup="never", watchers=(watcher,))
    assert result.resigned is None
    assert result.dead["tengen"] == result.dead["gnugo"]
    assert result.scores["tengen"] == result.scores["gnugo"]


def test_fixed_handicap_points_are_gnu_gos(gnugo, engines) -> None:
    us = engines(tengen_command(), "tengen")
    them = engines(gnugo, "gnugo")
    checked = 0
    for size in (7, 8, 9, 10, 13, 19):
        for stones in range(1, 11):
            answers = []
            for engine in (us, them):
                engine.send(f"boardsize {size}")
                engine.send("clear_board")
                try:
                    answers.append(set(engine.send(f"fixed_handicap {stones}").split()))
                except GtpFailure:
                    answers.append(None)
            assert answers[0] == answers[1], (size, stones)
            checked += answers[0] is not None
    assert checked == 3 * 3 + 8 * 3  # 2-4 stones on 7, 8 and 10; 2-9 on 9, 13 and 19
