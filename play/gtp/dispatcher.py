"""The GTP engine's front: ``GtpEngine`` reads a line (GTP 2's preprocessing, the
optional command id), finds its command in one table, formats the reply (``=`` or
``?``, the id echoed, the blank line that ends it), and in ``run`` streams an
analysis from a thread until the next input line. It answers the protocol's own
commands (``protocol_version``, ``name``, ``version``, ``known_command``,
``list_commands``, ``quit``); every other command is a handler's, one handler per
concern (board.py, clock.py, scoring.py, records.py, analysis.py), all sharing one
``Session``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import TextIO

import numpy as np

from tengen.engine.games.go import GoGame
from tengen.engine.mcts import SearchSettings
from tengen.play.gtp.analysis import AnalysisCommands
from tengen.play.gtp.board import BoardCommands
from tengen.play.gtp.clock import Clock, ClockCommands
from tengen.play.gtp.commands import ENGINE_NAME, PROTOCOL_VERSION, Command, GtpError, Stream, engine_version, expect
from tengen.play.gtp.records import RecordCommands
from tengen.play.gtp.scoring import SCORING, ScoringCommands
from tengen.play.gtp.session import Player, Record, Session
from tengen.play.ownership import Ownership, PlayoutOwnership
from tengen.play.score import Score

__all__ = ["GtpEngine", "decode_line", "preprocess", "run"]


def preprocess(line: str) -> str:
    """GTP 2 section 3.1: drop control characters except tab and newline, cut the
    '#' comment, turn tabs into spaces, strip the ends."""
    line = "".join(ch for ch in line if ch in "\t\n" or (ord(ch) >= 32 and ord(ch) != 127))
    line = line.split("#", 1)[0]
    return line.replace("\t", " ").strip()


#: how a session without a model searches for analysis and genmove_analyze (rollout MCTS)
ROLLOUT_SEARCH = SearchSettings(simulations=400)


class GtpEngine:
    """One GTP session: a game record, its rules, clocks and the command table.

    Keyword-only: ``size`` (5..19), ``komi``, ``superko``, ``seed`` (random moves),
    ``player`` (a model's search; None: random moves, rollout MCTS for analysis),
    ``ownership`` (a factory ``game -> Ownership``; default light playouts),
    ``scoring`` (one of SCORING), ``resign_threshold`` (a winrate, None: never
    resign) and ``resign_moves``, ``lag`` (seconds kept back per timed move),
    ``search`` (how analysis and genmove_analyze search without a model: rollout
    MCTS, its visit limit and constants, ``SearchSettings.for_rollouts``; a model's
    player brings its own), ``analysis_visits`` (the visit limit of analysis), ``history_length``,
    ``max_moves`` and ``features`` (the rules' and the model's: Go's feature planes), ``score``
    (a factory ``game -> Score`` of the model's score head, for kata-analyze; None: no
    scores), ``warn`` (where warnings go; default stderr).
    """

    def __init__(
        self,
        *,
        size: int = 19,
        komi: float = 7.5,
        superko: bool = False,
        seed: int | None = None,
        player: Player | None = None,
        ownership: Callable[[GoGame], Ownership] | None = None,
        scoring: str = "area",
        resign_threshold: float | None = 0.05,
        resign_moves: int = 3,
        lag: float = 0.5,
        search: SearchSettings = ROLLOUT_SEARCH,
        analysis_visits: int = 10_000,
        history_length: int = 8,
        max_moves: int | None = None,
        features: bool = False,
        score: Callable[[GoGame], Score] | None = None,
        warn: Callable[[str], None] | None = None,
    ):
        if scoring not in SCORING:
            raise ValueError(f"scoring must be one of {SCORING}, not {scoring!r}")
        if resign_moves < 1:
            raise ValueError("resign_moves must be at least 1")
        session = Session(
            superko=superko, seed=seed, player=player, ownership=ownership or (lambda game: PlayoutOwnership(game)),
            scoring=scoring, resign_threshold=resign_threshold, resign_moves=resign_moves, lag=lag,
            search=search, analysis_visits=analysis_visits, history_length=history_length,
            max_moves=max_moves, features=features, score=score,
            warn=warn or (lambda text: print(f"tengen gtp: {text}", file=sys.stderr, flush=True)),
        )
        game = session.make_game(size, komi)
        if player is not None and (why := player.why_not(game)):
            raise ValueError(why)
        session.set_game(game)
        session.check_komi(komi)
        self._session = session
        self._quit = False
        board, clock, scores = BoardCommands(session), ClockCommands(session.clock), ScoringCommands(session)
        records, analysis = RecordCommands(session), AnalysisCommands(session)
        # The table, in list_commands' order.
        self._commands: dict[str, Command] = {
            "protocol_version": self._protocol_version,
            "name": self._name,
            "version": self._version,
            "known_command": self._known_command,
            "list_commands": self._list_commands,
            "quit": self._quit_command,
            "boardsize": board.boardsize,
            "clear_board": board.clear_board,
            "komi": board.komi,
            "play": board.play,
            "genmove": board.genmove,
            "reg_genmove": board.reg_genmove,
            "kgs-genmove_cleanup": scores.kgs_genmove_cleanup,
            "undo": board.undo,
            "showboard": board.showboard,
            "final_score": scores.final_score,
            "final_status_list": scores.final_status_list,
            "time_settings": clock.time_settings,
            "kgs-time_settings": clock.kgs_time_settings,
            "time_left": clock.time_left,
            "fixed_handicap": records.fixed_handicap,
            "place_free_handicap": records.place_free_handicap,
            "set_free_handicap": records.set_free_handicap,
            "loadsgf": records.loadsgf,
            "printsgf": records.printsgf,
            "stop": analysis.stop,
            "rendb_dump": board.rendb_dump,
            "lz-analyze": analysis.lz_analyze,
            "kata-analyze": analysis.kata_analyze,
            "lz-genmove_analyze": analysis.lz_genmove_analyze,
            "kata-genmove_analyze": analysis.kata_genmove_analyze,
        }

    # -- public surface --------------------------------------------------------------
    @property
    def quit(self) -> bool:
        """True once ``quit`` was received (its reply has been returned)."""
        return self._quit

    @property
    def game(self) -> GoGame:
        return self._session.game

    @property
    def state(self) -> np.ndarray:
        """The current position."""
        return self._session.record.state

    @property
    def record(self) -> Record:
        """The game so far: its events and the state after each."""
        return self._session.record

    @property
    def clock(self) -> Clock:
        """Both players' clocks."""
        return self._session.clock

    @property
    def commands(self) -> list[str]:
        return list(self._commands)

    def handle(self, line: str) -> str | None:
        """The full reply to one input line (ending in a blank line), or None when the
        line is empty or only a comment. Never raises for bad input."""
        executed = self._execute(line)
        if executed is None:
            return None
        cmd_id, outcome = executed
        if isinstance(outcome, str):
            return outcome
        lines: list[str] = []
        try:
            outcome.produce(lines.append, None, False)
        except Exception as e:  # the '=' is out: say what went wrong in the reply
            lines.append(f"error {type(e).__name__}: {e}\n")
        return f"={cmd_id}\n{''.join(lines)}\n"

    def run(self, stdin: Iterable[bytes] | Iterable[str], stdout: TextIO) -> None:
        """Answer lines from ``stdin`` on ``stdout`` (flushed after each reply) until
        ``quit`` or the end of input; an analysis streams from a thread until the next
        input line arrives. Lines of bytes (``sys.stdin.buffer``) are decoded here: one
        that is not UTF-8 is answered ``? invalid UTF-8``."""
        lock = threading.Lock()

        def write(text: str) -> None:
            with lock:
                stdout.write(text)
                stdout.flush()

        background: tuple[threading.Thread, threading.Event] | None = None

        def finish_background() -> None:
            nonlocal background
            if background is not None:
                thread, stop = background
                stop.set()
                thread.join()
                write("\n")
                background = None

        for raw in stdin:
            finish_background()  # any line, even an empty one, ends a running analysis
            line = decode_line(raw)
            if line is None:  # one bad byte must not end the session (a strict locale's traceback did)
                assert isinstance(raw, bytes)
                cmd_id = preprocess(raw.decode("utf-8", "replace")).split(" ", 1)[0]
                write(_reply(False, cmd_id if cmd_id.isdigit() else "", "invalid UTF-8"))
                continue
            executed = self._execute(line)
            if executed is None:
                continue
            cmd_id, outcome = executed
            if isinstance(outcome, str):
                write(outcome)
            elif outcome.background:
                write(f"={cmd_id}\n")
                stop = threading.Event()
                thread = threading.Thread(target=self._produce_safely, args=(outcome, write, stop), daemon=True)
                background = (thread, stop)
                thread.start()
            else:
                write(f"={cmd_id}\n")
                self._produce_safely(outcome, write, None)
                write("\n")
            if self._quit:
                break
        finish_background()

    # -- dispatch ----------------------------------------------------------------------
    def _execute(self, line: str) -> tuple[str, str | Stream] | None:
        """None for a line to skip; else the command id and the whole reply, or the
        Stream that makes it."""
        text = preprocess(line)
        if not text:
            return None
        words = text.split()
        cmd_id = ""
        if words[0].isdigit():
            cmd_id = words.pop(0)
        if not words:
            return cmd_id, _reply(False, cmd_id, "unknown command")
        name, args = words[0], words[1:]
        command = self._commands.get(name)
        if command is None:
            return cmd_id, _reply(False, cmd_id, "unknown command")
        try:
            outcome = command(args)
        except GtpError as e:
            return cmd_id, _reply(False, cmd_id, str(e))
        except Exception as e:  # a controller must never lose the engine
            return cmd_id, _reply(False, cmd_id, f"internal error: {type(e).__name__}: {e}")
        return cmd_id, outcome if isinstance(outcome, Stream) else _reply(True, cmd_id, outcome)

    def _produce_safely(self, stream: Stream, write: Callable[[str], None], stop: threading.Event | None) -> None:
        try:
            stream.produce(write, stop, True)
        except Exception as e:  # the '=' is out: report on stderr, end the reply normally
            self._session.warn(f"analysis failed: {type(e).__name__}: {e}")

    # -- the protocol's own commands -----------------------------------------------------
    def _protocol_version(self, args: list[str]) -> str:
        return str(PROTOCOL_VERSION)

    def _name(self, args: list[str]) -> str:
        return ENGINE_NAME

    def _version(self, args: list[str]) -> str:
        return engine_version()

    def _known_command(self, args: list[str]) -> str:
        expect(args, 1)
        return "true" if args[0] in self._commands else "false"

    def _list_commands(self, args: list[str]) -> str:
        return "\n".join(self.commands)

    def _quit_command(self, args: list[str]) -> str:
        self._quit = True
        return ""


def decode_line(raw: bytes | str) -> str | None:
    """A line of input as text; None for bytes that are not UTF-8."""
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def run(engine: GtpEngine, stdin: Iterable[bytes] | Iterable[str], stdout: TextIO) -> None:
    """``engine.run(stdin, stdout)`` as a function."""
    engine.run(stdin, stdout)


def _reply(ok: bool, cmd_id: str, result: str) -> str:
    head = ("=" if ok else "?") + cmd_id
    if result and not result.startswith("\n"):
        head += " "
    return f"{head}{result}\n\n"
