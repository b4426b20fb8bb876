"""Go rules by example: boards as ASCII art (top row first, X black, O white)."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tengen.engine.games.base import IllegalMove
from tengen.engine.games.go import GoBoard, GoGame, RenDatabaseError


def position(game: GoGame, art: str, to_play: str = "black"):
    rows = [r.split() for r in art.strip().splitlines()]
    board = np.array([[".XO".index(c) for c in row] for row in rows], dtype=np.int8)
    return game.state_from_board(board, to_play=("black", "white").index(to_play))


def play(game, state, *vertices):
    """Plays the vertices in turn; returns the captured vertices of each move."""
    captured = [game.play(state, game.text_to_action(v)) for v in vertices]
    return [sorted(game.action_to_text(a) for a in c) for c in captured]


def stones(game, state, color):
    return sorted(game.action_to_text(a) for a in np.flatnonzero(game.board(state).reshape(-1) == color))


GO5 = GoGame(size=5)


def test_one_move_captures_two_groups():
    s = position(GO5, """
        X O . O X
        X O X O X
        . X . X .
        . . . . .
        . . . . .
    """)
    assert play(GO5, s, "C5") == [["B4", "B5", "D4", "D5"]]
    assert stones(GO5, s, 2) == []
    assert GO5.prisoners(s) == (4, 0)


def test_snapback_recaptures_at_once():
    s = position(GO5, """
        . X X X O
        X . . X .
        . . . O .
        . . . . O
        O O O . X
    """)
    # Black throws in at E3; White takes it from E4, which leaves E4-E5 with the single
    # liberty E3; Black plays E3 again and takes two. A group of two is not a ko.
    assert play(GO5, s, "E3", "E4", "E3") == [[], ["E3"], ["E4", "E5"]]
    assert GO5.ko_point(s) is None


def test_multi_stone_suicide_is_illegal_but_the_capture_is_not():
    s = position(GO5, """
        . X O . .
        X O . . .
        O . . . .
        . . . . .
        . . . . .
    """)
    mask = GO5.legal_mask(s)
    assert not mask[GO5.text_to_action("A5")]  # A5+B5+A4 would have no liberty
    with pytest.raises(IllegalMove, match="suicide"):
        GO5.play(s, GO5.text_to_action("A5"))
    assert stones(GO5, s, 1) == ["A4", "B5"]  # the failed move changed nothing
    GO5.play(s, GO5.pass_action)
    assert play(GO5, s, "A5") == [["A4", "B5"]]  # for White it captures both stones


def test_single_stone_suicide_in_the_corner_is_illegal():
    s = position(GO5, """
        . O . . .
        O . . . .
        . . . . .
        . . . . .
        . . . . .
    """)
    assert not GO5.is_legal(s, GO5.text_to_action("A5"))
    assert GO5.is_legal(s, GO5.text_to_action("B4"))


KO = """
    . . . . .
    . X O . .
    X O . O .
    . X O . .
    . . . . .
"""


def test_ko_forbids_the_immediate_recapture_but_not_one_move_later():
    s = position(GO5, KO)
    assert play(GO5, s, "C3") == [["B3"]]
    assert GO5.ko_point(s) == GO5.text_to_action("B3")
    with pytest.raises(IllegalMove, match="ko"):
        GO5.play(s, GO5.text_to_action("B3"))
    play(GO5, s, "E5", "E1")  # a ko threat and its answer
    assert play(GO5, s, "B3") == [["C3"]]


def test_a_pass_lifts_the_ko():
    s = position(GO5, KO)
    play(GO5, s, "C3", "pass", "pass")
    assert GO5.is_terminal(s) and GO5.end_reason(s) == "two passes"
    s = position(GO5, KO)
    play(GO5, s, "C3", "E5", "pass")
    assert GO5.is_legal(s, GO5.text_to_action("B3"))


def first_repetition(size=5, seed=0, games=400):
    """A seeded random game with simple ko that repeats a whole-board position with a
    stone move: (moves before the repeating move, the repeating move)."""
    game = GoGame(size=size)
    rng = np.random.default_rng(seed)
    for _ in range(games):
        s, seen, moves = game.initial_state(), set(), []
        seen.add(game.board(s).tobytes())
        while not game.is_terminal(s):
            legal = np.flatnonzero(game.legal_mask(s))
            a = int(rng.choice(legal))
            game.play(s, a)
            key = game.board(s).tobytes()
            if a != game.pass_action and key in seen:
                return moves, a
            seen.add(key)
            moves.append(a)
    raise AssertionError("no repetition found")


def test_positional_superko_forbids_what_simple_ko_allows():
    moves, repeating = first_repetition()
    simple, superko = GoGame(size=5), GoGame(size=5, superko=True)
    a, b = simple.initial_state(), superko.initial_state()
    for m in moves:
        simple.play(a, m)
        superko.play(b, m)
    assert simple.is_legal(a, repeating)
    assert not superko.is_legal(b, repeating)
    with pytest.raises(IllegalMove, match="superko"):
        superko.play(b, repeating)
    # Only that move differs: every other legal move is the same under both rules.
    differ = np.flatnonzero(simple.legal_mask(a) != superko.legal_mask(b))
    assert repeating in differ and all(not superko.is_legal(b, m) for m in differ)


def test_corner_edge_and_centre_liberties():
    board = GoBoard(GoGame(size=9))
    board.play("A1")
    board.play("E9")
    board.play("E5")
    assert board.liberty_count("A1") == 2 and board.liberties("A1") == ["A2", "B1"]
    assert board.liberty_count("E9") == 3
    assert board.liberty_count("E5") == 4
    board.play("B1", color=1)
    assert board.atari_point("A1") == "A2"
    assert board.group("A1").stones == (board.game.text_to_action("A1"),)
    board.play("E4", color=0)
    g = board.group("E5")
    assert sorted(board.game.action_to_text(a) for a in g.stones) == ["E4", "E5"]
    assert g.liberty_count == 6


def test_groups_of_a_colour():
    s = position(GO5, """
        X X . O .
        . . . O .
        X . . . .
        . . . . .
        . . . . X
    """)
    black = GO5.groups(s, color=0)
    assert [len(g.stones) for g in black] == [2, 1, 1]
    assert [len(g.stones) for g in GO5.groups(s, color=1)] == [2]


def test_undo_and_copy():
    board = GoBoard(GoGame(size=9))
    board.play("C3")
    other = board.copy()
    board.play("D4")
    assert board.group("D4") is not None and other.group("D4") is None
    assert board.undo()
    assert np.array_equal(board.state, other.state)
    assert board.undo() and board.group("C3") is None
    assert not board.undo()
    board.play("C3")
    board.clear()
    assert not board.undo()
    assert np.array_equal(board.state, board.game.initial_state())


def test_undo_restores_captured_stones():
    game = GoGame(size=5)
    board = GoBoard(game, position(game, KO))
    before = board.state.copy()
    assert board.play("C3") == ["B3"]
    board.undo()
    assert np.array_equal(board.state, before)


def test_seki_scores_nothing_inside_and_integer_komi_can_draw():
    # Both groups live on the same three liberties C5, C3 and C1 (a seki): Tromp-Taylor
    # gives empty points that reach both colours to nobody.
    game = GoGame(size=5, komi=0)
    s = position(game, """
        X X . O O
        X X O O O
        X X . O O
        X X X O O
        X X . O O
    """)
    # Black 11 stones, White 11 stones, three shared points: 11 - 11 = 0.
    assert game.area(s) == 0
    assert game.score_text(s) == "0"
    game.play(s, game.pass_action)
    game.play(s, game.pass_action)
    assert game.outcome(s) == 0.0
    assert GoGame(size=5, komi=0.5).score_text(s) == "W+0.5"


def test_tromp_taylor_counts_territory_that_reaches_one_colour():
    game = GoGame(size=5, komi=7.5)
    s = position(game, """
        . X O . .
        . X O . .
        . X O . .
        . X O . .
        . X O . .
    """)
    # Black: 5 stones + 5 points of column A; White: 5 stones + 10 points of D and E.
    assert game.area(s) == 10 - 15
    assert game.score_text(s) == "W+12.5"


def test_resignation_ends_the_game():
    game = GoGame(size=9)
    s = game.initial_state()
    game.resign(s)
    assert game.is_terminal(s) and game.outcome(s) == -1.0
    assert not game.legal_mask(s).any()


def test_move_cap_ends_the_game():
    game = GoGame(size=5, max_moves=4)
    s = game.initial_state()
    play(game, s, "A1", "B1", "C1", "D1")
    assert game.end_reason(s) == "move cap"


def test_gtp_vertices_skip_i_and_count_rows_from_the_bottom():
    game = GoGame(size=19)
    assert game.action_to_text(0) == "A19"
    assert game.action_to_text(18) == "T19"
    assert game.action_to_text(19 * 19 - 1) == "T1"
    assert game.text_to_action("j10") == 9 * 19 + 8
    assert game.action_to_text(game.pass_action) == "pass"
    for bad in ["I5", "Z1", "A0", "A20", "", "pass1", "5A"]:
        with pytest.raises(ValueError):
            game.text_to_action(bad)


def test_showboard_marks_the_last_move():
    board = GoBoard(GoGame(size=5))
    board.play("C3")
    text = str(board)
    assert text.splitlines()[0].split() == list("ABCDE")
    assert " 3 . .(X). . 3" in text


def test_ren_database_round_trip(tmp_path):
    game = GoGame(size=9)
    s = game.initial_state()
    play(game, s, "C3", "D3", "C4", "D4", "pass", "E5")
    doc = json.loads(game.rens_to_json(s))
    assert doc["header"] == {"boardWidth": 9, "boardHeight": 9}
    assert {"stone": "x", "locate": "C4 C3", "liberty": "C5 B4 B3 C2"} in doc["rens"].values()
    path = tmp_path / "rens.json"
    game.save_rens(s, path)
    loaded = game.load_rens(path)
    assert np.array_equal(game.board(loaded), game.board(s))
    assert game.groups(loaded) == game.groups(s)


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "not JSON"),
        ('{"rens": {}}', "header"),
        ('{"header": {"boardWidth": 19, "boardHeight": 19}, "rens": {}}', "19x19"),
        ('{"header": {"boardWidth": 9, "boardHeight": 9}, "rens": {"1": {"stone": "b"}}}', "'x' or 'o'"),
        ('{"header": {"boardWidth": 9, "boardHeight": 9}, "rens": {"1": {"stone": "x", "locate": "Z1"}}}',
         "not a vertex"),
        ('{"header": {"boardWidth": 9, "boardHeight": 9}, "rens": '
         '{"1": {"stone": "x", "locate": "A1 C1", "liberty": "A2 B1 C2 D1"}}}', "does not match"),
        ('{"header": {"boardWidth": 9, "boardHeight": 9}, "rens": '
         '{"1": {"stone": "x", "locate": "A1", "liberty": "B1"}}}', "does not match"),
    ],
)
def test_bad_ren_databases_are_refused_with_a_reason(text, message):
    with pytest.raises(RenDatabaseError, match=message):
        GoGame(size=9).state_from_rens(text)


def test_missing_ren_file_is_a_clear_error(tmp_path):
    with pytest.raises(RenDatabaseError, match="cannot read"):
        GoGame(size=9).load_rens(tmp_path / "none.json")


def test_copy_is_independent_and_random_playouts_replay_from_a_seed():
    game = GoGame(size=9)
    a, b = game.initial_state(), game.initial_state()
    game.random_playout(a, seed=7)
    game.random_playout(b, seed=7)
    assert np.array_equal(a, b) and game.is_terminal(a)
    c = a.copy()
    c[:] = 0
    assert game.is_terminal(a)


@pytest.mark.parametrize("size, superko", [(5, False), (9, False), (9, True)])
def test_eye_avoiding_playouts_end_when_neither_player_has_a_move_but_its_own_eyes(size, superko):
    # The light playout's stopping rule, and a check that it tracks the empty points
    # through captures: a captured point it forgot would be left empty and playable.
    game = GoGame(size=size, superko=superko, max_moves=20 * size * size)
    ended_by_passes = 0
    for seed in range(40):
        state = game.initial_state()
        game.random_playout(state, seed, avoid_own_eyes=True)
        if game.end_reason(state) != "two passes":
            continue  # a long ko fight ran into the move cap
        ended_by_passes += 1
        assert game.prisoners(state) != (0, 0), "these games have captures"
        for player in (0, 1):
            after = game.state_from_board(game.board(state), to_play=player)
            moves_left = [a for a in np.flatnonzero(game.legal_mask(after)[:-1])
                          if not game.is_own_eye(after, int(a), player)]
            assert moves_left == [], f"seed {seed}: {game.action_to_text(int(moves_left[0]))} was still open"
    assert ended_by_passes >= 35


# --- symmetries (hypothesis) ------------------------------------------------------------
GO7 = GoGame(size=7, history_length=3)


def random_game(game, seed, length):
    rng = np.random.default_rng(seed)
    s, history, moves = game.initial_state(), [], []
    for _ in range(length):
        if game.is_terminal(s):
            break
        legal = np.flatnonzero(game.legal_mask(s))
        a = int(rng.choice(legal))
        history.append(s.copy())
        game.play(s, a)
        moves.append(a)
    return s, history, moves


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), length=st.integers(0, 60), k=st.integers(0, 7))
def test_encoding_commutes_with_every_symmetry(seed, length, k):
    s, history, moves = random_game(GO7, seed, length)
    image, image_history, _ = GO7.initial_state(), [], None
    for m in moves:
        image_history.append(image.copy())
        GO7.play(image, GO7.map_action(m, k))
    assert np.array_equal(GO7.encode(image, image_history), GO7.transform_planes(GO7.encode(s, history), k))
    assert np.array_equal(GO7.legal_mask(image), GO7.transform_policy(GO7.legal_mask(s), k))
    assert GO7.canonical_key(image) == GO7.canonical_key(s)
    policy = np.random.default_rng(seed).random(GO7.num_actions)
    back = GO7.transform_policy(GO7.transform_policy(policy, k), GO7.symmetries.inverse[k])
    assert np.array_equal(back, policy)
    assert GO7.map_action(GO7.pass_action, k) == GO7.pass_action


def test_encoder_layout_for_the_side_to_move():
    game = GoGame(size=9)
    s = game.initial_state()
    history = []
    for v in ["E5", "C3"]:
        history.append(s.copy())
        game.play(s, game.text_to_action(v))
    planes = game.encode(s, history)
    assert planes.shape == (9, 9, 17)
    e5, c3 = divmod(game.text_to_action("E5"), 9), divmod(game.text_to_action("C3"), 9)
    assert planes[e5][0] == 1 and planes[c3][1] == 1  # black to move: own E5, their C3
    assert planes[e5][2] == 1 and planes[c3][3] == 0  # one move ago C3 was not there
    assert planes[..., 16].min() == 1  # black to move
    assert planes[..., 4:16].sum() == 0  # two moves ago the board was empty


def test_moves_out_of_turn_restart_the_run_of_passes():
    # GTP lets a controller play one colour twice; two passes by the same player are
    # not "two consecutive passes" of the game.
    board = GoBoard(GoGame(size=9))
    board.play("pass", color=0)
    board.play("pass", color=0)
    assert not board.game.is_terminal(board.state)
    board.play("pass", color=1)
    assert board.game.end_reason(board.state) == "two passes"
