"""Go on square boards 5..19: the Game interface, stone-group queries, a stateful
board with undo for protocols and people, GTP coordinates and the ren database.

Rules: captures of every opponent group left without liberties, suicide illegal,
simple ko, optional positional superko, two consecutive passes or the move cap end
the game, resignation, Tromp-Taylor area scoring with komi. The rules themselves
live in ``go_kernels`` (compiled); this module is the readable surface around them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike

import numpy as np

from tengen.engine.games import go_kernels as K
from tengen.engine.games.base import KERNEL_GO, Game, IllegalMove
from tengen.engine.games.go_features import FEATURE_PLANES, go_features
from tengen.engine.games.symmetry import dihedral

__all__ = [
    "MAX_KOMI",
    "check_komi",
    "GoGame",
    "GoBoard",
    "Group",
    "RenDatabaseError",
    "GTP_COLUMNS",
    "go",
]

#: GTP column letters: 'I' is skipped so it is never confused with 'J' or '1'.
GTP_COLUMNS = "ABCDEFGHJKLMNOPQRST"
_STONE_CHARS = {K.BLACK: "x", K.WHITE: "o"}


class RenDatabaseError(ValueError):
    """A ren database that cannot be read or does not fit the board."""


@dataclass(frozen=True)
class Group:
    """One group of connected stones ("ren"): actions of its stones and liberties."""

    color: int  # 0 black, 1 white
    stones: tuple[int, ...]
    liberties: tuple[int, ...]

    @property
    def liberty_count(self) -> int:
        return len(self.liberties)

    @property
    def atari_point(self) -> int | None:
        """The only liberty when the group is in atari, else None."""
        return self.liberties[0] if len(self.liberties) == 1 else None


#: the largest komi either way: more than any board's points (361), so it decides no
#: game that the board could not, and small enough that its half points stay exact
MAX_KOMI = 1000.0


def check_komi(komi: float) -> None:
    """A ValueError unless ``komi`` is a multiple of 0.5 within ±MAX_KOMI (NaN is not)."""
    if not -MAX_KOMI <= komi <= MAX_KOMI:
        raise ValueError(f"komi {komi:g} is outside -{MAX_KOMI:g}..{MAX_KOMI:g}")
    if komi * 2 != int(komi * 2):
        raise ValueError(f"komi must be a multiple of 0.5, not {komi:g}")


class GoGame(Game):
    """Go rules for one board size, komi and ko rule (constants only)."""

    kernel_kind = KERNEL_GO
    #: the last action, after the points
    pass_action: int

    def __init__(
        self,
        *,
        size: int = 19,
        komi: float = 7.5,
        superko: bool = False,
        max_moves: int | None = None,
        history_length: int = 8,
        features: bool = False,
    ):
        if not 5 <= size <= K.MAX_SIZE:
            raise ValueError(f"Go board size must be 5..{K.MAX_SIZE}, not {size}")
        check_komi(komi)
        self.size = size
        self.komi = float(komi)
        self.superko = superko
        # OpenSpiel's and minigo's cap: twice the number of points.
        self.max_moves = 2 * size * size if max_moves is None else int(max_moves)
        self.name = f"go{size}"
        self.board_shape = (size, size)
        self.num_actions = size * size + 1
        self.pass_action = size * size
        self.history_length = history_length
        #: the input planes carry go_features.py's liberty, ko, legal-move, ladder and komi planes
        self.features = bool(features)
        self.params = K.make_params(size, komi, superko, self.max_moves, self.features)
        self.symmetries = dihedral(size)
        self.policy_symmetries = self.symmetries
        self._captured = np.empty(self.params[K.P_POINTS], dtype=np.int32)
        self._stride = size + 2
        self._initial = K.initial_state(self.params)

    # -- Game interface ------------------------------------------------------------
    @property
    def num_planes(self) -> int:
        """The stones' 2T planes, with ``features`` go_features.py's, then the colour plane."""
        return 2 * self.history_length + (FEATURE_PLANES if self.features else 0) + 1

    def encode(self, state: np.ndarray, history: Sequence[np.ndarray] = ()) -> np.ndarray:
        planes = super().encode(state, history)
        if not self.features:
            return planes
        return np.concatenate([planes[..., :-1], go_features(self.params, state), planes[..., -1:]], axis=-1)

    def initial_state(self) -> np.ndarray:
        return self._initial.copy()

    def legal_mask(self, state: np.ndarray) -> np.ndarray:
        out = np.empty(self.num_actions, dtype=np.bool_)
        K.legal_mask_into(self.params, state, out)
        return out

    def is_legal(self, state: np.ndarray, action: int) -> bool:
        if state[K.END] != K.ONGOING:
            return False
        if action == self.pass_action:
            return True
        return bool(K.is_legal_point(self.params, state, self._point(action)))

    def play(self, state: np.ndarray, action: int) -> np.ndarray:
        action = int(action)
        if not 0 <= action < self.num_actions:
            raise IllegalMove(f"action {action} is outside 0..{self.num_actions - 1}")
        if state[K.END] != K.ONGOING:
            raise IllegalMove("the game is over")
        if not self.is_legal(state, action):
            why = self._why_illegal(state, action)
            raise IllegalMove(f"{self.action_to_text(action)} is not legal here ({why})")
        return self.play_unchecked(state, action)

    def play_unchecked(self, state: np.ndarray, action: int) -> np.ndarray:
        n = K.play_action(self.params, state, int(action), self._captured)
        return np.array([self._action(p) for p in self._captured[:n]], dtype=np.int32)

    def to_play(self, state: np.ndarray) -> int:
        return int(state[K.TO_PLAY])

    def move_number(self, state: np.ndarray) -> int:
        return int(state[K.MOVES])

    def is_terminal(self, state: np.ndarray) -> bool:
        return bool(state[K.END] != K.ONGOING)

    def end_reason(self, state: np.ndarray) -> str:
        return ("ongoing", "two passes", "move cap", "resignation")[int(state[K.END])]

    def outcome(self, state: np.ndarray) -> float:
        if state[K.END] == K.ENDED_BY_RESIGNATION:
            return 1.0 if state[K.WINNER] == 0 else -1.0
        return float(np.sign(self.score(state)))

    def board(self, state: np.ndarray) -> np.ndarray:
        padded = state[K.HEADER : K.HEADER + self.params[K.P_POINTS]].reshape(self._stride, self._stride)
        return padded[1:-1, 1:-1].astype(np.int8)

    def final_ownership(self, state: np.ndarray) -> np.ndarray:
        """``int8[N * N]``: the Tromp-Taylor owner of every point as the board stands
        (+1 Black: a black stone or empty points that reach only black; -1 White; 0
        dame and empty points of a seki that reach both), the ownership head's target."""
        points = int(self.params[K.P_POINTS])
        owners = np.empty(points, dtype=np.int32)
        K.area_owners_into(self.params, state, np.empty(points, dtype=np.int32), np.empty(points, dtype=np.int32),
                           owners)
        return owners.reshape(self._stride, self._stride)[1:-1, 1:-1].reshape(-1).astype(np.int8)

    # -- Go specifics ------------------------------------------------------------------
    def resign(self, state: np.ndarray, player: int | None = None) -> None:
        """``player`` (default: the one to move) resigns; the other wins."""
        loser = self.to_play(state) if player is None else int(player)
        state[K.END] = K.ENDED_BY_RESIGNATION
        state[K.WINNER] = 1 - loser

    def area(self, state: np.ndarray) -> int:
        """Tromp-Taylor area of black minus that of white, before komi."""
        return int(K.area_score(self.params, state))

    def score(self, state: np.ndarray) -> float:
        """Black's area minus white's area minus komi (> 0: black ahead)."""
        return self.area(state) - self.komi

    def score_text(self, state: np.ndarray) -> str:
        """GTP final_score text: 'B+3.5', 'W+0.5' or '0'."""
        score = self.score(state)
        if score == 0:
            return "0"
        return f"{'B' if score > 0 else 'W'}+{abs(score):g}"

    def ko_point(self, state: np.ndarray) -> int | None:
        p = int(state[K.KO])
        return None if p == K.NO_POINT else self._action(p)

    def prisoners(self, state: np.ndarray) -> tuple[int, int]:
        """Stones captured so far by black and by white."""
        return int(state[K.PRISONERS]), int(state[K.PRISONERS + 1])

    def last_move(self, state: np.ndarray) -> int | None:
        last = int(state[K.LAST])
        return None if last == K.NO_POINT else last

    def zobrist(self, state: np.ndarray) -> int:
        """64-bit hash of the stones on the board (not of whose turn it is)."""
        return (int(state[K.HASH_HI]) & 0xFFFFFFFF) << 32 | (int(state[K.HASH_LO]) & 0xFFFFFFFF)

    def group(self, state: np.ndarray, action: int) -> Group | None:
        """The group of the stone on ``action``, or None for an empty point."""
        p = self._point(action)
        color = int(state[K.HEADER + p])
        if color not in (K.BLACK, K.WHITE):
            return None
        points = self.params[K.P_POINTS]
        nxt = K.HEADER + 2 * points
        stones, liberties = [], set()
        s = p
        while True:
            stones.append(s)
            for q in (s - self._stride, s - 1, s + 1, s + self._stride):
                if state[K.HEADER + q] == K.EMPTY:
                    liberties.add(q)
            s = int(state[nxt + s])
            if s == p:
                break
        return Group(
            color=color - 1,
            stones=tuple(sorted(self._action(s) for s in stones)),
            liberties=tuple(sorted(self._action(q) for q in liberties)),
        )

    def groups(self, state: np.ndarray, color: int | None = None) -> list[Group]:
        """All groups (of ``color`` 0/1 when given), ordered by their first stone."""
        seen: set[int] = set()
        found = []
        for a in range(self.size * self.size):
            if a in seen:
                continue
            g = self.group(state, a)
            if g is None:
                continue
            seen.update(g.stones)
            if color is None or g.color == color:
                found.append(g)
        return found

    def state_from_board(self, board: np.ndarray, to_play: int = 0) -> np.ndarray:
        """A position with the given stones (``int8[N, N]``: 0/1/2) and player to move.

        Raises ValueError when a group has no liberty (such a position cannot arise).
        """
        board = np.asarray(board)
        if board.shape != self.board_shape:
            raise ValueError(f"board shape {board.shape} does not match {self.board_shape}")
        state = self.initial_state()
        for a in map(int, np.flatnonzero(board.reshape(-1))):
            color = int(board.reshape(-1)[a])
            if color not in (K.BLACK, K.WHITE):
                raise ValueError(f"point {self.action_to_text(a)} holds {color}, not 0, 1 or 2")
            K.place_stone(self.params, state, self._point(a), color)
        for g in self.groups(state):
            if not g.liberties:
                raise ValueError(f"the group at {self.action_to_text(g.stones[0])} has no liberty")
        state[K.TO_PLAY] = to_play
        if self.superko:
            K.record_position(self.params, state)
        return state

    def is_own_eye(self, state: np.ndarray, action: int, color: int | None = None) -> bool:
        color = self.to_play(state) if color is None else color
        return bool(K.is_own_eye(self.params, state, self._point(action), color + 1))

    def random_playout(self, state: np.ndarray, seed: int, *, avoid_own_eyes: bool = False) -> int:
        """Plays seeded uniform random legal moves in place to the end; returns the count."""
        return int(K.random_playout(self.params, state, seed, avoid_own_eyes))

    def random_games(self, state: np.ndarray, games: int, seed: int, *, avoid_own_eyes: bool = False) -> int:
        """Play ``games`` random games from ``state`` (left unchanged); total moves."""
        return int(K.random_games(self.params, state, games, seed, avoid_own_eyes))

    # -- text ----------------------------------------------------------------------------
    def action_to_text(self, action: int) -> str:
        action = int(action)
        if action == self.pass_action:
            return "pass"
        if not 0 <= action < self.pass_action:
            raise ValueError(f"action {action} is outside 0..{self.pass_action}")
        row, col = divmod(action, self.size)
        return f"{GTP_COLUMNS[col]}{self.size - row}"

    def text_to_action(self, text: str) -> int:
        vertex = text.strip().upper()
        if vertex == "PASS":
            return self.pass_action
        if len(vertex) < 2 or vertex[0] not in GTP_COLUMNS[: self.size] or not vertex[1:].isdigit():
            raise ValueError(f"{text!r} is not a vertex on a {self.size}x{self.size} board")
        col = GTP_COLUMNS.index(vertex[0])
        number = int(vertex[1:])
        if not 1 <= number <= self.size:
            raise ValueError(f"{text!r} is not a vertex on a {self.size}x{self.size} board")
        return (self.size - number) * self.size + col

    def render(self, state: np.ndarray) -> str:
        """A showboard grid: column letters, row numbers, X black, O white, '.' empty,
        the last move in parentheses."""
        board = self.board(state)
        last = self.last_move(state)
        letters = "   " + " ".join(GTP_COLUMNS[: self.size])
        lines = [letters]
        for row in range(self.size):
            number = self.size - row
            # seps[i] stands before cell i; the last move's two seps become ( and ).
            seps = [" "] * (self.size + 1)
            if last is not None and last // self.size == row and last < self.pass_action:
                seps[last % self.size], seps[last % self.size + 1] = "(", ")"
            cells = "".join(seps[c] + ".XO"[board[row, c]] for c in range(self.size)) + seps[-1]
            lines.append(f"{number:2d}{cells}{number}")
        lines.append(letters)
        black, white = self.prisoners(state)
        mover = "Black" if self.to_play(state) == 0 else "White"
        lines.append(f"{mover} to play; captures B {black} W {white}")
        return "\n".join(lines)

    # -- ren database ------------------------------------------------------------------
    def rens_to_json(self, state: np.ndarray) -> str:
        """The groups as a ren database: header with the board size, one entry per group
        with its stone colour ('x' black, 'o' white), stones and liberties as GTP vertices."""
        rens = {}
        for i, g in enumerate(self.groups(state), start=1):
            rens[str(i)] = {
                "stone": "xo"[g.color],
                "locate": " ".join(self.action_to_text(a) for a in g.stones),
                "liberty": " ".join(self.action_to_text(a) for a in g.liberties),
            }
        doc = {"header": {"boardWidth": self.size, "boardHeight": self.size}, "rens": rens}
        return json.dumps(doc, indent=2)

    def save_rens(self, state: np.ndarray, path: str | PathLike) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.rens_to_json(state) + "\n")

    def state_from_rens(self, text: str, to_play: int = 0) -> np.ndarray:
        """The position a ren database describes. Raises RenDatabaseError when the text
        is not a ren database, the board size differs, or the groups and liberties
        listed are not what the stones make."""
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise RenDatabaseError(f"not JSON: {e}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("header"), dict) or not isinstance(
            doc.get("rens"), dict
        ):
            raise RenDatabaseError("a ren database needs a 'header' object and a 'rens' object")
        width, height = doc["header"].get("boardWidth"), doc["header"].get("boardHeight")
        if (width, height) != (self.size, self.size):
            raise RenDatabaseError(
                f"the database is for a {width}x{height} board, this board is {self.size}x{self.size}"
            )
        board = np.zeros(self.board_shape, dtype=np.int8)
        listed = []
        for ren_id, ren in doc["rens"].items():
            if not isinstance(ren, dict) or ren.get("stone") not in ("x", "o"):
                raise RenDatabaseError(f"ren {ren_id}: 'stone' must be 'x' or 'o'")
            try:
                stones = [self.text_to_action(v) for v in str(ren.get("locate", "")).split()]
                liberties = [self.text_to_action(v) for v in str(ren.get("liberty", "")).split()]
            except ValueError as e:
                raise RenDatabaseError(f"ren {ren_id}: {e}") from None
            if not stones or self.pass_action in stones + liberties:
                raise RenDatabaseError(f"ren {ren_id}: needs at least one stone and no 'pass'")
            for a in stones:
                if board.flat[a]:
                    raise RenDatabaseError(f"ren {ren_id}: {self.action_to_text(a)} is listed twice")
                board.flat[a] = 1 if ren["stone"] == "x" else 2
            listed.append((ren_id, "xo".index(ren["stone"]), tuple(sorted(stones)), tuple(sorted(liberties))))
        try:
            state = self.state_from_board(board, to_play)
        except ValueError as e:
            raise RenDatabaseError(str(e)) from None
        actual = {(g.color, g.stones, g.liberties) for g in self.groups(state)}
        for ren_id, color, ren_stones, ren_liberties in listed:
            if (color, ren_stones, ren_liberties) not in actual:
                raise RenDatabaseError(
                    f"ren {ren_id} does not match the board: its stones are not one group "
                    "or its liberties are not that group's liberties"
                )
        return state

    def load_rens(self, path: str | PathLike, to_play: int = 0) -> np.ndarray:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise RenDatabaseError(f"cannot read {path}: {e.strerror}") from None
        return self.state_from_rens(text, to_play)

    # -- helpers -----------------------------------------------------------------------
    def _point(self, action: int) -> int:
        row, col = divmod(int(action), self.size)
        return (row + 1) * self._stride + col + 1

    def _action(self, p: int) -> int:
        return (int(p) // self._stride - 1) * self.size + int(p) % self._stride - 1

    def _why_illegal(self, state: np.ndarray, action: int) -> str:
        p = self._point(action)
        if state[K.HEADER + p] != K.EMPTY:
            return "occupied"
        if p == state[K.KO]:
            return "ko"
        if self.superko:
            saved = self.params[K.P_SUPERKO]
            self.params[K.P_SUPERKO] = 0
            try:
                plain = K.is_legal_point(self.params, state, p)
            finally:
                self.params[K.P_SUPERKO] = saved
            if plain:
                return "superko"
        return "suicide"


def go(size: int = 19, **kwargs) -> GoGame:
    return GoGame(size=size, **kwargs)


class GoBoard:
    """A Go position you can play on, undo, copy and query, like a classic engine's
    Board: moves as GTP text or actions, captured stones reported, full undo."""

    def __init__(self, game: GoGame | None = None, state: np.ndarray | None = None):
        self.game = game or GoGame()
        self.state = self.game.initial_state() if state is None else state
        self._undo: list[np.ndarray] = []

    @property
    def size(self) -> int:
        return self.game.size

    def play(self, move: str | int, color: int | None = None) -> list[str]:
        """Play ``move`` (GTP text or action) for ``color`` (default: the one to move);
        returns the captured vertices. A move out of turn is allowed, as in GTP."""
        action = self.game.text_to_action(move) if isinstance(move, str) else int(move)
        before = self.state.copy()
        if color is not None and color != self.game.to_play(self.state):
            self.state[K.TO_PLAY] = color
            # The skipped player neither passed nor played: the ko point (theirs) and
            # the run of consecutive passes both start over.
            self.state[K.KO] = K.NO_POINT
            self.state[K.PASSES] = 0
        try:
            captured = self.game.play(self.state, action)
        except IllegalMove:
            self.state = before
            raise
        self._undo.append(before)
        return [self.game.action_to_text(a) for a in captured]

    def undo(self) -> bool:
        """Take back the last move; False when there is none."""
        if not self._undo:
            return False
        self.state = self._undo.pop()
        return True

    def copy(self) -> GoBoard:
        other = GoBoard(self.game, self.state.copy())
        other._undo = list(self._undo)
        return other

    def history(self) -> list[np.ndarray]:
        """Earlier states, oldest first (for the encoder)."""
        return list(self._undo)

    def clear(self) -> None:
        self.state = self.game.initial_state()
        self._undo.clear()

    def group(self, vertex: str) -> Group | None:
        return self.game.group(self.state, self.game.text_to_action(vertex))

    def liberties(self, vertex: str) -> list[str]:
        g = self.group(vertex)
        return [] if g is None else [self.game.action_to_text(a) for a in g.liberties]

    def liberty_count(self, vertex: str) -> int:
        g = self.group(vertex)
        return 0 if g is None else g.liberty_count

    def atari_point(self, vertex: str) -> str | None:
        g = self.group(vertex)
        if g is None or g.atari_point is None:
            return None
        return self.game.action_to_text(g.atari_point)

    def legal_moves(self) -> list[str]:
        return [self.game.action_to_text(int(a)) for a in np.flatnonzero(self.game.legal_mask(self.state))]

    def __str__(self) -> str:
        return self.game.render(self.state)
