"""The end of a GTP game: which stones are dead, alive or in seki
(``final_status_list``), the score (``final_score``: area with the dead stones off,
or with ``scoring="tromp-taylor"`` the board as it is), and ``kgs-genmove_cleanup``,
which plays on until the opponent's dead stones are captured.

Both scoring commands read the session's one ownership estimate of the position
(``Session.estimate``), so they agree. ``score`` is also the result that ``printsgf``
writes.
"""

from __future__ import annotations

from tengen.engine.games.go import Group
from tengen.play.gtp.commands import GtpError, color, expect
from tengen.play.gtp.moves import generate
from tengen.play.gtp.session import Session, reopened
from tengen.play.ownership import area_without_dead, stone_status

__all__ = ["SCORING", "ScoringCommands", "score"]

#: "area": dead stones (by the estimate) off, then Tromp-Taylor; "tromp-taylor": the board as it is
SCORING = ("area", "tromp-taylor")
_STATUSES = ("alive", "dead", "seki")


def score(session: Session) -> str:
    """The score of the position: ``B+N``, ``W+N`` or ``0``."""
    game = session.game
    dead = [a for g in _groups_by_status(session)["dead"] for a in g.stones]
    points = area_without_dead(game, session.record.state, dead) - game.komi
    if points == 0:
        return "0"
    return f"{'B' if points > 0 else 'W'}+{abs(points):g}"


def _groups_by_status(session: Session) -> dict[str, list[Group]]:
    game, state = session.game, session.record.state
    groups: dict[str, list[Group]] = {status: [] for status in _STATUSES}
    if session.scoring == "tromp-taylor":
        groups["alive"] = game.groups(state)
        return groups
    probe = reopened(game, state)
    for s in stone_status(game, probe, session.estimate(probe)):
        groups[s.status].append(s.group)
    return groups


class ScoringCommands:
    """GTP's scoring and cleanup commands on a ``Session``."""

    def __init__(self, session: Session):
        self.session = session

    def final_score(self, args: list[str]) -> str:
        return score(self.session)

    def final_status_list(self, args: list[str]) -> str:
        expect(args, 1)
        status = args[0].lower()
        if status not in _STATUSES:
            raise GtpError("syntax error")
        # One group per line, as GNU Go answers.
        groups, game = _groups_by_status(self.session)[status], self.session.game
        return "\n".join(" ".join(game.action_to_text(a) for a in g.stones) for g in groups)

    def kgs_genmove_cleanup(self, args: list[str]) -> str:
        expect(args, 1)
        return generate(self.session, color(args[0]), cleanup=True)
