"""The m,n,k games: hand-checked boards, OpenSpiel as an independent referee, and
invariants over random playouts."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

from tengen.engine.games.base import IllegalMove
from tengen.engine.games.mnk import (
    DRAW,
    HEADER,
    LAST,
    MOVES,
    NO_MOVE,
    NO_WINNER,
    TO_PLAY,
    WINNER,
    MNKGame,
    connect4,
    fits_bitboard,
    gomoku,
    play_sequence,
    random_outcome,
    random_playout,
    tictactoe,
)


def board_text(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def moves(text: str) -> list[str]:
    """'1 4 2' -> ['1', '4', '2']; Connect Four games are written without spaces."""
    return text.split() if " " in text else list(text)


# -- the state and the factories ---------------------------------------------------------


def test_initial_state_layout():
    game = tictactoe()
    state = game.initial_state()
    assert state.dtype == np.int32 and state.shape == (HEADER + 9,)
    assert state[TO_PLAY] == 0 and state[MOVES] == 0
    assert state[WINNER] == NO_WINNER and state[LAST] == NO_MOVE
    assert not state[HEADER:].any()
    assert not game.is_terminal(state) and game.legal_mask(state).all()


def test_factories():
    assert (tictactoe().board_shape, tictactoe().num_actions, tictactoe().k) == ((3, 3), 9, 3)
    assert (connect4().board_shape, connect4().num_actions, connect4().k) == ((6, 7), 7, 4)
    assert (gomoku().board_shape, gomoku().num_actions, gomoku().k) == ((15, 15), 225, 5)
    assert gomoku(9).board_shape == (9, 9)
    assert [g.name for g in (tictactoe(), connect4(), gomoku())] == ["tictactoe", "connect4", "gomoku"]
    assert tictactoe().params.dtype == np.int32
    assert tictactoe().planes_shape == (3, 3, 3)
    assert len(tictactoe().symmetries) == 8 and len(connect4().symmetries) == 2
    with pytest.raises(ValueError, match="k=4"):
        MNKGame(height=3, width=3, k=4, gravity=False, name="bad")


def test_play_sets_header_and_returns_no_captures():
    game = tictactoe()
    state = game.initial_state()
    captured = game.play(state, 4)
    assert captured.shape == (0,)
    assert (game.to_play(state), game.move_number(state), state[LAST]) == (1, 1, 4)


# -- tic-tac-toe, by hand ----------------------------------------------------------------

TICTACTOE_WINS = [
    # moves (X first)   final board          outcome
    ("1 4 2 5 3", """
        X X X
        O O .
        . . .
        """, 1),
    ("1 2 4 5 7", """
        X O .
        X O .
        X . .
        """, 1),
    ("1 2 5 3 9", """
        X O O
        . X .
        . . X
        """, 1),
    ("3 1 5 2 7", """
        O O X
        . X .
        X . .
        """, 1),
    ("1 4 3 5 2", """
        X X X
        O O .
        . . .
        """, 1),  # the middle stone joins two halves of the line
    ("1 4 2 5 9 6", """
        X X .
        O O O
        . . X
        """, -1),
]


@pytest.mark.parametrize(("line", "expected", "outcome"), TICTACTOE_WINS)
def test_tictactoe_wins(line, expected, outcome):
    game = tictactoe()
    state = play_sequence(game, moves(line))
    assert game.render(state) == board_text(expected)
    assert game.is_terminal(state) and game.outcome(state) == outcome
    assert not game.legal_mask(state).any()


def test_tictactoe_no_win_before_the_line_is_complete():
    game = tictactoe()
    state = play_sequence(game, moves("1 4 2 5"))
    assert not game.is_terminal(state)
    assert game.legal_mask(state).tolist() == [False, False, True, False, False, True, True, True, True]


def test_tictactoe_draw_on_a_full_board():
    game = tictactoe()
    state = play_sequence(game, moves("1 2 3 5 4 6 8 7 9"))
    assert game.render(state) == board_text("""
        X O X
        X O O
        O X X
        """)
    assert game.is_terminal(state) and game.outcome(state) == 0 and state[WINNER] == DRAW


def test_full_board_win_on_the_last_move():
    game = tictactoe()
    # X: 1 3 6 8 then 9 completes the right column 3-6-9; O: 2 4 5 7
    state = play_sequence(game, moves("1 2 3 4 6 5 8 7 9"))
    assert game.render(state) == board_text("""
        X O X
        O O X
        O X X
        """)
    assert game.move_number(state) == 9 and game.outcome(state) == 1


# -- Gomoku, by hand ---------------------------------------------------------------------------


def test_gomoku_lines_do_not_wrap_around_the_edge():
    game = gomoku(7)
    # X takes cells 5..9: the end of row 1 and the start of row 2, five indices in a row
    state = play_sequence(game, moves("5 36 6 37 7 38 8 39 9"))
    assert game.render(state) == board_text("""
        . . . . X X X
        X X . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        O O O O . . .
        . . . . . . .
        """)
    assert not game.is_terminal(state)
    game.play(state, game.text_to_action("40"))  # O's fifth stone on row 6
    assert game.outcome(state) == -1


def test_gomoku_six_in_a_row_also_wins():
    game = gomoku(7)
    # X: 1 2 3 and 5 6 7 on the top row, then 4 joins them into six
    state = play_sequence(game, moves("1 43 2 44 3 45 5 46 6 48 7 49"))
    assert not game.is_terminal(state)
    game.play(state, game.text_to_action("4"))
    assert game.render(state).splitlines()[0] == "X X X X X X X"
    assert game.outcome(state) == 1


# -- Connect Four, by hand -----------------------------------------------------------------

CONNECT4_WINS = [
    ("1122334", """
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . .
        O O O . . . .
        X X X X . . .
        1 2 3 4 5 6 7
        """, 1),
    ("1212121", """
        . . . . . . .
        . . . . . . .
        X . . . . . .
        X O . . . . .
        X O . . . . .
        X O . . . . .
        1 2 3 4 5 6 7
        """, 1),
    ("12234334544", """
        . . . . . . .
        . . . . . . .
        . . . X . . .
        . . X O . . .
        . X O O . . .
        X O O X X . .
        1 2 3 4 5 6 7
        """, 1),
    ("76654554344", """
        . . . . . . .
        . . . . . . .
        . . . X . . .
        . . . O X . .
        . . . O O X .
        . . X X O O X
        1 2 3 4 5 6 7
        """, 1),
]


@pytest.mark.parametrize(("line", "expected", "outcome"), CONNECT4_WINS)
def test_connect4_wins(line, expected, outcome):
    game = connect4()
    state = play_sequence(game, moves(line))
    assert game.render(state) == board_text(expected)
    assert game.is_terminal(state) and game.outcome(state) == outcome


def test_connect4_second_player_wins_along_the_bottom():
    game = connect4()
    state = play_sequence(game, moves("71727364"))
    assert game.render(state) == board_text("""
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . . . . X
        . . . . . . X
        O O O O . X X
        1 2 3 4 5 6 7
        """)
    assert game.is_terminal(state) and game.outcome(state) == -1


def test_connect4_stones_stack_from_the_bottom():
    game = connect4()
    state = play_sequence(game, moves("444"))
    assert game.render(state) == board_text("""
        . . . . . . .
        . . . . . . .
        . . . . . . .
        . . . X . . .
        . . . O . . .
        . . . X . . .
        1 2 3 4 5 6 7
        """)
    assert game.board(state)[5, 3] == 1 and game.board(state)[4, 3] == 2
    game.play(state, 3)
    game.play(state, 3)
    assert game.legal_mask(state).all()
    game.play(state, 3)  # the sixth stone fills column 4
    assert game.legal_mask(state).tolist() == [True, True, True, False, True, True, True]


def test_connect4_draw_on_a_full_board():
    game = connect4()
    state = play_sequence(game, moves("666165577462463234152541333211132724554777"))
    assert game.render(state) == board_text("""
        X X O X O O O
        O X X O X X X
        X O O X O X O
        O X X O O X O
        X O X X X O X
        O O X O O X O
        1 2 3 4 5 6 7
        """)
    assert game.is_terminal(state) and game.outcome(state) == 0 and game.move_number(state) == 42


# -- illegal moves ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("game", "line", "action", "message"),
    [
        (tictactoe(), "5", 4, "5 is not legal"),  # occupied cell
        (tictactoe(), "", 9, "outside"),
        (tictactoe(), "", -1, "outside"),
        (connect4(), "444444", 3, "4 is not legal"),  # full column
        (connect4(), "", 7, "outside"),
        (tictactoe(), "1 4 2 5 3", 8, "over"),  # X already won
        (connect4(), "1212121", 6, "over"),
    ],
)
def test_illegal_moves_raise_and_leave_the_state_alone(game, line, action, message):
    state = play_sequence(game, moves(line) if line else [])
    before = state.copy()
    with pytest.raises(IllegalMove, match=message):
        game.play(state, action)
    np.testing.assert_array_equal(state, before)


# -- move text ----------------------------------------------------------------------------------


@pytest.mark.parametrize("game", [tictactoe(), connect4(), gomoku(9)])
def test_text_round_trips(game):
    for action in range(game.num_actions):
        text = game.action_to_text(action)
        assert text == str(action + 1)
        assert game.text_to_action(text) == action
    assert game.text_to_action(" 3 ") == 2


@pytest.mark.parametrize(
    ("game", "text"),
    [(tictactoe(), "0"), (tictactoe(), "10"), (tictactoe(), "x"), (tictactoe(), ""), (tictactoe(), "1.5"),
     (tictactoe(), "-1"), (connect4(), "8"), (connect4(), "D4"), (connect4(), "٣")],
)
def test_bad_text_names_the_text(game, text):
    with pytest.raises(ValueError, match=repr(text)):
        game.text_to_action(text)


def test_render_tictactoe_has_no_column_numbers():
    game = tictactoe()
    assert game.render(game.initial_state()) == ". . .\n. . .\n. . ."


# -- OpenSpiel as the referee ----------------------------------------------------------------


def _spiel_board(spiel_state, height):
    """OpenSpiel prints both games top row first, 'x' for player 0, 'o' for player 1."""
    rows = str(spiel_state).strip().splitlines()[:height]
    return np.array([[".xo".index(ch) for ch in row] for row in rows], dtype=np.int8)


@pytest.mark.parametrize(
    ("game", "spiel_name", "num_games"),
    [(tictactoe(), "tic_tac_toe", 400), (connect4(), "connect_four", 150)],
)
def test_matches_openspiel_on_random_games(game, spiel_name, num_games):
    pyspiel = pytest.importorskip("pyspiel")
    spiel_game = pyspiel.load_game(spiel_name)
    rng = np.random.default_rng(7)
    total_moves = 0
    outcomes = set()
    for _ in range(num_games):
        state, ref = game.initial_state(), spiel_game.new_initial_state()
        while True:
            mask = game.legal_mask(state)
            assert np.flatnonzero(mask).tolist() == sorted(ref.legal_actions())
            assert game.is_terminal(state) == ref.is_terminal()
            np.testing.assert_array_equal(game.board(state), _spiel_board(ref, game.board_shape[0]))
            if ref.is_terminal():
                break
            assert game.to_play(state) == ref.current_player()
            action = int(rng.choice(np.flatnonzero(mask)))
            game.play(state, action)
            ref.apply_action(action)
            total_moves += 1
        assert ref.returns() == [game.outcome(state), -game.outcome(state)]
        outcomes.add(game.outcome(state))
    # random Connect Four games are rarely drawn; the draw has its own check below
    assert total_moves > 2000 and {-1.0, 1.0} <= outcomes


def test_openspiel_agrees_on_the_connect4_draw():
    pyspiel = pytest.importorskip("pyspiel")
    ref = pyspiel.load_game("connect_four").new_initial_state()
    for column in moves("666165577462463234152541333211132724554777"):
        ref.apply_action(int(column) - 1)
    assert ref.is_terminal() and ref.returns() == [0.0, 0.0]


# -- the compiled random playout ---------------------------------------------------------------


@pytest.mark.parametrize("game", [tictactoe(), connect4(), gomoku()])
def test_random_playout_is_seeded_and_ends_the_game(game):
    finals = []
    for seed in range(20):
        first, second = game.initial_state(), game.initial_state()
        played = random_playout(game.params, first, seed)
        assert game.random_playout(second, seed) == played
        np.testing.assert_array_equal(first, second)
        assert game.is_terminal(first) and played == game.move_number(first)
        assert not game.legal_mask(first).any()
        finals.append(first.tobytes())
    assert len(set(finals)) > 10  # different seeds, different games


def test_random_playout_continues_a_game_in_progress():
    game = connect4()
    state = play_sequence(game, moves("4444"))
    played = game.random_playout(state, 11)
    assert game.move_number(state) == 4 + played
    assert game.board(state)[2:, 3].tolist() == [2, 1, 2, 1]


# -- invariants over random games (hypothesis) ---------------------------------------------------

GAMES = [
    tictactoe(),
    connect4(),
    gomoku(7),
    MNKGame(height=3, width=4, k=3, gravity=False, name="mnk343"),
    MNKGame(height=4, width=5, k=3, gravity=True, name="gravity453"),
]


def random_actions(game, seed, stop_after):
    """A random legal game, cut after ``stop_after`` moves: (actions, final state)."""
    rng = np.random.default_rng(seed)
    state, actions = game.initial_state(), []
    while not game.is_terminal(state) and len(actions) < stop_after:
        legal = np.flatnonzero(game.legal_mask(state))
        assert legal.size > 0  # a legal move exists until the end
        action = int(rng.choice(legal))
        game.play(state, action)
        actions.append(action)
    return actions, state


positions = st.tuples(
    st.sampled_from(GAMES), st.integers(0, 2**32 - 1), st.integers(0, 60)
).map(lambda t: (t[0], *random_actions(*t)))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(GAMES), st.integers(0, 2**32 - 1))
def test_random_games_end_with_a_result(game, seed):
    actions, state = random_actions(game, seed, 10**6)
    assert game.is_terminal(state)
    assert game.outcome(state) in (-1.0, 0.0, 1.0)
    assert not game.legal_mask(state).any()
    assert game.move_number(state) == len(actions) <= game.board_shape[0] * game.board_shape[1]
    # both players' stone counts differ by at most one, the mover's side being the short one
    board = game.board(state)
    assert (board == 1).sum() - (board == 2).sum() == game.to_play(state)


@njit
def _seeded_random_outcome(params, state, seed):
    np.random.seed(seed)
    return random_outcome(params, state, np.empty_like(state))


#: a gravity board too tall for the 64-bit playout, beside those of GAMES
TALL = MNKGame(height=8, width=8, k=5, gravity=True, name="gravity885")


@settings(max_examples=150, deadline=None)
@given(st.sampled_from([*GAMES, TALL]), st.integers(0, 2**32 - 1), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_a_playout_outcome_is_the_random_game_s_own(game, seed, moves_first, playout_seed):
    # random_outcome (the bitboards of Connect Four and its kin) plays the same game
    # as random_playout from the same seed, and leaves the position as it was
    _, state = random_actions(game, seed, moves_first)
    before = state.copy()
    played = state.copy()
    random_playout(game.params, played, playout_seed)
    assert _seeded_random_outcome(game.params, state, playout_seed) == game.outcome(played)
    np.testing.assert_array_equal(state, before)
    assert fits_bitboard(game.params) == (game.gravity and game is not TALL)


@settings(max_examples=60, deadline=None)
@given(positions)
def test_symmetric_images_encode_alike(position):
    game, actions, state = position
    planes, mask = game.encode(state), game.legal_mask(state)
    keys = set()
    for k in range(len(game.symmetries)):
        image = play_sequence(game, [game.map_action(a, k) for a in actions])
        np.testing.assert_array_equal(game.encode(image), game.transform_planes(planes, k))
        np.testing.assert_array_equal(game.legal_mask(image), game.transform_policy(mask, k))
        assert game.is_terminal(image) == game.is_terminal(state)
        assert game.outcome(image) == game.outcome(state)
        keys.add(game.canonical_key(image))
    assert len(keys) == 1


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(GAMES), st.integers(0, 2**32 - 1))
def test_policy_transform_round_trips(game, seed):
    policy = np.random.default_rng(seed).random((2, game.num_actions)).astype(np.float32)
    for k in range(len(game.policy_symmetries)):
        back = game.transform_policy(game.transform_policy(policy, k), game.symmetries.inverse[k])
        np.testing.assert_array_equal(back, policy)
        planes = np.random.default_rng(seed).random((*game.planes_shape,)).astype(np.float32)
        back = game.transform_planes(game.transform_planes(planes, k), game.symmetries.inverse[k])
        np.testing.assert_array_equal(back, planes)
