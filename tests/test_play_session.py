"""One game of the play page without the server: moves, undo, resignation, the
result and its Go scoring with the dead stones taken off (web/session.py)."""

from __future__ import annotations

import pytest

from tengen.engine.games import IllegalMove
from tengen.engine.games.go import GoGame
from tengen.engine.games.mnk import connect4, tictactoe
from tengen.play.score import ScoreBelief
from tengen.play.search_player import Analysis, MoveStats
from tengen.play.sgf import read_sgf
from tengen.web.session import NotYourTurn, PlaySession, expected_score


def searched(action: int, visits: int = 10, value: float = 0.2) -> Analysis:
    """What a search answers when it puts all but one visit on ``action``."""
    other = 0 if action else 1
    return Analysis(visits=visits, value=value, seconds=0.01, moves=(
        MoveStats(action, visits - 1, (value + 1) / 2, 0.6, 0.3, (action, other)),
        MoveStats(other, 1, 0.4, 0.4, 0.0, (other,)),
    ))


def test_expected_score_puts_a_draw_at_one_half():
    assert [expected_score(v) for v in (-1.0, 0.0, 0.5, 1.0)] == [0.0, 0.5, 0.75, 1.0]


def test_a_tictactoe_game_with_undo_and_the_model_thinking():
    game = tictactoe()
    session = PlaySession(game, person=0, session_id="t")
    with pytest.raises(NotYourTurn, match="no move of yours"):
        session.undo()
    session.play(4)  # the centre
    with pytest.raises(NotYourTurn, match="model's move"):
        session.play(0)
    assert session.play_model(searched(0)) == 0
    with pytest.raises(IllegalMove, match="1 is not legal here"):
        session.play(0)  # the model's corner
    view = session.view()
    assert view["board"] == [[2, 0, 0], [0, 1, 0], [0, 0, 0]] and view["last_point"] == [0, 0]
    assert [m["text"] for m in view["moves"]] == ["5", "1"]
    # 9 of 10 visits on the corner, 1 on the edge next to it; the PV is the move's.
    assert view["thought"]["share"][:2] == [0.9, 0.1] and view["thought"]["pv"] == ["1", "2"]
    assert view["thought"]["expected_score"] == pytest.approx(0.6)
    assert (view["thought"]["ply"], view["thought"]["move"]) == (1, "1")
    assert session.undo() == 2 and session.moves == [] and session.view()["thought"] is None
    # X takes the diagonal 3-5-7 while O plays 1 and 2.
    for person, model in ((4, 0), (2, 1), (6, None)):
        session.play(person)
        if model is not None:
            session.play_model(searched(model))
    assert session.over and session.result().text == "X wins" and session.result().winner == 0
    with pytest.raises(NotYourTurn, match="game is over"):
        session.play(8)
    with pytest.raises(NotYourTurn, match="no resignation"):
        PlaySession(game, person=1, session_id="u").resign()


def test_connect_four_marks_where_the_stone_fell():
    session = PlaySession(connect4(), person=1, session_id="c")
    session.play_model(searched(3))
    session.play(3)
    assert session.view()["last_point"] == [4, 3]  # on top of the model's stone in the bottom row
    assert session.view()["legal"] == list(range(7))


# A 5x5 game where White's lone stone at C3 is dead inside Black's wall:
#   5 . X . X .
#   4 X X X X X
#   3 X X o X X      o: White's C3, one liberty (C2), which only Black can fill
#   2 X X . X X
#   1 X X X X X
BLACK = "B5 D5 A4 B4 C4 D4 E4 A3 B3 D3 E3 A2 B2 D2 E2 A1 B1 C1 D1 E1".split()


def test_a_go_game_is_scored_with_its_dead_stones_off():
    game = GoGame(size=5, komi=0.5)
    session = PlaySession(game, person=0, session_id="g", ownership_playouts=64)
    for i, vertex in enumerate(BLACK):
        session.play(game.text_to_action(vertex))
        session.play_model(searched(game.text_to_action("C3") if i == 0 else game.pass_action))
    session.play(game.pass_action)  # after White's pass: the game ends
    result = session.result()
    assert result.reason == "two passes" and result.dead == (game.text_to_action("C3"),)
    # Without C3 all 25 points are Black's: 25 - 0.5. As the board stands C2 touches
    # White's stone and counts for nobody: Black 20 stones + A5, C5, E5 = 23, White 1.
    assert (result.text, result.board_score, result.winner) == ("B+24.5", "B+21.5", 0)
    assert session.view()["result"]["dead"] == [game.text_to_action("C3")]
    record = read_sgf(session.sgf(application=("tengen", "test")))
    assert record.result == "B+24.5" and record.players == ("person", "tengen")
    assert len(record.moves) == 2 * len(BLACK) + 1 and record.moves[1].action == game.text_to_action("C3")
    assert session.undo() == 1 and not session.over  # Black's pass


def test_resigning_gives_the_game_to_the_model():
    game = GoGame(size=9)
    session = PlaySession(game, person=1, session_id="r")
    session.play_model(searched(game.text_to_action("E5")))
    session.resign()
    assert session.over and session.result().text == "B+R" and session.result().winner == 0
    assert "B+R" in session.sgf(application=("tengen", "test"))
    assert session.undo() == 1 and not session.over and session.moves == [game.text_to_action("E5")]


def test_the_score_head_s_belief_is_shown_from_the_model_s_side():
    game = GoGame(size=9, komi=7.5)
    session = PlaySession(game, person=0, session_id="g")
    session.play(game.text_to_action("E5"))
    # Black's view: Black ahead by 2.5, so White, the model to move, trails by 2.5
    session.play_model(searched(game.text_to_action("C3")), ScoreBelief(2.5, 6.0))
    assert (session.view()["thought"]["lead"], session.view()["thought"]["lead_stdev"]) == (-2.5, 6.0)
    session.play(game.text_to_action("G7"))
    session.play_model(searched(game.text_to_action("C7")))  # a model without the head
    assert session.view()["thought"]["lead"] is None
