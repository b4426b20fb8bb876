"""The end of a GTP game: which stones are dead, alive or in seki
(``final_status_list``), the score (``final_score``: area with the dead stones off,
or with ``scoring="tromp-taylor"`` the board as it is), and ``kgs-genmove_cleanup``,
which plays on until the opponent's dead stones are captured.

Both scoring commands read the count of count.py (the session's one ownership
estimate of the position, ``Session.estimate``), so they agree, and agree with the
count by which ``genmove`` answers the opponent's pass. ``score`` is also the result
that ``printsgf`` writes.
"""

from __future__ import annotations

from tengen.play.gtp.commands import GtpError, color, expect
from tengen.play.gtp.count import STATUSES, black_lead, groups_by_status
from tengen.play.gtp.moves import generate
from tengen.play.gtp.session import Session

__all__ = ["SCORING", "ScoringCommands", "score"]

#: "area": dead stones (by the estimate) off, then Tromp-Taylor; "tromp-taylor": the board as it is
SCORING = ("area", "tromp-taylor")


def score(session: Session) -> str:
    """The score of the position: ``B+N``, ``W+N`` or ``0``."""
    points = black_lead(session, session.record.state)
    if points == 0:
        return "0"
    return f"{'B' if points > 0 else 'W'}+{abs(points):g}"


class ScoringCommands:
    """GTP's scoring and cleanup commands on a ``Session``."""

    def __init__(self, session: Session):
        self.session = session

    def final_score(self, args: list[str]) -> str:
        return score(self.session)

    def final_status_list(self, args: list[str]) -> str:
        expect(args, 1)
        status = args[0].lower()
        if status not in STATUSES:
            raise GtpError("syntax error")
        # One group per line, as GNU Go answers.
        session = self.session
        groups, game = groups_by_status(session, session.record.state)[status], session.game
        return "\n".join(" ".join(game.action_to_text(a) for a in g.stones) for g in groups)

    def kgs_genmove_cleanup(self, args: list[str]) -> str:
        expect(args, 1)
        return generate(self.session, color(args[0]), cleanup=True)
