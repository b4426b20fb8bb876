"""Go's input features beyond the stones (KataGo's "game-specific" inputs, Wu 2019,
section 4.2), from the compiled rules' own groups, written straight into a leaf's
planes: no Python per position.

``FEATURE_PLANES`` planes, in this order, each 0 or 1 per point, from the view of the
player to move:

    0-3   the mover's stones whose group has 1, 2, 3, 4 or more liberties
    4-7   the opponent's stones, the same way
    8     the point the mover may not play because of ko
    9     the points where the mover may legally play

A liberty count is the group's distinct empty neighbours (the rules keep
pseudo-liberties, one per stone-to-empty adjacency, which are exact for the rules'
questions but not a count). The planes are per point, so a board symmetry carries
them as it carries the stones.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tengen.engine.games import go_kernels as K

__all__ = ["FEATURE_PLANES", "write_go_features", "go_features"]

FEATURE_PLANES = 10
_OPPONENT_LIBERTIES, _KO, _LEGAL = 4, 8, 9


@njit(cache=True)
def write_go_features(params, st, planes, channels, first, legal, mark):
    """Write the feature planes of position ``st`` into ``planes`` (one position's
    ``[H*W*channels]`` values, point-major) at channels ``first`` ..
    ``first + FEATURE_PLANES - 1``. ``legal`` (bool[A]) and ``mark`` (int32[P]) are
    scratch."""
    size, stride, points = params[K.P_SIZE], params[K.P_STRIDE], params[K.P_POINTS]
    board, head, nxt = K.HEADER, K.HEADER + points, K.HEADER + 2 * points
    mover = K.BLACK if st[K.TO_PLAY] == 0 else K.WHITE
    cells = size * size
    for i in range(cells):
        for f in range(FEATURE_PLANES):
            planes[i * channels + first + f] = 0
    for p in range(points):
        mark[p] = -1
    for i in range(cells):
        p = K.point_of(params, i)
        colour = st[board + p]
        if (colour != K.BLACK and colour != K.WHITE) or st[head + p] != p:
            continue  # one pass per group, from its head
        liberties = 0
        s = p
        while True:
            for q in (s - stride, s - 1, s + 1, s + stride):
                if st[board + q] == K.EMPTY and mark[q] != p:
                    mark[q] = p
                    liberties += 1
            s = st[nxt + s]
            if s == p:
                break
        plane = first + min(liberties, 4) - 1 + (0 if colour == mover else _OPPONENT_LIBERTIES)
        s = p
        while True:
            planes[K.action_of(params, s) * channels + plane] = 1
            s = st[nxt + s]
            if s == p:
                break
    if st[K.KO] != K.NO_POINT:
        planes[K.action_of(params, st[K.KO]) * channels + first + _KO] = 1
    K.legal_mask_into(params, st, legal)
    for i in range(cells):
        if legal[i]:
            planes[i * channels + first + _LEGAL] = 1


def go_features(params: np.ndarray, st: np.ndarray) -> np.ndarray:
    """The feature planes of one position, ``float32[N, N, FEATURE_PLANES]`` (for the
    game's own encoder and for reading)."""
    size = int(params[K.P_SIZE])
    out = np.zeros(size * size * FEATURE_PLANES, dtype=np.float32)
    write_go_features(params, st, out, FEATURE_PLANES, 0, np.zeros(size * size + 1, np.bool_),
                      np.zeros(int(params[K.P_POINTS]), np.int32))
    return out.reshape(size, size, FEATURE_PLANES)
