"""Perfect players for tests and benchmarks: exact tic-tac-toe and Connect Four values.

- Tic-tac-toe: every one of the 5478 reachable positions is solved once by plain
  minimax (a few milliseconds) and memoised; ``tictactoe_value`` and
  ``tictactoe_optimal_actions`` read that table.
- Connect Four: a compiled alpha-beta negamax on bitboards (the layout of Pascal
  Pons' solver: 7 bits per column, bit ``7 * col + height`` with height 0 at the
  bottom, the 7th bit a sentinel), that only asks win/draw/loss, with

  * immediate wins found by bit tricks, forced blocks played at once, and moves
    that hand the opponent a win (playing under their threat) never tried;
  * move ordering by how many winning spots a move creates, centre-first on ties;
  * a transposition table (fixed-size numpy arrays, one slot per position key,
    mirror images sharing the key) holding lower and upper bounds, packed with
    the key into one ``int64`` so that a probe is one memory access;
  * two null-window searches at the root (win? then draw?), which cut far more
    than one full-window search.

  Measured on this repository's 2-core CPU (one core; ~7M nodes/s), on seeded
  random positions by stones on the board, a fresh table per call:

  ======  ========  ========  =======  =============================
  stones  median    p90       max      ``connect4_optimal_actions`` max
  ======  ========  ========  =======  =============================
  20      0.1 ms    3 ms      10 ms    30 ms
  16      0.4 ms    14 ms     0.11 s   0.47 s
  14      2.4 ms    22 ms     0.31 s   0.42 s
  12      4 ms      87 ms     0.37 s   0.82 s
  10      12 ms     0.22 s    1.0 s
  8       0.09 s    1.8 s     4.9 s
  6       1.1 s     > 40 s (past 300M nodes)
  ======  ========  ========  =======  =============================

  ``connect4_labelled_positions(300, min_stones=14, max_stones=24)`` takes ~3 s,
  100 positions at 10-12 stones ~20 s. The empty board is out of reach without an
  opening book.

Values are from the point of view of the player to move: +1 win, 0 draw, -1 loss.
"""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from tengen.engine.games.mnk import HEADER, NO_WINNER, TO_PLAY, WINNER, connect4, play_in_place

__all__ = [
    "SolveBudgetExceeded",
    "tictactoe_values",
    "tictactoe_value",
    "tictactoe_optimal_actions",
    "connect4_solve",
    "connect4_optimal_actions",
    "connect4_labelled_positions",
]

WIN, DRAW, LOSS = 1, 0, -1


class SolveBudgetExceeded(RuntimeError):
    """The Connect Four search visited ``max_nodes`` nodes without a verdict."""


# ---------------------------------------------------------------------------------
# Tic-tac-toe
# ---------------------------------------------------------------------------------

_TTT_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def _ttt_has_line(board: tuple[int, ...], stone: int) -> bool:
    return any(board[a] == board[b] == board[c] == stone for a, b, c in _TTT_LINES)


@functools.cache
def tictactoe_values() -> dict[tuple[int, ...], int]:
    """Every reachable tic-tac-toe board -> its exact value for the player to move.

    Keys are the 9 cells row-major from the top (0 empty, 1 X = player 0, 2 O), as
    in the state after its header; finished games are included (value -1 when the
    previous mover made a line, 0 for a full board). 5478 entries. The rules are
    re-implemented here (eight lines) so that the solver checks ``engine.games``
    rather than repeating it.
    """
    values: dict[tuple[int, ...], int] = {}

    def solve(board: tuple[int, ...]) -> int:
        if board in values:
            return values[board]
        stones = sum(cell != 0 for cell in board)
        mover = 1 + stones % 2  # X (stone 1) moves first
        if _ttt_has_line(board, 3 - mover):
            value = LOSS
        elif stones == 9:
            value = DRAW
        else:
            # Negamax: my value is the best of my moves, each worth minus the child's.
            value = max(-solve(board[:cell] + (mover,) + board[cell + 1 :]) for cell in range(9) if not board[cell])
        values[board] = value
        return value

    solve((0,) * 9)
    return values


def _ttt_board(state: np.ndarray) -> tuple[int, ...]:
    board = tuple(int(cell) for cell in np.asarray(state)[HEADER : HEADER + 9])
    if len(board) != 9 or board not in tictactoe_values():
        raise ValueError("not a reachable tic-tac-toe position")
    return board


def tictactoe_value(state: np.ndarray) -> int:
    """The exact value of a tic-tac-toe state for the player to move (+1/0/-1)."""
    return tictactoe_values()[_ttt_board(state)]


def tictactoe_optimal_actions(state: np.ndarray) -> set[int]:
    """The cells (0..8) whose moves keep the game-theoretic value; empty once the game is over."""
    board = _ttt_board(state)
    values = tictactoe_values()
    if _ttt_has_line(board, 1) or _ttt_has_line(board, 2):
        return set()
    mover = 1 + sum(cell != 0 for cell in board) % 2
    move_values = {cell: -values[board[:cell] + (mover,) + board[cell + 1 :]] for cell in range(9) if not board[cell]}
    if not move_values:
        return set()
    best = max(move_values.values())
    return {cell for cell, value in move_values.items() if value == best}


# ---------------------------------------------------------------------------------
# Connect Four
# ---------------------------------------------------------------------------------

_ROWS, _COLS = 6, 7
_STRIDE = _ROWS + 1  # bits per column: six cells and a sentinel that stops carries
_BOTTOM = sum(1 << (_STRIDE * col) for col in range(_COLS))  # the lowest cell of every column
_BOARD = _BOTTOM * ((1 << _ROWS) - 1)  # every cell, no sentinels
_ORDER = np.array([3, 2, 4, 1, 5, 0, 6], dtype=np.int64)  # centre first: centre columns join more lines
_ABORTED = 2  # a sentinel value outside -1..1

# stats slots, an int64[2] array shared by a whole search
_NODES = 0
_ABORT = 1

#: default transposition table: a prime number of slots near 2**22 (key % prime spreads
#: the structured keys); 4M slots x 8 bytes = 32 MB.
DEFAULT_TABLE_SLOTS = 4194301


@njit(cache=True, inline="always")
def _winning_spots(position, mask):
    """Empty cells where the stones in ``position`` would complete four (any line)."""
    # vertical: three stones straight below
    r = (position << 1) & (position << 2) & (position << 3)
    # horizontal (shift 7), and the two diagonals (shifts 6 and 8)
    for shift in (7, 6, 8):
        p = (position << shift) & (position << (2 * shift))
        r |= p & (position << (3 * shift))
        r |= p & (position >> shift)
        p = (position >> shift) & (position >> (2 * shift))
        r |= p & (position << shift)
        r |= p & (position >> (3 * shift))
    return r & (_BOARD ^ mask)


@njit(cache=True, inline="always")
def _popcount(x):
    count = 0
    while x:
        x &= x - 1
        count += 1
    return count


@njit(cache=True, inline="always")
def _mirror(bits):
    out = 0
    for col in range(_COLS):
        out |= ((bits >> (_STRIDE * col)) & 0x7F) << (_STRIDE * (_COLS - 1 - col))
    return out


_BOUND_BITS = 4  # an entry's low bits: (lower + 1) << 2 | (upper + 1), each in 0..2


@njit(cache=True, inline="always")
def _lower(entry):
    return ((entry >> 2) & 3) - 1


@njit(cache=True, inline="always")
def _upper(entry):
    return (entry & 3) - 1


@njit(cache=True, inline="always")
def _key(position, mask):
    """A unique number per position, the same for a position and its mirror image.

    ``position + mask`` marks the mover's stones and, by the carry, the first empty
    cell of each column; ``+ _BOTTOM`` keeps the empty board's key off 0, the mark
    of an empty table slot.
    """
    key = position + mask + _BOTTOM
    mirrored = _mirror(position) + _mirror(mask) + _BOTTOM
    return key if key < mirrored else mirrored


_MAX_DEPTH = _ROWS * _COLS + 1  # frames on the explicit stack: one per stone still to play, and the root


@njit(cache=True)
def _negamax(root_position, root_mask, root_moves, root_alpha, root_beta, table, stats, max_nodes):
    """Fail-soft alpha-beta value in -1..1 of the position for the player to move.

    ``position``: the mover's stones; ``mask``: all stones; ``moves``: stones on the
    board. A result <= alpha is an upper bound, >= beta a lower bound, else exact.
    ``_ABORTED`` once ``stats[_NODES]`` passes ``max_nodes``.

    The recursion runs on an explicit stack of frames (arrays indexed by depth):
    numba's on-disk cache mishandles self-recursive functions (a cached copy
    crashed here), and the compile takes seconds that every test run would pay.
    """
    position = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] the mover's stones
    mask = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] all stones
    alpha = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] window, tightened as children return
    beta = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth]
    alpha_searched = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] alpha when the moves began
    best = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] best child value so far
    slot = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] transposition-table slot
    key = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] position key
    moves = np.empty((_MAX_DEPTH, _COLS), dtype=np.int64)  # [depth, i] ordered move bits
    count = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] how many moves
    next_move = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] index of the child being searched
    scores = np.empty(_COLS, dtype=np.int64)

    depth = 0
    position[0], mask[0], alpha[0], beta[0] = root_position, root_mask, root_alpha, root_beta
    entering = True  # entering the node at ``depth``; else returning ``result`` from it
    result = DRAW
    while True:
        if entering:
            entering = False
            stats[_NODES] += 1
            if stats[_NODES] > max_nodes:
                stats[_ABORT] = 1
                return _ABORTED
            own, all_stones = position[depth], mask[depth]
            if root_moves + depth == _ROWS * _COLS:
                result = DRAW
                continue
            possible = (all_stones + _BOTTOM) & _BOARD
            if _winning_spots(own, all_stones) & possible:
                result = WIN
                continue
            threats = _winning_spots(own ^ all_stones, all_stones)
            forced = possible & threats
            if forced:
                if forced & (forced - 1):  # two threats to block at once: lost
                    result = LOSS
                    continue
                possible = forced
            # Never play directly under an opponent's winning spot: it would fill it for them.
            candidates = possible & ~(threats >> 1)
            if candidates == 0:
                result = LOSS
                continue

            k = _key(own, all_stones)
            s = k % table.shape[0]
            key[depth], slot[depth] = k, s
            if table[s] >> _BOUND_BITS == k:
                lo, hi = _lower(table[s]), _upper(table[s])
                if lo >= beta[depth] or lo == hi:
                    result = lo
                    continue
                if hi <= alpha[depth]:
                    result = hi
                    continue
                alpha[depth] = max(alpha[depth], lo)
                beta[depth] = min(beta[depth], hi)
            alpha_searched[depth] = alpha[depth]

            # Order the moves: more new winning spots first, centre first among equals.
            n = 0
            for i in range(_COLS):
                move = candidates & (((1 << _ROWS) - 1) << (_STRIDE * _ORDER[i]))
                if move:
                    score = _popcount(_winning_spots(own | move, all_stones))
                    j = n
                    while j > 0 and scores[j - 1] < score:
                        moves[depth, j] = moves[depth, j - 1]
                        scores[j] = scores[j - 1]
                        j -= 1
                    moves[depth, j] = move
                    scores[j] = score
                    n += 1
            count[depth] = n
            next_move[depth] = 0
            best[depth] = LOSS - 1
        else:
            # ``result`` is the value of the node at ``depth``; hand it to the parent.
            if depth == 0:
                return result
            depth -= 1
            value = -result
            if value > best[depth]:
                best[depth] = value
                if value > alpha[depth]:
                    alpha[depth] = value
            next_move[depth] += 1
            if alpha[depth] >= beta[depth] or next_move[depth] == count[depth]:
                # Done with this node: record what the search proved, then return it.
                s, k, b = slot[depth], key[depth], best[depth]
                lo, hi = LOSS, WIN
                if table[s] >> _BOUND_BITS == k:  # tighten what an earlier search proved
                    lo, hi = _lower(table[s]), _upper(table[s])
                if b <= alpha_searched[depth]:
                    hi = min(hi, b)
                elif b >= beta[depth]:
                    lo = max(lo, b)
                else:
                    lo = hi = b
                table[s] = (k << _BOUND_BITS) | ((lo + 1) << 2) | (hi + 1)
                result = b
                continue
        # Descend into the next child of the node at ``depth``.
        move = moves[depth, next_move[depth]]
        position[depth + 1] = position[depth] ^ mask[depth]
        mask[depth + 1] = mask[depth] | move
        alpha[depth + 1] = -beta[depth]
        beta[depth + 1] = -alpha[depth]
        depth += 1
        entering = True


@njit(cache=True)
def _solve(position, mask, moves, table, stats, max_nodes):
    """The exact value, by two null-window searches; ``_ABORTED`` past the budget."""
    # Is it a win? A search with window (0, 1) answers >= 1 or <= 0.
    if _negamax(position, mask, moves, 0, 1, table, stats, max_nodes) >= WIN:
        return _ABORTED if stats[_ABORT] else WIN
    if stats[_ABORT]:
        return _ABORTED
    # Not a win: draw or loss? Window (-1, 0).
    value = _negamax(position, mask, moves, -1, 0, table, stats, max_nodes)
    if stats[_ABORT]:
        return _ABORTED
    return DRAW if value >= DRAW else LOSS


@njit(cache=True)
def _child_values(position, mask, moves, table, stats, max_nodes, out):
    """``out[col]``: the value for the mover of playing ``col`` (-2 when full)."""
    for col in range(_COLS):
        out[col] = -2
        column = ((1 << _ROWS) - 1) << (_STRIDE * col)
        move = (mask + _BOTTOM) & column
        if move == 0:
            continue
        if _winning_spots(position, mask) & move:
            out[col] = WIN
            continue
        value = _solve(position ^ mask, mask | move, moves + 1, table, stats, max_nodes)
        if value == _ABORTED:
            return False
        out[col] = -value
    return True


class _Table:
    """The transposition table: ``int64[slots]``, each ``key << 4 | (lower + 1) << 2 | (upper + 1)``
    (0 is an empty slot: no key is 0)."""

    def __init__(self, slots: int):
        self.entries = np.zeros(slots, dtype=np.int64)  # [slots] packed key and bounds


def _bitboards(state: np.ndarray) -> tuple[int, int, int]:
    """(mover's stones, all stones, stone count) of a Connect Four state."""
    state = np.asarray(state)
    cells = state[HEADER : HEADER + _ROWS * _COLS]
    if cells.shape[0] != _ROWS * _COLS:
        raise ValueError("not a Connect Four state (6x7 cells expected)")
    own_stone = 1 + int(state[TO_PLAY])
    position = mask = 0
    for index in np.flatnonzero(cells):
        row, col = divmod(int(index), _COLS)
        bit = 1 << (_STRIDE * col + (_ROWS - 1 - row))  # state row 0 is the top
        mask |= bit
        if cells[index] == own_stone:
            position |= bit
    return position, mask, int(np.count_nonzero(cells))


def _terminal_value(state: np.ndarray) -> int | None:
    winner = int(state[WINNER])
    if winner == NO_WINNER:
        return None
    if winner in (0, 1):
        return WIN if winner == int(state[TO_PLAY]) else LOSS
    return DRAW


def connect4_solve(state: np.ndarray, *, max_nodes: int = 200_000_000, table_slots: int = DEFAULT_TABLE_SLOTS) -> int:
    """The exact value of a Connect Four state for the player to move: +1, 0 or -1.

    A finished game gets its result (the previous mover won: -1). Raises
    ``SolveBudgetExceeded`` after ``max_nodes`` search nodes (about 30 s at the
    default, far more than any position with 10+ stones has needed here).
    """
    terminal = _terminal_value(state)
    if terminal is not None:
        return terminal
    position, mask, moves = _bitboards(state)
    table = _Table(table_slots)
    stats = np.zeros(2, dtype=np.int64)
    value = _solve(position, mask, moves, table.entries, stats, max_nodes)
    if value == _ABORTED:
        raise SolveBudgetExceeded(f"no verdict within {max_nodes} nodes")
    return int(value)


def _optimal_columns(state: np.ndarray, table: _Table, max_nodes: int) -> set[int]:
    if _terminal_value(state) is not None:
        return set()
    position, mask, moves = _bitboards(state)
    values = np.empty(_COLS, dtype=np.int64)
    stats = np.zeros(2, dtype=np.int64)
    if not _child_values(position, mask, moves, table.entries, stats, max_nodes, values):
        raise SolveBudgetExceeded(f"no verdict within {max_nodes} nodes")
    best = int(values.max())
    return {col for col in range(_COLS) if values[col] == best}


def connect4_optimal_actions(
    state: np.ndarray, *, max_nodes: int = 200_000_000, table_slots: int = DEFAULT_TABLE_SLOTS
) -> set[int]:
    """The columns (0..6) whose moves keep the game-theoretic value; empty once it is over.

    ``max_nodes`` bounds the nodes of all the children's searches together.
    """
    return _optimal_columns(state, _Table(table_slots), max_nodes)


def connect4_labelled_positions(
    count: int,
    *,
    min_stones: int = 14,
    max_stones: int = 24,
    seed: int = 0,
    max_nodes: int = 20_000_000,
    informative_only: bool = False,
) -> list[tuple[np.ndarray, set[int]]]:
    """``count`` distinct unfinished positions from seeded random play, with their optimal columns.

    Each position is reached by uniformly random moves up to a stone count drawn
    uniformly from ``min_stones..max_stones``; games that end on the way, repeats,
    and positions the solver cannot settle within ``max_nodes`` are skipped; with
    ``informative_only`` so are positions where every legal move is optimal (all
    win or all lose: they score any policy as perfect; about a quarter of them at
    14-24 stones). The same arguments give the same list. One transposition table
    serves all of them.
    """
    if not 0 <= min_stones <= max_stones < _ROWS * _COLS:
        raise ValueError(f"need 0 <= min_stones <= max_stones < 42, got {min_stones}, {max_stones}")
    game = connect4()
    rng = np.random.default_rng(seed)
    table = _Table(DEFAULT_TABLE_SLOTS)
    seen: set[bytes] = set()
    labelled: list[tuple[np.ndarray, set[int]]] = []
    while len(labelled) < count:
        stones = int(rng.integers(min_stones, max_stones + 1))
        state = game.initial_state()
        for _ in range(stones):
            legal = np.flatnonzero(game.legal_mask(state))
            play_in_place(game.params, state, int(rng.choice(legal)))
            if state[WINNER] != NO_WINNER:
                break
        if state[WINNER] != NO_WINNER or state[HEADER:].tobytes() in seen:
            continue
        seen.add(state[HEADER:].tobytes())
        try:
            optimal = _optimal_columns(state, table, max_nodes)
        except SolveBudgetExceeded:
            continue
        if informative_only and len(optimal) == int(np.count_nonzero(game.legal_mask(state))):
            continue
        labelled.append((state, optimal))
    return labelled
