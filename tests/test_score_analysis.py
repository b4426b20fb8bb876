"""Analysis reports the score head's estimate where the model has one: ``NetworkScore``
turns the head's (mean, stdev) to Black's view over the board's symmetries, and the
analysis engine writes it as scoreLead/scoreMean/scoreStdev for the root and after each
move, in the perspective asked for; without the head the scores are the ownership's
area count, with no spread. A fake head and a fake estimate with values worked by hand."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from tengen.engine.games.go import GoGame
from tengen.engine.mcts import SearchSettings
from tengen.play.analysis_engine import AnalysisEngine
from tengen.play.score import NetworkScore, ScoreBelief
from tengen.play.search_player import SearchPlayer

GO9 = GoGame(size=9)


def test_network_score_averages_the_symmetries_and_turns_to_blacks_view():
    seen = []

    def head(images):
        # one row per image: means 0..7, spreads alternately 4 and 2
        seen.append(images.shape)
        return np.array([[float(i), 4.0 if i % 2 == 0 else 2.0] for i in range(len(images))], np.float32)

    score = NetworkScore(GO9, head)
    state = GO9.initial_state()
    # mean (0 + ... + 7) / 8 = 3.5; spread sqrt((16 + 4) / 2) = sqrt(10): the variances averaged
    assert score(state, []) == pytest.approx(ScoreBelief(3.5, math.sqrt(10)))
    assert seen == [(8, *GO9.planes_shape)]
    history = [state.copy()]
    GO9.play(state, GO9.text_to_action("E5"))  # White to move: the head's 3.5 is White's lead
    assert score(state, history) == pytest.approx(ScoreBelief(-3.5, math.sqrt(10)))
    assert NetworkScore(GO9, head, symmetries=False)(state, history) == pytest.approx(ScoreBelief(-0.0, 4.0))
    with pytest.raises(ValueError, match="not \\(mean, stdev\\)"):
        NetworkScore(GO9, lambda images: np.zeros((len(images), 3)))(state, history)


def stones_plus_2_5(state, history):
    """A fake score estimate: Black leads by 2.5 plus one point per stone on the board."""
    return ScoreBelief(2.5 + int(np.count_nonzero(GO9.board(state))), 3.0)


def nobodys(state, history):
    """A fake ownership estimate: every point dame, so an area count gives -komi."""
    return np.zeros(81, np.float32)


def analyse(query: dict, *, score: bool) -> dict:
    lines: list[str] = []
    engine = AnalysisEngine(make_player=lambda: SearchPlayer(None, search=SearchSettings(simulations=8),
                                                             simulations=8),
                            sizes=[9], ownership_for=lambda game: nobodys, default_visits=8, write=lines.append,
                            version="test", model_name="fake", score_for=(lambda game: stones_plus_2_5) if score
                            else None)
    engine.handle_line(json.dumps({"id": "q", "rules": "chinese", "komi": 7.5, "boardXSize": 9, "boardYSize": 9,
                                   **query}))
    engine.close()
    [result] = [json.loads(line) for line in lines]
    return result


@pytest.mark.parametrize("perspective, sign", [("BLACK", 1), ("SIDETOMOVE", -1)])
def test_the_engine_reports_the_heads_score_for_the_root_and_after_each_move(perspective, sign):
    # turn 1: one black stone, White to move. The root: Black leads by 2.5 + 1 = 3.5;
    # after a White stone 4.5, after White's pass still 3.5. From White's side: negated.
    result = analyse({"moves": [["B", "E5"]], "analyzeTurns": [1],
                      "overrideSettings": {"reportAnalysisWinratesAs": perspective}}, score=True)
    root = result["rootInfo"]
    assert (root["scoreLead"], root["scoreSelfplay"], root["scoreStdev"]) == (sign * 3.5, sign * 3.5, 3.0)
    assert result["moveInfos"]
    for info in result["moveInfos"]:
        after = 3.5 if info["move"] == "pass" else 4.5
        assert (info["scoreLead"], info["scoreMean"], info["scoreStdev"]) == (sign * after, sign * after, 3.0)


def test_without_the_head_the_scores_are_the_ownership_count_with_no_spread():
    # every point dame: Black's area lead is 0, less komi: -7.5 for Black, 7.5 for White to move
    result = analyse({"moves": [["B", "E5"]], "analyzeTurns": [1],
                      "overrideSettings": {"reportAnalysisWinratesAs": "SIDETOMOVE"}}, score=False)
    assert result["rootInfo"]["scoreLead"] == 7.5 and "scoreStdev" not in result["rootInfo"]
    assert all(info["scoreLead"] == 7.5 and "scoreStdev" not in info for info in result["moveInfos"])


def test_kata_analyze_gives_each_move_the_score_after_it_for_the_player_to_move():
    from gtp_clients import sabaki_parse_analysis

    from tengen.play.gtp import GtpEngine

    def stones_minus_komi(game):
        # a stand-in head, Black's view: Black's stones less White's, less komi
        def score(state, history):
            board = game.board(state)
            return ScoreBelief(float((board == 1).sum() - (board == 2).sum()) - game.komi, 4.0)
        return score

    engine = GtpEngine(size=9, seed=0, analysis_visits=32, score=stones_minus_komi)
    head, line, _ = engine.handle("kata-analyze b 10").split("\n", 2)
    moves, _ = sabaki_parse_analysis(line, size=9)  # as Sabaki reads the line
    assert head == "=" and moves
    # after each Black move: one Black stone, komi 7.5 against it
    assert {(m["fields"]["scoreLead"], m["fields"]["scoreMean"], m["fields"]["scoreStdev"]) for m in moves} == {
        ("-6.500000", "-6.500000", "4.000000")}
    assert engine.handle("play b D4") == "=\n\n"
    _, line, _ = engine.handle("kata-analyze w 10").split("\n", 2)
    # White to move: a stone each after its move, so White leads by komi
    assert {m["fields"]["scoreLead"] for m in sabaki_parse_analysis(line, size=9)[0]} == {"7.500000"}
    _, line, _ = engine.handle("lz-analyze b 10").split("\n", 2)
    assert "score" not in line  # Leela Zero's dialect has no score
