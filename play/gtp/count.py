"""The count of a position as the GTP engine scores it: which groups are alive, dead
or in seki (from the session's ownership estimate, or every stone alive with
``scoring="tromp-taylor"``), and Black's lead by area with the dead stones taken
off, komi included.

A module of its own because two handlers count: ``final_score`` and
``final_status_list`` (scoring.py), and ``genmove`` answering the opponent's pass
(moves.py), which passes only into a count it wins. scoring.py imports moves.py for
cleanup, so the count they share lives here, where both read the one estimate
(``Session.estimate``) and so always agree.
"""

from __future__ import annotations

import numpy as np

from tengen.engine.games.go import Group
from tengen.play.gtp.session import Session, reopened
from tengen.play.ownership import area_without_dead, stone_status

__all__ = ["STATUSES", "groups_by_status", "black_lead"]

STATUSES = ("alive", "dead", "seki")


def groups_by_status(session: Session, state: np.ndarray) -> dict[str, list[Group]]:
    """The groups of ``state`` by status, each list in the order of the groups' first stones."""
    game = session.game
    groups: dict[str, list[Group]] = {status: [] for status in STATUSES}
    if session.scoring == "tromp-taylor":
        groups["alive"] = game.groups(state)
        return groups
    probe = reopened(game, state)
    for s in stone_status(game, probe, session.estimate(probe)):
        groups[s.status].append(s.group)
    return groups


def black_lead(session: Session, state: np.ndarray) -> float:
    """Black's area minus White's, less komi, with the stones ``groups_by_status``
    calls dead taken off (positive: Black wins the count)."""
    dead = [a for g in groups_by_status(session, state)["dead"] for a in g.stones]
    return area_without_dead(session.game, state, dead) - session.game.komi
