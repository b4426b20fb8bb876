"""KataGo's JSON analysis protocol, the part that is data: a query line read into a
``Query`` (or a ``QueryError`` naming its field), the positions it asks about, and an
analysis written as KataGo writes its results (KataGo's docs/Analysis_Engine.md is the
reference; KaTrain is the client that matters). The engine that runs the searches is
play/analysis_engine.py.

Our rules are area scoring, Tromp-Taylor's and China's alike: a query with those rules
is answered as asked; any other rules (KaTrain sends ``japanese`` by default) are
analysed under area scoring with a warning that says so, not refused. Scores
(``scoreLead``, ``scoreMean``, ``scoreStdev``) come from the model's score head where
it has one (play/score.py: the network's estimate of the root position and of the
position after each move, not an average over the search), else from the ownership
estimate: the points each side is expected to own minus komi, as an area count makes
them, with no spread.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from tengen.engine.games.base import IllegalMove
from tengen.engine.games.go import GoGame, check_komi
from tengen.engine.mcts import MoveRule
from tengen.play.gtp.session import Record
from tengen.play.search_player import Analysis

__all__ = ["Query", "QueryError", "Position", "Lead", "move_rules", "parse_query", "positions", "result_json",
           "no_result_json", "AREA_RULES", "SETTINGS_HONOURED", "MAX_VISITS"]

#: rule names (and KataGo's JSON form's scoring) that mean area scoring as ours
AREA_RULES = {"chinese", "tromp-taylor", "trompTaylor", "chinese-ogs", "chinese-kgs", "stone-scoring", "aga",
              "bga", "new-zealand", "newzealand", "area"}
#: overrideSettings the engine honours; others are accepted with a warning
SETTINGS_HONOURED = {"reportAnalysisWinratesAs", "maxTime", "maxVisits", "wideRootNoise"}
#: the most visits one search makes: its tree is sized for them up front (at 19x19,
#: 50,000 visits is about 300 MB); a query asking more is searched this far, with a warning
MAX_VISITS = 50_000
_PERSPECTIVES = {"BLACK", "WHITE", "SIDETOMOVE"}
_COLORS = {"B": 0, "W": 1, "b": 0, "w": 1}


class QueryError(ValueError):
    """A query that cannot be analysed: ``field`` names the part at fault (None: the
    whole line)."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field

    def to_json(self, query_id: str | None) -> dict[str, Any]:
        out: dict[str, Any] = {"error": str(self)}
        if self.field is not None:
            out["field"] = self.field
        if query_id is not None:
            out["id"] = query_id
        return out


@dataclass(frozen=True)
class Query:
    id: str
    size: int
    komi: float
    initial_stones: tuple[tuple[int, int], ...]  # (color, action)
    initial_player: int | None
    moves: tuple[tuple[int, int], ...]
    turns: tuple[int, ...]
    max_visits: int | None
    max_time: float | None
    include_ownership: bool
    include_moves_ownership: bool
    include_policy: bool
    include_pv_visits: bool
    report_every: float | None
    priority: int
    #: "BLACK", "WHITE" or "SIDETOMOVE": whose winrates and scores the results give
    perspective: str
    #: KataGo's wideRootNoise: the root's policy flattened to p ** (1 / (1 + 4 w))
    wide_root_noise: float = 0.0
    #: (player, actions, until depth): moves the player may not search in the first
    #: plies (avoidMoves), or the only ones it may (allowMoves); ``move_rules`` says
    #: them to the search
    avoid: tuple[tuple[int, frozenset[int], int], ...] = ()
    allow: tuple[tuple[int, frozenset[int], int], ...] = ()
    warnings: tuple[tuple[str, str], ...] = field(default=())  # (field, message)


def _want(obj: dict[str, Any], key: str, kinds: type | tuple[type, ...], *, default: Any = None,
          required: bool = False) -> Any:
    if key not in obj:
        if required:
            raise QueryError(f"{key} is required", key)
        return default
    value = obj[key]
    bad_bool = isinstance(value, bool) and bool not in (kinds if isinstance(kinds, tuple) else (kinds,))
    if not isinstance(value, kinds) or bad_bool:
        names = " or ".join(k.__name__ for k in (kinds if isinstance(kinds, tuple) else (kinds,)))
        raise QueryError(f"{key} must be a {names}, not {value!r}"[:300], key)
    return value


def _number(obj: dict[str, Any], key: str, *, low: float, high: float, integer: bool = False,
            default: Any = None) -> Any:
    value = _want(obj, key, int if integer else (int, float), default=default)
    if value is None:
        return None
    if not (isinstance(value, int) or math.isfinite(value)) or not low <= value <= high:
        raise QueryError(f"{key} must be in {low:g}..{high:g}, not {value!r}", key)
    return value


def _moves(game: GoGame, obj: dict[str, Any], key: str) -> tuple[tuple[int, int], ...]:
    raw = _want(obj, key, list, default=[])
    out = []
    for i, item in enumerate(raw):
        if not (isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item)):
            raise QueryError(f"{key}[{i}] must be [player, location], not {item!r}"[:300], key)
        player, where = item
        if player not in _COLORS:
            raise QueryError(f"{key}[{i}]: player must be B or W, not {player!r}", key)
        try:
            action = game.text_to_action(where)
        except ValueError as e:
            raise QueryError(f"{key}[{i}]: {e}", key) from None
        out.append((_COLORS[player], action))
    return tuple(out)


def _restrictions(game: GoGame, obj: dict[str, Any], key: str) -> tuple[tuple[int, frozenset[int], int], ...]:
    out = []
    for i, item in enumerate(_want(obj, key, list, default=[])):
        if not isinstance(item, dict):
            raise QueryError(f"{key}[{i}] must be an object with player, moves and untilDepth", key)
        player = item.get("player")
        if player not in _COLORS:
            raise QueryError(f"{key}[{i}].player must be B or W, not {player!r}", key)
        depth = item.get("untilDepth")
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise QueryError(f"{key}[{i}].untilDepth must be a positive integer, not {depth!r}", key)
        moves = item.get("moves")
        if not isinstance(moves, list) or not all(isinstance(m, str) for m in moves):
            raise QueryError(f"{key}[{i}].moves must be a list of locations", key)
        try:
            actions = frozenset(game.text_to_action(m) for m in moves)
        except ValueError as e:
            raise QueryError(f"{key}[{i}]: {e}", key) from None
        out.append((_COLORS[player], actions, depth))
    if key == "allowMoves" and len(out) > 1:
        raise QueryError("allowMoves takes one entry", key)
    return tuple(out)


def move_rules(query: Query, num_actions: int) -> tuple[MoveRule, ...]:
    """The search's rules for ``query``'s avoidMoves and allowMoves (an allowMoves
    entry forbids every move it does not list, pass included)."""
    def mask(actions: frozenset[int]) -> np.ndarray:
        out = np.zeros(num_actions, dtype=np.bool_)
        out[list(actions)] = True
        return out

    return (*(MoveRule(player, mask(actions), depth) for player, actions, depth in query.avoid),
            *(MoveRule(player, ~mask(actions), depth) for player, actions, depth in query.allow))


def parse_query(obj: Any, *, sizes: Sequence[int]) -> Query:
    """The analysis ``obj`` asks for, on a board of one of ``sizes`` (what the model
    plays). QueryError names the field at fault; warnings ride on the query."""
    if not isinstance(obj, dict):
        raise QueryError("a query must be a JSON object")
    query_id = obj.get("id")
    if not isinstance(query_id, str):
        raise QueryError("id is required and must be a string", "id")
    warnings: list[tuple[str, str]] = []
    width = _number(obj, "boardXSize", low=1, high=99, integer=True)
    height = _number(obj, "boardYSize", low=1, high=99, integer=True)
    if width is None or height is None:
        raise QueryError("boardXSize and boardYSize are required", "boardXSize" if width is None else "boardYSize")
    if width != height or width not in sizes:
        raise QueryError(f"the model plays {' and '.join(f'{s}x{s}' for s in sizes)}, not {width}x{height}",
                         "boardXSize")
    komi = _number(obj, "komi", low=-150, high=150, default=7.5)
    try:
        check_komi(float(komi))
    except ValueError as e:
        raise QueryError(str(e), "komi") from None
    rules = obj.get("rules")
    if rules is None:
        raise QueryError("rules is required (tromp-taylor, chinese, ...)", "rules")
    name = rules if isinstance(rules, str) else rules.get("scoringRule") if isinstance(rules, dict) else None
    if not isinstance(name, str):
        raise QueryError(f"rules must be a name or KataGo's JSON rules, not {rules!r}"[:300], "rules")
    if name.lower() not in {r.lower() for r in AREA_RULES}:
        warnings.append(("rules", f"rules {name!r} are not area scoring: tengen scores by area (Tromp-Taylor), "
                                  "with simple ko, and analyses under those"))
    game = GoGame(size=width, komi=float(komi))
    moves = _moves(game, obj, "moves")
    initial = _moves(game, obj, "initialStones")
    if any(action == game.pass_action for _, action in initial):
        raise QueryError("initialStones cannot pass", "initialStones")
    initial_player = obj.get("initialPlayer")
    if initial_player is not None and initial_player not in _COLORS:
        raise QueryError(f"initialPlayer must be B or W, not {initial_player!r}", "initialPlayer")
    turns_raw = _want(obj, "analyzeTurns", list, default=[len(moves)])
    if not turns_raw or not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t <= len(moves)
                                for t in turns_raw):
        raise QueryError(f"analyzeTurns must list turns in 0..{len(moves)}", "analyzeTurns")
    settings = _want(obj, "overrideSettings", dict, default={})
    for key in sorted(set(settings) - SETTINGS_HONOURED):
        warnings.append(("overrideSettings", f"{key} is not a setting of tengen's search: ignored"))
    perspective = settings.get("reportAnalysisWinratesAs", "BLACK")
    if perspective not in _PERSPECTIVES:
        raise QueryError(f"reportAnalysisWinratesAs must be one of {sorted(_PERSPECTIVES)}", "overrideSettings")
    max_time = _number(settings, "maxTime", low=0, high=86_400)
    max_visits = _number(obj, "maxVisits", low=1, high=2**63, integer=True,
                         default=_number(settings, "maxVisits", low=1, high=2**63, integer=True))
    if max_visits is not None and max_visits > MAX_VISITS:
        warnings.append(("maxVisits", f"maxVisits {max_visits} is more than tengen searches ({MAX_VISITS}): "
                                      f"searching {MAX_VISITS}"))
        max_visits = MAX_VISITS
    wide_root_noise = _number(settings, "wideRootNoise", low=0, high=1_000, default=0.0)
    return Query(
        id=query_id, size=width, komi=float(komi), initial_stones=initial,
        initial_player=None if initial_player is None else _COLORS[initial_player], moves=moves,
        turns=tuple(dict.fromkeys(turns_raw)), max_visits=max_visits, max_time=max_time,
        include_ownership=bool(_want(obj, "includeOwnership", bool, default=False)),
        include_moves_ownership=bool(_want(obj, "includeMovesOwnership", bool, default=False)),
        include_policy=bool(_want(obj, "includePolicy", bool, default=False)),
        include_pv_visits=bool(_want(obj, "includePVVisits", bool, default=False)),
        report_every=_number(obj, "reportDuringSearchEvery", low=0.001, high=3600),
        priority=_number(obj, "priority", low=-2**31, high=2**31, integer=True, default=0),
        perspective=perspective, wide_root_noise=float(wide_root_noise), avoid=_restrictions(game, obj, "avoidMoves"),
        allow=_restrictions(game, obj, "allowMoves"), warnings=tuple(warnings))


@dataclass(frozen=True)
class Position:
    turn: int
    state: np.ndarray
    history: list[np.ndarray]


def positions(query: Query, game: GoGame) -> list[Position]:
    """The positions of ``query.turns``: the initial stones, then the moves up to each
    turn. An illegal move is a QueryError naming it (field ``moves``)."""
    record = Record(game)
    if query.initial_stones:
        black = [a for c, a in query.initial_stones if c == 0]
        white = [a for c, a in query.initial_stones if c == 1]
        try:
            record.setup(black, white, to_play=query.initial_player)
        except ValueError as e:
            raise QueryError(f"initialStones: {e}", "initialStones") from None
    elif query.initial_player is not None:
        record.setup(to_play=query.initial_player)
    wanted = set(query.turns)
    found: dict[int, Position] = {}
    if 0 in wanted:
        found[0] = Position(0, record.state.copy(), [s.copy() for s in record.history()])
    for turn, (color, action) in enumerate(query.moves, start=1):
        try:
            record.play(color, action)
        except IllegalMove as e:
            raise QueryError(f"Illegal move {turn}: {'BW'[color]} {game.action_to_text(action)} ({e})",
                             "moves") from None
        if turn in wanted:
            found[turn] = Position(turn, record.state.copy(), [s.copy() for s in record.history()])
    return [found[t] for t in query.turns]


class Lead(NamedTuple):
    """A score estimate in points from the mover's view: its expected lead and, from a
    score head, the spread of the final score about it (None from an ownership count)."""

    points: float
    stdev: float | None = None


def _flip(query: Query, mover: int) -> bool:
    """Whether the mover's winrate and score are turned to the other side's."""
    return (query.perspective == "BLACK" and mover == 1) or (query.perspective == "WHITE" and mover == 0)


def result_json(query: Query, position: Position, game: GoGame, analysis: Analysis, *, during: bool,
                score_of: Callable[[int], Lead | None], root_score: Lead | None,
                ownership: np.ndarray | None, moves_ownership: Callable[[int], np.ndarray | None] | None,
                policy: np.ndarray | None) -> dict[str, Any]:
    """One result line. ``score_of(action)``: the mover's expected lead after the move
    (None: no estimate); ``root_score``: the mover's lead in the position; ``ownership``
    (Black's view, row-major from the top-left) and ``policy`` when asked for."""
    mover = game.to_play(position.state)
    flip = _flip(query, mover)

    def rate(w: float) -> float:
        return 1.0 - w if flip else w

    def scores(lead: Lead | None) -> dict[str, float]:
        if lead is None:
            return {}
        points = -lead.points if flip else lead.points
        out = {"scoreLead": points, "scoreMean": points, "scoreSelfplay": points}
        return out if lead.stdev is None else {**out, "scoreStdev": lead.stdev}

    infos = []
    for order, m in enumerate(analysis.moves):
        if m.visits <= 0 and order > 0:
            continue
        # the other side's lower bound is one minus the mover's upper one
        winrate, lcb = rate(m.winrate), (m.lcb if not flip else 1.0 - (2 * m.winrate - m.lcb))
        info: dict[str, Any] = {
            "move": game.action_to_text(m.action), "visits": int(m.visits), "winrate": winrate,
            "prior": float(m.prior), "lcb": lcb, "utility": 2 * winrate - 1, "utilityLcb": 2 * lcb - 1,
            "order": order, "pv": [game.action_to_text(a) for a in m.pv],
        }
        info.update(scores(score_of(m.action)))
        if query.include_pv_visits:
            info["pvVisits"] = list(m.pv_visits)
        if moves_ownership is not None:
            owned = moves_ownership(m.action)
            if owned is not None:
                info["ownership"] = [round(float(v), 6) for v in owned]
        infos.append(info)
    value = (analysis.value + 1) / 2
    root: dict[str, Any] = {"visits": int(analysis.visits), "winrate": rate(value), "utility": 2 * rate(value) - 1,
                            "currentPlayer": "BW"[mover]}
    root.update(scores(root_score))
    out: dict[str, Any] = {"id": query.id, "isDuringSearch": during, "turnNumber": position.turn,
                           "moveInfos": infos, "rootInfo": root}
    if ownership is not None:
        out["ownership"] = [round(float(v), 6) for v in ownership]
    if policy is not None:
        out["policy"] = [round(float(v), 8) if v >= 0 else -1 for v in policy]
    return out


def no_result_json(query_id: str, turn: int) -> dict[str, Any]:
    """What a query terminated before it ran answers."""
    return {"id": query_id, "isDuringSearch": False, "noResults": True, "turnNumber": turn}
