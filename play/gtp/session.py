"""The state that every GTP handler shares: the game so far (``Record``) and its
rules, the player that searches (a model's, or none), both clocks, the ownership
estimate of a position and the resign counters, with the settings the engine was
started with.

A module of its own so that the handlers meet here and never reach into each other:
``boardsize``, ``komi`` and ``loadsgf`` replace the game through the ``Session``, and
whatever reads the position, the clock or the estimate reads it here.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from tengen.engine.games import go_kernels as K
from tengen.engine.games.go import GoGame
from tengen.engine.mcts import SearchSettings
from tengen.play.gtp.clock import Clock
from tengen.play.ownership import Ownership
from tengen.play.score import Score
from tengen.play.search_player import Analysis, SearchPlayer
from tengen.play.sgf import Move, Setup

__all__ = ["Player", "Record", "Session", "reopened"]


class Player(Protocol):
    """What ``genmove`` and analysis need from a searcher (``play.search_player.SearchPlayer``)."""

    @property
    def uses_model(self) -> bool: ...

    #: the komi the model was trained with (None: no model, or any)
    komi: float | None

    def why_not(self, game: GoGame) -> str | None: ...

    def search(self, game: GoGame, state: np.ndarray, history: Sequence[np.ndarray] = (), *,
               max_visits: int | None = None, seconds: float | None = None, stop: threading.Event | None = None,
               on_snapshot: Callable[[Analysis], None] | None = None,
               interval: float | None = None) -> Analysis: ...


def reopened(game: GoGame, state: np.ndarray) -> np.ndarray:
    """A copy of ``state`` on which a move can be played: a finished game goes on
    (after two passes; past the move cap the position starts a fresh move count)."""
    s = state.copy()
    end = int(s[K.END])
    if end == K.ENDED_BY_MOVE_CAP:
        fresh = game.state_from_board(game.board(s), game.to_play(s))
        for field in (K.KO, K.PASSES, K.LAST, K.PRISONERS, K.PRISONERS + 1):
            fresh[field] = s[field]
        s = fresh
    s[K.END] = K.ONGOING
    return s


class Record:
    """The game as GTP built it: setup and move events, and the state after each."""

    def __init__(self, game: GoGame):
        self.game = game
        self.clear()

    def clear(self) -> None:
        self.events: list[Setup | Move] = []
        self.states = [self.game.initial_state()]
        self.handicap = 0

    @property
    def state(self) -> np.ndarray:
        return self.states[-1]

    def history(self) -> list[np.ndarray]:
        """Earlier states, oldest first (for the encoder)."""
        return self.states[:-1]

    @property
    def moves_played(self) -> int:
        return sum(isinstance(e, Move) for e in self.events)

    def board_is_empty(self) -> bool:
        return not self.game.board(self.state).any()

    def probe(self, color: int) -> np.ndarray:
        """The current position reopened, with ``color`` to move (a move out of turn:
        the skipped player neither passed nor played, so the ko point and the run of
        passes start over)."""
        s = reopened(self.game, self.state)
        if color != self.game.to_play(s):
            s[K.TO_PLAY] = color
            s[K.KO] = K.NO_POINT
            s[K.PASSES] = 0
        return s

    def play(self, color: int, action: int) -> None:
        s = self.probe(color)
        self.game.play(s, action)  # raises IllegalMove
        self.events.append(Move(color, int(action)))
        self.states.append(s)

    def setup(self, black: Sequence[int] = (), white: Sequence[int] = (), empty: Sequence[int] = (),
              to_play: int | None = None) -> None:
        """Put stones on (and take them off) the board; raises ValueError for a
        position with a group without liberties."""
        board = self.game.board(self.state).reshape(-1).copy()
        board[list(empty)] = 0
        board[list(black)] = 1
        board[list(white)] = 2
        mover = self.game.to_play(self.state) if to_play is None else to_play
        s = self.game.state_from_board(board.reshape(self.game.board_shape), mover)
        s[K.PRISONERS : K.PRISONERS + 2] = self.state[K.PRISONERS : K.PRISONERS + 2]
        self.events.append(Setup(tuple(sorted(black)), tuple(sorted(white)), tuple(sorted(empty))))
        self.states.append(s)

    def undo(self) -> bool:
        if not self.events:
            return False
        event = self.events.pop()
        self.states.pop()
        if isinstance(event, Setup) and not self.events:
            self.handicap = 0
        return True


class Session:
    """One GTP session's game and what plays it. ``record`` (the game so far),
    ``clock`` and ``low_value`` change as it goes; the rest is the engine's settings
    (``GtpEngine`` says what each means)."""

    def __init__(self, *, superko: bool, seed: int | None, player: Player | None,
                 ownership: Callable[[GoGame], Ownership], scoring: str, resign_threshold: float | None,
                 resign_moves: int, lag: float, search: SearchSettings, analysis_visits: int, history_length: int,
                 max_moves: int | None, warn: Callable[[str], None], features: bool = False,
                 score: Callable[[GoGame], Score] | None = None):
        self._superko = superko
        self._score_factory = score
        self._features = features
        self._history_length = history_length
        self._max_moves = max_moves
        self.rng = np.random.default_rng(seed)
        self._seed = 0 if seed is None else seed
        self.player = player
        self._ownership_factory = ownership
        self.scoring = scoring
        self.resign_threshold = resign_threshold
        self.resign_moves = resign_moves
        self.search = search
        self.analysis_visits = analysis_visits
        self.warn = warn
        self.clock = Clock(lag=lag)
        self.low_value = [0, 0]  # consecutive own moves below the resign threshold, per player
        self._rollout: SearchPlayer | None = None
        self._warned_komi: float | None = None

    @property
    def game(self) -> GoGame:
        return self.record.game

    def make_game(self, size: int, komi: float) -> GoGame:
        """The rules for a board of ``size`` with ``komi``, the rest as the engine's."""
        return GoGame(size=size, komi=komi, superko=self._superko, max_moves=self._max_moves,
                      history_length=self._history_length, features=self._features)

    def set_game(self, game: GoGame, record: Record | None = None) -> None:
        """A new board (size or rules changed, or a record loaded): ``record``
        (default an empty one), a fresh estimator, full clocks."""
        self.record = record if record is not None else Record(game)
        self._ownership = self._ownership_factory(game)
        self._ownership_cache: dict[bytes, np.ndarray] = {}
        self.score = None if self._score_factory is None else self._score_factory(game)
        self.new_game()

    def new_game(self) -> None:
        self.clock.reset()
        self.low_value = [0, 0]

    def set_komi(self, komi: float) -> None:
        """Komi lives in the rules object, not in the states: same positions, new
        rules, record and undo kept."""
        game = self.make_game(self.game.size, komi)
        self.record.game = game
        self._ownership = self._ownership_factory(game)
        self._ownership_cache = {}
        self.score = None if self._score_factory is None else self._score_factory(game)

    def check_komi(self, komi: float) -> None:
        """Warn (once per komi) when ``komi`` is not the one the model was trained with."""
        trained = None if self.player is None else self.player.komi
        if trained is not None and komi != trained and self._warned_komi != komi:
            self._warned_komi = komi
            self.warn(f"komi {komi:g} differs from the komi the model was trained with ({trained:g}); "
                      f"scores use {komi:g}, the model's values assume {trained:g}")

    def estimate(self, state: np.ndarray) -> np.ndarray:
        """The ownership estimate of a position (cached: the same position always
        gets the same answer)."""
        key = state[: K.HEADER + self.game.params[K.P_POINTS]].tobytes()
        own = self._ownership_cache.get(key)
        if own is None:
            if len(self._ownership_cache) > 64:
                self._ownership_cache.clear()
            own = np.asarray(self._ownership(state, self.record.history()), dtype=np.float32)
            self._ownership_cache[key] = own
        return own

    def rollout_player(self) -> SearchPlayer:
        """Rollout MCTS (no model), made once: what analysis searches with without a player."""
        if self._rollout is None:
            self._rollout = SearchPlayer(None, search=self.search, seed=self._seed)
        return self._rollout
