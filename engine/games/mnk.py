"""The m,n,k games: k stones in a row on an H x W board, optionally with gravity.

One class covers tic-tac-toe (3x3, k=3), Connect Four (6x7, k=4, gravity) and
Gomoku (15x15, k=5). A state is a flat ``int32`` array: a header at the fixed
offsets below, then the H*W cells row-major from the top-left (``EMPTY``, or
``1 + player`` for a stone). The compiled kernels take ``(params, state, ...)``
with ``params`` the ``int32`` constants at the ``P_*`` offsets.

A move only ever completes lines through the stone just placed, so ``play``
checks the four line directions through that stone and stops each scan after
k - 1 stones: O(k) per move, never a board scan.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from numba import njit

from tengen.engine.games.base import KERNEL_MNK, Game
from tengen.engine.games.symmetry import SymmetrySet, dihedral, mirror_only

__all__ = [
    "MNKGame",
    "tictactoe",
    "connect4",
    "gomoku",
    "play_sequence",
    "legal_mask_into",
    "is_legal",
    "play_in_place",
    "random_playout",
    "random_games",
    "random_moves",
    "random_outcome",
    "fits_bitboard",
    "TO_PLAY",
    "MOVES",
    "WINNER",
    "LAST",
    "HEADER",
    "NO_WINNER",
    "DRAW",
    "NO_MOVE",
    "EMPTY",
]

# -- state layout: header offsets, then the cells -----------------------------------
TO_PLAY = 0  # player to move, 0 or 1
MOVES = 1  # moves played so far
WINNER = 2  # NO_WINNER while the game runs, then 0, 1 or DRAW
LAST = 3  # the last action played, NO_MOVE before the first
HEADER = 4  # cell i lives at state[HEADER + i]

NO_WINNER = -1
DRAW = 2
NO_MOVE = -1
EMPTY = 0  # a stone of player p is stored as 1 + p

# -- params layout ------------------------------------------------------------------
P_HEIGHT = 0
P_WIDTH = 1
P_K = 2
P_GRAVITY = 3


@njit(cache=True)
def _is_legal(params, state, action):
    """Whether ``action`` is legal; ``action`` must already be in 0..A-1."""
    if state[WINNER] != NO_WINNER:
        return False
    # With gravity a column is open while its top cell (row 0) is empty.
    return state[HEADER + action] == EMPTY


@njit(cache=True)
def is_legal(params, state, action):
    return 0 <= action < _num_actions(params) and _is_legal(params, state, action)


@njit(cache=True, inline="always")
def _num_actions(params):
    return params[P_WIDTH] if params[P_GRAVITY] else params[P_HEIGHT] * params[P_WIDTH]


@njit(cache=True)
def legal_mask_into(params, state, out):
    """Fill ``out`` (``bool[A]``) with the legal actions of ``state``."""
    for action in range(out.shape[0]):
        out[action] = _is_legal(params, state, action)


@njit(cache=True, inline="always")
def _run(params, state, row, col, d_row, d_col, stone, limit):
    """Stones of colour ``stone`` in a line from (row, col) exclusive, up to ``limit``."""
    height, width = params[P_HEIGHT], params[P_WIDTH]
    # Bound the run by the board's edge first, so the loop is one test per stone.
    steps = limit
    if d_row > 0:
        steps = min(steps, height - 1 - row)
    elif d_row < 0:
        steps = min(steps, row)
    if d_col > 0:
        steps = min(steps, width - 1 - col)
    elif d_col < 0:
        steps = min(steps, col)
    stride = d_row * width + d_col
    cell = HEADER + row * width + col + stride
    count = 0
    while count < steps and state[cell] == stone:
        count += 1
        cell += stride
    return count


@njit(cache=True, inline="always")
def _makes_line(params, state, row, col, d_row, d_col, stone):
    need = params[P_K] - 1
    forward = _run(params, state, row, col, d_row, d_col, stone, need)
    if forward >= need:
        return True
    return forward + _run(params, state, row, col, -d_row, -d_col, stone, need - forward) >= need


@njit(cache=True, inline="always")
def _place(params, state, action):
    """Drop the mover's stone for ``action``; returns its (row, col)."""
    height, width = params[P_HEIGHT], params[P_WIDTH]
    if params[P_GRAVITY]:
        col = action
        row = height - 1
        while state[HEADER + row * width + col] != EMPTY:
            row -= 1
    else:
        row, col = action // width, action % width
    player = state[TO_PLAY]
    state[HEADER + row * width + col] = 1 + player
    state[MOVES] += 1
    state[LAST] = action
    state[TO_PLAY] = 1 - player
    return row, col


@njit(cache=True)
def play_known_ongoing(params, state, action):
    """Play a legal move already known not to end the game: no line scan. (Search
    replays paths through expanded, hence non-terminal, nodes.)"""
    _place(params, state, action)


@njit(cache=True)
def play_in_place(params, state, action):
    """Play a legal ``action`` for the player to move, updating the winner."""
    height, width = params[P_HEIGHT], params[P_WIDTH]
    player = state[TO_PLAY]
    stone = 1 + player
    row, col = _place(params, state, action)
    # The mover has played ceil(moves / 2) stones if they moved first; until that
    # reaches k no line can exist (a search's first plies skip the scan).
    moves = state[MOVES]
    stones = (moves + 1 - player) // 2
    if stones < params[P_K]:
        if moves == height * width:
            state[WINNER] = DRAW
        return
    # The four line directions: along the row, down the column, both diagonals.
    if (
        _makes_line(params, state, row, col, 0, 1, stone)
        or _makes_line(params, state, row, col, 1, 0, stone)
        or _makes_line(params, state, row, col, 1, 1, stone)
        or _makes_line(params, state, row, col, 1, -1, stone)
    ):
        state[WINNER] = player
    elif state[MOVES] == height * width:
        state[WINNER] = DRAW


@njit(cache=True)
def random_playout(params, state, seed):
    """Play uniformly random legal moves in place until the game ends.

    Returns the number of moves played. ``seed`` (0 <= seed < 2**32) seeds numba's
    own generator (not NumPy's), so the same seed and state give the same game.
    """
    np.random.seed(seed)
    return random_moves(params, state)


@njit(cache=True)
def random_games(params, state, games, seed):
    """Play ``games`` seeded random games from copies of ``state``; returns the total
    number of moves. Seeding once per call keeps short games cheap (a benchmark's
    and a rollout evaluator's loop)."""
    np.random.seed(seed)
    total = 0
    scratch = state.copy()
    for _ in range(games):
        scratch[:] = state
        total += random_moves(params, scratch)
    return total


@njit(cache=True)
def random_moves(params, state):
    """Finish the game with uniform random legal moves from numba's generator as the
    caller seeded it; returns how many were played."""
    num_actions = _num_actions(params)
    played = 0
    while state[WINNER] == NO_WINNER:
        # Rejection sampling is uniform over the legal actions and, with most of them
        # legal, cheaper than counting them first.
        action = np.random.randint(0, num_actions)
        while state[HEADER + action] != EMPTY:
            action = np.random.randint(0, num_actions)
        play_in_place(params, state, action)
        played += 1
    return played


@njit(cache=True)
def fits_bitboard(params):
    """Whether a gravity board fits the 64-bit playout of ``random_outcome``: each
    column takes H bits and one empty guard bit above them, so that no line wraps
    from one column into the next."""
    return params[P_GRAVITY] != 0 and (params[P_HEIGHT] + 1) * params[P_WIDTH] <= 64


@njit(cache=True, inline="always")
def _has_line(stones, k, shift):
    """Whether ``stones`` holds k in a row along the direction of bit ``shift``."""
    run = stones
    for i in range(1, k):
        run &= stones >> np.uint64(i * shift)
    return run != 0


@njit(cache=True, inline="always")
def _wins(stones, height, k):
    # down a column: 1; along a row: H + 1; the diagonals: H and H + 2 (the guard
    # bits keep every run inside the board)
    return (_has_line(stones, k, 1) or _has_line(stones, k, height + 1) or _has_line(stones, k, height)
            or _has_line(stones, k, height + 2))


@njit(cache=True)
def random_outcome(params, state, scratch):
    """The outcome (+1 / -1 / 0, player 0's view) of finishing the game with uniform
    random legal moves from numba's generator as the caller seeded it, ``state`` left
    as it is: the result of ``random_moves`` then the winner, draw for draw.

    Playouts are what pure MCTS spends its time on: a gravity board that fits 64 bits
    (``fits_bitboard``: Connect Four) is played on bitboards, a move an addition and
    a line a few shifts, with the same draws as ``random_moves`` (a full column is
    redrawn), so the same seed gives the same game. Other boards play on ``scratch``,
    a state-sized buffer."""
    winner = state[WINNER]
    if winner == NO_WINNER and fits_bitboard(params):
        winner = _bitboard_playout(params, state)
    elif winner == NO_WINNER:
        scratch[:] = state
        random_moves(params, scratch)
        winner = scratch[WINNER]
    if winner == DRAW:
        return 0.0
    return 1.0 if winner == 0 else -1.0


@njit(cache=True)
def _bitboard_playout(params, state):
    """The winner (or DRAW) of a random playout; bit ``col * (H + 1) + r`` is row r
    from the bottom of column ``col``."""
    height, width, k = params[P_HEIGHT], params[P_WIDTH], params[P_K]
    one = np.uint64(1)
    stones0 = np.uint64(0)
    stones1 = np.uint64(0)
    for col in range(width):
        for row in range(height):
            cell = state[HEADER + row * width + col]
            if cell != EMPTY:
                bit = one << np.uint64(col * (height + 1) + height - 1 - row)
                if cell == 1:
                    stones0 |= bit
                else:
                    stones1 |= bit
    filled = stones0 | stones1
    player = state[TO_PLAY]
    moves = state[MOVES]
    cells = height * width
    while True:
        col = np.random.randint(0, width)
        # full (its top cell taken): drawn again, as random_moves does
        while filled & (one << np.uint64(col * (height + 1) + height - 1)):
            col = np.random.randint(0, width)
        # the column's stones sit at its bottom: adding its bottom bit carries into
        # the first free cell
        stone = (filled + (one << np.uint64(col * (height + 1)))) & ~filled
        filled |= stone
        if player == 0:
            stones0 |= stone
            won = _wins(stones0, height, k)
        else:
            stones1 |= stone
            won = _wins(stones1, height, k)
        moves += 1
        if won:
            return player
        if moves == cells:
            return DRAW
        player = 1 - player


class MNKGame(Game):
    """k in a row on an H x W board; with ``gravity`` the actions are the columns."""

    history_length = 1
    kernel_kind = KERNEL_MNK

    def __init__(self, *, height: int, width: int, k: int, gravity: bool, name: str):
        if height < 1 or width < 1:
            raise ValueError(f"board must be at least 1x1, got {height}x{width}")
        if not 1 <= k <= max(height, width):
            raise ValueError(f"k={k} does not fit a {height}x{width} board")
        self.name = name
        self.height, self.width, self.k, self.gravity = height, width, k, bool(gravity)
        self.board_shape = (height, width)
        self.num_actions = width if gravity else height * width
        self.params = np.array([height, width, k, int(gravity)], dtype=np.int32)
        self.symmetries = _board_symmetries(height, width, self.gravity)
        # Columns mirror exactly as the board does; index k matches ``symmetries``.
        self.policy_symmetries = mirror_only(1, width) if gravity else self.symmetries

    def __repr__(self) -> str:
        return (
            f"MNKGame(height={self.height}, width={self.width}, k={self.k}, "
            f"gravity={self.gravity}, name={self.name!r})"
        )

    # -- positions -------------------------------------------------------------------
    def initial_state(self) -> np.ndarray:
        state = np.zeros(HEADER + self.height * self.width, dtype=np.int32)
        state[WINNER] = NO_WINNER
        state[LAST] = NO_MOVE
        return state

    def legal_mask(self, state: np.ndarray) -> np.ndarray:
        mask = np.zeros(self.num_actions, dtype=np.bool_)
        legal_mask_into(self.params, state, mask)
        return mask

    def play_unchecked(self, state: np.ndarray, action: int) -> np.ndarray:
        play_in_place(self.params, state, int(action))
        return np.empty(0, dtype=np.int32)  # nothing is ever captured

    def random_playout(self, state: np.ndarray, seed: int) -> int:
        """Finish the game in place with random moves; returns how many were played."""
        return int(random_playout(self.params, state, seed))

    def random_games(self, state: np.ndarray, games: int, seed: int) -> int:
        """Play ``games`` random games from ``state`` (left unchanged); total moves."""
        return int(random_games(self.params, state, games, seed))

    def to_play(self, state: np.ndarray) -> int:
        return int(state[TO_PLAY])

    def move_number(self, state: np.ndarray) -> int:
        return int(state[MOVES])

    def is_terminal(self, state: np.ndarray) -> bool:
        return bool(state[WINNER] != NO_WINNER)

    def outcome(self, state: np.ndarray) -> float:
        winner = int(state[WINNER])
        if winner == 0:
            return 1.0
        if winner == 1:
            return -1.0
        return 0.0

    def board(self, state: np.ndarray) -> np.ndarray:
        return state[HEADER:].reshape(self.height, self.width).astype(np.int8)

    # -- text ----------------------------------------------------------------------------
    def action_to_text(self, action: int) -> str:
        if not 0 <= action < self.num_actions:
            raise ValueError(f"action {action} is outside 0..{self.num_actions - 1}")
        return str(int(action) + 1)

    def text_to_action(self, text: str) -> int:
        stripped = text.strip()
        if not (stripped.isascii() and stripped.isdigit()) or not 1 <= int(stripped) <= self.num_actions:
            what = "column" if self.gravity else "cell"
            raise ValueError(f"{text!r} is not a {self.name} move: expected a {what} 1..{self.num_actions}")
        return int(stripped) - 1

    def render(self, state: np.ndarray) -> str:
        """Rows top to bottom, ``X`` for player 0, ``O`` for player 1, ``.`` empty."""
        marks = np.array([".", "X", "O"])
        lines = [" ".join(marks[row]) for row in self.board(state)]
        if self.gravity:
            lines.append(" ".join(str(c + 1) for c in range(self.width)))
        return "\n".join(lines)


def _board_symmetries(height: int, width: int, gravity: bool) -> SymmetrySet:
    if gravity:
        return mirror_only(height, width)
    if height == width:
        return dihedral(height)
    # A rectangle without gravity also keeps its half turn (and so the up-down mirror).
    return SymmetrySet(height, width, [(False, 0), (True, 0), (False, 2), (True, 2)])


def tictactoe() -> MNKGame:
    return MNKGame(height=3, width=3, k=3, gravity=False, name="tictactoe")


def connect4() -> MNKGame:
    return MNKGame(height=6, width=7, k=4, gravity=True, name="connect4")


def gomoku(size: int = 15) -> MNKGame:
    return MNKGame(height=size, width=size, k=5, gravity=False, name="gomoku")


def play_sequence(game: Game, actions: Iterable[int | str]) -> np.ndarray:
    """The state after playing ``actions`` (ints or move text) from the start, checked."""
    state = game.initial_state()
    for action in actions:
        game.play(state, game.text_to_action(action) if isinstance(action, str) else action)
    return state
