"""Perfect players for tests and benchmarks: exact tic-tac-toe and Connect Four values.

- Tic-tac-toe: every one of the 5478 reachable positions is solved once by plain
  minimax (a few milliseconds) and memoised; ``tictactoe_value`` and
  ``tictactoe_optimal_actions`` read that table.
- Connect Four: a compiled alpha-beta negamax on bitboards (the layout of Pascal
  Pons' solver: 7 bits per column, bit ``7 * col + height`` with height 0 at the
  bottom, the 7th bit a sentinel) over Pons' scores: a win scores 22 minus the
  stones the winner has played when the four is made (18 down to 1), a loss minus
  that, a draw 0; so the best move wins soonest or loses latest. With

  * immediate wins found by bit tricks, forced blocks played at once, and moves
    that hand the opponent a win (playing under their threat) never tried;
  * each window narrowed first by the scores still possible at that stone count;
  * move ordering by how many winning spots a move creates, centre-first on ties;
  * a transposition table (a fixed-size numpy array, one slot per position key,
    mirror images sharing the key) holding a lower and an upper bound on the
    score, packed with the key into one ``int64`` so that a probe is one memory
    access; its bounds hold whatever the root, so one table can serve many calls;
  * only null-window searches at the root: ``connect4_solve`` asks "a win?" then
    "a draw?" (the cheap win/draw/loss path), and ``connect4_score`` goes on from
    that sign with a binary search of null windows over the sign's half of the
    score range, as Pons' solver narrows its window.

  Search nodes (exact, so they do not depend on the load) on seeded random positions
  by stones on the board, 40 per row (30 at 8 stones, 10 at 6), a fresh table per
  call, as median / p90 / max. One core of this repository's 2-core CPU searched
  4-6M nodes/s while other jobs shared it (~7M on a quiet core), so 1M nodes take
  ~0.2 s:

  ======  ===================  ===================  ========================
  stones  ``connect4_solve``   ``connect4_score``   ``connect4_move_scores``
  ======  ===================  ===================  ========================
  20      1 / 5K / 56K         2 / 8K / 61K         16 / 24K / 56K
  16      10 / 39K / 0.13M     15 / 51K / 0.13M     9K / 0.14M / 0.27M
  14      0.9K / 0.14M / 1.2M  3K / 0.25M / 1.2M    0.19M / 0.69M / 2.7M
  12      16K / 0.70M / 1.3M   83K / 1.1M / 3.0M    0.64M / 3.3M / 6.4M
  10      97K / 0.87M / 3.4M   0.41M / 1.5M / 7.5M  2.4M / 6.4M / 19M
  8       0.54M / 14M / 71M    2.3M / 38M / 82M     10M / 63M / 127M
  6       7.7M / 25M / 37M
  ======  ===================  ===================  ========================

  The win/draw/loss path visits about as many nodes as the value-only search it
  replaced (a few percent fewer, by the score bounds), at the same speed per node.
  Labelling play/data/connect4_positions.txt (every move's score) took ~12 s per
  position at 8 stones, ~4 s at 9, under 1 s from 10 on, on a loaded core.

  ``connect4_move_scores`` scores each child (one stone more), sharing one table.
  The empty board is out of reach without an opening book.

Values are from the point of view of the player to move: +1 win, 0 draw, -1 loss;
scores likewise (positive: the mover wins).
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
    "MAX_SCORE",
    "MIN_SCORE",
    "NO_SCORE",
    "TranspositionTable",
    "connect4_solve",
    "connect4_score",
    "connect4_move_scores",
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
_CELLS = _ROWS * _COLS
_STRIDE = _ROWS + 1  # bits per column: six cells and a sentinel that stops carries
_BOTTOM = sum(1 << (_STRIDE * col) for col in range(_COLS))  # the lowest cell of every column
_BOARD = _BOTTOM * ((1 << _ROWS) - 1)  # every cell, no sentinels
_ORDER = np.array([3, 2, 4, 1, 5, 0, 6], dtype=np.int64)  # centre first: centre columns join more lines

#: the best and worst scores of Connect Four (a win or loss on the 4th stone)
MAX_SCORE = 18
MIN_SCORE = -18
#: ``connect4_move_scores``' mark of a full column
NO_SCORE = -100
_ABORTED = 100  # a sentinel outside every score

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


@njit(cache=True, inline="always")
def _win_now(moves):
    """The score of winning with the next stone when ``moves`` stones are on the board.

    The mover's stones then number ``moves // 2 + 1``, and a win is worth 22 minus
    them: (43 - moves) // 2 for either parity.
    """
    return (_CELLS + 1 - moves) // 2


@njit(cache=True, inline="always")
def _lose_next(moves):
    """The score of losing to the opponent's next stone (minus their win at ``moves + 1``)."""
    return -((_CELLS - moves) // 2)


# A table entry: key << 12 | (lower + 32) << 6 | (upper + 32), the bounds in -21..21.
_BOUND_BITS = 12
_BOUND_OFFSET = 32


@njit(cache=True, inline="always")
def _lower(entry):
    return ((entry >> 6) & 63) - _BOUND_OFFSET


@njit(cache=True, inline="always")
def _upper(entry):
    return (entry & 63) - _BOUND_OFFSET


@njit(cache=True, inline="always")
def _key(position, mask):
    """A unique number per position, the same for a position and its mirror image.

    ``position + mask`` marks the mover's stones and, by the carry, the first empty
    cell of each column; ``+ _BOTTOM`` keeps the empty board's key off 0, the mark
    of an empty table slot. Below 2**49, so the key and two 6-bit bounds fit an int64.
    """
    key = position + mask + _BOTTOM
    mirrored = _mirror(position) + _mirror(mask) + _BOTTOM
    return key if key < mirrored else mirrored


_MAX_DEPTH = _CELLS + 1  # frames on the explicit stack: one per stone still to play, and the root


@njit(cache=True)
def _negamax(root_position, root_mask, root_moves, root_alpha, root_beta, table, stats, max_nodes):
    """Fail-soft alpha-beta score of the position for the player to move.

    ``position``: the mover's stones; ``mask``: all stones; ``moves``: stones on the
    board. A result <= alpha is an upper bound, >= beta a lower bound, else exact.
    ``_ABORTED`` once ``stats[_NODES]`` passes ``max_nodes``.

    Each node's window is first narrowed by what is known without searching: a mover
    who cannot win at once and is not lost at once scores at most ``_win_now(moves + 2)``
    and at least ``_lose_next(moves + 2)``; and by the table's bounds. Narrowing by
    proven bounds keeps fail-soft results sound: a child's bound outside the narrowed
    window still bounds the true score.

    The recursion runs on an explicit stack of frames (arrays indexed by depth):
    numba's on-disk cache mishandles self-recursive functions (a cached copy
    crashed here), and the compile takes seconds that every test run would pay.
    """
    position = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] the mover's stones
    mask = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] all stones
    alpha = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] window, tightened as children return
    beta = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth]
    alpha_searched = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] alpha when the moves began
    lower = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] proven bounds before the moves
    upper = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth]
    best = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] best child score so far
    slot = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] transposition-table slot
    key = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] position key
    moves = np.empty((_MAX_DEPTH, _COLS), dtype=np.int64)  # [depth, i] ordered move bits
    count = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] how many moves
    next_move = np.empty(_MAX_DEPTH, dtype=np.int64)  # [depth] index of the child being searched
    order = np.empty(_COLS, dtype=np.int64)

    depth = 0
    position[0], mask[0], alpha[0], beta[0] = root_position, root_mask, root_alpha, root_beta
    entering = True  # entering the node at ``depth``; else returning ``result`` from it
    result = 0
    while True:
        if entering:
            entering = False
            stats[_NODES] += 1
            if stats[_NODES] > max_nodes:
                stats[_ABORT] = 1
                return _ABORTED
            own, all_stones = position[depth], mask[depth]
            n = root_moves + depth
            if n == _CELLS:
                result = 0
                continue
            possible = (all_stones + _BOTTOM) & _BOARD
            if _winning_spots(own, all_stones) & possible:
                result = _win_now(n)
                continue
            threats = _winning_spots(own ^ all_stones, all_stones)
            forced = possible & threats
            if forced:
                if forced & (forced - 1):  # two threats to block at once: lost
                    result = _lose_next(n)
                    continue
                possible = forced
            # Never play directly under an opponent's winning spot: it would fill it for them.
            candidates = possible & ~(threats >> 1)
            if candidates == 0:
                result = _lose_next(n)
                continue
            if n >= _CELLS - 2:  # one stone each at most, and neither can win with it
                result = 0
                continue

            lo, hi = _lose_next(n + 2), _win_now(n + 2)
            k = _key(own, all_stones)
            s = k % table.shape[0]
            key[depth], slot[depth] = k, s
            if table[s] >> _BOUND_BITS == k:
                lo, hi = max(lo, _lower(table[s])), min(hi, _upper(table[s]))
            if lo >= beta[depth] or lo == hi:
                result = lo
                continue
            if hi <= alpha[depth]:
                result = hi
                continue
            alpha[depth] = max(alpha[depth], lo)
            beta[depth] = min(beta[depth], hi)
            alpha_searched[depth] = alpha[depth]
            lower[depth], upper[depth] = lo, hi

            # Order the moves: more new winning spots first, centre first among equals.
            n_moves = 0
            for i in range(_COLS):
                move = candidates & (((1 << _ROWS) - 1) << (_STRIDE * _ORDER[i]))
                if move:
                    spots = _popcount(_winning_spots(own | move, all_stones))
                    j = n_moves
                    while j > 0 and order[j - 1] < spots:
                        moves[depth, j] = moves[depth, j - 1]
                        order[j] = order[j - 1]
                        j -= 1
                    moves[depth, j] = move
                    order[j] = spots
                    n_moves += 1
            count[depth] = n_moves
            next_move[depth] = 0
            best[depth] = -_ABORTED
        else:
            # ``result`` is the score of the node at ``depth``; hand it to the parent.
            if depth == 0:
                return result
            depth -= 1
            score = -result
            if score > best[depth]:
                best[depth] = score
                if score > alpha[depth]:
                    alpha[depth] = score
            next_move[depth] += 1
            if alpha[depth] >= beta[depth] or next_move[depth] == count[depth]:
                # Done with this node: record what the search proved, then return it.
                s, b = slot[depth], best[depth]
                lo, hi = lower[depth], upper[depth]
                if b <= alpha_searched[depth]:
                    hi = min(hi, b)
                elif b >= beta[depth]:
                    lo = max(lo, b)
                else:
                    lo = hi = b
                table[s] = (key[depth] << _BOUND_BITS) | ((lo + _BOUND_OFFSET) << 6) | (hi + _BOUND_OFFSET)
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
def _sign(position, mask, moves, table, stats, max_nodes):
    """+1, 0 or -1 (win, draw, loss) by two null-window searches; ``_ABORTED`` past the budget."""
    # Is it a win? A search with window (0, 1) answers >= 1 or <= 0.
    if _negamax(position, mask, moves, 0, 1, table, stats, max_nodes) >= 1:
        return _ABORTED if stats[_ABORT] else WIN
    if stats[_ABORT]:
        return _ABORTED
    # Not a win: draw or loss? Window (-1, 0).
    score = _negamax(position, mask, moves, -1, 0, table, stats, max_nodes)
    if stats[_ABORT]:
        return _ABORTED
    return DRAW if score >= 0 else LOSS


@njit(cache=True)
def _score(position, mask, moves, table, stats, max_nodes):
    """The exact score: the sign first (the cheap questions), then a binary search of
    null-window probes within the sign's half; ``_ABORTED`` past the budget."""
    sign = _sign(position, mask, moves, table, stats, max_nodes)
    if sign == _ABORTED:
        return _ABORTED
    if sign == DRAW:
        return 0
    # The bounds the sign leaves: a win scores 1.._win_now(moves), a loss _lose_next(moves)..-1.
    lo, hi = (1, _win_now(moves)) if sign == WIN else (_lose_next(moves), -1)
    while lo < hi:
        probe = lo + (hi - lo) // 2  # is the score above ``probe``?
        result = _negamax(position, mask, moves, probe, probe + 1, table, stats, max_nodes)
        if stats[_ABORT]:
            return _ABORTED
        if result <= probe:
            hi = min(hi, result)
        else:
            lo = max(lo, result)
    return lo


@njit(cache=True)
def _child_results(position, mask, moves, exact, table, stats, max_nodes, out):
    """``out[col]``: the score (``exact``) or the sign of playing ``col`` for the mover,
    ``NO_SCORE`` when the column is full; False past the budget."""
    for col in range(_COLS):
        out[col] = NO_SCORE
        column = ((1 << _ROWS) - 1) << (_STRIDE * col)
        move = (mask + _BOTTOM) & column
        if move == 0:
            continue
        if _winning_spots(position, mask) & move:
            out[col] = _win_now(moves) if exact else WIN
            continue
        if exact:
            result = _score(position ^ mask, mask | move, moves + 1, table, stats, max_nodes)
        else:
            result = _sign(position ^ mask, mask | move, moves + 1, table, stats, max_nodes)
        if result == _ABORTED:
            return False
        out[col] = -result
    return True


class TranspositionTable:
    """The Connect Four search's memory: ``int64[slots]``, each entry
    ``key << 12 | (lower + 32) << 6 | (upper + 32)`` (0 is an empty slot: no key is 0).

    Entries are proven bounds on positions' scores, true whatever the root, so one
    table may serve many calls (``table=``): positions that share subtrees then cost
    less. ``slots`` x 8 bytes of memory.
    """

    def __init__(self, slots: int = DEFAULT_TABLE_SLOTS):
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


def _terminal_score(state: np.ndarray) -> int | None:
    """The score of a finished game for the player to move (who did not make the last move)."""
    winner = int(state[WINNER])
    if winner == NO_WINNER:
        return None
    if winner in (0, 1):
        # The last mover won with stone number ``stones`` of the game, their (stones + 1) // 2-th.
        stones = int(np.count_nonzero(np.asarray(state)[HEADER : HEADER + _CELLS]))
        return (stones + 1) // 2 - 22
    return 0


def _search_table(table: TranspositionTable | None, table_slots: int) -> TranspositionTable:
    return table if table is not None else TranspositionTable(table_slots)


def connect4_solve(
    state: np.ndarray,
    *,
    max_nodes: int = 200_000_000,
    table_slots: int = DEFAULT_TABLE_SLOTS,
    table: TranspositionTable | None = None,
) -> int:
    """The exact value of a Connect Four state for the player to move: +1, 0 or -1.

    The sign of ``connect4_score``, at the cost of its first two null-window
    searches only. A finished game gets its result (the previous mover won: -1).
    Raises ``SolveBudgetExceeded`` after ``max_nodes`` search nodes (about 30 s at
    the default, far more than any position with 10+ stones has needed here).
    """
    terminal = _terminal_score(state)
    if terminal is not None:
        return int(np.sign(terminal))
    position, mask, moves = _bitboards(state)
    stats = np.zeros(2, dtype=np.int64)
    value = _sign(position, mask, moves, _search_table(table, table_slots).entries, stats, max_nodes)
    if value == _ABORTED:
        raise SolveBudgetExceeded(f"no verdict within {max_nodes} nodes")
    return int(value)


def connect4_score(
    state: np.ndarray,
    *,
    max_nodes: int = 200_000_000,
    table_slots: int = DEFAULT_TABLE_SLOTS,
    table: TranspositionTable | None = None,
) -> int:
    """The exact score of a Connect Four state for the player to move, as Pascal Pons' solver scores it.

    Both sides play perfectly, winning as soon and losing as late as they can. A win
    scores 22 minus the number of stones the winner has played when the four is
    made (18 for a win with one's 4th stone, 1 with one's 21st and last), a loss
    minus that, a draw 0: an integer in ``MIN_SCORE..MAX_SCORE`` (-18..18). The
    mover's best move leaves the opponent minus the mover's score. A finished game
    scores from the previous mover's win (e.g. -18 after a four made with a 4th stone).
    Raises ``SolveBudgetExceeded`` after ``max_nodes`` search nodes.
    """
    terminal = _terminal_score(state)
    if terminal is not None:
        return terminal
    position, mask, moves = _bitboards(state)
    stats = np.zeros(2, dtype=np.int64)
    score = _score(position, mask, moves, _search_table(table, table_slots).entries, stats, max_nodes)
    if score == _ABORTED:
        raise SolveBudgetExceeded(f"no score within {max_nodes} nodes")
    return int(score)


def _child_scores(state: np.ndarray, table: TranspositionTable, max_nodes: int, exact: bool) -> np.ndarray | None:
    if _terminal_score(state) is not None:
        return None
    position, mask, moves = _bitboards(state)
    out = np.empty(_COLS, dtype=np.int64)
    stats = np.zeros(2, dtype=np.int64)
    if not _child_results(position, mask, moves, exact, table.entries, stats, max_nodes, out):
        raise SolveBudgetExceeded(f"no verdict within {max_nodes} nodes")
    return out


def connect4_move_scores(
    state: np.ndarray,
    *,
    max_nodes: int = 200_000_000,
    table_slots: int = DEFAULT_TABLE_SLOTS,
    table: TranspositionTable | None = None,
) -> np.ndarray:
    """``int64[7]``: for each column, the mover's score after playing there (``connect4_score``
    of the move: minus the opponent's score after it, or the win it makes at once);
    ``NO_SCORE`` for a full column. Every column ``NO_SCORE`` once the game is over.

    The position's own score is the maximum. ``max_nodes`` bounds the nodes of all
    the children's searches together; one table serves them all.
    """
    scores = _child_scores(state, _search_table(table, table_slots), max_nodes, exact=True)
    return np.full(_COLS, NO_SCORE, dtype=np.int64) if scores is None else scores


def _optimal_columns(state: np.ndarray, table: TranspositionTable, max_nodes: int) -> set[int]:
    values = _child_scores(state, table, max_nodes, exact=False)
    if values is None:
        return set()
    best = int(values.max())
    return {col for col in range(_COLS) if values[col] == best}


def connect4_optimal_actions(
    state: np.ndarray, *, max_nodes: int = 200_000_000, table_slots: int = DEFAULT_TABLE_SLOTS
) -> set[int]:
    """The columns (0..6) whose moves keep the game-theoretic value (win, draw or loss;
    not the fastest win: see ``connect4_move_scores``); empty once it is over.

    ``max_nodes`` bounds the nodes of all the children's searches together.
    """
    return _optimal_columns(state, TranspositionTable(table_slots), max_nodes)


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
    table = TranspositionTable(DEFAULT_TABLE_SLOTS)
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
