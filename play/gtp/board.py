"""The board and its moves in GTP: the board's size and komi (``boardsize``,
``komi``), a new game (``clear_board``), moves played (``play``) and chosen
(``genmove``, ``reg_genmove``, which does not play it), ``undo``, and the board
shown (``showboard``, and ``rendb_dump``: the groups, their stones and liberties, as
JSON).
"""

from __future__ import annotations

import math

from tengen.engine.games import go_kernels as K
from tengen.engine.games.base import IllegalMove
from tengen.engine.games.go import check_komi
from tengen.play.gtp.commands import GtpError, color, expect, one_number
from tengen.play.gtp.moves import generate
from tengen.play.gtp.session import Session

__all__ = ["BoardCommands", "MIN_SIZE", "MAX_SIZE"]

MIN_SIZE, MAX_SIZE = 5, K.MAX_SIZE


class BoardCommands:
    """GTP's board and move commands on a ``Session``."""

    def __init__(self, session: Session):
        self.session = session

    def boardsize(self, args: list[str]) -> str:
        session = self.session
        size = one_number(args, int)
        if not MIN_SIZE <= size <= MAX_SIZE:
            raise GtpError("unacceptable size")
        game = session.make_game(size, session.game.komi)
        if session.player is not None and (why := session.player.why_not(game)):
            raise GtpError(f"unacceptable size: {why}")
        session.set_game(game)
        return ""

    def clear_board(self, args: list[str]) -> str:
        self.session.record.clear()
        self.session.new_game()
        return ""

    def komi(self, args: list[str]) -> str:
        komi = one_number(args, float)
        if not math.isfinite(komi):
            raise GtpError("syntax error")
        try:
            check_komi(komi)  # area scoring counts whole points: GoGame keeps komi in half points
        except ValueError as e:
            raise GtpError(str(e)) from None
        self.session.set_komi(komi)
        self.session.check_komi(komi)
        return ""

    def play(self, args: list[str]) -> str:
        expect(args, 2)
        player = color(args[0])
        try:
            action = self.session.game.text_to_action(args[1])
        except ValueError:
            raise GtpError("syntax error") from None
        try:
            self.session.record.play(player, action)
        except IllegalMove:
            raise GtpError("illegal move") from None
        return ""

    def genmove(self, args: list[str]) -> str:
        expect(args, 1)
        return generate(self.session, color(args[0]))

    def reg_genmove(self, args: list[str]) -> str:
        expect(args, 1)
        return generate(self.session, color(args[0]), commit=False)

    def undo(self, args: list[str]) -> str:
        if not self.session.record.undo():
            raise GtpError("cannot undo")
        return ""

    def showboard(self, args: list[str]) -> str:
        return "\n" + self.session.game.render(self.session.record.state)

    def rendb_dump(self, args: list[str]) -> str:
        text = self.session.game.rens_to_json(self.session.record.state)
        # A reply may not hold an empty line (it would end the reply early).
        return "\n".join(line for line in text.splitlines() if line.strip())
