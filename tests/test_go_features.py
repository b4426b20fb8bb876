"""Go's feature planes (engine/games/go_features.py) by example: boards as ASCII art
(top row first, X black, O white), each plane worked out by hand."""

import numpy as np
from test_go import KO, play, position

from tengen.engine.games.go import GoGame
from tengen.engine.mcts import Search, SearchSettings

GO5 = GoGame(size=5, history_length=2, features=True)
#: the planes after the stones' 2T: liberties 1-4+ of the mover's groups, of the
#: opponent's, the ko point, the legal moves; the colour plane is still the last
MOVER_LIBS, OPPONENT_LIBS, KO_PLANE, LEGAL = 4, 8, 12, 13


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
    assert planes.shape[-1] == 2 * 2 + 10 + 1 and np.array_equal(planes[0], GO5.encode(s))
    # a symmetry of the position has the symmetry's image of its planes
    for k in range(8):
        board = GO5.symmetries.apply_board(GO5.board(s), k)
        image = GO5.state_from_board(board, to_play=GO5.to_play(s))
        expected = GO5.transform_planes(GO5.encode(s), k)[..., 4:-1]
        got = GO5.encode(image)[..., 4:-1]
        assert np.array_equal(got[..., :8], expected[..., :8])  # liberties (ko needs the move, not the board)
