"""Go's feature planes (engine/games/go_features.py) by example: boards as ASCII art
(top row first, X black, O white), each plane worked out by hand."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_go import KO, play, position, random_game

from tengen.engine.games.go import GoGame
from tengen.engine.games.go_features import FEATURE_PLANES
from tengen.engine.mcts import Search, SearchSettings

GO5 = GoGame(size=5, history_length=2, features=True)
#: the planes after the stones' 2T: liberties 1-4+ of the mover's groups, of the
#: opponent's, the ko point, the legal moves, the ladder-captured stones, the
#: ladder-catching moves, the mover's komi (8); the colour plane is still the last
MOVER_LIBS, OPPONENT_LIBS, KO_PLANE, LEGAL, KOMI = 4, 8, 12, 13, 16
#: 9x9 for ladders, with one past position: the features start at plane 2
GO9 = GoGame(size=9, history_length=1, features=True)
LADDERED, CATCHING = 2 + 10, 2 + 11


def plane(game, state, index):
    return game.encode(state)[..., index].astype(int)


def test_liberty_planes_count_each_groups_distinct_liberties():
    s = position(GO5, """
        X X . O .
        O X . O .
        . O . . .
        . . . X X
        . . . X .
    """)  # black to move
    # black's top group (A5 B5 B4) has C5 and C4: 2 (A4 is white); the bottom group
    # (D2 E2 D1) has D3 E3 C2 C1 E1: 4 or more. White A4 has A3: 1; B3 has B2 A3 C3:
    # 3; the D5-D4 group has C5 E5 C4 E4 D3: 4 or more.
    libs = {n: plane(GO5, s, MOVER_LIBS + n - 1) for n in (1, 2, 3, 4)}
    assert libs[2].tolist() == [[1, 1, 0, 0, 0], [0, 1, 0, 0, 0], [0] * 5, [0] * 5, [0] * 5]
    assert libs[4].tolist() == [[0] * 5, [0] * 5, [0] * 5, [0, 0, 0, 1, 1], [0, 0, 0, 1, 0]]
    assert libs[1].sum() == libs[3].sum() == 0
    theirs = {n: plane(GO5, s, OPPONENT_LIBS + n - 1) for n in (1, 2, 3, 4)}
    assert np.argwhere(theirs[1]).tolist() == [[1, 0]]  # A4
    assert np.argwhere(theirs[3]).tolist() == [[2, 1]]  # B3
    assert np.argwhere(theirs[4]).tolist() == [[0, 3], [1, 3]]  # D5, D4
    assert theirs[2].sum() == 0
    # the same position with white to move: the planes swap sides
    w = position(GO5, """
        X X . O .
        O X . O .
        . O . . .
        . . . X X
        . . . X .
    """, to_play="white")
    assert (plane(GO5, w, OPPONENT_LIBS + 1) == libs[2]).all() and (plane(GO5, w, MOVER_LIBS) == theirs[1]).all()


def test_the_ko_plane_marks_the_point_the_mover_may_not_retake_and_legal_moves_leave_it_out():
    s = position(GO5, KO)
    play(GO5, s, "C3")  # black takes the ko: white may not retake at B3 at once
    ko = plane(GO5, s, KO_PLANE)
    b3 = GO5.text_to_action("B3")
    assert ko.reshape(-1).tolist() == [int(a == b3) for a in range(25)]
    legal = plane(GO5, s, LEGAL).reshape(-1)
    assert legal.tolist() == GO5.legal_mask(s)[:25].astype(int).tolist() and legal[b3] == 0


def test_the_search_writes_the_same_feature_planes_as_the_game_and_symmetries_carry_them():
    s = position(GO5, KO)
    play(GO5, s, "C3")
    search = Search(GO5, games=1, settings=SearchSettings(simulations=30))
    search.reset(0, s)
    planes = search.gather()
    assert planes.shape[-1] == 2 * 2 + FEATURE_PLANES + 1 and np.array_equal(planes[0], GO5.encode(s))
    # a symmetry of the position has the symmetry's image of its planes
    for k in range(8):
        board = GO5.symmetries.apply_board(GO5.board(s), k)
        image = GO5.state_from_board(board, to_play=GO5.to_play(s))
        expected = GO5.transform_planes(GO5.encode(s), k)[..., 4:-1]
        got = GO5.encode(image)[..., 4:-1]
        assert np.array_equal(got[..., :8], expected[..., :8])  # liberties (ko needs the move, not the board)


def points(game, state, index):
    """The points where plane ``index`` is 1, as GTP vertices."""
    return sorted(game.action_to_text(int(a)) for a in np.flatnonzero(plane(game, state, index)))


#: White C3 has two liberties, C4 and D3, beside black B3, B4 and C2 (black to move).
LADDER = """
    . . . . . . . . .
    . . . . . . . . .
    . . . . . . . . .
    . . . . . . . . .
    . . . . . . . . .
    . X . . . . . . .
    . X O . . . . . .
    . . X . . . . . .
    . . . . . . . . .
"""


def test_an_atari_that_starts_a_working_ladder_is_a_catching_move_and_the_runner_is_marked():
    s = position(GO9, LADDER)
    # Black D3: white runs to C4 (liberties C5 D4), black C5, white D4 (D5 E4), black
    # E4, white D5 (D6 E5), black D6, white E5 (E6 F5), black F5, white E6 (E7 F6),
    # black E7, white F6 (F7 G6), black G6, white F7 (F8 G7), black F8, white G7
    # (G8 H7), black H7, white G8 (G9 H8), black G9, white H8 (H9 J8), black J8, and
    # white H9 has one liberty, J9: taken. Black C4 instead: white D3 has D2 D4 E3.
    assert points(GO9, s, CATCHING) == ["D3"]
    assert points(GO9, s, LADDERED) == []  # nothing is in atari yet
    play(GO9, s, "D3")
    # white to move: running does not help its own stone
    assert points(GO9, s, LADDERED) == ["C3"]
    assert points(GO9, s, CATCHING) == []  # black's stones have 3 or more liberties
    # black to move (white passed): white's stone is dead even if it runs
    GO9.play(s, GO9.pass_action)
    assert points(GO9, s, LADDERED) == ["C3"]


def test_a_ladder_breaker_on_the_ladders_path_saves_the_runner():
    # LADDER with a white stone on G8: in the line above, white G7 joins it and has
    # G9 H8 H7, three liberties.
    s = position(GO9, """
        . . . . . . . . .
        . . . . . . O . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . X . . . . . . .
        . X O . . . . . .
        . . X . . . . . .
        . . . . . . . . .
    """)
    assert points(GO9, s, CATCHING) == []
    play(GO9, s, "D3")
    assert points(GO9, s, LADDERED) == []


def test_a_ladder_across_the_whole_19x19_board_is_read_to_its_end():
    # LADDER's stones in the 19x19 corner: the same staircase runs up to the top right
    # (more than 60 plies, within the reader's 4 x 19 + 4); a white stone on R17, on
    # its way, breaks it.
    go19 = GoGame(size=19, history_length=1, features=True)
    for breaker, catching in ((None, ["D3"]), ("R17", [])):
        board = np.zeros((19, 19), dtype=np.int8)
        for vertex, colour in [("B3", 1), ("B4", 1), ("C2", 1), ("C3", 2)] + ([(breaker, 2)] if breaker else []):
            board.reshape(-1)[go19.text_to_action(vertex)] = colour
        s = go19.state_from_board(board)
        assert points(go19, s, CATCHING) == catching
        play(go19, s, "D3")
        assert points(go19, s, LADDERED) == ["C3" for _ in catching]


def test_the_runner_escapes_by_taking_a_chasing_stone_in_atari():
    # White E3 beside the ladder: after black D3, white C4, black C5, white D4, black's
    # D3 has one liberty left, D2. After black E4 white takes it on D2 and has D3 D5,
    # black may not play D3 (no liberty, nothing taken) and white D3 after black D5
    # joins D2 and E3; after black D5 the same with E4. Black C4 instead: white D3
    # joins E3.
    s = position(GO9, """
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . X . . . . . . .
        . X O . O . . . .
        . . X . . . . . .
        . . . . . . . . .
    """)
    assert points(GO9, s, CATCHING) == []
    play(GO9, s, "D3")
    assert points(GO9, s, LADDERED) == []


def test_a_stone_in_atari_on_the_second_line_dies_along_the_edge():
    # White C2 beside black B2 and C3: black D2 ataris it; white C1 has B1 D1, black
    # B1, and white D1 has only E1: taken (black D1 first is the same the other way).
    # Black C1 instead: white D2 has D1 D3 E2.
    s = position(GO9, """
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . . . . . . . .
        . . X . . . . . .
        . X O . . . . . .
        . . . . . . . . .
    """)
    assert points(GO9, s, CATCHING) == ["D2"]
    play(GO9, s, "D2")
    assert points(GO9, s, LADDERED) == ["C2"]


def test_the_ladder_planes_of_a_symmetric_image_are_the_image_of_the_planes():
    s = position(GO9, LADDER)
    play(GO9, s, "D3", "A9")  # white elsewhere: black to move, white C3 still in atari
    for art_state in (position(GO9, LADDER), s):
        planes = GO9.encode(art_state)
        for k in range(8):
            board = GO9.symmetries.apply_board(GO9.board(art_state), k)
            image = GO9.state_from_board(board, to_play=GO9.to_play(art_state))
            expected = GO9.transform_planes(planes, k)[..., LADDERED:CATCHING + 1]
            assert np.array_equal(GO9.encode(image)[..., LADDERED:CATCHING + 1], expected)
    assert points(GO9, s, LADDERED) == ["C3"]


GO7 = GoGame(size=7, history_length=1, features=True)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), length=st.integers(0, 80), k=st.integers(0, 7))
def test_every_feature_plane_of_a_game_played_under_a_symmetry_is_the_image_of_the_plane(seed, length, k):
    # random games on 7x7 leave groups in atari and in ladders; the image game plays
    # the image moves, so it has the image ko too
    s, _, moves = random_game(GO7, seed, length)
    image = GO7.initial_state()
    for m in moves:
        GO7.play(image, GO7.map_action(m, k))
    assert np.array_equal(GO7.encode(image), GO7.transform_planes(GO7.encode(s), k))


def test_the_komi_planes_are_the_movers_komi_as_a_thermometer():
    # thresholds -7.25 -6.25 -5.25 -0.25 0.25 5.25 6.25 7.25; komi goes to white, so
    # black's komi is -komi
    expected = {
        (7.5, "black"): [0, 0, 0, 0, 0, 0, 0, 0],  # -7.5
        (7.5, "white"): [1, 1, 1, 1, 1, 1, 1, 1],  # +7.5
        (0.0, "black"): [1, 1, 1, 1, 0, 0, 0, 0],  # 0: above -0.25, not above 0.25
        (0.0, "white"): [1, 1, 1, 1, 0, 0, 0, 0],
        (6.5, "black"): [1, 0, 0, 0, 0, 0, 0, 0],  # -6.5: only above -7.25
        (6.5, "white"): [1, 1, 1, 1, 1, 1, 1, 0],  # 6.5: all but 7.25
    }
    for (komi, to_play), thermometer in expected.items():
        game = GoGame(size=5, history_length=2, komi=komi, features=True)
        s = position(game, ". . . . .\n" * 5, to_play=to_play)
        planes = game.encode(s)[..., KOMI:KOMI + 8]
        assert planes.reshape(-1, 8).min(axis=0).tolist() == thermometer  # every point alike
        assert planes.reshape(-1, 8).max(axis=0).tolist() == thermometer
