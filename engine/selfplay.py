"""Self-play: G concurrent games, one batched evaluation per search round.

``SelfPlay.gather()`` returns the planes of every game's next leaves and
``SelfPlay.apply(policy, value)`` feeds their evaluation back; whenever a game's
root has had its simulations, it plays a move, and a finished game comes back as a
``GameRecord``. ``step(evaluate)`` does one round of both. A worker that wants tree
work to overlap inference keeps two SelfPlay objects (two half-batches) in flight.

Move choice follows AlphaGo Zero (visit counts at temperature 1 for the first
``temperature_moves`` moves, then the most visited) or a constant Boltzmann
temperature (``temperature_schedule="constant"``, the classic Connect Four tutorial).
KataGo's playout cap randomisation (``full_search_fraction`` < 1: only full searches
become policy targets, the others use ``cheap_simulations``) and resignation
(``resign_threshold``, never in a ``no_resign_fraction`` of games) are off by default.
Resignation is checked as AlphaGo Zero checks it: the games that are played out
record who would have resigned, and resigning stays off while more than
``resign_max_false_positives`` of the last ``RESIGN_CHECKS`` such games were not lost
by that player (or while fewer than ``MIN_RESIGN_CHECKS`` were played): every game is
then played out (``resign_max_false_positives=1`` resigns unchecked). A young
network's confident values would otherwise end games after a move or two and teach
it nothing but those endings.

KataGo's forked games (``fork_fraction`` > 0, off by default): that share of the new
games branches off a recent game (one of the last ``FORK_SOURCES`` finished here) at
one of its positions, drawn uniformly, with one uniformly random legal move (a pass
only when nothing else is legal), and plays on from there. Forks of forks stack their
random moves, so self-play also meets the lopsided positions that only a mistake
reaches (a player must still find the fastest win and the slowest loss there) while
every recorded position keeps the result of a game played out from it. A forked
game's record begins with the moves it branched off; they are not its training
positions (``full_search`` False) and carry the search values of the game they came
from.

A position's value target is the game's result for its mover times ``discount`` to
the power of the moves left, the last one included: what the search, which
discounts each ply of its backup alike, finds there (1: AlphaZero's plain result).

With ``search="gumbel"`` (Gumbel AlphaZero, engine/mcts/gumbel.py) every search,
full or cheap, draws its own Gumbel noise; the move played is the search's survivor
(``Search.gumbel_action``), which with the noise is a sample of the improved policy,
so neither Dirichlet noise nor a temperature is used (``temperature_schedule``,
``temperature_moves``, ``temperature``, ``dirichlet_*`` are ignored); the recorded
policy is the improved policy (``Search.improved_policy``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.mcts import Evaluator, Search, SearchSettings, choose_move, visit_policy

__all__ = ["GameRecord", "RecordRefused", "SelfPlay", "SelfPlaySettings", "RESIGN_CHECKS", "MIN_RESIGN_CHECKS",
           "FORK_SOURCES"]

#: the played-out games that would have been resigned, over which resignation's
#: false positives are counted (the latest ones)
RESIGN_CHECKS = 100
#: resignation stays off until this many of them were played
MIN_RESIGN_CHECKS = 20
#: a forked game branches off one of the latest this many finished games
FORK_SOURCES = 256


class RecordRefused(ValueError):
    """A finished game that the place it goes (a sample stream's format check) will not
    take; the message says why. Self-play drops that game and plays on."""


@dataclass
class GameRecord:
    """One finished self-play game: its training positions and how it went."""

    game: str
    planes: np.ndarray  # uint8 [L, H, W, C]: recorded positions (full searches only)
    policy: np.ndarray  # float32 [L, A]: the search's policy at each recorded position (visits, or Gumbel's pi')
    value: np.ndarray  # float32 [L]: final result from each position's mover's view, discounted
    moves: np.ndarray  # int32 [n]: every move played, in order (a forked game's from the game it branched off)
    outcome: float  # +1 / 0 / -1 for player 0
    model_version: int
    resigned: bool = False
    #: in a no-resign game: the player who would have resigned (for the false-positive rate)
    would_resign: int | None = None
    #: who played it and its number there (``w003.1f2e:17``), once a worker names it
    game_id: str | None = None
    #: per move played, aligned with ``moves`` (None in records from before format 3):
    #: the search's root value Q(root) from the mover's view, float32 [n]
    search_value: np.ndarray | None = None
    #: the root's visit count N(root) when the move was chosen (with the reused subtree), int32 [n]
    search_visits: np.ndarray | None = None
    #: whether the move had a full search (playout-cap randomisation makes others cheap), bool [n]
    full_search: np.ndarray | None = None
    #: the ownership head's target, int8 [H*W]: who owns each point of the final
    #: position by Tromp-Taylor (+1 player 0, -1 player 1, 0 nobody), from player 0's
    #: view; None for a resigned game (it has no final position), a game without
    #: territory and records from before it
    ownership: np.ndarray | None = None

    @property
    def length(self) -> int:
        return len(self.moves)


@dataclass
class _Game:
    state_history: list = field(default_factory=list)  # earlier states, oldest first
    planes: list = field(default_factory=list)
    policies: list = field(default_factory=list)
    movers: list = field(default_factory=list)
    moves: list = field(default_factory=list)
    root_values: list = field(default_factory=list)  # per move: Q(root) for the mover
    root_visits: list = field(default_factory=list)  # per move: N(root)
    full_searches: list = field(default_factory=list)  # per move: a full search or a cheap one
    full_search: bool = True
    needs_noise: bool = True
    no_resign: bool = False
    would_resign: int | None = None


@dataclass(frozen=True)
class SelfPlaySettings:
    """How self-play searches and chooses its moves, as one typed value: the search
    (``search``, whose root noise is self-play's) and what self-play adds to it (the
    move temperature, playout caps, resignation, forks; meanings in the module's
    docstring). What a self-play worker is given (the run config's
    ``selfplay_settings()``); the defaults here are the schema's too."""

    search: SearchSettings = SearchSettings()
    temperature_schedule: Literal["alphazero", "constant"] = "alphazero"
    temperature_moves: int = 30
    temperature: float = 1.0
    full_search_fraction: float = 1.0
    cheap_simulations: int = 0
    resign_threshold: float | None = None
    no_resign_fraction: float = 0.1
    resign_max_false_positives: float = 0.05
    fork_fraction: float = 0.0
    forced_playouts_k: float = 0.0

    def __post_init__(self) -> None:
        if self.temperature_schedule not in ("alphazero", "constant"):
            raise ValueError(f"temperature_schedule must be 'alphazero' or 'constant', not "
                             f"{self.temperature_schedule!r}")
        if not 0.0 < self.full_search_fraction <= 1.0:
            raise ValueError("full_search_fraction must be in (0, 1]")
        if self.full_search_fraction < 1.0 and not 1 <= self.cheap_simulations <= self.search.simulations:
            raise ValueError("cheap_simulations must be in 1..simulations when playout caps are on")
        if not 0.0 <= self.fork_fraction < 1.0:
            raise ValueError("fork_fraction must be in [0, 1)")
        if self.forced_playouts_k < 0 or (self.forced_playouts_k > 0 and self.search.search != "puct"):
            raise ValueError("forced_playouts_k must be >= 0, and is for search='puct' (Gumbel search explores "
                             "by its own noise)")


@dataclass(frozen=True)
class _ForkSource:
    """What a forked game takes from the finished game it branches off."""

    moves: np.ndarray
    search_value: np.ndarray
    search_visits: np.ndarray


class SelfPlay:
    """Plays ``games`` concurrent self-play games of ``game`` and returns records."""

    def __init__(self, game: Game, *, games: int, seed: int, settings: SelfPlaySettings = SelfPlaySettings(),
                 model_version: int = 0):
        search = settings.search
        self.game = game
        self.settings = settings
        self.simulations = search.simulations
        self.rng = np.random.default_rng(seed)
        self.search = Search(game, games=games, settings=search)
        self.gumbel = search.search == "gumbel"
        #: per played-out game that would have been resigned: whether its would-be
        #: resigner did not lose (a false positive)
        self.resign_checks: deque[bool] = deque(maxlen=RESIGN_CHECKS)
        self._fork_sources: deque[_ForkSource] = deque(maxlen=FORK_SOURCES)
        self.model_version = model_version
        self._games = [self._new_game() for _ in range(games)]
        self._targets = np.zeros(games, dtype=np.float32)
        self._active = np.ones(games, dtype=np.bool_)
        self._games_left: int | None = None
        for g in range(games):
            self._start_move(g)
        #: simulations (leaf evaluations and terminal backups) since creation
        self.evaluations = 0
        self.moves_played = 0

    # -- the round --------------------------------------------------------------------
    def gather(self) -> np.ndarray:
        """Planes of this round's leaves, uint8 [B, H, W, C] (B = 0 when all games wait)."""
        return self.search.gather(self._targets, self._active)

    def apply(self, policy: np.ndarray, value: np.ndarray) -> list[GameRecord]:
        """Feed back the evaluation of the last gather; play the moves that are due and
        return the games that ended."""
        self.evaluations += len(value)
        self.search.apply(policy, value)
        finished = []
        tree = self.search.tree
        for g in map(int, np.flatnonzero(self._active)):
            info = self._games[g]
            if info.needs_noise and self.search.root_expanded(g):
                self._add_noise(g)
            if tree.node_n[g, 0] >= self._targets[g] and tree.in_flight[g] == 0:
                record = self._play_move(g)
                if record is not None:
                    finished.append(record)
        return finished

    def step(self, evaluate: Evaluator) -> list[GameRecord]:
        planes = self.gather()
        if len(planes) == 0:
            return self.apply(*self._empty_evaluation())
        policy, value = evaluate(planes)
        return self.apply(policy, value)

    def play(self, evaluate: Evaluator, games: int) -> list[GameRecord]:
        """Play until ``games`` games have finished (the games in flight are finished too,
        then no new ones start); returns all finished records."""
        self._games_left = games - int(self._active.sum())
        if self._games_left < 0:
            self._active[games:] = False
            self._games_left = 0
        records: list[GameRecord] = []
        while self._active.any():
            records.extend(self.step(evaluate))
        return records

    @property
    def resigning(self) -> bool:
        """Whether a game below ``resign_threshold`` is resigned now (see the module's
        docstring); False without a threshold."""
        if self.settings.resign_threshold is None:
            return False
        if self.settings.resign_max_false_positives >= 1.0:
            return True
        if len(self.resign_checks) < MIN_RESIGN_CHECKS:
            return False
        return sum(self.resign_checks) <= self.settings.resign_max_false_positives * len(self.resign_checks)

    def set_model_version(self, version: int) -> None:
        """New samples carry ``version`` from the next recorded move on."""
        self.model_version = version

    # -- per game ---------------------------------------------------------------------
    def _new_game(self) -> _Game:
        return _Game(no_resign=bool(self.rng.random() < self.settings.no_resign_fraction))

    def _start_move(self, g: int) -> None:
        info = self._games[g]
        fraction = self.settings.full_search_fraction
        info.full_search = bool(fraction >= 1.0 or self.rng.random() < fraction)
        self._targets[g] = self.simulations if info.full_search else self.settings.cheap_simulations
        if self.gumbel:
            # Gumbel's noise is its exploration and its move choice: every search draws it.
            self.search.sample_gumbel(g, self.rng)
            info.needs_noise = False
            return
        # Forced playouts, like the noise, explore full searches only (KataGo's).
        self.search.force_playouts(g, self.settings.forced_playouts_k if info.full_search else 0.0)
        # Noise is for exploration in full searches; cheap ones only pick the move.
        info.needs_noise = info.full_search and self.settings.search.dirichlet_fraction > 0
        if info.needs_noise and self.search.root_expanded(g):
            self._add_noise(g)

    def _add_noise(self, g: int) -> None:
        search = self.settings.search
        self.search.add_root_noise(g, self.rng, alpha=search.dirichlet_alpha, fraction=search.dirichlet_fraction)
        self._games[g].needs_noise = False

    def _temperature(self, move_number: int) -> float:
        if self.settings.temperature_schedule == "constant":
            return self.settings.temperature
        return 1.0 if move_number < self.settings.temperature_moves else 0.0

    def _play_move(self, g: int) -> GameRecord | None:
        info = self._games[g]
        state = self.search.root_state(g)
        mover = self.game.to_play(state)
        # a full search with forced playouts: the visits they forced are pruned from the
        # policy target and the move's draw alike (KataGo's policy target pruning)
        visits = self.search.pruned_visits(g)
        root_value = self.search.root_value(g)
        if self.settings.resign_threshold is not None and root_value < self.settings.resign_threshold:
            if not info.no_resign and self.resigning:
                return self._finish(g, resigned_by=mover)
            if info.would_resign is None:
                info.would_resign = mover
        if info.full_search:
            info.planes.append(self.game.encode(state, info.state_history).astype(np.uint8))
            info.policies.append(self.search.improved_policy(g) if self.gumbel else visit_policy(visits))
            info.movers.append(mover)
        if self.gumbel:
            action = self.search.gumbel_action(g)
        else:
            action = choose_move(visits, self.rng, temperature=self._temperature(len(info.moves)),
                                 unsampled=self.game.pass_action)
        info.state_history.append(state.copy())
        del info.state_history[: -max(self.game.history_length - 1, 1)]
        info.moves.append(action)
        info.root_values.append(root_value)
        info.root_visits.append(int(self.search.tree.node_n[g, 0]))
        info.full_searches.append(info.full_search)
        self.search.advance(g, action)
        self.moves_played += 1
        if self.game.is_terminal(self.search.root_state(g)):
            return self._finish(g)
        self._start_move(g)
        return None

    def _finish(self, g: int, resigned_by: int | None = None) -> GameRecord:
        info = self._games[g]
        state = self.search.root_state(g)
        if resigned_by is None:
            outcome = self.game.outcome(state)
        else:
            outcome = -1.0 if resigned_by == 0 else 1.0
        if resigned_by is None and info.would_resign is not None:
            self.resign_checks.append((outcome if info.would_resign == 0 else -outcome) >= 0)
        movers = np.array(info.movers, dtype=np.int64)
        # The search backs a result up ``discount`` times smaller per ply; the targets
        # are discounted alike: discount ** (the moves left to the end, the last included).
        plies = np.flatnonzero(np.array(info.full_searches, dtype=np.bool_))
        discounts = np.float64(self.search.settings.discount) ** (len(info.moves) - plies)
        shape = (0, *self.game.planes_shape)
        search_value = np.array(info.root_values, dtype=np.float32)
        search_visits = np.array(info.root_visits, dtype=np.int32)
        record = GameRecord(
            game=self.game.name,
            planes=np.stack(info.planes) if info.planes else np.zeros(shape, dtype=np.uint8),
            policy=np.stack(info.policies) if info.policies else np.zeros((0, self.game.num_actions), np.float32),
            value=(np.where(movers == 0, outcome, -outcome) * discounts).astype(np.float32),
            moves=np.array(info.moves, dtype=np.int32),
            outcome=float(outcome),
            model_version=self.model_version,
            resigned=resigned_by is not None,
            would_resign=info.would_resign,
            search_value=search_value,
            search_visits=search_visits,
            full_search=np.array(info.full_searches, dtype=np.bool_),
            ownership=self.game.final_ownership(state) if resigned_by is None else None,
        )
        if self.settings.fork_fraction > 0:
            self._fork_sources.append(_ForkSource(record.moves, search_value, search_visits))
        self._games[g] = self._new_game()
        self.search.reset(g)
        if self.settings.fork_fraction > 0 and self.rng.random() < self.settings.fork_fraction:
            self._fork(g)
        if self._games_left is not None:
            if self._games_left <= 0:
                self._active[g] = False
                return record
            self._games_left -= 1
        self._start_move(g)
        return record

    def _fork(self, g: int) -> None:
        """Start game g where a recent game's position and a random move lead (see the
        module's docstring); from the initial position when that move ends the game."""
        source = self._fork_sources[int(self.rng.integers(len(self._fork_sources)))]
        ply = int(self.rng.integers(len(source.moves)))
        states = [self.game.initial_state()]
        for action in source.moves[:ply]:
            states.append(self.game.next_state(states[-1], int(action)))
        legal = self.game.legal_mask(states[-1]).copy()
        if self.game.pass_action is not None and legal.sum() > 1:
            legal[self.game.pass_action] = False
        action = int(self.rng.choice(np.flatnonzero(legal)))
        state = self.game.next_state(states[-1], action)
        if self.game.is_terminal(state):
            return
        info = self._games[g]
        info.moves = [*map(int, source.moves[:ply]), action]
        info.root_values = [float(v) for v in source.search_value[: ply + 1]]
        info.root_visits = [int(n) for n in source.search_visits[: ply + 1]]
        info.full_searches = [False] * (ply + 1)
        info.state_history = states[-max(self.game.history_length - 1, 1):]
        self.search.reset(g, state, info.state_history)

    def _empty_evaluation(self) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros((0, self.game.num_actions), np.float32), np.zeros(0, np.float32)
