"""The one Game interface that search, self-play and the tools see.

A game object holds only constants (board size, rules, komi); every position is a
small flat ``int32`` array (a *state*) that the compiled kernels read and write in
place, so copying a position is one memcpy and a batch of positions is a 2-D array.
The methods here are thin wrappers for Python callers; the kernels behind them take
``(params, state, ...)`` with ``params`` the game's constants as an ``int32`` array,
so compiled search code can call them directly.

Conventions shared by every game:

- Players are 0 (first to move: Black in Go, X in the m,n,k games) and 1.
- Points are indexed row-major from the top-left corner: ``action = row * W + col``
  where row 0 is the top row as printed. Go adds ``pass = H * W``. Connect Four's
  actions are its columns.
- ``outcome(state)`` is the result from player 0's point of view: +1 win, -1 loss,
  0 draw; only meaningful once ``is_terminal(state)``.
- Input planes are NHWC (``planes_hwc`` for one position: ``[H, W, C]``, float32).
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

import numpy as np

from tengen.engine.games.symmetry import SymmetrySet

__all__ = ["Game", "IllegalMove", "PLAYER_NAMES", "KERNEL_MNK", "KERNEL_GO"]

PLAYER_NAMES = ("black", "white")

#: kernel kinds: which compiled rules a state belongs to (see engine/games/kernels.py)
KERNEL_MNK, KERNEL_GO = 0, 1


class IllegalMove(ValueError):
    """Raised by the checked ``play`` when a move is not legal in the position."""


class Game(abc.ABC):
    """Rules, encoder, symmetries and move text of one game (constants only)."""

    name: str
    #: board height and width (rows, columns)
    board_shape: tuple[int, int]
    #: size of the policy vector: points (+ pass for Go), or columns for Connect Four
    num_actions: int
    #: number of past positions per side in the input planes (T)
    history_length: int
    #: the game's constants for the compiled kernels
    params: np.ndarray
    #: which family of compiled kernels reads ``params`` and the states (KERNEL_*)
    kernel_kind: int
    #: the board transformations that leave the rules unchanged
    symmetries: SymmetrySet
    #: the same transformations acting on the action layout (the board cells for Go
    #: and tic-tac-toe, the columns for Connect Four); index k matches ``symmetries``
    policy_symmetries: SymmetrySet
    #: the action that passes (Go's), None in games without one; temperature never
    #: samples it (``choose_move``)
    pass_action: int | None = None

    # -- positions -------------------------------------------------------------------
    @abc.abstractmethod
    def initial_state(self) -> np.ndarray:
        """A new empty position, player 0 to move."""

    @abc.abstractmethod
    def legal_mask(self, state: np.ndarray) -> np.ndarray:
        """``bool[A]``: which actions are legal (all False once the game is over)."""

    @abc.abstractmethod
    def play_unchecked(self, state: np.ndarray, action: int) -> np.ndarray:
        """Play a move known to be legal, in place; returns the points it captured."""

    def play(self, state: np.ndarray, action: int) -> np.ndarray:
        """Play ``action`` in place after checking it; returns the captured points.

        Raises ``IllegalMove`` (and leaves the state untouched) when it is not legal.
        """
        action = int(action)
        if not 0 <= action < self.num_actions:
            raise IllegalMove(f"action {action} is outside 0..{self.num_actions - 1}")
        if self.is_terminal(state):
            raise IllegalMove("the game is over")
        if not self.legal_mask(state)[action]:
            raise IllegalMove(f"{self.action_to_text(action)} is not legal here")
        return self.play_unchecked(state, action)

    def next_state(self, state: np.ndarray, action: int) -> np.ndarray:
        """A copy of ``state`` with ``action`` played (checked)."""
        child = state.copy()
        self.play(child, action)
        return child

    @abc.abstractmethod
    def to_play(self, state: np.ndarray) -> int:
        """The player to move: 0 or 1."""

    @abc.abstractmethod
    def move_number(self, state: np.ndarray) -> int:
        """How many moves (passes included) have been played."""

    @abc.abstractmethod
    def is_terminal(self, state: np.ndarray) -> bool:
        """Whether the game has ended."""

    @abc.abstractmethod
    def outcome(self, state: np.ndarray) -> float:
        """+1/-1/0 from player 0's point of view for a finished game."""

    @abc.abstractmethod
    def random_playout(self, state: np.ndarray, seed: int) -> int:
        """Finish the game in place with seeded uniform random legal moves (one
        compiled call); returns how many moves were played."""

    @abc.abstractmethod
    def random_games(self, state: np.ndarray, games: int, seed: int) -> int:
        """Play ``games`` seeded random games from ``state`` (left unchanged) in one
        compiled call; returns the total number of moves."""

    @abc.abstractmethod
    def board(self, state: np.ndarray) -> np.ndarray:
        """``int8[H, W]``: 0 empty, 1 player 0's stone, 2 player 1's stone."""

    def final_ownership(self, state: np.ndarray) -> np.ndarray | None:
        """``int8[H * W]`` for a game that ends by counting territory: who owns each
        point of the final position (+1 player 0, -1 player 1, 0 nobody), row-major
        like the actions; None for games without territory (the default)."""
        return None

    # -- network inputs ----------------------------------------------------------------
    @property
    def num_planes(self) -> int:
        """C: own and opponent stones for T positions, plus the colour plane."""
        return 2 * self.history_length + 1

    @property
    def planes_shape(self) -> tuple[int, int, int]:
        return (*self.board_shape, self.num_planes)

    @staticmethod
    def movers(planes: np.ndarray) -> np.ndarray:
        """``int64[L]``: the player to move in each of ``planes[L, H, W, C]``, read from
        the colour plane that ``encode`` writes (1 when player 0 is to move)."""
        planes = np.asarray(planes)
        return np.where(planes[:, 0, 0, -1] > 0, 0, 1).astype(np.int64)

    def encode(self, state: np.ndarray, history: Sequence[np.ndarray] = ()) -> np.ndarray:
        """``float32[H, W, C]`` input planes for the player to move.

        ``history`` holds earlier states, oldest first (only the last T-1 are used;
        missing ones give empty planes). Planes ``2t`` and ``2t+1`` are the mover's
        and the opponent's stones ``t`` moves ago; the last plane is 1 when player 0
        is to move (AlphaGo Zero's layout).
        """
        boards = [self.board(state)]
        for past in list(history)[::-1][: self.history_length - 1]:
            boards.append(self.board(past))
        return encode_boards(boards, self.to_play(state), self.history_length)

    # -- symmetries ----------------------------------------------------------------------
    def transform_planes(self, planes_hwc: np.ndarray, k: int) -> np.ndarray:
        """``planes[..., H, W, C]`` under symmetry ``k``."""
        return self.symmetries.apply_planes(planes_hwc, k)

    def transform_policy(self, policy: np.ndarray, k: int) -> np.ndarray:
        """``policy[..., A]`` under symmetry ``k`` (pass stays pass)."""
        return self.policy_symmetries.apply_policy(policy, k)

    def map_action(self, action: int, k: int) -> int:
        """The image of a move under symmetry ``k``."""
        return self.policy_symmetries.map_action(action, k)

    def canonical_key(self, state: np.ndarray) -> bytes:
        """The same bytes for every symmetric image of a position (least image)."""
        board = self.board(state)
        images = [self.symmetries.apply_board(board, k).tobytes() for k in range(len(self.symmetries))]
        return bytes([self.to_play(state)]) + min(images)

    # -- text ----------------------------------------------------------------------------
    @abc.abstractmethod
    def action_to_text(self, action: int) -> str:
        """Move text: GTP vertex or 'pass' in Go, '1'..'7' in Connect Four, '1'..'9' in tic-tac-toe."""

    @abc.abstractmethod
    def text_to_action(self, text: str) -> int:
        """Inverse of ``action_to_text``; ``ValueError`` naming the text when it is not a move."""

    def moves_from_text(self, line: str) -> list[int]:
        """Moves as people type them: move texts separated by spaces or commas
        ("D4 Q16 pass"), or, where every move is one character, a run of them
        ("4453" in Connect Four). ValueError names the first bad move."""
        tokens = line.replace(",", " ").split()
        if len(tokens) == 1 and all(len(self.action_to_text(a)) == 1 for a in range(self.num_actions)):
            tokens = list(tokens[0])
        return [self.text_to_action(t) for t in tokens]

    def state_from_moves(self, moves: Sequence[int]) -> tuple[np.ndarray, list[np.ndarray]]:
        """The position after ``moves`` from the start, and the states before it
        (oldest first, for ``encode``). IllegalMove names the first illegal move."""
        state, history = self.initial_state(), []
        for i, action in enumerate(moves):
            history.append(state.copy())
            try:
                self.play(state, action)
            except IllegalMove as e:
                raise IllegalMove(f"move {i + 1}: {e}") from None
        return state, history

    @abc.abstractmethod
    def render(self, state: np.ndarray) -> str:
        """A text board for people."""


def encode_boards(boards: Sequence[np.ndarray], to_play: int, history_length: int) -> np.ndarray:
    """Planes from boards (newest first) for the mover ``to_play``; see ``Game.encode``."""
    height, width = boards[0].shape
    planes = np.zeros((height, width, 2 * history_length + 1), dtype=np.float32)
    own, other = 1 + to_play, 2 - to_play
    for t, board in enumerate(boards[:history_length]):
        planes[:, :, 2 * t] = board == own
        planes[:, :, 2 * t + 1] = board == other
    planes[:, :, -1] = 1.0 if to_play == 0 else 0.0
    return planes
