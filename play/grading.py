"""Grading a Connect Four player against exact labels: its moves on solver-labelled
positions, and its score against pure MCTS.

**The positions** (``data/connect4_positions.txt``, shipped with tengen; made once by
bench/label_connect4.py: 1,012 positions, 44 for each stone count from 8 to 30, every
column's exact score). The file, format 1 (``read_positions`` checks every line and
fails on anything else):

    # tengen connect4 positions, format 1
    # ... comment lines: how the file was made, counts, times ...
    MOVES S1 S2 S3 S4 S5 S6 S7 BEST

one line per position, sorted by stone count: ``MOVES`` the columns played from the
empty board, 1-7 (Pascal Pons' notation, e.g. ``4453``); ``Sc`` the score for the
player to move of playing column ``c`` (``connect4_move_scores`` in play/solvers.py:
Pons' score, 22 minus the winner's stones at the four, negative for a loss, 0 for a
draw), ``x`` for a full column; ``BEST`` the position's score, the largest ``Sc``.

**The grade.** On these positions a player's move is
- **optimal** when its score is the position's best: the fastest win, the draw, or
  the slowest loss, as Pascal Pons' solver scores them;
- **outcome kept** when its score has the best score's sign: a won position stays
  won, a drawn one drawn (a lost one is lost whatever the move).

A uniformly random player scores 0.27 optimal and 0.65 outcome kept there (the
expectation from the labels): 441 of the 1,012 positions, most of them lost, keep
their outcome whatever the move, while no position has every move optimal. A player
that knows every move's outcome but not how soon it comes (uniformly random among the
moves that keep the outcome) scores 0.57 optimal and 1.0 outcome kept: the rest of
the optimal share is the distance to the end (the fastest win, the slowest loss),
which a value trained on win, draw or loss alone is not taught. (AlphaZero.jl's
benchmark on Pascal Pons' positions counts a move as right when it keeps the outcome:
that is this bench's outcome-kept share.)

The misses are counted by kind as well (``Misses``): on won positions a slower win
or a win thrown away, on drawn ones the draw lost, on lost ones a faster loss (a lost
position cannot lose its outcome).

Each share comes with its binomial standard error, sqrt(p (1 - p) / n). Against pure
MCTS (``RolloutMctsPlayer``: UCT with random-rollout leaves) with 400 and with 1000
simulations, over ``games`` games each (200 at least for the issue's figures),
colours alternated: the score is (wins + draws / 2) / games, its standard error the
standard deviation of the per-game scores (1, 1/2 or 0) over sqrt(games).

The network alone is graded too, without search, to tell how much of a model's
grade is its net's and how much its search's: its policy head's most likely move
(``policy_chooser``, the same two shares) and the share of the won and lost positions
whose value head has the outcome's sign (``value_sign_share``; a value of 0 has none).

A player here is a ``Chooser``: ``choose(states) -> columns``, one batch of states
at once (a model searches them all in one batched search).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.games.mnk import connect4, play_sequence
from tengen.engine.mcts import Evaluator, Search, SearchSettings
from tengen.play.match import Player, play_match
from tengen.play.players import MctsPlayer, RolloutMctsPlayer
from tengen.play.solvers import NO_SCORE

FORMAT_LINE = "# tengen connect4 positions, format 1"
#: the positions tengen grades Connect Four players on
DEFAULT_PATH = Path(__file__).resolve().parent / "data" / "connect4_positions.txt"
COLUMNS = 7

_GAME = connect4()


@dataclass(frozen=True)
class LabelledPosition:
    """A position of the file: its moves, ``state``, the score of each column (``scores``,
    ``int64[7]``, ``NO_SCORE`` for a full one) and its own score ``best``."""

    moves: str
    state: np.ndarray = field(repr=False)
    scores: np.ndarray = field(repr=False)
    best: int

    @property
    def stones(self) -> int:
        return len(self.moves)


def format_line(moves: str, scores: np.ndarray) -> str:
    fields = ["x" if score == NO_SCORE else str(int(score)) for score in scores]
    return " ".join([moves, *fields, str(int(np.max(scores)))])


def parse_line(line: str) -> LabelledPosition:
    """One position line, checked: legal moves, an unfinished game, 7 scores, ``x``
    exactly where the column is full, and ``BEST`` their maximum."""
    fields = line.split()
    if len(fields) != COLUMNS + 2:
        raise ValueError(f"expected moves, 7 scores and the best score: {line!r}")
    moves = fields[0]
    state = play_sequence(_GAME, list(moves))
    if _GAME.is_terminal(state):
        raise ValueError(f"the game is over: {line!r}")
    legal = _GAME.legal_mask(state)
    scores = np.array([NO_SCORE if f == "x" else int(f) for f in fields[1 : COLUMNS + 1]], dtype=np.int64)
    if not np.array_equal(scores != NO_SCORE, legal) or np.any(np.abs(scores[legal]) > 18):
        raise ValueError(f"scores do not fit the legal moves: {line!r}")
    best = int(fields[-1])
    if best != int(scores.max()):
        raise ValueError(f"the best score is not the largest: {line!r}")
    return LabelledPosition(moves, state, scores, best)


def read_positions(path: str | Path = DEFAULT_PATH) -> list[LabelledPosition]:
    lines = Path(path).read_text().splitlines()
    if not lines or lines[0] != FORMAT_LINE:
        found = lines[0] if lines else "an empty file"
        raise ValueError(f"{path}: expected {FORMAT_LINE!r} on the first line, found {found!r}")
    return [parse_line(line) for line in lines[1:] if line.strip() and not line.startswith("#")]


def canonical_moves(moves: str) -> bytes:
    """The board or its mirror image, whichever is smaller: one key for both."""
    board = _GAME.board(play_sequence(_GAME, list(moves)))
    return min(board.tobytes(), board[:, ::-1].tobytes())


def position_keys(positions: Iterable[LabelledPosition]) -> set[bytes]:
    """One key per position and its mirror image: a ``seen`` set that keeps a new file's
    positions apart from these (training positions from the bench's)."""
    return {canonical_moves(p.moves) for p in positions}


#: ``choose(states) -> one column (0-6) per state``
Chooser = Callable[[Sequence[np.ndarray]], list[int]]

#: the issue's targets for the main job (60 minutes on 2 cores)
TARGET_OPTIMAL = 0.9
TARGET_OUTCOME = 0.97
TARGET_VS_MCTS1000 = 0.9
OPPONENTS = (400, 1000)  # pure MCTS simulations


@dataclass(frozen=True)
class Share:
    """``hits`` of ``total`` positions, with the binomial standard error."""

    hits: int
    total: int

    @property
    def value(self) -> float:
        return self.hits / self.total if self.total else 0.0

    @property
    def se(self) -> float:
        p = self.value
        return math.sqrt(p * (1 - p) / self.total) if self.total else 0.0


@dataclass(frozen=True)
class Misses:
    """The positions by their outcome, and the moves that missed in each way: a slower win
    or a faster loss keeps the outcome and misses the distance; the rest lose the outcome."""

    won: int = 0
    won_slower: int = 0
    won_thrown: int = 0  # drawn or lost instead
    drawn: int = 0
    drawn_lost: int = 0
    lost: int = 0
    lost_faster: int = 0

    def describe(self) -> str:
        return (f"won {self.won_slower} slower + {self.won_thrown} thrown away of {self.won}; "
                f"drawn {self.drawn_lost} lost of {self.drawn}; lost {self.lost_faster} faster of {self.lost}")


@dataclass(frozen=True)
class MoveGrades:
    optimal: Share
    outcome: Share
    misses: Misses


def grade_moves(choose: Chooser, positions: Sequence[LabelledPosition]) -> MoveGrades:
    """The player's optimal and outcome-kept shares on ``positions``; a full column is an error."""
    columns = choose([position.state for position in positions])
    tally = {field: 0 for field in Misses.__dataclass_fields__}
    for position, column in zip(positions, columns, strict=True):
        if not 0 <= column < len(position.scores) or position.scores[column] == NO_SCORE:
            raise ValueError(f"column {column + 1} is not a legal move after {position.moves}")
        score = int(position.scores[column])
        kind = "won" if position.best > 0 else "drawn" if position.best == 0 else "lost"
        tally[kind] += 1
        if np.sign(score) != np.sign(position.best):
            tally["won_thrown" if kind == "won" else "drawn_lost"] += 1
        elif score != position.best:
            tally["won_slower" if kind == "won" else "lost_faster"] += 1
    misses = Misses(**tally)
    outcome = len(positions) - misses.won_thrown - misses.drawn_lost
    optimal = outcome - misses.won_slower - misses.lost_faster
    return MoveGrades(Share(optimal, len(positions)), Share(outcome, len(positions)), misses)


def random_chooser(game: Game, rng: np.random.Generator) -> Chooser:
    """Uniformly random legal columns."""
    return lambda states: [int(rng.choice(np.flatnonzero(game.legal_mask(state)))) for state in states]


def search_chooser(game: Game, evaluate: Evaluator, settings: SearchSettings, *, batch: int = 512) -> Chooser:
    """A model's search as ``settings`` says (a run's ``play_search()``, no root
    noise): the most visited move after ``settings.simulations`` (with the solver, the
    proof's move where it has one; with Gumbel search, its survivor); ``batch``
    positions searched at once."""

    def choose(states: Sequence[np.ndarray]) -> list[int]:
        search = Search(game, games=min(batch, len(states)), settings=settings)
        columns: list[int] = []
        for start in range(0, len(states), batch):
            chunk = states[start : start + batch]
            active = np.zeros(search.games, dtype=np.bool_)
            active[: len(chunk)] = True
            for i, state in enumerate(chunk):
                search.reset(i, state)
            search.run(evaluate, settings.simulations, active)
            for i, state in enumerate(chunk):
                visits = search.move_visits(i)
                columns.append(search.gumbel_action(i) if search.gumbel else
                               int(np.argmax(np.where(game.legal_mask(state), visits, -1))))
        return columns

    return choose


def policy_chooser(game: Game, evaluate: Evaluator) -> Chooser:
    """The network without search: its policy head's most likely legal move."""

    def choose(states: Sequence[np.ndarray]) -> list[int]:
        policy, _ = evaluate(np.stack([game.encode(state) for state in states]))
        return [int(np.argmax(np.where(game.legal_mask(state), prior, -np.inf)))
                for state, prior in zip(states, policy, strict=True)]

    return choose


def value_sign_share(game: Game, evaluate: Evaluator, positions: Sequence[LabelledPosition]) -> Share:
    """Of the won and lost positions, those whose network value has the outcome's sign."""
    decided = [position for position in positions if position.best != 0]
    if not decided:
        return Share(0, 0)
    _, value = evaluate(np.stack([game.encode(position.state) for position in decided]))
    signs = np.sign([position.best for position in decided])
    return Share(int(np.sum(np.sign(value) == signs)), len(decided))


@dataclass(frozen=True)
class NetworkGrades:
    """The network alone: its policy head's moves and its value head's signs."""

    policy: MoveGrades
    value_sign: Share


def grade_network(game: Game, evaluate: Evaluator, positions: Sequence[LabelledPosition]) -> NetworkGrades:
    return NetworkGrades(grade_moves(policy_chooser(game, evaluate), positions),
                         value_sign_share(game, evaluate, positions))


@dataclass(frozen=True)
class MatchScore:
    """The player's results against one opponent; draws count half."""

    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def value(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.0

    @property
    def se(self) -> float:
        """Standard deviation of the per-game scores (1, 1/2, 0) over sqrt(games)."""
        n = self.games
        if n < 2:
            return 0.0
        mean = self.value
        squares = self.wins * (1 - mean) ** 2 + self.draws * (0.5 - mean) ** 2 + self.losses * mean**2
        return math.sqrt(squares / (n - 1) / n)


def score_vs_mcts(game: Game, player: Player, *, simulations: int, games: int, seed: int) -> MatchScore:
    """``player`` (with ``games`` slots) against pure MCTS with ``simulations`` random-rollout
    simulations, ``games`` games at once, colours alternated."""
    opponent = RolloutMctsPlayer(game, slots=games, simulations=simulations, seed=seed)
    match = play_match(game, player, opponent, games=games, slots=games, rng=np.random.default_rng(seed))
    return MatchScore(match.wins, match.draws, match.losses)


@dataclass(frozen=True)
class Grades:
    moves: MoveGrades
    network: NetworkGrades
    vs_mcts: dict[int, MatchScore]  # opponent simulations -> score (empty: no matches played)


def grade_model(game: Game, evaluate: Evaluator, positions: Sequence[LabelledPosition], settings: SearchSettings,
                *, games: int, seed: int, log: Callable[[str], None] = print) -> Grades:
    """A model searching with ``settings``: its moves on ``positions`` and its scores
    against MCTS-400 and MCTS-1000 (no matches when ``games`` is 0). In the matches it
    samples its first two moves from the visits, so that its games differ."""
    if games < 0:
        raise ValueError(f"games must be 0 (no matches) or more, got {games}")
    moves = grade_moves(search_chooser(game, evaluate, settings), positions)
    log(f"  positions: optimal {moves.optimal.value:.3f}, outcome kept {moves.outcome.value:.3f}")
    log(f"  misses: {moves.misses.describe()}")
    network = grade_network(game, evaluate, positions)
    log(f"  network alone: policy optimal {network.policy.optimal.value:.3f}, outcome kept "
        f"{network.policy.outcome.value:.3f}; value sign right on {network.value_sign.value:.3f} "
        f"of {network.value_sign.total} won or lost positions")
    scores = {}
    for opponent in OPPONENTS if games else ():
        player = MctsPlayer(game, evaluate, slots=games, search=settings, temperature_moves=2, name="model")
        scores[opponent] = score_vs_mcts(game, player, simulations=opponent, games=games, seed=seed + opponent)
        log(f"  vs mcts{opponent}: {scores[opponent].value:.3f} over {games} games")
    return Grades(moves, network, scores)


def table_header() -> str:
    return (f"{'model':<12} {'positions':>9} {'optimal':>15} {'outcome kept':>15} "
            + " ".join(f"{'vs mcts' + str(o):>15}" for o in OPPONENTS)
            + f" {'net optimal':>15} {'net value sign':>15}  (± standard error)")


def table_row(name: str, grades: Grades) -> str:
    def cell(value: float, se: float) -> str:
        return f"{value:.3f} ± {se:.3f}"

    moves = grades.moves
    row = (f"{name:<12} {moves.optimal.total:>9} {cell(moves.optimal.value, moves.optimal.se):>15} "
           f"{cell(moves.outcome.value, moves.outcome.se):>15}")
    for opponent in OPPONENTS:
        score = grades.vs_mcts.get(opponent)
        row += f" {cell(score.value, score.se) if score else 'not played':>15}"
    network = grades.network
    row += (f" {cell(network.policy.optimal.value, network.policy.optimal.se):>15}"
            f" {cell(network.value_sign.value, network.value_sign.se):>15}")
    return row


def ratio_lines(grades: Grades) -> list[str]:
    """The RATIO lines of the Connect Four targets (the form of README.md's Benchmarks):
    three, or the two shares when no matches were played."""
    lines = [
        f"RATIO connect4_optimal_share {grades.moves.optimal.value:.3f} vs solver target {TARGET_OPTIMAL}",
        f"RATIO connect4_outcome_share {grades.moves.outcome.value:.3f} vs solver target {TARGET_OUTCOME}",
    ]
    if 1000 in grades.vs_mcts:
        lines.append(f"RATIO connect4_winrate_vs_mcts1000 {grades.vs_mcts[1000].value:.3f} vs mcts1000 "
                     f"target {TARGET_VS_MCTS1000}")
    return lines
