"""Finished games as files people and other programs read: SGF for Go, a plain line
for the other games.

A ``FinishedGame`` is what a file says about one game: its moves (this project's
actions), the two players' names (model version ids such as ``000042``: the caller
spells them, engine/ knows nothing of versions), who resigned, when it was played,
and per move what the search saw when it chose it (its root value from the mover's
view, the root's visit count, and whether it was a full search or a cheap one under
playout-cap randomisation), where the game's record kept that. ``from_record`` makes
one from a self-play ``GameRecord``; a gating game is made from its move list.

**Go** is written as SGF (FF[4], through play/sgf.py and sgfmill) with ``SZ``,
``KM``, ``RU`` (Tromp-Taylor area scoring and the ko rule), ``RE`` (``B+R`` / ``W+R``
for a resignation, else the area score: ``B+3.5``, ``W+0.5``, ``0`` for a draw,
replayed with the engine's rules), ``PB``/``PW``, ``DT`` (the UTC date) and ``AP``,
and on each move with a recorded search a comment ``C[value +0.532 (B), 412
visits]``, ending ``, cheap search`` where the move had only a cheap one. ``value``
is Q(root) for the colour in brackets, the player who made the move.

**Connect Four, tic-tac-toe and gomoku** are written as one line of space-separated
``key=value`` fields, in this order (``date``, ``values``, ``visits`` and ``full``
only when known)::

    format=1 game=connect4 first=000003 second=000003 date=2024-05-01 result=1-0 end=rules \
        moves=4,3,4,3,4,3,4 values=+0.120,-0.300,+0.410,-0.520,+0.800,-0.950,+1.000 \
        visits=48,52,60,9,71,80,93 full=1,1,1,0,1,1,1

(shown on three lines here; a file holds it on one).

- ``format``: this line format's version (1); a reader refuses others.
- ``game``: the game's name; ``first`` / ``second``: the players, who move first and second.
- ``result``: ``1-0`` (the first player won), ``0-1`` or ``1/2-1/2``; ``end``:
  ``rules`` (the board decided), ``resignation`` or ``forfeit`` (a match's engine
  that died or broke the protocol; SGF's ``B+F`` / ``W+F`` for Go).
- ``moves``: the moves as the game writes them (Connect Four columns 1-7 from the
  left, tic-tac-toe cells 1-9 row by row from the top left), comma-separated.
- ``values`` (signed, 3 decimals), ``visits`` and ``full`` (1 full search, 0 cheap):
  per move, aligned with ``moves``, as in the SGF comments.

A file of such lines holds one game a line; ``read_plain`` reads one back.
"""

from __future__ import annotations

import calendar
import re
import time
from dataclasses import dataclass

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.engine.selfplay import GameRecord
from tengen.play.sgf import GoRecord, Move, write_sgf

__all__ = [
    "PLAIN_FORMAT",
    "FinishedGame",
    "GameTextError",
    "file_suffix",
    "move_comment",
    "parse_move_comment",
    "read_plain",
    "result_text",
    "write_game",
    "write_plain",
    "write_go_sgf",
]

#: the plain line format's version (its ``format=`` field)
PLAIN_FORMAT = 1
_PLAIN_KEYS = ("format", "game", "first", "second", "date", "result", "end", "moves", "values", "visits", "full")
_REQUIRED_KEYS = frozenset({"format", "game", "first", "second", "result", "end", "moves"})
_RESULTS = {1.0: "1-0", -1.0: "0-1", 0.0: "1/2-1/2"}
_COMMENT = re.compile(
    r"^value (?P<value>[+-]\d+\.\d+) \((?P<color>[BW])\), (?P<visits>\d+) visits(?P<cheap>, cheap search)?$")


class GameTextError(ValueError):
    """A game that cannot be written (not finished, a bad name), or a line that is not
    a game in the plain format; the message says why."""


@dataclass(frozen=True)
class FinishedGame:
    """One finished game as its files tell it (see the module docstring)."""

    moves: tuple[int, ...]
    #: the first and the second player (Go: black and white), e.g. model version ids
    players: tuple[str | None, str | None] = (None, None)
    #: the player (0 or 1) who resigned, None when the board decided
    resigned_by: int | None = None
    #: the player (0 or 1) who lost by forfeit (a match's engine that died or broke
    #: the protocol), None when the board decided
    forfeit_by: int | None = None
    #: unix seconds (its date goes in the file)
    when: float | None = None
    #: per move, aligned with ``moves`` (all three or none): Q(root) for the mover,
    #: N(root), and whether the search was a full one
    search_value: tuple[float, ...] | None = None
    search_visits: tuple[int, ...] | None = None
    full_search: tuple[bool, ...] | None = None

    def __post_init__(self) -> None:
        search = (self.search_value, self.search_visits, self.full_search)
        if any(s is None for s in search) and not all(s is None for s in search):
            raise GameTextError("search_value, search_visits and full_search go together: all three or none")
        if self.search_value is not None and not (
                len(self.search_value) == len(self.search_visits or ()) == len(self.full_search or ())
                == len(self.moves)):
            raise GameTextError(f"the search arrays must have one entry per move ({len(self.moves)})")
        if self.resigned_by not in (None, 0, 1) or self.forfeit_by not in (None, 0, 1):
            raise GameTextError(f"resigned_by and forfeit_by must be 0, 1 or None, not "
                                f"{self.resigned_by!r}, {self.forfeit_by!r}")
        if self.resigned_by is not None and self.forfeit_by is not None:
            raise GameTextError("a game ends by resignation or by forfeit, not both")

    @property
    def lost_by(self) -> int | None:
        """The player who resigned or forfeited, None when the board decided."""
        return self.resigned_by if self.resigned_by is not None else self.forfeit_by

    @property
    def end(self) -> str:
        """``rules``, ``resignation`` or ``forfeit``."""
        return "resignation" if self.resigned_by is not None else "forfeit" if self.forfeit_by is not None else "rules"

    @property
    def has_search(self) -> bool:
        return self.search_value is not None

    @classmethod
    def from_record(cls, record: GameRecord, *, players: tuple[str | None, str | None],
                    when: float | None = None) -> FinishedGame:
        """A self-play record's game; ``players`` names both sides (the same model)."""
        resigned_by = None
        if record.resigned:
            resigned_by = 0 if record.outcome < 0 else 1
        search: dict = {}
        if record.search_value is not None and record.search_visits is not None and record.full_search is not None:
            search = {"search_value": tuple(float(v) for v in record.search_value),
                      "search_visits": tuple(int(v) for v in record.search_visits),
                      "full_search": tuple(bool(v) for v in record.full_search)}
        return cls(moves=tuple(int(m) for m in record.moves), players=players, resigned_by=resigned_by,
                   when=when, **search)


def file_suffix(game: Game) -> str:
    """``.sgf`` for Go, ``.txt`` for the plain line of the others."""
    return ".sgf" if isinstance(game, GoGame) else ".txt"


def write_game(game: Game, finished: FinishedGame) -> str:
    """The game's file text: SGF for Go, the plain line (with its newline) otherwise."""
    if isinstance(game, GoGame):
        return write_go_sgf(game, finished)
    return write_plain(game, finished) + "\n"


def _final_state(game: Game, finished: FinishedGame) -> np.ndarray:
    state = game.initial_state()
    for i, action in enumerate(finished.moves):
        try:
            game.play(state, int(action))
        except ValueError as e:  # IllegalMove, a finished game
            raise GameTextError(f"move {i + 1} ({action}): {e}") from None
    if finished.lost_by is None and not game.is_terminal(state):
        raise GameTextError(f"the game is not finished after its {len(finished.moves)} moves, and nobody resigned")
    return state


def result_text(game: Game, finished: FinishedGame) -> str:
    """The result as the game's file writes it: SGF's RE for Go (``B+R``, ``W+3.5``,
    ``0``), else ``1-0`` / ``0-1`` / ``1/2-1/2``. The moves are replayed, so the result
    is the rules', never a caller's claim."""
    state = _final_state(game, finished)
    if isinstance(game, GoGame):
        if finished.lost_by is not None:
            return f"{'WB'[finished.lost_by]}+{'R' if finished.resigned_by is not None else 'F'}"
        return game.score_text(state)
    if finished.lost_by is not None:
        return _RESULTS[-1.0 if finished.lost_by == 0 else 1.0]
    return _RESULTS[game.outcome(state)]


def utc_date(when: float | None) -> str | None:
    """SGF's DT and the plain line's date: the UTC day of unix seconds ``when``."""
    return None if when is None else time.strftime("%Y-%m-%d", time.gmtime(when))


def move_comment(value: float, visits: int, full: bool, *, color: int) -> str:
    """A Go move's SGF comment: ``value +0.532 (B), 412 visits[, cheap search]``."""
    return f"value {value:+.3f} ({'BW'[color]}), {int(visits)} visits" + ("" if full else ", cheap search")


def parse_move_comment(text: str) -> tuple[float, int, bool, int] | None:
    """``(value, visits, full, color)`` from a ``move_comment``; None for any other text."""
    found = _COMMENT.match(text.strip())
    if found is None:
        return None
    return (float(found["value"]), int(found["visits"]), found["cheap"] is None, "BW".index(found["color"]))


def write_go_sgf(game: GoGame, finished: FinishedGame) -> str:
    """The game as SGF (see the module docstring)."""
    from tengen import __version__

    result = result_text(game, finished)
    events = []
    state = game.initial_state()
    for i, action in enumerate(finished.moves):
        color = game.to_play(state)
        comment = None
        if finished.search_value is not None and finished.search_visits is not None and finished.full_search:
            comment = move_comment(finished.search_value[i], finished.search_visits[i], finished.full_search[i],
                                   color=color)
        events.append(Move(color, int(action), comment))
        game.play(state, int(action))
    ko = "positional superko" if game.superko else "simple ko"
    record = GoRecord(size=game.size, komi=game.komi, events=tuple(events), result=result,
                      rules=f"Tromp-Taylor (area scoring, {ko})", players=finished.players,
                      application=("tengen", __version__), date=utc_date(finished.when))
    return write_sgf(record)


def _name(name: str | None, which: str) -> str:
    text = "-" if name is None else name
    if not text or any(c.isspace() for c in text) or "=" in text:
        raise GameTextError(f"the {which} player's name {name!r} cannot go in a plain line (no spaces or '=')")
    return text


def write_plain(game: Game, finished: FinishedGame) -> str:
    """The game as one plain line, without a newline (see the module docstring)."""
    if isinstance(game, GoGame):
        raise GameTextError("Go games are written as SGF (write_go_sgf)")
    fields = {"format": str(PLAIN_FORMAT), "game": game.name, "first": _name(finished.players[0], "first"),
              "second": _name(finished.players[1], "second")}
    if finished.when is not None:
        fields["date"] = utc_date(finished.when) or ""
    fields["result"] = result_text(game, finished)
    fields["end"] = finished.end
    fields["moves"] = ",".join(game.action_to_text(a) for a in finished.moves)
    if finished.search_value is not None and finished.search_visits is not None and finished.full_search:
        fields["values"] = ",".join(f"{v:+.3f}" for v in finished.search_value)
        fields["visits"] = ",".join(str(int(v)) for v in finished.search_visits)
        fields["full"] = ",".join("1" if f else "0" for f in finished.full_search)
    return " ".join(f"{key}={value}" for key, value in fields.items())


def read_plain(line: str, game: Game) -> tuple[FinishedGame, str]:
    """``(game, result)`` from a plain line of ``game``; GameTextError says what is wrong.
    The line's result must be what its moves give (a forged or truncated line is refused)."""
    fields: dict[str, str] = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if not sep or key not in _PLAIN_KEYS:
            raise GameTextError(f"{token!r} is not a field of the plain game format")
        if key in fields:
            raise GameTextError(f"field {key!r} appears twice")
        fields[key] = value
    if fields.get("format") != str(PLAIN_FORMAT):
        raise GameTextError(f"plain game format {fields.get('format')!r} is not the one this reader knows "
                            f"({PLAIN_FORMAT})")
    missing = sorted(_REQUIRED_KEYS - set(fields))
    if missing:
        raise GameTextError(f"missing fields: {', '.join(missing)}")
    if fields["game"] != game.name:
        raise GameTextError(f"the line is a {fields['game']!r} game, not {game.name!r}")
    if fields["end"] not in ("rules", "resignation", "forfeit"):
        raise GameTextError(f"end must be 'rules', 'resignation' or 'forfeit', not {fields['end']!r}")
    try:
        moves = tuple(game.text_to_action(m) for m in fields["moves"].split(",")) if fields["moves"] else ()
    except ValueError as e:
        raise GameTextError(str(e)) from None
    loser = None
    if fields["end"] != "rules":
        if fields["result"] not in ("1-0", "0-1"):
            raise GameTextError(f"a {fields['end']}'s result must be 1-0 or 0-1, not {fields['result']!r}")
        loser = 1 if fields["result"] == "1-0" else 0
    search: dict = {}
    per_move = [k for k in ("values", "visits", "full") if k in fields]
    if per_move:
        if len(per_move) != 3:
            raise GameTextError("values, visits and full go together: all three or none")
        try:
            search = {"search_value": tuple(float(v) for v in fields["values"].split(",") if v),
                      "search_visits": tuple(int(v) for v in fields["visits"].split(",") if v),
                      "full_search": tuple(_flag(v) for v in fields["full"].split(",") if v)}
        except ValueError as e:
            raise GameTextError(f"bad per-move search field: {e}") from None
    when = None
    if "date" in fields:
        try:
            when = float(calendar.timegm(time.strptime(fields["date"], "%Y-%m-%d")) + 12 * 3600)  # noon UTC
        except ValueError:
            raise GameTextError(f"date must be YYYY-MM-DD, not {fields['date']!r}") from None
    players = tuple(None if fields[k] == "-" else fields[k] for k in ("first", "second"))
    finished = FinishedGame(moves=moves, players=(players[0], players[1]), when=when,
                            resigned_by=loser if fields["end"] == "resignation" else None,
                            forfeit_by=loser if fields["end"] == "forfeit" else None, **search)
    result = result_text(game, finished)
    if result != fields["result"]:
        raise GameTextError(f"the line says {fields['result']} but its moves give {result}")
    return finished, result


def _flag(text: str) -> bool:
    if text not in ("0", "1"):
        raise ValueError(f"full must be 0 or 1, not {text!r}")
    return text == "1"
