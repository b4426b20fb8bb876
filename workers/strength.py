"""Strength against fixed references: the best model measured against opponents and
positions that do not move while it trains (the ladder's candidate-vs-best results
drift upward by construction; these do not).

A plain class; the cluster makes it a Ray actor and the single-process run a child
process (run/strength_process.py), both at low priority. ``StrengthEvaluator.evaluate``
loads a version's weights (the registry's blob) into its own compiled model and
measures it against the game's references, each result with its standard error:

- tic-tac-toe: the share of optimal moves (play/solvers.py's exact values) over a
  fixed sample of the reachable positions (``optimal_moves``), and the score against
  a perfect player that picks at random among the optimal moves (``vs_perfect``; a
  perfect model draws every game: 0.5);
- Connect Four: the optimal and outcome-kept shares on a fixed sample of the 1,012
  solver-labelled positions (``positions_optimal``, ``positions_outcome``;
  play/grading.py), and the score against pure MCTS with N random-rollout simulations
  (``vs_mctsN``);
- Go: the score against pure MCTS (``vs_mctsN``) and against GNU Go at the config's
  level (``vs_gnugoL``) when ``gnugo`` is on the PATH or in /usr/games (``find_gnugo``); without it that reference is
  recorded as skipped, saying so;
- any other game (gomoku): the score against pure MCTS.

A share's standard error is the binomial one, sqrt(p (1 - p) / n); a score's the
standard deviation of the per-game scores (1, 1/2, 0) over sqrt(games)
(play/grading.py's ``Share`` and ``MatchScore``). The samples and the matches' seeds
are the same at every evaluation, so that two versions meet the same positions and
openings and the curve shows the model, not the draw.

The model searches as the gating players do (``StrengthOptions.player``), with their
opening temperature in the matches so that its games differ. ``measure`` takes any
``Side`` (a player for matches and a chooser for positions), so a perfect or a random
player can be measured the same way.

The evaluator holds itself to its CPU share: ``CpuShare`` is called before each of
the model's network calls (``paced``) and sleeps whenever the process's CPU time since
the evaluation began exceeds ``share`` times the wall time since then. Its process
runs at nice 19 (``low_priority``: set before TensorFlow starts its threads, which
inherit it), so on a busy machine it gets what the main job leaves, and on an idle
one no more than its share.
"""

from __future__ import annotations

import math
import os
import shlex
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Literal, TypedDict

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.engine.mcts import Evaluator
from tengen.engine.network_spec import NetworkSpec
from tengen.play.grading import Chooser, MatchScore, Share, grade_moves, random_chooser, read_positions, search_chooser
from tengen.play.match import Player, PlayerBase, play_match
from tengen.play.players import MctsPlayerSettings, RandomPlayer, RolloutMctsPlayer
from tengen.play.solvers import tictactoe_optimal_actions

if TYPE_CHECKING:
    from tengen.engine.network import CompiledModel

__all__ = ["ReferenceScore", "StrengthResult", "StrengthOptions", "StrengthEvaluator", "Side", "CpuShare",
           "model_side", "perfect_tictactoe_side", "random_side", "reachable_positions", "low_priority", "paced",
           "gnugo_command", "find_gnugo"]

#: how GNU Go is started at a level (play/gtp_player.py's engines; bench/learn_go9.py's)
GNUGO_COMMAND = "{gnugo} --mode gtp --chinese-rules --level {level}"
#: where GNU Go is looked for after the PATH: Debian's and Ubuntu's gnugo package puts it in
#: /usr/games, which root's PATH (and a service's) leaves out
GNUGO_OUTSIDE_PATH = ("/usr/games/gnugo",)
#: GNU Go processes at once (one per game slot)
_GNUGO_SLOTS = 4


class ReferenceScore(TypedDict):
    """One reference's result: a ``share`` of positions or a ``score`` of games (draws
    count half), with its standard error over ``n`` positions or games; a reference
    that could not be measured has ``skipped``, the reason, and no value."""

    reference: str  # "optimal_moves", "vs_perfect", "positions_optimal", "positions_outcome", "vs_mcts400", ...
    measure: Literal["share", "score"]
    value: float | None
    se: float | None
    n: int
    skipped: str | None


class StrengthResult(TypedDict):
    """What ``StrengthEvaluator.evaluate`` returns (it crosses Ray as it is): the
    version measured, how long it took (wall and this process's CPU), and the scores."""

    version: int
    elapsed_s: float
    cpu_s: float
    scores: list[ReferenceScore]


@dataclass(frozen=True)
class StrengthOptions:
    """How strength is measured (the run config makes it: ``TengenConfig.strength_options()``):
    the model's player, ``positions`` sampled for the position references, ``games``
    per match, pure MCTS's ``mcts_simulations``, GNU Go's ``gnugo_level``, the process's
    ``cpu_share`` of one core, and the seed of the samples and matches."""

    player: MctsPlayerSettings
    positions: int = 256
    games: int = 40
    mcts_simulations: int = 400
    gnugo_level: int = 1
    cpu_share: float = 0.5
    seed: int = 0


@dataclass(frozen=True)
class Side:
    """What is measured: ``player(slots)``, a match player for that many games at once,
    and ``choose``, its moves on a batch of positions."""

    name: str
    player: Callable[[int], Player]
    choose: Chooser


def model_side(game: Game, evaluate: Evaluator, settings: MctsPlayerSettings) -> Side:
    """A network searching as ``settings`` says: its most visited move on positions, the
    settings' opening temperature in matches."""
    return Side("model", lambda slots: settings.build(game, evaluate, slots=slots, name="model"),
                search_chooser(game, evaluate, settings.search))


class _PerfectTicTacToe(PlayerBase):
    """Tic-tac-toe's perfect player: a move that keeps the game's value, at random among them."""

    name = "perfect"

    def choose(self, slots: list[int], states: list[np.ndarray], rng: np.random.Generator) -> list[int]:
        return [int(rng.choice(sorted(tictactoe_optimal_actions(state)))) for state in states]

    def advance(self, slot: int, action: int) -> None:
        pass


def perfect_tictactoe_side(seed: int = 0) -> Side:
    rng = np.random.default_rng(seed)
    return Side("perfect", lambda slots: _PerfectTicTacToe(),
                lambda states: [int(rng.choice(sorted(tictactoe_optimal_actions(s)))) for s in states])


def random_side(game: Game, seed: int = 0) -> Side:
    return Side("random", lambda slots: RandomPlayer(game), random_chooser(game, np.random.default_rng(seed)))


@cache
def _reachable(game_name: str) -> tuple[np.ndarray, ...]:
    from tengen.engine.games import make_game

    game = make_game(game_name)
    seen: dict[bytes, np.ndarray] = {}
    frontier = [game.initial_state()]
    while frontier:
        state = frontier.pop()
        key = game.board(state).tobytes()  # the board alone (the state holds the last move too)
        if key in seen or game.is_terminal(state):
            continue
        seen[key] = state
        frontier.extend(game.next_state(state, int(a)) for a in np.flatnonzero(game.legal_mask(state)))
    return tuple(seen[key] for key in sorted(seen))


def reachable_positions(game: Game) -> tuple[np.ndarray, ...]:
    """Every position of a small game (tic-tac-toe: 4,520) where a move is still to be
    made, in a fixed order."""
    return _reachable(game.name)


def _sample(count: int, size: int, seed: int) -> np.ndarray:
    """``size`` of ``count`` indices (all when ``size`` is not less), the same for a seed, in order."""
    if size >= count:
        return np.arange(count)
    return np.sort(np.random.default_rng(seed).choice(count, size=size, replace=False))


def _share(reference: str, share: Share) -> ReferenceScore:
    return {"reference": reference, "measure": "share", "value": round(share.value, 4), "se": round(share.se, 4),
            "n": share.total, "skipped": None}


def _score(reference: str, score: MatchScore) -> ReferenceScore:
    return {"reference": reference, "measure": "score", "value": round(score.value, 4), "se": round(score.se, 4),
            "n": score.games, "skipped": None}


def _skipped(reference: str, why: str) -> ReferenceScore:
    return {"reference": reference, "measure": "score", "value": None, "se": None, "n": 0, "skipped": why}


def find_gnugo() -> str | None:
    """GNU Go's binary: ``gnugo`` on the PATH, else one of ``GNUGO_OUTSIDE_PATH``; None
    where there is none."""
    on_path = shutil.which("gnugo")
    if on_path:
        return on_path
    return next((place for place in GNUGO_OUTSIDE_PATH if os.path.isfile(place) and os.access(place, os.X_OK)), None)


def gnugo_command(gnugo: str, level: int) -> str:
    return GNUGO_COMMAND.format(gnugo=shlex.quote(gnugo), level=level)


class CpuShare:
    """Holds a process to ``share`` of one core on average: each call sleeps while the
    process's CPU time since ``begin()`` exceeds ``share`` times the wall time since
    then (cpulimit's rule, kept by the process itself between its own steps). The
    clocks and the sleep are arguments, so a test runs it by hand."""

    def __init__(self, share: float, *, clock: Callable[[], float] = time.monotonic,
                 cpu: Callable[[], float] = time.process_time, sleep: Callable[[float], None] = time.sleep):
        if share <= 0:
            raise ValueError(f"a CPU share is more than 0, got {share}")
        self.share = share
        self.clock, self.cpu, self.sleep = clock, cpu, sleep
        self.begin()

    def begin(self) -> None:
        self._wall0, self._cpu0 = self.clock(), self.cpu()
        self.slept = 0.0

    def __call__(self) -> float:
        """Sleep as long as the share needs; returns the seconds slept."""
        used = self.cpu() - self._cpu0
        wait = used / self.share - (self.clock() - self._wall0)
        if wait <= 0:
            return 0.0
        self.sleep(wait)
        self.slept += wait
        return wait


def paced(evaluate: Evaluator, pace: Callable[[], object]) -> Evaluator:
    """``evaluate`` with ``pace()`` before each call."""

    def call(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        pace()
        return evaluate(planes)

    return call


def low_priority(share: float, *, nice: int = 19) -> CpuShare:
    """This process (its threads, and those started from now on: call it before
    TensorFlow's first op) at ``nice`` (19: what the main job leaves), TensorFlow held to ceil(``share``) threads;
    returns the ``CpuShare`` that its evaluations pace themselves by."""
    # Linux keeps a nice value per thread: every thread there is now (a Ray worker's own),
    # and this one, whose new threads inherit it.
    task = "/proc/self/task"
    threads = [int(tid) for tid in os.listdir(task)] if os.path.isdir(task) else []
    for tid in [0, *threads]:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, max(nice, os.getpriority(os.PRIO_PROCESS, tid)))
        except OSError:  # gone, or not allowed here: the CPU share still holds
            pass
    from tengen.engine.backend import limit_cpu_threads  # the backend, and its threads, after the nice value

    limit_cpu_threads(math.ceil(share))
    return CpuShare(share)


class StrengthEvaluator:
    """A model version measured against ``game``'s references (module docstring).
    ``network``: the run's network (None: only ``measure`` is used, for other sides);
    ``pace``: called before each network call (a ``CpuShare``; None: none); ``gnugo``:
    GNU Go's binary (None: ``find_gnugo`` at each evaluation, if any)."""

    def __init__(self, *, game: Game, options: StrengthOptions, network: NetworkSpec | None = None,
                 pace: CpuShare | None = None, gnugo: str | None = None):
        self.game = game
        self.options = options
        self.pace = pace
        self.gnugo = gnugo
        self.compiled: CompiledModel | None = None
        if network is not None:  # TensorFlow loads here, not with the module (the config imports it)
            from tengen.engine.network import CompiledModel

            self.compiled = CompiledModel(network.build())
        self.evaluations = 0

    def evaluate(self, version: int, blob: bytes) -> StrengthResult:
        """The version whose weights are ``blob`` against every reference."""
        assert self.compiled is not None, "an evaluator of models needs the run's network"
        wall, cpu = time.monotonic(), time.process_time()
        self.compiled.load_weights_blob(blob)
        evaluate: Evaluator = self.compiled
        if self.pace is not None:
            self.pace.begin()
            evaluate = paced(evaluate, self.pace)
        scores = self.measure(model_side(self.game, evaluate, self.options.player))
        self.evaluations += 1
        return {"version": int(version), "elapsed_s": round(time.monotonic() - wall, 2),
                "cpu_s": round(time.process_time() - cpu, 2), "scores": scores}

    def measure(self, side: Side) -> list[ReferenceScore]:
        """``side`` against the game's references."""
        game, options = self.game, self.options
        scores: list[ReferenceScore] = []
        if game.name == "tictactoe":
            positions = reachable_positions(game)
            chosen = [positions[i] for i in _sample(len(positions), options.positions, options.seed)]
            moves = side.choose(chosen)
            hits = sum(int(move) in tictactoe_optimal_actions(state) for state, move in zip(chosen, moves, strict=True))
            scores.append(_share("optimal_moves", Share(hits, len(chosen))))
            scores.append(_score("vs_perfect", self._match(side, _PerfectTicTacToe(), slots=options.games)))
            return scores
        if game.name == "connect4":
            labelled = _connect4_positions()
            chosen_positions = [labelled[i] for i in _sample(len(labelled), options.positions, options.seed)]
            grades = grade_moves(side.choose, chosen_positions)
            scores += [_share("positions_optimal", grades.optimal), _share("positions_outcome", grades.outcome)]
        simulations = options.mcts_simulations
        opponent = RolloutMctsPlayer(game, slots=options.games, simulations=simulations, seed=options.seed)
        scores.append(_score(f"vs_mcts{simulations}", self._match(side, opponent, slots=options.games)))
        if isinstance(game, GoGame):
            scores.append(self._vs_gnugo(side))
        return scores

    def _vs_gnugo(self, side: Side) -> ReferenceScore:
        from tengen.play.gtp_player import GtpPlayer

        game = self.game
        assert isinstance(game, GoGame)
        reference = f"vs_gnugo{self.options.gnugo_level}"
        gnugo = self.gnugo or find_gnugo()
        if gnugo is None:
            places = ", ".join(GNUGO_OUTSIDE_PATH)
            return _skipped(reference, f"GNU Go is not installed (no gnugo on the PATH or at {places})")
        slots = min(self.options.games, _GNUGO_SLOTS)
        engine = GtpPlayer(game, gnugo_command(gnugo, self.options.gnugo_level), slots=slots, name=reference[3:])
        try:
            return _score(reference, self._match(side, engine, slots=slots))
        finally:
            engine.close()

    def _match(self, side: Side, opponent: Player, *, slots: int) -> MatchScore:
        """``side`` against ``opponent`` over ``options.games`` games, colours alternated,
        every game played (no early verdict)."""
        games = self.options.games
        slots = min(slots, games)
        result = play_match(self.game, side.player(slots), opponent, games=games, slots=slots,
                            rng=np.random.default_rng(self.options.seed))
        return MatchScore(result.wins, result.draws, result.losses)


@cache
def _connect4_positions() -> tuple:
    return tuple(read_positions())
