"""A Go Text Protocol (version 2) engine over ``GoBoard``, with no I/O of its own.

``GtpEngine.handle(line)`` takes one line from a controller and returns the whole
reply (``=`` or ``?``, the command id echoed when given, the result, and the blank
line that ends every reply), or None for a line the protocol says to skip (empty or
comment only). ``run(stdin, stdout)`` is the loop a console script needs.

Rules are those of ``GoGame``: Tromp-Taylor area scoring with komi, simple ko or
positional superko, suicide illegal; so ``final_status_list`` calls every stone on
the board alive, consistent with ``final_score``.

Moves come from ``move_chooser(game, state, history) -> action`` when one is given
(the hook for model + MCTS); otherwise ``genmove`` plays a uniformly random legal
move that does not fill the mover's own single-point eye, and passes when none is
left.

After the game has ended (two passes, or the rules' move cap), ``play`` of a stone
answers ``? illegal move``, ``play`` of a pass is accepted and changes nothing, and
``genmove`` answers ``pass`` without playing; ``undo`` takes back the move that ended
the game, and ``clear_board`` starts a new one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from importlib import metadata
from typing import TextIO

import numpy as np

from engine.games import go_kernels as K
from engine.games.base import IllegalMove
from engine.games.go import GoBoard, GoGame

__all__ = ["GtpEngine", "MoveChooser", "ENGINE_NAME", "PROTOCOL_VERSION", "run"]

ENGINE_NAME = "tengen"
PROTOCOL_VERSION = 2
MIN_SIZE, MAX_SIZE = 5, K.MAX_SIZE

#: ``(game, state, history) -> action``: the state has the colour asked for to move;
#: history holds earlier states, oldest first (as ``GoBoard.history``).
MoveChooser = Callable[[GoGame, np.ndarray, list[np.ndarray]], int]

_COLORS = {"b": 0, "black": 0, "w": 1, "white": 1}
_STATUSES = ("alive", "dead", "seki")


class GtpError(Exception):
    """A command failed; the message is the text after '?'."""


def _version() -> str:
    try:
        return metadata.version("tengen")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def preprocess(line: str) -> str:
    """GTP 2 section 3.1: drop control characters except tab and newline, cut the
    '#' comment, turn tabs into spaces, strip the ends."""
    line = "".join(ch for ch in line if ch in "\t\n" or (ord(ch) >= 32 and ord(ch) != 127))
    line = line.split("#", 1)[0]
    return line.replace("\t", " ").strip()


class GtpEngine:
    """One GTP session: a board, its rules and the command table.

    Keyword-only: ``size`` (5..19), ``komi``, ``superko`` (positional superko instead
    of simple ko), ``seed`` (for the random ``genmove``), ``move_chooser`` (see the
    module docstring).
    """

    def __init__(
        self,
        *,
        size: int = 19,
        komi: float = 7.5,
        superko: bool = False,
        seed: int | None = None,
        move_chooser: MoveChooser | None = None,
    ):
        self._superko = superko
        self._rng = np.random.default_rng(seed)
        self._move_chooser = move_chooser
        self._quit = False
        self.board = GoBoard(GoGame(size=size, komi=komi, superko=superko))
        self._commands: dict[str, Callable[[list[str]], str]] = {
            "protocol_version": self._protocol_version,
            "name": self._name,
            "version": self._version,
            "known_command": self._known_command,
            "list_commands": self._list_commands,
            "quit": self._quit_command,
            "boardsize": self._boardsize,
            "clear_board": self._clear_board,
            "komi": self._komi,
            "play": self._play,
            "genmove": self._genmove,
            "undo": self._undo,
            "showboard": self._showboard,
            "final_score": self._final_score,
            "final_status_list": self._final_status_list,
            "rendb_dump": self._rendb_dump,
        }

    # -- public surface --------------------------------------------------------------
    @property
    def quit(self) -> bool:
        """True once ``quit`` was received (its reply has been returned)."""
        return self._quit

    @property
    def game(self) -> GoGame:
        return self.board.game

    @property
    def commands(self) -> list[str]:
        return list(self._commands)

    def handle(self, line: str) -> str | None:
        """The full reply to one input line (ending in a blank line), or None when the
        line is empty or only a comment. Never raises for bad input."""
        text = preprocess(line)
        if not text:
            return None
        words = text.split()
        cmd_id = ""
        if words[0].isdigit():
            cmd_id = words.pop(0)
        if not words:
            return _reply(False, cmd_id, "unknown command")
        name, args = words[0], words[1:]
        command = self._commands.get(name)
        if command is None:
            return _reply(False, cmd_id, "unknown command")
        try:
            return _reply(True, cmd_id, command(args))
        except GtpError as e:
            return _reply(False, cmd_id, str(e))
        except Exception as e:  # a controller must never lose the engine
            return _reply(False, cmd_id, f"internal error: {type(e).__name__}: {e}")

    def run(self, stdin: TextIO, stdout: TextIO) -> None:
        """Answer lines from ``stdin`` on ``stdout`` (flushed after each reply) until
        ``quit`` or the end of input."""
        for line in stdin:
            reply = self.handle(line)
            if reply is None:
                continue
            stdout.write(reply)
            stdout.flush()
            if self._quit:
                break

    # -- protocol and administration -------------------------------------------------
    def _protocol_version(self, args: list[str]) -> str:
        return str(PROTOCOL_VERSION)

    def _name(self, args: list[str]) -> str:
        return ENGINE_NAME

    def _version(self, args: list[str]) -> str:
        return _version()

    def _known_command(self, args: list[str]) -> str:
        _expect(args, 1)
        return "true" if args[0] in self._commands else "false"

    def _list_commands(self, args: list[str]) -> str:
        return "\n".join(self._commands)

    def _quit_command(self, args: list[str]) -> str:
        self._quit = True
        return ""

    # -- setup -------------------------------------------------------------------------
    def _boardsize(self, args: list[str]) -> str:
        _expect(args, 1)
        try:
            size = int(args[0])
        except ValueError:
            raise GtpError("syntax error") from None
        if not MIN_SIZE <= size <= MAX_SIZE:
            raise GtpError("unacceptable size")
        self.board = GoBoard(GoGame(size=size, komi=self.game.komi, superko=self._superko))
        return ""

    def _clear_board(self, args: list[str]) -> str:
        self.board.clear()
        return ""

    def _komi(self, args: list[str]) -> str:
        _expect(args, 1)
        try:
            komi = float(args[0])
        except ValueError:
            raise GtpError("syntax error") from None
        if not math.isfinite(komi):
            raise GtpError("syntax error")
        if komi * 2 != int(komi * 2):
            # Area scoring counts whole points; GoGame keeps komi in half points.
            raise GtpError("komi must be a multiple of 0.5")
        # Komi lives in the rules object, not in the states: same positions, new komi.
        self.board.game = GoGame(size=self.game.size, komi=komi, superko=self._superko)
        return ""

    # -- moves -------------------------------------------------------------------------
    def _play(self, args: list[str]) -> str:
        _expect(args, 2)
        color = _color(args[0])
        try:
            action = self.game.text_to_action(args[1])
        except ValueError:
            raise GtpError("syntax error") from None
        if self.game.is_terminal(self.board.state):
            if action == self.game.pass_action:
                return ""
            raise GtpError("illegal move")
        try:
            self.board.play(action, color)
        except IllegalMove:
            raise GtpError("illegal move") from None
        return ""

    def _genmove(self, args: list[str]) -> str:
        _expect(args, 1)
        color = _color(args[0])
        state = self.board.state
        if self.game.is_terminal(state):
            return "pass"
        probe = state.copy()
        if color != self.game.to_play(probe):
            probe[K.TO_PLAY] = color
            probe[K.KO] = K.NO_POINT  # as GoBoard.play does for a move out of turn
        if self._move_chooser is not None:
            action = int(self._move_chooser(self.game, probe, self.board.history()))
        else:
            action = self._random_move(probe, color)
        try:
            self.board.play(action, color)
        except IllegalMove as e:
            raise GtpError(f"move chooser returned an illegal move: {e}") from None
        return self.game.action_to_text(action)

    def _random_move(self, state: np.ndarray, color: int) -> int:
        """A uniform legal move that does not fill ``color``'s own eye, else pass."""
        legal = self.game.legal_mask(state)
        legal[self.game.pass_action] = False
        candidates = [int(a) for a in np.flatnonzero(legal) if not self.game.is_own_eye(state, int(a), color)]
        if not candidates:
            return self.game.pass_action
        return candidates[int(self._rng.integers(len(candidates)))]

    def _undo(self, args: list[str]) -> str:
        if not self.board.undo():
            raise GtpError("cannot undo")
        return ""

    # -- queries -----------------------------------------------------------------------
    def _showboard(self, args: list[str]) -> str:
        return "\n" + str(self.board)

    def _final_score(self, args: list[str]) -> str:
        return self.game.score_text(self.board.state)

    def _final_status_list(self, args: list[str]) -> str:
        _expect(args, 1)
        status = args[0].lower()
        if status not in _STATUSES:
            raise GtpError("syntax error")
        if status != "alive":
            return ""  # Tromp-Taylor: no stone is dead and none is in seki
        # One group per line, as GNU Go answers.
        groups = self.game.groups(self.board.state)
        return "\n".join(" ".join(self.game.action_to_text(a) for a in g.stones) for g in groups)

    def _rendb_dump(self, args: list[str]) -> str:
        text = self.game.rens_to_json(self.board.state)
        # A reply may not hold an empty line (it would end the reply early).
        return "\n".join(line for line in text.splitlines() if line.strip())


def run(engine: GtpEngine, stdin: TextIO, stdout: TextIO) -> None:
    """``engine.run(stdin, stdout)`` as a function."""
    engine.run(stdin, stdout)


def _reply(ok: bool, cmd_id: str, result: str) -> str:
    head = ("=" if ok else "?") + cmd_id
    if result and not result.startswith("\n"):
        head += " "
    return f"{head}{result}\n\n"


def _expect(args: list[str], count: int) -> None:
    if len(args) != count:
        raise GtpError("syntax error")


def _color(word: str) -> int:
    color = _COLORS.get(word.lower())
    if color is None:
        raise GtpError("syntax error")
    return color
