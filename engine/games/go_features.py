"""Go's input features beyond the stones (KataGo's "game-specific" inputs, Wu 2019,
section 4.2), from the compiled rules' own groups, written straight into a leaf's
planes: no Python per position.

``FEATURE_PLANES`` planes, in this order, each 0 or 1 per point (self-play ships the
planes bit-packed, workers/packed_planes.py), from the view of the player to move:

    0-3    the mover's stones whose group has 1, 2, 3, 4 or more liberties
    4-7    the opponent's stones, the same way
    8      the point the mover may not play because of ko
    9      the points where the mover may legally play
    10     ladder-captured stones: the stones (either colour) of every group in atari
           that dies in a ladder even when its owner runs
    11     ladder-catching moves: the points where the mover can atari an opponent
           group of two liberties so that the group then dies in a ladder
    12-19  the mover's komi, a thermometer: plane 12 + i is 1 on every point when the
           mover's komi exceeds ``KOMI_THRESHOLDS[i]``

A liberty count is the group's distinct empty neighbours (the rules keep
pseudo-liberties, one per stone-to-empty adjacency, which are exact for the rules'
questions but not a count). The planes are per point, so a board symmetry carries
them as it carries the stones.

Ladders (planes 10 and 11, KataGo's ladder features; its "working moves" are plane
11) are read by ``_ladder_captured`` on copies of the position, under simple ko, with no
superko and no move cap. The defender, whose group is in atari, tries to capture an
attacker group in atari beside its group (on that group's liberty) and to extend on
its own liberty; a move that brings the group to three or more liberties escapes, one
that leaves it one liberty fails (unless the attacker may not take it at once, a ko:
that counts as an escape), and on two liberties the attacker tries an atari on each.
The group is ladder-captured when no defender move escapes whatever the attacker
does. The reader sees everything these moves lead to (breakers, chasing stones
left in atari and taken, stones captured on the way, the edge), but no other move:
a group that could get out only by an atari of its own on a chasing stone of two
liberties is still marked, and a group caught only by a quiet move (a net) is not.
Each read stops after ``LADDER_NODES`` positions or 4N + 4 plies (a ladder across
the whole board is about 64), and a read that stops counts as an escape, so a
position costs little and the plane only claims ladders it has read to the end.

Why the catching moves and not the escapes of the issue's wording ("ladder escapes
that work"): the mover's escape from its own atari is plane 10 already (its group is
marked exactly when running fails, and running means playing on the one liberty or a
capture beside it), while which atari starts a working ladder is two plies deeper
than anything plane 10 says, and a net reads it poorly from the stones.

The komi planes: the rules give komi to white, so the mover's komi is +komi when
white moves and -komi when black moves. A thermometer rather than one plane of the
value, since every plane must be 0 or 1. The thresholds lie a quarter point off the
komis people play, so none sits on a threshold (komi is a multiple of 0.5) and the
code of -k is the code of k reversed and flipped. They tell apart 7.5 and more, 6.5
and 7, 5.5 and 6, 0.5 to 5, no komi, and the same four on the losing side: the komis
played are 7.5 (area scoring), 6.5 (territory), 5.5 (older), 0.5 or 0 (handicap),
and a game is won by a margin, so the few points of komi are the ones that matter.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tengen.engine.games import go_kernels as K

__all__ = ["FEATURE_PLANES", "KOMI_THRESHOLDS", "LADDER_NODES", "feature_scratch", "feature_scratch_shape",
           "write_go_features", "go_features"]

FEATURE_PLANES = 20
_OPPONENT_LIBERTIES, _KO, _LEGAL, _LADDER_CAPTURED, _LADDER_MOVE, _KOMI = 4, 8, 9, 10, 11, 12
#: the mover's komi thresholds of planes 12-19, in points (see the module)
KOMI_THRESHOLDS = (-7.25, -6.25, -5.25, -0.25, 0.25, 5.25, 6.25, 7.25)
_KOMI_QUARTERS = (-29, -25, -21, -1, 1, 21, 25, 29)  # the same, in quarter points
#: positions one ladder read may visit before it gives up (and counts an escape)
LADDER_NODES = 400


def feature_scratch_shape(params: np.ndarray) -> tuple[int, int]:
    """(R, L) of ``feature_scratch``: R - 1 rows for the positions along a ladder of
    up to 4N + 4 plies (a state without its superko history, then the defender's
    moves at that ply) and a last row for the points a move captures."""
    points = int(params[K.P_POINTS])
    plies = 4 * int(params[K.P_SIZE]) + 4
    return plies + 2, K.HEADER + 6 * points


def feature_scratch(params: np.ndarray) -> np.ndarray:
    """``int32[R, L]``, what ``write_go_features`` reads ladders in
    (``feature_scratch_shape``)."""
    return np.zeros(feature_scratch_shape(params), dtype=np.int32)


@njit(cache=True)
def write_go_features(params, st, planes, channels, first, legal, mark, ladder):
    """Write the feature planes of position ``st`` into ``planes`` (one position's
    ``[H*W*channels]`` values, point-major) at channels ``first`` ..
    ``first + FEATURE_PLANES - 1``. ``legal`` (bool[A]), ``mark`` (int32[P]) and
    ``ladder`` (``feature_scratch``'s) are scratch."""
    size, stride, points = params[K.P_SIZE], params[K.P_STRIDE], params[K.P_POINTS]
    board, head, nxt = K.HEADER, K.HEADER + points, K.HEADER + 2 * points
    mover = K.BLACK if st[K.TO_PLAY] == 0 else K.WHITE
    cells = size * size
    for i in range(cells):
        for f in range(FEATURE_PLANES):
            planes[i * channels + first + f] = 0
    for p in range(points):
        mark[p] = -1
    K.legal_mask_into(params, st, legal)
    # The ladder reader's rules: simple ko only and no move cap, so that its states
    # need no superko history and never end.
    rules = params.copy()
    rules[K.P_SUPERKO] = 0
    rules[K.P_MAX_MOVES] = 1 << 30
    budget = np.zeros(1, dtype=np.int64)
    prefix = K.HEADER + 5 * points
    for i in range(cells):
        p = K.point_of(params, i)
        colour = st[board + p]
        if (colour != K.BLACK and colour != K.WHITE) or st[head + p] != p:
            continue  # one pass per group, from its head
        liberties = 0
        first_liberty, second_liberty = K.NO_POINT, K.NO_POINT
        s = p
        while True:
            for q in (s - stride, s - 1, s + 1, s + stride):
                if st[board + q] == K.EMPTY and mark[q] != p:
                    mark[q] = p
                    liberties += 1
                    if first_liberty == K.NO_POINT:
                        first_liberty = q
                    elif second_liberty == K.NO_POINT:
                        second_liberty = q
            s = st[nxt + s]
            if s == p:
                break
        plane = first + min(liberties, 4) - 1 + (0 if colour == mover else _OPPONENT_LIBERTIES)
        captured = False
        # Before a read, the common case: a run onto a point with three empty
        # neighbours has three liberties.
        if liberties == 1 and not (_open_neighbours(st, stride, first_liberty, K.NO_POINT) >= 3
                                   and (colour != mover or first_liberty != st[K.KO])):
            # The owner runs: its move, and without the ko that binds only the mover.
            _copy_prefix(st, ladder[0], prefix)
            if colour != mover:
                ladder[0, K.TO_PLAY] = colour - 1
                ladder[0, K.KO] = K.NO_POINT
            budget[0] = LADDER_NODES
            captured = _ladder_captured(rules, ladder, p, budget)
        elif liberties == 2 and colour != mover:
            for atari, run in ((first_liberty, second_liberty), (second_liberty, first_liberty)):
                if not legal[K.action_of(params, atari)] or _open_neighbours(st, stride, run, atari) >= 3:
                    continue
                _copy_prefix(st, ladder[0], prefix)
                K.play_point(rules, ladder[0], atari, ladder[ladder.shape[0] - 1])
                budget[0] = LADDER_NODES
                if _ladder_captured(rules, ladder, p, budget):
                    planes[K.action_of(params, atari) * channels + first + _LADDER_MOVE] = 1
        s = p
        while True:
            at = K.action_of(params, s) * channels
            planes[at + plane] = 1
            if captured:
                planes[at + first + _LADDER_CAPTURED] = 1
            s = st[nxt + s]
            if s == p:
                break
    if st[K.KO] != K.NO_POINT:
        planes[K.action_of(params, st[K.KO]) * channels + first + _KO] = 1
    for i in range(cells):
        if legal[i]:
            planes[i * channels + first + _LEGAL] = 1
    # komi in half points, so the mover's komi in quarter points is 2 * that
    komi4 = 2 * params[K.P_KOMI2] * (1 if mover == K.WHITE else -1)
    for f in range(len(_KOMI_QUARTERS)):
        if komi4 > _KOMI_QUARTERS[f]:
            for i in range(cells):
                planes[i * channels + first + _KOMI + f] = 1


@njit(cache=True, inline="always")
def _open_neighbours(st, stride, p, other):
    """The empty neighbours of padded point p, ``other`` left out."""
    n = 0
    for q in (p - stride, p - 1, p + 1, p + stride):
        if st[K.HEADER + q] == K.EMPTY and q != other:
            n += 1
    return n


@njit(cache=True, inline="always")
def _copy_prefix(source, target, n):
    for i in range(n):
        target[i] = source[i]


@njit(cache=True)
def _liberties(rules, st, p, most):
    """The distinct liberties of the group on padded point p, counted up to ``most``
    (at most 3), and the first two of them (or NO_POINT)."""
    points, stride = rules[K.P_POINTS], rules[K.P_STRIDE]
    board, nxt = K.HEADER, K.HEADER + 2 * points
    found = 0
    a, b, c = K.NO_POINT, K.NO_POINT, K.NO_POINT
    s = p
    while True:
        for q in (s - stride, s - 1, s + 1, s + stride):
            if st[board + q] == K.EMPTY and q != a and q != b and q != c:
                if found == 0:
                    a = q
                elif found == 1:
                    b = q
                else:
                    c = q
                found += 1
                if found >= most:
                    return found, a, b
        s = st[nxt + s]
        if s == p:
            return found, a, b


# What a defender's position comes to, or asks for next (_ladder_captured).
_ESCAPED, _CAUGHT, _ATARI = 0, 1, 2
# The tail of a row of ``feature_scratch``, past the state: a defender's row lists its
# moves (how many, which one is tried now, the moves); the row after it, the position
# the attacker ataris in, holds the two ataris and which one is tried now.
_MOVES, _MOVE_TRIED, _MOVE_LIST = 0, 1, 2
_ATARIS, _ATARI_TRIED = 0, 2


@njit(cache=True)
def _ladder_captured(rules, work, target, budget):
    """Whether the group on padded point ``target``, in atari in ``work[0]`` with its
    owner to move, dies in a ladder (see the module for the moves read). The positions
    along the ladder are ``work[d]``: the defender's at even d, the attacker's at odd
    d; the last row takes captured points. A read past ``budget[0]`` positions or the
    rows of ``work`` counts as an escape.

    A depth-first search over an explicit stack, not a recursive function: numba's
    cache of a recursive function can crash the process that loads it (numba #6061)."""
    d = 0
    if not _open_defence(rules, work, 0, target, budget):
        return False
    while True:
        # The defender at d tries its next move.
        result = _next_defence(rules, work, d, target)
        if result == _ATARI:
            if _next_atari(rules, work, d + 1):
                d += 2
                if _open_defence(rules, work, d, target, budget):
                    continue
            result = _ESCAPED  # no atari holds the move (or the read gave up on it)
        # Pass the result of the defender at d up the stack.
        while True:
            if d == 0:
                return result == _CAUGHT
            if result == _CAUGHT:
                d -= 2  # the attacker's atari holds: the defender tries another move
                break
            if _next_atari(rules, work, d - 1):
                if _open_defence(rules, work, d, target, budget):
                    break
            else:
                d -= 2  # the move escaped every atari: the defender at d - 2 is out


@njit(cache=True)
def _open_defence(rules, work, d, target, budget):
    """List the defender's moves in ``work[d]``: each capture of an attacker group in
    atari beside the group, then the extension on its liberty. False when the read
    gives up here (budget or depth spent, or the group is not in atari)."""
    budget[0] -= 1
    if budget[0] < 0 or d + 2 > work.shape[0] - 2:
        return False
    points, stride = rules[K.P_POINTS], rules[K.P_STRIDE]
    board, head, nxt = K.HEADER, K.HEADER + points, K.HEADER + 2 * points
    st = work[d]
    tail = K.HEADER + 5 * points
    found, liberty, _ = _liberties(rules, st, target, 2)
    if found != 1:
        return False
    attacker = 3 - st[board + target]
    listed = tail + _MOVE_LIST
    n = 0
    s = target
    while True:
        for q in (s - stride, s - 1, s + 1, s + stride):
            if st[board + q] == attacker:
                count, capture, _ = _liberties(rules, st, st[head + q], 2)
                if count == 1 and capture != liberty:
                    seen = False
                    for k in range(n):
                        seen = seen or st[listed + k] == capture
                    if not seen:
                        st[listed + n] = capture
                        n += 1
        s = st[nxt + s]
        if s == target:
            break
    st[listed + n] = liberty
    st[tail + _MOVES] = n + 1
    st[tail + _MOVE_TRIED] = -1
    return True


@njit(cache=True)
def _next_defence(rules, work, d, target):
    """Play the defender's next listed move from ``work[d]`` into ``work[d + 1]``:
    _ESCAPED when it gets three liberties (or a ko the attacker may not take back at
    once), _ATARI when two (their ataris listed in ``work[d + 1]``), _CAUGHT when no
    move is left."""
    points = rules[K.P_POINTS]
    tail = K.HEADER + 5 * points
    st, after = work[d], work[d + 1]
    captured = work[work.shape[0] - 1]
    while True:
        st[tail + _MOVE_TRIED] += 1
        k = st[tail + _MOVE_TRIED]
        if k >= st[tail + _MOVES]:
            return _CAUGHT
        move = st[tail + _MOVE_LIST + k]
        if not K.is_legal_point(rules, st, move):
            continue
        if k == st[tail + _MOVES] - 1 and _open_neighbours(st, rules[K.P_STRIDE], move, K.NO_POINT) >= 3:
            return _ESCAPED  # the extension, onto three empty neighbours
        _copy_prefix(st, after, tail)
        K.play_point(rules, after, move, captured)
        n, first_liberty, second_liberty = _liberties(rules, after, target, 3)
        if n >= 3:
            return _ESCAPED
        if n == 2:
            after[tail + _ATARIS] = first_liberty
            after[tail + _ATARIS + 1] = second_liberty
            after[tail + _ATARI_TRIED] = -1
            return _ATARI
        if not K.is_legal_point(rules, after, first_liberty):
            return _ESCAPED  # the attacker may not capture: it would retake a ko at once
        # one liberty: the attacker captures; the next move


@njit(cache=True)
def _next_atari(rules, work, d):
    """Play the attacker's next legal atari from ``work[d]`` into ``work[d + 1]``;
    False when none is left."""
    tail = K.HEADER + 5 * rules[K.P_POINTS]
    st = work[d]
    while True:
        st[tail + _ATARI_TRIED] += 1
        j = st[tail + _ATARI_TRIED]
        if j >= 2:
            return False
        atari, run = st[tail + _ATARIS + j], st[tail + _ATARIS + 1 - j]
        # Not read: an atari that leaves the defender a run onto three empty points.
        if _open_neighbours(st, rules[K.P_STRIDE], run, atari) < 3 and K.is_legal_point(rules, st, atari):
            _copy_prefix(st, work[d + 1], tail)
            K.play_point(rules, work[d + 1], atari, work[work.shape[0] - 1])
            return True


def go_features(params: np.ndarray, st: np.ndarray) -> np.ndarray:
    """The feature planes of one position, ``float32[N, N, FEATURE_PLANES]`` (for the
    game's own encoder and for reading)."""
    size = int(params[K.P_SIZE])
    out = np.zeros(size * size * FEATURE_PLANES, dtype=np.float32)
    write_go_features(params, st, out, FEATURE_PLANES, 0, np.zeros(size * size + 1, np.bool_),
                      np.zeros(int(params[K.P_POINTS]), np.int32), feature_scratch(params))
    return out.reshape(size, size, FEATURE_PLANES)
