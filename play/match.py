"""Whole games between two players, many at once, colours alternated, each game
returned as a ``PlayedGame``: the one match loop (``play_games``), for ``tengen
match``, gating and the benchmarks. ``play_match`` is gating's use of it: it stops as
soon as the decision rule (engine/gating.py) has a verdict, and its ``MatchResult``
carries the first player's wins, draws and losses and an Elo estimate with its
interval.

The players are ``Player``s: a model's ``MctsPlayer`` (play/players.py) searches all
its games in one batch; a ``GtpPlayer`` (play/gtp_player.py) runs one engine process
per slot, and may resign or fail.

Scoring of Go games: Tromp-Taylor area (black's stones and the empty regions only
black reaches, minus white's, minus komi) on the final board: the rules the models
learn and are gated by. A GTP engine such as GNU Go passes with dead stones still on
the board, which Tromp-Taylor would count as alive. So when a GTP engine takes part
and a game ends by two passes (or the move cap), each GTP engine is asked
``final_status_list dead``; when any lists dead stones, the game is reopened for a
KGS-style cleanup phase (GTP engines answer ``kgs-genmove_cleanup``, which captures
dead stones instead of passing; a model searches on as before) until two passes
again, as tests/gtp_referee.py referees games, and the board after it is scored.
This keeps one scoring rule for every match, needs no trust in either side's
judgement, and agrees with GNU Go's Chinese count once the dead stones are off. Each
GTP engine's own ``final_score`` is asked too and kept beside the result (a
disagreement is reported, not resolved).

A GTP engine that fails inside a game (dies, times out, refuses a move, plays an
illegal one) loses that game by forfeit (SGF's ``B+F``/``W+F``), with the reason
kept: a tournament's rule, so that a crashing engine cannot escape a loss and one
bad game does not end the match. Its slot's engine is started again for the next
game; failing to start or set up a game raises ``GtpEngineError`` (the match stops).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from tengen.engine.games import go_kernels as K
from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.engine.gating import Decision, EloEstimate, GatingRule, estimate_elo
from tengen.play.gtp_player import FORFEIT, RESIGN

if TYPE_CHECKING:  # players.py is built on this module's PlayerBase
    from tengen.play.players import MctsPlayerSettings

__all__ = ["Player", "PlayerBase", "PlayedGame", "MatchResult", "GatingOptions", "play_games", "play_match",
           "result_text"]


class Player(Protocol):
    """One side of a match, with a slot per concurrent game: ``new_game(slot, state)``
    starts a game, ``choose(slots, states, rng)`` picks the moves of the games in which
    it is to move (one batched search for all of them), and ``advance(slot, action)``
    tells it the move played (its own or the opponent's), so that tree players keep
    their subtrees. ``choose`` may answer ``RESIGN``, or ``FORFEIT`` when the player
    cannot go on (``forfeit_reason`` says why).

    At the end of a Go game the loop asks each side what it sees: ``dead_stones``
    (the stones it calls dead once two passes end the game; any reopens the game for
    a cleanup phase, which ``begin_cleanup`` announces) and ``final_score`` (its own
    count, kept beside the loop's). ``PlayerBase`` answers these for a player that has
    nothing to say at the end. The players are in play/players.py (models, pure MCTS,
    random) and play/gtp_player.py (a GTP engine)."""

    name: str

    def new_game(self, slot: int, state: np.ndarray) -> None: ...

    def choose(self, slots: list[int], states: list[np.ndarray], rng: np.random.Generator) -> list[int]: ...

    def advance(self, slot: int, action: int) -> None: ...

    def dead_stones(self, slot: int) -> list[int] | None: ...

    def final_score(self, slot: int) -> str | None: ...

    def begin_cleanup(self, slot: int, state: np.ndarray) -> None: ...

    def forfeit_reason(self, slot: int) -> str: ...


class PlayerBase:
    """The end of a game for a player that sees nothing there of its own (a model's
    search, pure MCTS, a random player): no dead stones, no count, and a cleanup phase
    that a GTP engine asked for is a new game from the reopened position."""

    name: str

    def new_game(self, slot: int, state: np.ndarray) -> None:
        pass

    def dead_stones(self, slot: int) -> list[int] | None:
        return None

    def final_score(self, slot: int) -> str | None:
        return None

    def begin_cleanup(self, slot: int, state: np.ndarray) -> None:
        self.new_game(slot, state)

    def forfeit_reason(self, slot: int) -> str:
        return f"{self.name} gave up the game"


@dataclass(frozen=True)
class PlayedGame:
    """One finished game. ``outcome`` is player 0's (black's, the first mover's):
    +1 won, 0 drawn, -1 lost."""

    index: int
    black: str
    white: str
    first_is_black: bool  # the match's first player (A) moved first
    moves: tuple[int, ...]  # actions, cleanup moves included
    outcome: float
    end: str  # 'two passes', 'move cap', 'resignation', 'forfeit', or 'finished' (other games)
    score: float | None = None  # Go, scored: black's area minus white's minus komi
    cleanup_start: int | None = None  # moves[cleanup_start:] were the cleanup phase
    reason: str | None = None  # why the forfeit
    engine_scores: tuple[tuple[str, str], ...] = ()  # (GTP engine, its final_score)

    @property
    def first_result(self) -> float:
        """The first player's (A's) outcome."""
        return self.outcome if self.first_is_black else -self.outcome


def result_text(played: PlayedGame) -> str:
    """SGF's RE: 'B+3.5', 'W+R' (resignation), 'B+F' (forfeit), '0' (a draw)."""
    if played.outcome == 0:
        return "0"
    winner = "B" if played.outcome > 0 else "W"
    if played.end == "resignation":
        return f"{winner}+R"
    if played.end == "forfeit":
        return f"{winner}+F"
    if played.score is not None:
        return f"{winner}+{abs(played.score):g}"
    return f"{winner}+"


def _reopened(game: GoGame, state: np.ndarray) -> np.ndarray:
    """A copy of a finished game's state that goes on, with the run of passes started
    over (a capped game gets a fresh move count, as the GTP engine reopens one)."""
    s = state.copy()
    if int(s[K.END]) == K.ENDED_BY_MOVE_CAP:
        fresh = game.state_from_board(game.board(s), game.to_play(s))
        for field in (K.KO, K.LAST, K.PRISONERS, K.PRISONERS + 1):
            fresh[field] = s[field]
        s = fresh
    s[K.END] = K.ONGOING
    s[K.PASSES] = 0
    return s


def play_games(game: Game, first: Player, second: Player, *, games: int, slots: int, rng: np.random.Generator,
               on_game: Callable[[PlayedGame], None] | None = None,
               until: Callable[[PlayedGame], bool] | None = None) -> list[PlayedGame]:
    """Play ``games`` games, ``slots`` at a time, ``first`` moving first in the
    even-numbered ones; ``on_game`` gets each game as it finishes. When ``until``
    returns True for a finished game, the match ends there: the games still going
    are dropped unfinished. Returns the finished games in the order of their index."""
    if games < 1 or slots < 1:
        raise ValueError(f"games and slots must be at least 1, got {games} and {slots}")
    go = game if isinstance(game, GoGame) else None
    states: list[np.ndarray | None] = [None] * slots
    index = [0] * slots
    moves: list[list[int]] = [[] for _ in range(slots)]
    cleanup_start: list[int | None] = [None] * slots
    finished: list[PlayedGame] = []
    started = 0
    stopped = False

    def first_is_black(slot: int) -> bool:
        return index[slot] % 2 == 0

    def start(slot: int) -> None:
        nonlocal started
        state = game.initial_state()
        states[slot], index[slot], moves[slot], cleanup_start[slot] = state, started, [], None
        started += 1
        first.new_game(slot, state)
        second.new_game(slot, state)

    def finish(slot: int, outcome: float, end: str, *, reason: str | None = None) -> None:
        nonlocal stopped
        state = states[slot]
        assert state is not None
        score = go.score(state) if go is not None and end in ("two passes", "move cap") else None
        engine_scores: tuple[tuple[str, str], ...] = ()
        if score is not None:
            engine_scores = tuple((p.name, text) for p in (first, second) if (text := p.final_score(slot)) is not None)
        black, white = (first, second) if first_is_black(slot) else (second, first)
        played = PlayedGame(index=index[slot], black=black.name, white=white.name,
                            first_is_black=first_is_black(slot), moves=tuple(moves[slot]), outcome=outcome,
                            end=end, score=score, cleanup_start=cleanup_start[slot], reason=reason,
                            engine_scores=engine_scores)
        finished.append(played)
        if on_game is not None:
            on_game(played)
        states[slot] = None
        stopped = until is not None and until(played)
        if not stopped and started < games:
            start(slot)

    def needs_cleanup(slot: int) -> bool:
        if go is None or cleanup_start[slot] is not None:
            return False
        return any(p.dead_stones(slot) for p in (first, second))

    for slot in range(min(slots, games)):
        start(slot)
    while not stopped and any(s is not None for s in states):
        for player, is_first in ((first, True), (second, False)):
            movers = [i for i, s in enumerate(states)
                      if s is not None and (game.to_play(s) == 0) == (first_is_black(i) == is_first)]
            if not movers:
                continue
            actions = player.choose(movers, [s for i in movers if (s := states[i]) is not None], rng)
            for slot, action in zip(movers, actions, strict=True):
                if stopped:
                    break
                state = states[slot]
                assert state is not None
                mover = game.to_play(state)
                if action in (RESIGN, FORFEIT):
                    reason = None
                    if action == FORFEIT:
                        reason = player.forfeit_reason(slot)
                    elif go is not None:
                        go.resign(state, mover)
                    finish(slot, 1.0 if mover == 1 else -1.0, "resignation" if action == RESIGN else "forfeit",
                           reason=reason)
                    continue
                game.play(state, action)
                moves[slot].append(int(action))
                first.advance(slot, action)
                second.advance(slot, action)
                if not game.is_terminal(state):
                    continue
                if go is not None and needs_cleanup(slot):
                    reopened = _reopened(go, state)
                    states[slot] = reopened
                    cleanup_start[slot] = len(moves[slot])
                    for p in (first, second):
                        p.begin_cleanup(slot, reopened)
                    continue
                finish(slot, game.outcome(state), go.end_reason(state) if go is not None else "finished")
            if stopped:
                break
    return sorted(finished, key=lambda g: g.index)


@dataclass(frozen=True)
class MatchResult:
    """The first player's results against the second, and the games that were played
    to the end, in the order they were started (those cut off by an early decision
    are not)."""

    wins: int
    draws: int
    losses: int
    decision: Decision
    elo: EloEstimate
    played: tuple[PlayedGame, ...] = ()

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        return (self.wins + 0.5 * self.draws) / self.games if self.games else 0.5


def play_match(
    game: Game,
    first: Player,
    second: Player,
    *,
    games: int,
    slots: int,
    rng: np.random.Generator,
    rule: GatingRule | None = None,
) -> MatchResult:
    """Play up to ``games`` games, ``slots`` at a time, ``first`` taking player 0 in
    even-numbered games and player 1 in odd ones; stop early once ``rule`` decides.
    Without a rule every game is played (a measurement), and the decision says
    whether ``first`` scored above one half."""
    counts = {"wins": 0, "draws": 0, "losses": 0}
    decision = rule.decide(0, 0, 0) if rule else Decision.CONTINUE

    def decided(played: PlayedGame) -> bool:
        nonlocal decision
        result = played.first_result
        counts["wins" if result > 0 else "draws" if result == 0 else "losses"] += 1
        if rule:
            decision = rule.decide(**counts)
        return decision != Decision.CONTINUE

    played = [] if decision != Decision.CONTINUE else play_games(game, first, second, games=games, slots=slots,
                                                                 rng=rng, until=decided)
    wins, draws, losses = counts["wins"], counts["draws"], counts["losses"]
    if decision == Decision.CONTINUE:  # every game played without a verdict
        decision = rule.decide(wins, draws, losses) if rule else Decision.CONTINUE
        if decision == Decision.CONTINUE:
            decision = Decision.PROMOTE if wins + 0.5 * draws > 0.5 * max(wins + draws + losses, 1) else Decision.REJECT
    return MatchResult(wins, draws, losses, decision, estimate_elo(wins, draws, losses), tuple(played))


@dataclass(frozen=True)
class GatingOptions:
    """How gating plays a candidate against the best (workers/gatekeeper.py): ``rule`` decides,
    ``games_in_flight`` games are played at once, and each side is an ``MctsPlayer``
    of ``player`` whose network answers go through an evaluation cache of
    ``cache_positions`` (0: none). The run config makes it
    (``TengenConfig.gating_options()``); both wirings give the gatekeeper the same."""

    rule: GatingRule
    games_in_flight: int
    player: MctsPlayerSettings
    cache_positions: int = 0
