"""One game on the play page: a person against the model, its moves, undo, the
model's thoughts and the result, with no server and no model in it.

``PlaySession`` keeps the moves from the start and rebuilds the position from them
(``Game.state_from_moves``) when a move is taken back, so that the position, the
history the network reads and the move list never disagree. The model's moves come
with a ``Thought``: what its search said before it played (root value, visit share
of every move, principal variation). ``view()`` is the JSON the page draws.

Go ends by two passes, the move cap or a resignation. A finished Go game is scored
by area after taking off the stones that light random playouts call dead
(``play.ownership``: ``PlayoutOwnership`` and ``stone_status``, what GTP's
``final_status_list`` and ``final_score`` read), which is Tromp-Taylor on the board
once the dead stones are gone; the Tromp-Taylor count of the board as it stands,
which decides self-play's games, is shown beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.play.ownership import PlayoutOwnership, area_without_dead, stone_status
from tengen.play.score import ScoreBelief
from tengen.play.search_player import Analysis
from tengen.play.sgf import GoRecord, Move, write_sgf
from tengen.web.board_view import last_point, player_names

__all__ = ["Thought", "Result", "PlaySession", "NotYourTurn", "expected_score"]


class NotYourTurn(ValueError):
    """A move, undo or resignation that the game's state does not allow now."""


def expected_score(value: float) -> float:
    """A value in [-1, 1] (the network's tanh head: +1 win, 0 draw, -1 loss) as the
    expected score in [0, 1] (win 1, draw 1/2, loss 0). The two are the same number
    on two scales: the value head predicts the mean outcome, so 0 is "a draw on
    average", a sure draw and a coin flip alike."""
    return (float(np.clip(value, -1.0, 1.0)) + 1.0) / 2.0


@dataclass(frozen=True)
class Thought:
    """What the search said before the model played: ``value`` in [-1, 1] for the
    model (the player to move then), ``visits`` at the root, ``share[A]`` of the
    root's visits per action, ``pv`` the principal variation of the move played;
    where the model has a score head, ``lead`` (its expected final score difference in
    points, > 0: the model ahead) and ``lead_stdev``, KataGo's scoreLead and scoreStdev."""

    value: float
    visits: int
    seconds: float
    share: tuple[float, ...]
    pv: tuple[int, ...]
    lead: float | None = None
    lead_stdev: float | None = None

    @classmethod
    def from_analysis(cls, analysis: Analysis, num_actions: int, *, lead: float | None = None,
                      lead_stdev: float | None = None) -> Thought:
        share = np.zeros(num_actions, dtype=np.float64)
        total = sum(m.visits for m in analysis.moves)
        for m in analysis.moves:
            # With 0 visits (the raw policy) the prior is what the model thinks.
            share[m.action] = m.visits / total if total else m.prior
        pv = analysis.moves[0].pv if analysis.moves else ()
        return cls(value=float(analysis.value), visits=int(analysis.visits), seconds=float(analysis.seconds),
                   share=tuple(float(s) for s in share), pv=tuple(int(a) for a in pv), lead=lead,
                   lead_stdev=lead_stdev)


@dataclass(frozen=True)
class Result:
    """A finished game: ``winner`` 0 or 1 (None: a draw), ``text`` as people write it
    ("X wins", "W+3.5", "B+R"), ``reason``; for Go the ``dead`` stones (actions)
    taken off before counting and ``board_score``, the count of the board as it is."""

    winner: int | None
    text: str
    reason: str
    dead: tuple[int, ...] = ()
    board_score: str | None = None


class PlaySession:
    """A person (``person``: 0 or 1) against the model in ``game``."""

    def __init__(self, game: Game, *, person: int, session_id: str, ownership_playouts: int = 256):
        if person not in (0, 1):
            raise ValueError(f"the person plays 0 or 1, not {person!r}")
        self.game = game
        self.person = person
        self.id = session_id
        self.moves: list[int] = []
        #: the model's thought per ply of the model's moves
        self.thoughts: dict[int, Thought] = {}
        self.resigned: int | None = None
        self._ownership_playouts = ownership_playouts
        self._state: np.ndarray = game.initial_state()
        self._history: list[np.ndarray] = []
        self._result: Result | None = None

    # -- the position --------------------------------------------------------------------
    @property
    def state(self) -> np.ndarray:
        return self._state

    @property
    def history(self) -> list[np.ndarray]:
        return self._history

    @property
    def over(self) -> bool:
        return self.resigned is not None or self.game.is_terminal(self._state)

    @property
    def to_play(self) -> int:
        return self.game.to_play(self._state)

    @property
    def model_to_move(self) -> bool:
        return not self.over and self.to_play != self.person

    def position(self) -> tuple[np.ndarray, list[np.ndarray]]:
        """Copies of the state and its history, for a search in another thread."""
        return self._state.copy(), [s.copy() for s in self._history]

    # -- moves ---------------------------------------------------------------------------
    def play(self, action: int) -> None:
        """The person's move. ``NotYourTurn`` when the game is over or it is the
        model's turn, ``IllegalMove`` (naming the move) when the rules refuse it."""
        if self.over:
            raise NotYourTurn("the game is over: start a new one")
        if self.to_play != self.person:
            raise NotYourTurn("it is the model's move")
        self._play(action)

    def play_model(self, analysis: Analysis, score: ScoreBelief | None = None) -> int:
        """The model's move: the best of ``analysis`` (a search of this position);
        ``score``: its score head's belief about this position, Black's view (None:
        no head)."""
        if not self.model_to_move:
            raise NotYourTurn("it is not the model's move")
        action = analysis.best
        if action is None:
            raise ValueError("the search found no legal move")
        sign = 1.0 if self.to_play == 0 else -1.0
        thought = Thought.from_analysis(analysis, self.game.num_actions,
                                        lead=None if score is None else sign * score.mean,
                                        lead_stdev=None if score is None else score.stdev)
        self._play(action)
        self.thoughts[len(self.moves) - 1] = thought
        return action

    def _play(self, action: int) -> None:
        before = self._state.copy()
        self.game.play(self._state, int(action))  # IllegalMove leaves the state as it was
        self._history.append(before)
        self.moves.append(int(action))
        self._result = None

    def undo(self) -> int:
        """Take back the person's last move and the model's replies after it; returns
        how many moves went (a resignation counts as one)."""
        if self.resigned is not None:
            self.resigned = None
            self._result = None
            return 1
        persons = [i for i in range(len(self.moves)) if self._mover(i) == self.person]
        if not persons:
            raise NotYourTurn("there is no move of yours to take back")
        keep = persons[-1]
        taken = len(self.moves) - keep
        self.moves = self.moves[:keep]
        self.thoughts = {ply: t for ply, t in self.thoughts.items() if ply < keep}
        self._state, self._history = self.game.state_from_moves(self.moves)
        self._result = None
        return taken

    def _mover(self, ply: int) -> int:
        return self.game.to_play(self._history[ply])

    def resign(self) -> None:
        """The person gives up (Go)."""
        if not isinstance(self.game, GoGame):
            raise NotYourTurn(f"{self.game.name} has no resignation: finish it or start a new game")
        if self.over:
            raise NotYourTurn("the game is over")
        self.resigned = self.person

    # -- the end -------------------------------------------------------------------------
    def result(self) -> Result | None:
        """The result of a finished game (None while it runs). For Go this runs the
        playouts of the dead-stone estimate once per finished position."""
        if not self.over:
            return None
        if self._result is None:
            self._result = self._score()
        return self._result

    def _score(self) -> Result:
        game = self.game
        names = player_names(game)
        if self.resigned is not None:
            winner = 1 - self.resigned
            return Result(winner, f"{names[winner][0]}+R", f"{names[self.resigned]} resigned")
        if not isinstance(game, GoGame):
            outcome = game.outcome(self._state)
            if outcome == 0:
                return Result(None, "Draw", "board full")
            won = 0 if outcome > 0 else 1
            return Result(won, f"{names[won]} wins", f"{getattr(game, 'k', '')} in a row".lstrip())
        estimate = PlayoutOwnership(game, playouts=self._ownership_playouts)(self._state, self._history)
        dead = tuple(sorted(a for s in stone_status(game, self._state, estimate) if s.status == "dead"
                            for a in s.group.stones))
        score = area_without_dead(game, self._state, dead) - game.komi
        leader = None if score == 0 else (0 if score > 0 else 1)
        return Result(leader, _score_text(score), game.end_reason(self._state), dead=dead,
                      board_score=game.score_text(self._state))

    # -- records -------------------------------------------------------------------------
    def sgf(self, *, application: tuple[str, str]) -> str:
        """The Go game as SGF (play/sgf.py), the result when it is over."""
        game = self.game
        if not isinstance(game, GoGame):
            raise NotYourTurn(f"SGF records Go games, not {game.name}")
        result = self.result()
        players: list[str | None] = ["tengen", "tengen"]
        players[self.person] = "person"
        moves = tuple(Move(self._mover(i), a) for i, a in enumerate(self.moves))
        return write_sgf(GoRecord(size=game.size, komi=game.komi, events=moves,
                                  result=None if result is None else ("Draw" if result.winner is None
                                                                      else result.text),
                                  rules="Chinese", players=(players[0], players[1]), application=application))

    # -- what the page draws -------------------------------------------------------------
    def view(self) -> dict:
        """The JSON the page draws (see web/static/play.js)."""
        game = self.game
        # The dead-stone estimate is left to ``result()``, which the server runs off
        # its event loop; until then a finished Go game shows no result.
        scored = self._result is not None or self.resigned is not None or not isinstance(game, GoGame)
        result = self.result() if scored else None
        # The model's last thought stays shown after the person's reply to it.
        ply = max(self.thoughts, default=None)
        return {
            "id": self.id,
            "person": self.person,
            "to_play": self.to_play,
            "over": self.over,
            "board": game.board(self._state).tolist(),
            "moves": [{"player": self._mover(i), "action": a, "text": game.action_to_text(a)}
                      for i, a in enumerate(self.moves)],
            "legal": [] if self.over else [int(a) for a in np.flatnonzero(game.legal_mask(self._state))],
            "last_point": self._last_point(),
            "thought": None if ply is None else {**_thought_view(game, self.thoughts[ply]), "ply": ply,
                                                 "move": game.action_to_text(self.moves[ply])},
            "result": None if result is None else {
                "winner": result.winner, "text": result.text, "reason": result.reason,
                "dead": list(result.dead), "board_score": result.board_score,
            },
        }

    def _last_point(self) -> list[int] | None:
        """[row, col] of the stone the last move put down (None: none yet, or a pass)."""
        if not self._history:
            return None
        return last_point(self.game.board(self._history[-1]), self.game.board(self._state))


def _thought_view(game: Game, thought: Thought) -> dict:
    return {
        "value": thought.value,
        "expected_score": expected_score(thought.value),
        "visits": thought.visits,
        "seconds": thought.seconds,
        "share": list(thought.share),
        "pv": [game.action_to_text(a) for a in thought.pv],
        "lead": thought.lead,
        "lead_stdev": thought.lead_stdev,
    }


def _score_text(score: float) -> str:
    if score == 0:
        return "0"
    return f"{'B' if score > 0 else 'W'}+{abs(score):g}"

