"""How the GTP engine chooses a move: the player's search within the clock's budget
(rollout MCTS for the genmove_analyze commands without a model), or without a player
a random move that fills no own eye and lies where the ownership estimate sees
something left to play; ``resign`` after a run of low winrates; in cleanup, moves on
the liberties of the opponent's dead stones rather than a pass.

The opponent's pass is answered from the count (count.py), before any search: a
server that scores the game itself once both pass (online-go.com for bots, through
gtp2ogs) holds no dead-stone phase in which the engine could say more. So after
the opponent's pass the engine passes when the count after its own pass, with the
estimate's dead stones off, is a win for it; it resigns at once when that count is
lost and the estimate's expected result (the ownership summed, less komi) is a loss
too, unless resignation is off (``resign_threshold`` None); otherwise (a drawn count,
or one the estimate expects to turn) it chooses its move as always.

A module of its own because ``genmove`` and ``reg_genmove`` (board),
``kgs-genmove_cleanup`` (scoring) and ``*-genmove_analyze`` (analysis) all choose
moves this one way.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from tengen.engine.games.base import IllegalMove
from tengen.play.gtp.commands import GtpError
from tengen.play.gtp.count import black_lead
from tengen.play.gtp.session import Record, Session
from tengen.play.ownership import SETTLED, stone_status
from tengen.play.search_player import Analysis
from tengen.play.sgf import Move

__all__ = ["generate"]

#: how ``_answer_to_pass`` ends the game (else None: choose a move as always)
_PASS, _RESIGN = "pass", "resign"


def generate(session: Session, color: int, *, cleanup: bool = False, commit: bool = True,
             report: Callable[[Analysis], None] | None = None, interval: float | None = None,
             analyze: bool = False) -> str:
    """Choose (and unless ``commit`` is False, play) ``color``'s move; the vertex,
    'pass' or 'resign'. ``analyze``: search even without a model (rollouts), as
    the genmove_analyze commands do; ``report`` gets snapshots every
    ``interval`` seconds and the final one."""
    start = time.perf_counter()
    record = session.record
    game, probe = session.game, record.probe(color)
    seconds = session.clock.budget(color, board_size=game.size, moves_played=record.moves_played)
    player = session.player or (session.rollout_player() if analyze else None)
    value = None
    answer = None if cleanup else _answer_to_pass(session, probe, color)
    if answer == _RESIGN:
        return "resign"
    if answer == _PASS:
        action = game.pass_action
    elif player is None:
        action = _random_move(session, probe, color, cleanup=cleanup)
    else:
        analysis = player.search(game, probe, record.history(), seconds=seconds,
                                 max_visits=None if session.player is not None else session.search.simulations,
                                 on_snapshot=report, interval=interval)
        if report is not None:
            report(analysis)
        action = game.pass_action if analysis.best is None else analysis.best
        value = analysis.value if player.uses_model else None
        if cleanup:
            action = _cleanup_override(session, probe, color, action)
    resign = False
    if value is not None and session.resign_threshold is not None and not cleanup:
        low = (value + 1) / 2 < session.resign_threshold
        session.low_value[color] = session.low_value[color] + 1 if low else 0
        resign = session.low_value[color] >= session.resign_moves
    if commit and not resign:
        try:
            record.play(color, action)
        except IllegalMove as e:
            raise GtpError(f"the search chose an illegal move: {e}") from None
    if commit:
        session.clock.spend(color, time.perf_counter() - start, budget=seconds)
    return "resign" if resign else game.action_to_text(action)


def _answer_to_pass(session: Session, probe: np.ndarray, color: int) -> str | None:
    """After the opponent's pass: _PASS when passing ends the game won by the count,
    _RESIGN when the count is lost and so is the estimate's expected result (and
    resignation is on), else None. ``probe``: the position with ``color`` to move."""
    if not _opponent_passed(session.record, color):
        return None
    game = session.game
    sign = 1.0 if color == 0 else -1.0
    ended = probe.copy()
    game.play(ended, game.pass_action)  # the position final_score would count after our pass
    count = sign * black_lead(session, ended)
    if count > 0:
        return _PASS
    expected = sign * (float(session.estimate(probe).sum()) - game.komi)
    if count < 0 and expected < 0 and session.resign_threshold is not None:
        return _RESIGN
    return None


def _opponent_passed(record: Record, color: int) -> bool:
    """Whether the last thing that happened in the game is the opponent's pass."""
    last = record.events[-1] if record.events else None
    return isinstance(last, Move) and last.color != color and last.action == record.game.pass_action


def _random_move(session: Session, state: np.ndarray, color: int, *, cleanup: bool) -> int:
    """A uniform legal move that fills none of ``color``'s own eyes and lies on a
    point the estimate does not call settled, else pass. In cleanup, the
    liberties of the opponent's dead stones first, and no pass while any are
    left and a move is."""
    game, rng = session.game, session.rng
    legal = game.legal_mask(state)
    legal[game.pass_action] = False
    candidates = [int(a) for a in np.flatnonzero(legal) if not game.is_own_eye(state, int(a), color)]
    if not candidates:
        return game.pass_action
    own = session.estimate(state)
    if cleanup:
        dead_liberties = _dead_liberties(session, state, own, 1 - color)
        if dead_liberties is not None:
            targets = [a for a in candidates if a in dead_liberties] or candidates
            return targets[int(rng.integers(len(targets)))]
    useful = [a for a in candidates if abs(float(own[a])) < SETTLED]
    if not useful:
        return game.pass_action
    return useful[int(rng.integers(len(useful)))]


def _cleanup_override(session: Session, state: np.ndarray, color: int, action: int) -> int:
    """A search's pass in cleanup becomes a move on a liberty of the opponent's
    dead stones while any are left."""
    game = session.game
    if action != game.pass_action:
        return action
    liberties = _dead_liberties(session, state, session.estimate(state), 1 - color)
    if not liberties:
        return action
    legal = game.legal_mask(state)
    targets = sorted(a for a in liberties if legal[a] and not game.is_own_eye(state, a, color))
    return targets[int(session.rng.integers(len(targets)))] if targets else action


def _dead_liberties(session: Session, state: np.ndarray, own: np.ndarray, color: int) -> set[int] | None:
    """The liberties of ``color``'s dead groups, or None when none is dead."""
    dead = [s.group for s in stone_status(session.game, state, own) if s.status == "dead" and s.group.color == color]
    if not dead:
        return None
    return {a for g in dead for a in g.liberties}
