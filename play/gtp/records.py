"""Game records and handicap in GTP: ``loadsgf FILE [N]`` replays a record up to
just before move N, ``printsgf [FILE]`` writes the game (``play.sgf``, with
sgfmill), and ``fixed_handicap``, ``place_free_handicap`` and ``set_free_handicap``
put black stones on an empty board (GNU Go's fixed points, ``handicap_points``).

Together because both set a game up from outside it, and a handicap is what a record
carries along (SGF's HA, the setup stones before the first move).
"""

from __future__ import annotations

import errno
import os
import stat

from tengen.engine.games.base import IllegalMove
from tengen.play.gtp.commands import ENGINE_NAME, GtpError, engine_version, one_number
from tengen.play.gtp.scoring import score
from tengen.play.gtp.session import Record, Session
from tengen.play.sgf import GoRecord, Move, Setup, SgfError, load_sgf, write_sgf

__all__ = ["RecordCommands", "handicap_points"]


def handicap_points(size: int, stones: int) -> list[int] | None:
    """GNU Go's fixed handicap points (GTP 2, section 4.1.1) as actions, top to
    bottom: on the 3-3 points below 13x13, the 4-4 points from 13x13; up to 9 stones
    on odd boards from 9x9, 4 on 7x7 and even boards; None when not available."""
    if size < 7 or stones < 2:
        return None
    if stones > (9 if size % 2 and size >= 9 else 4):
        return None
    edge = 2 if size < 13 else 3
    low, mid, high = edge, size // 2, size - 1 - edge  # rows/columns from the top-left
    corners = [(high, low), (low, high), (low, low), (high, high)]  # D4 Q16 D16 Q4 order
    chosen = corners[: min(stones, 4)]
    if stones >= 6:
        chosen += [(mid, low), (mid, high)]
    if stones >= 8:
        chosen += [(high, mid), (low, mid)]
    if stones % 2 and stones >= 5:
        chosen.append((mid, mid))
    return sorted(r * size + c for r, c in chosen)


def _free_handicap_points(size: int, stones: int) -> list[int]:
    """The fixed points while they last, then each next point as far as possible
    (Manhattan distance) from those placed, off the first two lines when it can."""
    fixed_max = 9 if size % 2 and size >= 9 else 4
    chosen = list(handicap_points(size, min(stones, fixed_max)) or [])
    while len(chosen) < stones:
        best, best_key = -1, None
        for a in range(size * size):
            if a in chosen:
                continue
            r, c = divmod(a, size)
            spread = min((abs(r - q // size) + abs(c - q % size) for q in chosen), default=size * 2)
            key = (min(r, size - 1 - r, c, size - 1 - c) >= 2, spread, -a)
            if best_key is None or key > best_key:
                best, best_key = a, key
        chosen.append(best)
    return sorted(chosen)


def _replay(record: Record, sgf: GoRecord, until: int | None) -> None:
    """``sgf``'s setup and moves onto an empty ``record``, up to just before move ``until``."""
    played = 0
    for event in sgf.events:
        if isinstance(event, Move):
            played += 1
            if until is not None and played >= until:
                break
            try:
                record.play(event.color, event.action)
            except IllegalMove as e:
                raise GtpError(f"cannot load file: move {played} is illegal ({e})") from None
        else:
            try:
                record.setup(event.black, event.white, event.empty,
                             to_play=sgf.to_play if not record.events else None)
            except ValueError as e:
                raise GtpError(f"cannot load file: {e}") from None
    if sgf.handicap and record.events and isinstance(record.events[0], Setup):
        record.handicap = sgf.handicap


def _write_record(path: str, text: str) -> None:
    """``text`` into ``path``: a new file or a regular one, replaced; never through a
    symbolic link (O_NOFOLLOW), never a device or FIFO (refused before anything is
    truncated), as GTP lets any controller name any path."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
    except OSError as e:
        why = "a symbolic link" if e.errno == errno.ELOOP else e.strerror
        raise GtpError(f"cannot write file: {why}") from None
    with os.fdopen(fd, "wb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise GtpError("cannot write file: not a regular file")
        try:
            os.ftruncate(fd, 0)
            f.write(text.encode("utf-8"))
            f.flush()  # a full disk shows here, not in the close after the reply
        except OSError as e:
            raise GtpError(f"cannot write file: {e.strerror}") from None


class RecordCommands:
    """GTP's record and handicap commands on a ``Session``."""

    def __init__(self, session: Session):
        self.session = session

    def loadsgf(self, args: list[str]) -> str:
        session = self.session
        if len(args) not in (1, 2):
            raise GtpError("syntax error")
        try:
            until = int(args[1]) if len(args) == 2 else None
        except ValueError:
            raise GtpError("syntax error") from None
        try:
            sgf = load_sgf(args[0])
        except SgfError as e:
            raise GtpError(f"cannot load file: {e}") from None
        game = session.make_game(sgf.size, sgf.komi)
        if session.player is not None and (why := session.player.why_not(game)):
            raise GtpError(f"cannot load file: {why}")
        session.new_game()  # the clocks start afresh from here, even when the record is refused
        record = Record(game)
        _replay(record, sgf, until)  # a refused record leaves the game as it was
        session.set_game(game, record)
        session.check_komi(sgf.komi)
        return ""

    def printsgf(self, args: list[str]) -> str:
        if len(args) > 1:
            raise GtpError("syntax error")
        session = self.session
        game, record = session.game, session.record
        result = None
        if game.is_terminal(record.state) and game.end_reason(record.state) == "two passes":
            points = score(session)
            result = "Draw" if points == "0" else points
        # Setup stones (a handicap) without a move after them do not say whose turn it
        # is; PL does (write_sgf writes it only then). Without it readers guess, and
        # differently (Sabaki gives white the move after HA, sgfmill's users black).
        to_play = game.to_play(record.state) if record.events else None
        text = write_sgf(GoRecord(
            size=game.size, komi=game.komi, events=tuple(record.events), to_play=to_play, handicap=record.handicap,
            result=result, rules="Tromp-Taylor" if session.scoring == "tromp-taylor" else "Chinese",
            application=(ENGINE_NAME, engine_version()),
        ))
        if args:
            _write_record(args[0], text)
            return ""
        # A reply may not hold an empty line (it would end the reply early).
        return "\n".join(line for line in text.splitlines() if line.strip())

    def fixed_handicap(self, args: list[str]) -> str:
        stones = self._handicap_count(args)
        points = handicap_points(self.session.game.size, stones)
        if points is None:
            raise GtpError("invalid handicap")
        return self._place_handicap(points)

    def place_free_handicap(self, args: list[str]) -> str:
        stones = self._handicap_count(args)
        size = self.session.game.size
        if stones >= size * size:
            raise GtpError("invalid handicap")
        return self._place_handicap(_free_handicap_points(size, stones))

    def set_free_handicap(self, args: list[str]) -> str:
        game = self.session.game
        if len(args) < 2:
            raise GtpError("bad vertex list")
        if not self.session.record.board_is_empty():
            raise GtpError("board not empty")
        try:
            points = [game.text_to_action(v) for v in args]
        except ValueError:
            raise GtpError("bad vertex list") from None
        if game.pass_action in points or len(set(points)) != len(points) or len(points) >= game.size * game.size:
            raise GtpError("bad vertex list")
        self._place_handicap(points)
        return ""

    def _handicap_count(self, args: list[str]) -> int:
        stones = one_number(args, int)
        if not self.session.record.board_is_empty():
            raise GtpError("board not empty")
        if stones < 2:
            raise GtpError("invalid handicap")
        return stones

    def _place_handicap(self, points: list[int]) -> str:
        record = self.session.record
        record.setup(black=points, to_play=1)
        record.handicap = len(points)
        return " ".join(self.session.game.action_to_text(a) for a in sorted(points))
