"""Compiled Go rules over one flat int32 array per position.

The board is padded with one ring of EDGE cells so that every point has four
neighbours at ``p - S, p - 1, p + 1, p + S`` (S = N + 2). Stones are kept in groups
the way classic engines do it: each stone knows its group's head, the stones of a
group form a circular linked list, and the head holds the group's size and its
*pseudo-liberties* (one per stone-to-empty adjacency, so a point next to two stones
of a group counts twice). Pseudo-liberties are enough for exact rules: a group
whose pseudo-liberties all touch point p has p as its only liberty, so capture,
atari-on-p and suicide tests are O(1) per neighbour, and play is O(stones moved).

State layout (``int32[HEADER + 5 * P (+ 2 * (max_moves + 1) with superko)]``):

    [0:HEADER)            header fields, named below
    BOARD  [P]            EMPTY / BLACK / WHITE / EDGE per padded point
    HEAD   [P]            group head of the stone on p (undefined on empty points)
    NEXT   [P]            next stone of the same group (circular)
    LIBS   [P]            pseudo-liberties of the group headed by p
    SIZE   [P]            stones of the group headed by p
    HISTORY [2 * (M + 1)] Zobrist hash (lo, hi) after each move, for positional superko

Params layout (``int32[NUM_PARAMS]``) is listed below as P_* names.
"""

from __future__ import annotations

import numpy as np
from numba import njit

# --- point colours ------------------------------------------------------------------
EMPTY, BLACK, WHITE, EDGE = 0, 1, 2, 3
NO_POINT = -1

# --- header fields ------------------------------------------------------------------
TO_PLAY = 0  # 0 black, 1 white
MOVES = 1  # moves played, passes included
PASSES = 2  # consecutive passes just played
KO = 3  # padded point the mover may not play on (simple ko), or NO_POINT
END = 4  # why the game ended: one of END_*
WINNER = 5  # player who won by resignation (else unused)
LAST = 6  # last action, or NO_POINT
HASH_LO = 7  # Zobrist hash of the stones, two 32-bit halves
HASH_HI = 8
PRISONERS = 9  # [9] stones captured by black, [10] by white
LAST_CAPTURE = 11  # move number of the latest capture; superko only looks before it
HEADER = 16

ONGOING, ENDED_BY_PASSES, ENDED_BY_MOVE_CAP, ENDED_BY_RESIGNATION = 0, 1, 2, 3

# --- params fields ------------------------------------------------------------------
P_SIZE = 0  # N
P_STRIDE = 1  # S = N + 2
P_POINTS = 2  # P = S * S
P_KOMI2 = 3  # komi in half points
P_SUPERKO = 4  # 1: positional superko, 0: simple ko only
P_MAX_MOVES = 5  # the game ends (scored) after this many moves
P_ACTIONS = 6  # N * N + 1 (pass is the last action)
P_STATE_SIZE = 7
P_FEATURES = 8  # 1: the input planes carry go_features.py's planes
NUM_PARAMS = 9

MAX_SIZE = 19
_MAX_POINTS = (MAX_SIZE + 2) ** 2

# Two independent 32-bit Zobrist tables from a fixed seed: the same hash in every
# process, without 64-bit unsigned arithmetic in the kernels.
_zobrist_rng = np.random.default_rng(20261130)
ZOBRIST_LO = _zobrist_rng.integers(-(2**31), 2**31, size=(3, _MAX_POINTS), dtype=np.int64).astype(np.int32)
ZOBRIST_HI = _zobrist_rng.integers(-(2**31), 2**31, size=(3, _MAX_POINTS), dtype=np.int64).astype(np.int32)


def make_params(size: int, komi: float, superko: bool, max_moves: int, features: bool = False) -> np.ndarray:
    stride = size + 2
    points = stride * stride
    state_size = HEADER + 5 * points + (2 * (max_moves + 1) if superko else 0)
    params = np.zeros(NUM_PARAMS, dtype=np.int32)
    params[P_SIZE] = size
    params[P_STRIDE] = stride
    params[P_POINTS] = points
    params[P_KOMI2] = int(round(komi * 2))
    params[P_SUPERKO] = int(superko)
    params[P_MAX_MOVES] = max_moves
    params[P_ACTIONS] = size * size + 1
    params[P_STATE_SIZE] = state_size
    params[P_FEATURES] = int(features)
    return params


@njit(cache=True)
def initial_state(params):
    size, stride, points = params[P_SIZE], params[P_STRIDE], params[P_POINTS]
    st = np.zeros(params[P_STATE_SIZE], dtype=np.int32)
    st[KO] = NO_POINT
    st[LAST] = NO_POINT
    for p in range(points):
        y, x = p // stride, p % stride
        if y == 0 or x == 0 or y == size + 1 or x == size + 1:
            st[HEADER + p] = EDGE
    return st


@njit(cache=True, inline="always")
def point_of(params, action):
    """Padded point of a board action (row-major from the top-left)."""
    size = params[P_SIZE]
    return (action // size + 1) * params[P_STRIDE] + action % size + 1


@njit(cache=True, inline="always")
def action_of(params, p):
    stride = params[P_STRIDE]
    return (p // stride - 1) * params[P_SIZE] + p % stride - 1


@njit(cache=True, inline="always")
def is_legal_point(params, st, p):
    """Whether the player to move may play on padded point p (suicide, ko, superko)."""
    if st[HEADER + p] != EMPTY or p == st[KO]:
        return False
    # The common case inline: an empty neighbour is a liberty, and without superko
    # nothing else can make the move illegal.
    if params[P_SUPERKO] == 0:
        stride = params[P_STRIDE]
        if (st[HEADER + p - stride] == EMPTY or st[HEADER + p - 1] == EMPTY
                or st[HEADER + p + 1] == EMPTY or st[HEADER + p + stride] == EMPTY):
            return True
    return _is_legal_crowded(params, st, p)


@njit(cache=True)
def _is_legal_crowded(params, st, p):
    """is_legal_point for an empty point off the fast path: liberties through friends,
    captures, superko."""
    points, stride = params[P_POINTS], params[P_STRIDE]
    board, head, libs = HEADER, HEADER + points, HEADER + 3 * points
    color = 1 + st[TO_PLAY]
    superko = params[P_SUPERKO] == 1
    has_liberty = False
    captures = False
    for q in (p - stride, p - 1, p + 1, p + stride):
        c = st[board + q]
        if c == EMPTY:
            has_liberty = True
        elif c != EDGE:
            h = st[head + q]
            touching = 0
            for r in (p - stride, p - 1, p + 1, p + stride):
                rc = st[board + r]
                if rc == c and st[head + r] == h:
                    touching += 1
            if c == color:
                if st[libs + h] > touching:
                    has_liberty = True
            elif st[libs + h] == touching:
                captures = True
    if not (has_liberty or captures):
        return False
    if superko:
        return not _repeats_position(params, st, p, color)
    return True


@njit(cache=True)
def _repeats_position(params, st, p, color):
    """Whether playing ``color`` on p recreates an earlier position (positional superko)."""
    points, stride = params[P_POINTS], params[P_STRIDE]
    board, head, nxt, libs = HEADER, HEADER + points, HEADER + 2 * points, HEADER + 3 * points
    lo = st[HASH_LO] ^ ZOBRIST_LO[color, p]
    hi = st[HASH_HI] ^ ZOBRIST_HI[color, p]
    opponent = 3 - color
    captured_any = False
    seen0 = NO_POINT
    seen1 = NO_POINT
    seen2 = NO_POINT
    for q in (p - stride, p - 1, p + 1, p + stride):
        if st[board + q] != opponent:
            continue
        h = st[head + q]
        if h == seen0 or h == seen1 or h == seen2:
            continue
        touching = 0
        for r in (p - stride, p - 1, p + 1, p + stride):
            if st[board + r] == opponent and st[head + r] == h:
                touching += 1
        if st[libs + h] == touching:
            captured_any = True
            s = h
            while True:
                lo ^= ZOBRIST_LO[opponent, s]
                hi ^= ZOBRIST_HI[opponent, s]
                s = st[nxt + s]
                if s == h:
                    break
        if seen0 == NO_POINT:
            seen0 = h
        elif seen1 == NO_POINT:
            seen1 = h
        else:
            seen2 = h
    # Since the last capture stones were only added, so every later position lacks a
    # stone on p: a non-capturing move can only repeat a position from before it.
    last = st[MOVES] if captured_any else st[LAST_CAPTURE]
    history = HEADER + 5 * points
    for m in range(last + 1):
        if st[history + 2 * m] == lo and st[history + 2 * m + 1] == hi:
            return True
    return False


@njit(cache=True)
def legal_mask_into(params, st, out):
    """Fill ``out[A]`` with the legal actions of the player to move (pass is last)."""
    _mask_into(params, st, out, False)


@njit(cache=True)
def candidate_mask_into(params, st, out):
    """Fill ``out[A]`` with the moves that may be legal: the empty points other than
    the ko point, and pass. A superset of ``legal_mask_into`` (it lets suicide and
    superko through) at the cost of one load per point; search checks a candidate
    with ``is_legal_action`` only when it first tries it."""
    _mask_into(params, st, out, True)


@njit(cache=True, inline="always")
def _mask_into(params, st, out, candidates_only):
    size, stride = params[P_SIZE], params[P_STRIDE]
    n = size * size
    if st[END] != ONGOING:
        out[:] = False
        return
    ko = st[KO]
    # Nested loops rather than point_of(a): a division per point cost more than the
    # legality test itself.
    a = 0
    for y in range(size):
        p = (y + 1) * stride + 1
        for _ in range(size):
            if candidates_only:
                out[a] = st[HEADER + p] == EMPTY and p != ko
            else:
                out[a] = is_legal_point(params, st, p)
            a += 1
            p += 1
    out[n] = True


@njit(cache=True)
def is_legal_action(params, st, action):
    """Whether the player to move may play ``action`` (a point or pass)."""
    if st[END] != ONGOING:
        return False
    if action == params[P_ACTIONS] - 1:
        return True
    return is_legal_point(params, st, point_of(params, action))


@njit(cache=True)
def place_stone(params, st, p, color):
    """Put a stone on empty padded point p and merge it with its friends (no captures)."""
    points, stride = params[P_POINTS], params[P_STRIDE]
    board, head, nxt, libs, sizes = (HEADER, HEADER + points, HEADER + 2 * points,
                                     HEADER + 3 * points, HEADER + 4 * points)
    st[board + p] = color
    st[head + p] = p
    st[nxt + p] = p
    st[sizes + p] = 1
    st[libs + p] = 0
    st[HASH_LO] ^= ZOBRIST_LO[color, p]
    st[HASH_HI] ^= ZOBRIST_HI[color, p]
    for q in (p - stride, p - 1, p + 1, p + stride):
        c = st[board + q]
        if c == EMPTY:
            st[libs + p] += 1
        elif c != EDGE:
            st[libs + st[head + q]] -= 1
    # Merge with friendly neighbours, relabelling the smaller group.
    for q in (p - stride, p - 1, p + 1, p + stride):
        if st[board + q] != color:
            continue
        a, b = st[head + p], st[head + q]
        if a == b:
            continue
        if st[sizes + a] < st[sizes + b]:
            a, b = b, a
        s = b
        while True:
            st[head + s] = a
            s = st[nxt + s]
            if s == b:
                break
        st[nxt + a], st[nxt + b] = st[nxt + b], st[nxt + a]
        st[sizes + a] += st[sizes + b]
        st[libs + a] += st[libs + b]


@njit(cache=True)
def play_point(params, st, p, captured_out):
    """Play the mover's stone on legal padded point p, in place.

    Writes the captured padded points to ``captured_out`` and returns how many.
    """
    points, stride = params[P_POINTS], params[P_STRIDE]
    board, head, nxt, libs, sizes = (HEADER, HEADER + points, HEADER + 2 * points,
                                     HEADER + 3 * points, HEADER + 4 * points)
    color = 1 + st[TO_PLAY]
    opponent = 3 - color
    place_stone(params, st, p, color)
    # Remove opponent groups left without liberties.
    n_captured = 0
    for q in (p - stride, p - 1, p + 1, p + stride):
        if st[board + q] != opponent or st[libs + st[head + q]] != 0:
            continue
        h = st[head + q]
        s = h
        while True:
            st[board + s] = EMPTY
            st[HASH_LO] ^= ZOBRIST_LO[opponent, s]
            st[HASH_HI] ^= ZOBRIST_HI[opponent, s]
            captured_out[n_captured] = s
            n_captured += 1
            s = st[nxt + s]
            if s == h:
                break
        # The group's stones are all empty now; every stone next to one of them is the
        # mover's (groups of one colour never touch), and gains a liberty.
        s = h
        while True:
            for r in (s - stride, s - 1, s + 1, s + stride):
                rc = st[board + r]
                if rc == BLACK or rc == WHITE:
                    st[libs + st[head + r]] += 1
            s = st[nxt + s]
            if s == h:
                break
    st[KO] = NO_POINT
    if n_captured == 1 and st[sizes + st[head + p]] == 1 and st[libs + p] == 1:
        st[KO] = captured_out[0]
    if n_captured > 0:
        st[PRISONERS + st[TO_PLAY]] += n_captured
        st[LAST_CAPTURE] = st[MOVES] + 1
    st[PASSES] = 0
    st[LAST] = action_of(params, p)
    _finish_move(params, st)
    return n_captured


@njit(cache=True)
def play_pass(params, st):
    st[PASSES] += 1
    st[KO] = NO_POINT
    st[LAST] = params[P_ACTIONS] - 1
    _finish_move(params, st)
    if st[PASSES] >= 2 and st[END] == ONGOING:
        st[END] = ENDED_BY_PASSES


@njit(cache=True)
def record_position(params, st):
    """Store the current hash as the position after move ``MOVES`` (superko history)."""
    history = HEADER + 5 * params[P_POINTS]
    st[history + 2 * st[MOVES]] = st[HASH_LO]
    st[history + 2 * st[MOVES] + 1] = st[HASH_HI]


@njit(cache=True, inline="always")
def _finish_move(params, st):
    st[MOVES] += 1
    st[TO_PLAY] ^= 1
    if params[P_SUPERKO] == 1:
        record_position(params, st)
    if st[MOVES] >= params[P_MAX_MOVES]:
        st[END] = ENDED_BY_MOVE_CAP


@njit(cache=True)
def play_action(params, st, action, captured_out):
    """Play a legal action (point or pass) in place; returns the number captured."""
    if action == params[P_ACTIONS] - 1:
        play_pass(params, st)
        return 0
    return play_point(params, st, point_of(params, action), captured_out)


@njit(cache=True)
def area_owners_into(params, st, region, stack, out):
    """``out[P]`` = +1 / -1 / 0 per padded point: whose it is by Tromp-Taylor (a stone's
    colour, or the one colour an empty region reaches); ``region`` and ``stack`` are
    int32[P] scratch."""
    points, stride = params[P_POINTS], params[P_STRIDE]
    region[:] = -1
    for p in range(points):
        c = st[HEADER + p]
        if c == BLACK:
            out[p] = 1
        elif c == WHITE:
            out[p] = -1
        elif c == EDGE:
            out[p] = 0
        elif region[p] == -1:
            reaches = 0  # bit 1: black, bit 2: white
            top = 0
            members = 0
            stack[top] = p
            top += 1
            region[p] = p
            # The stack's used prefix keeps the region's members: walk it once more
            # to write their owner.
            while members < top:
                s = stack[members]
                members += 1
                for q in (s - stride, s - 1, s + 1, s + stride):
                    qc = st[HEADER + q]
                    if qc == EMPTY:
                        if region[q] == -1:
                            region[q] = p
                            stack[top] = q
                            top += 1
                    elif qc != EDGE:
                        reaches |= qc
            owner = 1 if reaches == BLACK else (-1 if reaches == WHITE else 0)
            for i in range(top):
                out[stack[i]] = owner


@njit(cache=True)
def area_score(params, st):
    """Tromp-Taylor area: black points minus white points (stones + empty regions
    that reach only one colour), komi not included."""
    points = params[P_POINTS]
    owners = np.empty(points, dtype=np.int32)
    area_owners_into(params, st, np.empty(points, dtype=np.int32), np.empty(points, dtype=np.int32), owners)
    return int(owners.sum())


@njit(cache=True)
def is_own_eye(params, st, p, color):
    """A single-point eye of ``color``: all neighbours its stones (or edge) and at most
    one enemy diagonal (none on the edge), so filling it can only hurt."""
    stride = params[P_STRIDE]
    for q in (p - stride, p - 1, p + 1, p + stride):
        c = st[HEADER + q]
        if c != color and c != EDGE:
            return False
    bad = 0
    edge = 0
    for q in (p - stride - 1, p - stride + 1, p + stride - 1, p + stride + 1):
        c = st[HEADER + q]
        if c == EDGE:
            edge = 1
        elif c == 3 - color:
            bad += 1
    return bad + edge < 2


@njit(cache=True)
def own_eye_rule_into(params, st, listed):
    """The eye-avoiding playout's rule over ``listed`` (bool[A]: legal or candidate
    moves): take out every point that fills the mover's own eye, and the pass while
    another listed point is a legal move. Under area scoring such a game loses
    nothing by it: it ends with the dead stones captured, so Tromp-Taylor scores what
    was played, and neither an early pass (which self-play against itself never
    punishes) nor a filled eye (a young network filled the last eye of a 63-stone
    group against a random player) can become a habit."""
    size, stride = params[P_SIZE], params[P_STRIDE]
    color = 1 + st[TO_PLAY]
    moves_left = False
    a = 0
    for y in range(size):
        p = (y + 1) * stride + 1
        for _ in range(size):
            if listed[a]:
                if is_own_eye(params, st, p, color):
                    listed[a] = False
                elif not moves_left:
                    # candidates may be suicide: the first legal one settles the pass
                    moves_left = is_legal_point(params, st, p)
            a += 1
            p += 1
    if moves_left:
        listed[params[P_ACTIONS] - 1] = False


@njit(cache=True)
def random_playout(params, st, seed, avoid_own_eyes):
    """Play uniformly random legal moves (pass included) until the game ends.

    With ``avoid_own_eyes`` the mover never fills its own single-point eye and
    passes when nothing else is left (the classic light playout). Returns the number
    of moves played. Deterministic for a given seed.
    """
    np.random.seed(seed)
    return random_moves(params, st, avoid_own_eyes)


@njit(cache=True)
def random_games(params, st, games, seed, avoid_own_eyes):
    """Play ``games`` seeded random games from copies of ``st``; total moves played."""
    np.random.seed(seed)
    total = 0
    scratch = st.copy()
    for _ in range(games):
        scratch[:] = st
        total += random_moves(params, scratch, avoid_own_eyes)
    return total


@njit(cache=True)
def random_moves(params, st, avoid_own_eyes):
    """Finish the game with random legal moves from numba's generator as the caller
    seeded it; returns how many were played."""
    points = params[P_POINTS]
    captured = np.empty(points, dtype=np.int32)
    empties = np.empty(points, dtype=np.int32)
    n_empty = 0
    for p in range(points):
        if st[HEADER + p] == EMPTY:
            empties[n_empty] = p
            n_empty += 1
    played = 0
    while st[END] == ONGOING:
        color = 1 + st[TO_PLAY]
        # Rejection sampling over (empties + pass) is uniform over the legal moves:
        # an illegal draw is swapped out of the candidate range for this turn only.
        k = n_empty
        pass_slot = 0 if avoid_own_eyes else 1
        chosen = NO_POINT
        while k + pass_slot > 0:
            i = np.random.randint(k + pass_slot)
            if i == k:
                break  # pass
            p = empties[i]
            # the eye test first: it is cheaper than legality on a point surrounded by friends
            if not (avoid_own_eyes and is_own_eye(params, st, p, color)) and is_legal_point(params, st, p):
                chosen = i
                break
            k -= 1
            empties[i], empties[k] = empties[k], empties[i]
        if chosen == NO_POINT:
            play_pass(params, st)
        else:
            n_captured = play_point(params, st, empties[chosen], captured)
            n_empty -= 1
            empties[chosen] = empties[n_empty]
            for c in range(n_captured):
                empties[n_empty] = captured[c]
                n_empty += 1
        played += 1
    return played
