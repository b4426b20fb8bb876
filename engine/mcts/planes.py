"""The input planes of a leaf, written by the compiled walk straight into the batch.

The layout is the game encoder's (``Game.encode``), point-major ``[H*W*C]`` bytes per
leaf with C = 2T + F + 1 channels: the mover's and the opponent's stones for the last
T positions, newest first, Go's F feature planes (engine/games/go_features.py, when
the game has them), then a colour plane (1 when player 0 is to move). A test checks
that both agree.
"""

from __future__ import annotations

from numba import njit

from tengen.engine.mcts.tree import copy_into

__all__ = ["encode_leaf", "write_planes"]


@njit(cache=True, inline="always")
def encode_leaf(tree, g, depth, scratch, to_play, out, b):
    """Write the planes of the leaf reached by ``depth`` path moves into ``out[b]``.
    The boards along the path are in ``scratch.boards[0..depth]``, newest first."""
    boards = scratch.boards
    history_length, cells = boards.shape[0], boards.shape[1]
    # Older positions come from the root's history (all zeros before the game began:
    # an empty board).
    for t in range(depth + 1, history_length):
        copy_into(tree.root_history[g, t - depth - 1], boards[t])
    write_planes(boards, to_play, out[b], cells, history_length, out.shape[1] // cells)


@njit(cache=True)
def write_planes(boards, to_play, planes, cells, history_length, channels):
    """``planes`` is one leaf's [H*W*C] bytes, point-major: the stones' 2T channels
    and the colour plane, the last of ``channels`` (those between are Go's feature
    planes, written apart). The m,n,k games (T = 1) and AlphaGo Zero's Go input
    (T = 8) without features get loops whose stride the compiler can see: T = 1 then
    runs as vector code, several times faster than the general loop, whose stride is
    only known at run time."""
    own, other = 1 + to_play, 2 - to_play
    colour = 1 if to_play == 0 else 0
    if history_length == 1 and channels == 3:
        board = boards[0]
        for i in range(cells):
            v = board[i]
            planes[3 * i] = v == own
            planes[3 * i + 1] = v == other
            planes[3 * i + 2] = colour
    elif history_length == 8 and channels == 17:
        for i in range(cells):
            for t in range(8):
                v = boards[t, i]
                planes[17 * i + 2 * t] = v == own
                planes[17 * i + 2 * t + 1] = v == other
            planes[17 * i + 16] = colour
    else:
        for t in range(history_length):
            board = boards[t]
            for i in range(cells):
                v = board[i]
                planes[i * channels + 2 * t] = v == own
                planes[i * channels + 2 * t + 1] = v == other
        for i in range(cells):
            planes[i * channels + channels - 1] = colour
