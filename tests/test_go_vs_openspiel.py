"""Go rules cross-checked against OpenSpiel's C++ Go (through pyspiel) on seeded random games.

How the two rule sets differ, and how these tests treat it:
- OpenSpiel numbers points from the bottom-left (a1 = 0); ours from the top-left.
  ``to_ours`` maps them; pass is N*N in both.
- Both use simple ko for legal moves, forbid suicide, end on two passes or at
  2*N*N moves, and score Tromp-Taylor area with komi.
- OpenSpiel ends the game as a draw when a move repeats an earlier whole-board
  position; with simple ko we play on (with ``superko=True`` such a move is
  illegal). When OpenSpiel stops that way we assert that the position really did
  repeat, and stop comparing that game.
"""

import numpy as np
import pyspiel
import pytest

from tengen.engine.games.go import GoGame


def compare_random_games(size: int, games: int, seed: int) -> tuple[int, int]:
    ours = GoGame(size=size, komi=7.5)
    theirs = pyspiel.load_game("go", {"board_size": size, "komi": 7.5})
    assert theirs.max_game_length() == ours.max_moves

    def to_ours(a: int) -> int:
        return a if a == size * size else (size - 1 - a // size) * size + a % size

    rng = np.random.default_rng(seed)
    moves = repeats = 0
    for _ in range(games):
        ref, state = theirs.new_initial_state(), ours.initial_state()
        seen = {ours.board(state).tobytes()}
        repeated = False  # did the last move recreate an earlier board?
        while True:
            legal_ours = set(np.flatnonzero(ours.legal_mask(state)).tolist())
            if ref.is_terminal() and not ours.is_terminal(state):
                assert ref.returns() == [0.0, 0.0]
                assert repeated, ours.render(state)
                repeats += 1
                break
            assert legal_ours == {to_ours(a) for a in ref.legal_actions()}, ours.render(state)
            if ref.is_terminal():
                assert ours.outcome(state) == ref.returns()[0], ours.render(state)
                break
            action = int(rng.choice(ref.legal_actions()))
            ref.apply_action(action)
            ours.play(state, to_ours(action))
            key = ours.board(state).tobytes()
            # A pass leaves the board as it was; only a stone can repeat a position.
            repeated = action != size * size and key in seen
            seen.add(key)
            moves += 1
    return moves, repeats


@pytest.mark.parametrize("size, games", [(9, 200), (19, 30)])
def test_same_legal_moves_ends_and_results(size, games):
    moves, _ = compare_random_games(size, games, seed=size)
    assert moves > 3000


def test_small_boards_show_openspiel_drawing_on_a_repeated_position():
    moves, repeats = compare_random_games(5, 1500, seed=5)
    assert moves > 3000 and repeats >= 1
