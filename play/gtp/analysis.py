"""Analysis in GTP, as Leela Zero and KataGo speak it: ``lz-analyze`` and
``kata-analyze`` stream ``info`` lines about the position until the next input line,
``lz-genmove_analyze`` and ``kata-genmove_analyze`` stream while they choose a move
and end with ``play VERTEX``, and ``stop`` ends an analysis (the next line already
did).

Every command here answers with a ``Stream`` that the dispatcher runs, in the
background for analysis and to its end for genmove_analyze; this module parses the
options (``[color] [interval] [key value]...``) and writes the lines in each dialect.
Where the model has a score head, ``kata-analyze``'s moves carry KataGo's
``scoreMean``, ``scoreStdev``, ``scoreLead`` and ``scoreSelfplay``: the head's estimate
of the position after the move, for the player to move (KataGo's GTP reports as the
side to move), each move's read once per analysis.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from tengen.play.gtp.commands import COLORS, GtpError, Stream, is_number
from tengen.play.gtp.moves import generate
from tengen.play.gtp.session import Session
from tengen.play.score import ScoreBelief
from tengen.play.search_player import Analysis

__all__ = ["AnalysisCommands"]

#: the longest interval between analysis lines a controller may ask for (an hour)
MAX_INTERVAL_S = 3600.0


@dataclass(frozen=True)
class _AnalyzeRequest:
    dialect: str  # "lz" or "kata"
    color: int
    interval: float  # seconds; 0: no info lines
    max_moves: int | None
    ownership: bool


class AnalysisCommands:
    """GTP's analysis commands on a ``Session``."""

    def __init__(self, session: Session):
        self.session = session

    def lz_analyze(self, args: list[str]) -> Stream:
        return self._analyze(args, "lz")

    def kata_analyze(self, args: list[str]) -> Stream:
        return self._analyze(args, "kata")

    def lz_genmove_analyze(self, args: list[str]) -> Stream:
        return self._genmove_analyze(args, "lz")

    def kata_genmove_analyze(self, args: list[str]) -> Stream:
        return self._genmove_analyze(args, "kata")

    def stop(self, args: list[str]) -> str:
        return ""  # a running analysis already stopped when this line arrived

    def _request(self, args: list[str], dialect: str) -> _AnalyzeRequest:
        words = list(args)
        color = self.session.game.to_play(self.session.record.state)
        if words and words[0].lower() in COLORS:
            color = COLORS[words.pop(0).lower()]
        interval = 0.0
        if words and is_number(words[0]):
            interval = float(words.pop(0)) / 100
        max_moves, ownership = None, False
        while words:
            key = words.pop(0)
            if key in ("allow", "avoid"):
                if len(words) < 3:
                    raise GtpError("syntax error")
                del words[:3]  # accepted, not applied
                continue
            if not words:
                raise GtpError("syntax error")
            value = words.pop(0)
            if key == "interval" and is_number(value):
                interval = float(value) / 100
            elif key == "maxmoves" and value.isdigit():
                max_moves = int(value)
            elif key == "minmoves" and value.isdigit():
                pass  # accepted: only visited moves are reported
            elif key == "ownership" and value in ("true", "false"):
                ownership = value == "true"
            else:
                raise GtpError(f"syntax error: unknown analysis option {key} {value}")
        if interval < 0:
            raise GtpError("syntax error")
        if interval > MAX_INTERVAL_S:  # an event wait that long overflows
            raise GtpError(f"interval {interval:g} s is outside 0..{MAX_INTERVAL_S:g}")
        return _AnalyzeRequest(dialect, color, interval, max_moves, ownership and dialect == "kata")

    def _analyze(self, args: list[str], dialect: str) -> Stream:
        session = self.session
        request = self._request(args, dialect)
        probe = session.record.probe(request.color)
        history = session.record.history()
        player = session.player or session.rollout_player()
        owner = self._owner_text(probe, request)
        scores = self._move_scores(probe, history, request)

        def produce(write: Callable[[str], None], stop: threading.Event | None, live: bool) -> None:
            def report(analysis: Analysis) -> None:
                if request.interval > 0 and analysis.moves:
                    write(self._info_line(analysis, request, owner, scores) + "\n")

            if not live and request.interval <= 0:
                return  # nothing would be printed: no search
            final = player.search(session.game, probe, history, max_visits=session.analysis_visits, stop=stop,
                                  on_snapshot=report if live else None,
                                  interval=request.interval if live and request.interval > 0 else None)
            report(final)

        return Stream(produce, background=True)

    def _genmove_analyze(self, args: list[str], dialect: str) -> Stream:
        request = self._request(args, dialect)
        probe = self.session.record.probe(request.color)
        owner = self._owner_text(probe, request)
        scores = self._move_scores(probe, self.session.record.history(), request)

        def produce(write: Callable[[str], None], stop: threading.Event | None, live: bool) -> None:
            def report(analysis: Analysis) -> None:
                if request.interval > 0 and analysis.moves:
                    write(self._info_line(analysis, request, owner, scores) + "\n")

            snapshots: list[Analysis] = []
            move = generate(self.session, request.color, analyze=True, report=report if live else snapshots.append,
                            interval=request.interval if live and request.interval > 0 else None)
            if snapshots:
                report(snapshots[-1])
            write(f"play {move}\n")

        return Stream(produce, background=False)

    def _owner_text(self, probe: np.ndarray, request: _AnalyzeRequest) -> str | None:
        if not request.ownership:
            return None
        own = self.session.estimate(probe) * (1.0 if request.color == 0 else -1.0)
        return " ".join(f"{v:.6f}" for v in own)

    def _move_scores(self, probe: np.ndarray, history: Sequence[np.ndarray],
                     request: _AnalyzeRequest) -> Callable[[int], ScoreBelief] | None:
        """``action -> ScoreBelief`` of the position after the move, from the mover's
        view, read once per move; None without a score head or in Leela Zero's dialect."""
        score, game = self.session.score, self.session.game
        if score is None or request.dialect != "kata":
            return None
        sign = 1.0 if request.color == 0 else -1.0
        known: dict[int, ScoreBelief] = {}

        def after(action: int) -> ScoreBelief:
            if action not in known:
                child = probe.copy()
                game.play(child, action)
                belief = score(child, [*history, probe])
                known[action] = ScoreBelief(sign * belief.mean, belief.stdev)
            return known[action]

        return after

    def _info_line(self, analysis: Analysis, request: _AnalyzeRequest, owner: str | None,
                   scores: Callable[[int], ScoreBelief] | None = None) -> str:
        game = self.session.game
        moves = analysis.moves if request.max_moves is None else analysis.moves[: request.max_moves]
        parts = []
        for order, m in enumerate(moves):
            pv = " ".join(game.action_to_text(a) for a in m.pv)
            vertex = game.action_to_text(m.action)
            if request.dialect == "lz":
                parts.append(f"info move {vertex} visits {m.visits} winrate {round(m.winrate * 10000)} "
                             f"prior {round(m.prior * 10000)} lcb {round(m.lcb * 10000)} order {order} pv {pv}")
            else:
                score = ""
                if scores is not None:
                    lead = scores(m.action)
                    score = (f"scoreMean {lead.mean:.6f} scoreStdev {lead.stdev:.6f} scoreLead {lead.mean:.6f} "
                             f"scoreSelfplay {lead.mean:.6f} ")
                parts.append(f"info move {vertex} visits {m.visits} utility {2 * m.winrate - 1:.6f} "
                             f"winrate {m.winrate:.6f} {score}prior {m.prior:.6f} lcb {m.lcb:.6f} "
                             f"utilityLcb {2 * m.lcb - 1:.6f} order {order} pv {pv}")
        line = " ".join(parts)
        if owner is not None:
            line += " ownership " + owner
        return line
