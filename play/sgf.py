"""Go game records in SGF (FF[4]), read and written with sgfmill.

A record is the board size, komi and the main line as events: ``Setup`` (stones
put on or taken off the board, SGF's AB/AW/AE) and ``Move`` (a colour's move or
pass, with the node's comment, SGF's C, if any). Points are this project's actions (row-major from the top-left, pass is
N * N); sgfmill counts rows from the bottom, which only this module knows.
Variations other than the main line are ignored on reading.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from os import PathLike

from sgfmill import sgf

from tengen.engine.games.go import check_komi

__all__ = ["Setup", "Move", "GoRecord", "SgfError", "MAX_SGF_BYTES", "read_sgf", "load_sgf", "write_sgf"]

#: the largest SGF file read: a long game with comments is tens of kB, a game
#: collection a few MB; the limit keeps /dev/zero or a mistaken path from filling memory
MAX_SGF_BYTES = 4 * 2**20


class SgfError(ValueError):
    """A file that is not an SGF Go record this engine can replay."""


@dataclass(frozen=True)
class Setup:
    """Stones put on the board (black, white) and points cleared (empty), as actions."""

    black: tuple[int, ...] = ()
    white: tuple[int, ...] = ()
    empty: tuple[int, ...] = ()


@dataclass(frozen=True)
class Move:
    color: int  # 0 black, 1 white
    action: int  # N * N: pass
    comment: str | None = None  # the move node's C[]


@dataclass(frozen=True)
class GoRecord:
    """One game's main line. ``to_play``: SGF's PL in the root (None when absent)."""

    size: int
    komi: float
    events: tuple[Setup | Move, ...] = ()
    to_play: int | None = None
    handicap: int = 0
    result: str | None = None
    rules: str | None = None
    players: tuple[str | None, str | None] = (None, None)
    application: tuple[str, str] | None = None  # AP: the program's name and version
    date: str | None = None  # DT: when it was played, ``YYYY-MM-DD``

    @property
    def moves(self) -> list[Move]:
        return [e for e in self.events if isinstance(e, Move)]


def _action(size: int, point: tuple[int, int] | None) -> int:
    if point is None:
        return size * size
    row, col = point
    return (size - 1 - row) * size + col


def _point(size: int, action: int) -> tuple[int, int] | None:
    if action == size * size:
        return None
    row, col = divmod(int(action), size)
    return (size - 1 - row, col)


def read_sgf(data: bytes | str) -> GoRecord:
    """Parse one SGF Go game. Raises SgfError for anything else."""
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        game = sgf.Sgf_game.from_bytes(raw)
    except ValueError as e:
        raise SgfError(f"not an SGF file: {e}") from None
    root = game.get_root()
    if root.has_property("GM") and root.get("GM") != 1:
        raise SgfError(f"GM[{root.get('GM')}] is not Go")
    size = game.get_size()
    if not 5 <= size <= 19:
        raise SgfError(f"board size {size} is outside 5..19")
    try:
        komi = float(game.get_komi())
        check_komi(komi)
        handicap = game.get_handicap() or 0
    except ValueError as e:
        raise SgfError(str(e)) from None
    if not 0 <= handicap < size * size:
        raise SgfError(f"HA[{handicap}] is outside 0..{size * size - 1}")
    events: list[Setup | Move] = []
    for node in game.get_main_sequence():
        try:
            if node.has_setup_stones():
                black, white, empty = node.get_setup_stones()
                events.append(Setup(tuple(sorted(_action(size, p) for p in black)),
                                    tuple(sorted(_action(size, p) for p in white)),
                                    tuple(sorted(_action(size, p) for p in empty))))
            color, point = node.get_move()
        except ValueError as e:
            raise SgfError(f"bad node: {e}") from None
        if color is not None:
            events.append(Move(0 if color == "b" else 1, _action(size, point), _text(node, "C")))
    to_play = None
    if root.has_property("PL"):
        to_play = 0 if root.get("PL") == "b" else 1
    elif handicap and events and all(isinstance(e, Setup) and not e.white for e in events):
        # Handicap stones and no move or PL: white moves next, as Sabaki reads it (with
        # a move after them, its colour says whose turn it was).
        to_play = 1
    text = {key: _text(root, key) for key in ("RE", "RU", "PB", "PW", "DT")}
    return GoRecord(size=size, komi=komi, events=tuple(events), to_play=to_play, handicap=int(handicap),
                    result=text["RE"], rules=text["RU"], players=(text["PB"], text["PW"]), date=text["DT"])


def _text(node: sgf.Node, key: str) -> str | None:
    if not node.has_property(key):
        return None
    try:
        return str(node.get(key))
    except ValueError:
        return None


def load_sgf(path: str | PathLike) -> GoRecord:
    """The record in the regular file at ``path``, of at most MAX_SGF_BYTES (a device,
    a FIFO or a huge file is refused before it is read)."""
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer; fstat then refuses it
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise SgfError(f"cannot read {path}: {e.strerror}") from None
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SgfError(f"cannot read {path}: not a regular file")
        if info.st_size > MAX_SGF_BYTES:
            raise SgfError(f"cannot read {path}: {info.st_size} bytes, more than the {MAX_SGF_BYTES} an SGF file "
                           "may have here")
        try:
            data = f.read(MAX_SGF_BYTES + 1)  # a file that grew since fstat is cut off here
        except OSError as e:
            raise SgfError(f"cannot read {path}: {e.strerror}") from None
    if len(data) > MAX_SGF_BYTES:
        raise SgfError(f"cannot read {path}: more than the {MAX_SGF_BYTES} bytes an SGF file may have here")
    return read_sgf(data)


def write_sgf(record: GoRecord) -> str:
    """The record as SGF text (FF[4], UTF-8), leading setup in the root node."""
    size = record.size
    game = sgf.Sgf_game(size=size)
    root = game.get_root()
    root.set("KM", record.komi)
    if record.handicap:
        root.set("HA", record.handicap)
    for key, value in (("RU", record.rules), ("PB", record.players[0]), ("PW", record.players[1]),
                       ("RE", record.result), ("DT", record.date)):
        if value:
            root.set(key, value)
    if record.application:
        root.set("AP", record.application)
    at_root = True  # setup before the first move goes into the root node
    for event in record.events:
        if isinstance(event, Setup):
            target = root if at_root and not root.has_setup_stones() else game.extend_main_sequence()
            target.set_setup_stones([_point(size, a) for a in event.black], [_point(size, a) for a in event.white],
                                    [_point(size, a) for a in event.empty])
            continue
        at_root = False
        node = game.extend_main_sequence()
        node.set_move("bw"[event.color], _point(size, event.action))
        if event.comment:
            node.set("C", event.comment)
    if record.to_play is not None and not record.moves:
        root.set("PL", "bw"[record.to_play])
    return game.serialise().decode("utf-8")
