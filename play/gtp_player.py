"""Another Go program as a match player, over the Go Text Protocol (version 2).

``GtpProcess`` is one engine process (``gnugo --mode gtp --chinese-rules --level 1``,
``tengen gtp --checkpoint ...``): ``ask(command)`` sends one command and returns the
reply's text. Every reply has a deadline: an engine that does not answer in time is
killed and ``GtpEngineError`` names it, the command and the tail of its stderr, so a
hung engine is never a silent hang. A program that cannot start, exits at once or
closes its output raises the same error.

``GtpPlayer`` is ``engine.interfaces.Player`` for Go with one process per game slot, so
the games of a match run in parallel: ``choose`` writes ``genmove`` to every slot's
engine before it reads any answer. Two answers are no move: ``RESIGN``, and
``FORFEIT`` for an engine that failed inside a game (died, timed out, refused the
opponent's move, or answered a move illegal on the referee's board); the reason is in
``failures[slot]``. The slot's engine is started again for its next game, and a
failure to start is raised. ``begin_cleanup(slot)`` switches a slot to
``kgs-genmove_cleanup`` (KGS's phase in which dead stones are captured, not passed
over), and ``dead_stones``/``final_score`` ask for the engine's own judgement.
"""

from __future__ import annotations

import os
import selectors
import shlex
import subprocess
import tempfile
import time
from collections.abc import Sequence

import numpy as np

from tengen.engine.games.go import GoGame

__all__ = ["RESIGN", "FORFEIT", "GtpEngineError", "GtpRefused", "GtpProcess", "GtpPlayer"]

#: what ``GtpPlayer.choose`` answers for a resignation and for a failed engine
RESIGN = -1
FORFEIT = -2

_STDERR_TAIL = 2000  # characters of an engine's stderr quoted in an error


class GtpEngineError(RuntimeError):
    """An engine that failed: it did not start, died, closed its output or did not
    answer in time. The message names the engine."""


class GtpRefused(GtpEngineError):
    """An engine answered '?' (the engine itself is still usable)."""


class GtpProcess:
    """One GTP engine process. ``argv`` is a list or a shell-like command string."""

    def __init__(self, argv: Sequence[str] | str, *, name: str, timeout: float, cwd: str | None = None):
        self.argv = shlex.split(argv) if isinstance(argv, str) else list(argv)
        if not self.argv:
            raise GtpEngineError(f"{name}: an empty engine command")
        self.name = name
        self.timeout = timeout
        self._err = tempfile.TemporaryFile(mode="w+b")  # a file: a chatty stderr never blocks the engine
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._err, cwd=cwd)
        except OSError as e:
            self._err.close()
            raise GtpEngineError(f"{name}: cannot start {shlex.join(self.argv)}: {e.strerror or e}") from None
        assert self.proc.stdout is not None
        self._out = self.proc.stdout.fileno()
        os.set_blocking(self._out, False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._out, selectors.EVENT_READ)
        self._buffer = b""
        self.closed = False

    # -- one command ---------------------------------------------------------------------
    def ask(self, command: str, *, timeout: float | None = None) -> str:
        """Send ``command`` and return its reply's text (after '= '). GtpRefused on
        '?'; GtpEngineError when the engine is dead or silent past the deadline."""
        self.write(command)
        return self.read_reply(command, timeout=timeout)

    def write(self, command: str) -> None:
        if self.closed:
            raise GtpEngineError(f"{self.name} was closed")
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((command + "\n").encode("utf-8"))
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._dead(f"exited before {command!r} could be sent") from None
        self._sent_at = time.monotonic()

    def read_reply(self, command: str, *, timeout: float | None = None) -> str:
        """The reply to the last command written; the deadline counts from its writing,
        so replies awaited one after another from many engines overlap their waits."""
        deadline = self._sent_at + (self.timeout if timeout is None else timeout)
        while True:
            reply = self._take_reply()
            if reply is not None:
                break
            left = deadline - time.monotonic()
            if left <= 0 or not self._selector.select(left):
                if time.monotonic() < deadline:
                    continue
                if self.proc.poll() is not None:
                    raise self._dead(f"exited without answering {command!r}")
                self.kill()
                raise GtpEngineError(f"{self.name} ({shlex.join(self.argv)}) gave no answer to {command!r} in "
                                     f"{self.timeout if timeout is None else timeout:g} s (killed)"
                                     + self._stderr_note())
            try:
                chunk = os.read(self._out, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                raise self._dead(f"closed its output after {command!r}")
            self._buffer += chunk.replace(b"\r", b"")
        text = reply.decode("utf-8", "replace")
        if text.startswith("?"):
            raise GtpRefused(f"{self.name} refused {command!r}: {text[1:].strip()}")
        if not text.startswith("="):
            raise GtpEngineError(f"{self.name} answered {command!r} with {text!r}, not a GTP reply")
        return text[1:].strip()

    def _take_reply(self) -> bytes | None:
        """The first complete reply in the buffer (it ends with an empty line), or None."""
        buffer = self._buffer.lstrip(b"\n")  # empty lines before a reply belong to none
        end = buffer.find(b"\n\n")
        if end < 0:
            self._buffer = buffer
            return None
        self._buffer = buffer[end + 2:]
        return buffer[:end]

    # -- ending ---------------------------------------------------------------------------
    def _stderr_note(self) -> str:
        self._err.flush()
        self._err.seek(0, os.SEEK_END)
        size = self._err.tell()
        self._err.seek(max(0, size - _STDERR_TAIL))
        tail = self._err.read().decode("utf-8", "replace").strip()
        return f"; its stderr ends:\n{tail}" if tail else "; its stderr is empty"

    def _dead(self, what: str) -> GtpEngineError:
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.wait()
        self.closed = True
        return GtpEngineError(f"{self.name} ({shlex.join(self.argv)}) {what}: exit status {code}"
                              + self._stderr_note())

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.closed = True

    def close(self) -> None:
        """``quit``, then wait a little for the process, and kill it if it lingers."""
        if not self.closed and self.proc.poll() is None:
            try:
                self.ask("quit", timeout=min(self.timeout, 10.0))
            except GtpEngineError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.kill()
        self._selector.close()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        self._err.close()


class GtpPlayer:
    """A GTP engine playing Go games in ``slots`` slots at once, one process each."""

    def __init__(self, game: GoGame, command: Sequence[str] | str, *, slots: int, name: str,
                 timeout: float = 60.0, cwd: str | None = None):
        self.game = game
        self.command = command
        self.name = name
        self.timeout = timeout
        self.cwd = cwd
        self.processes: list[GtpProcess | None] = [None] * slots
        self.failures: dict[int, str] = {}  # slot -> why its engine left the game
        self._to_move = [0] * slots  # colour to move in each slot's game (0 black)
        self._own = [False] * slots  # the move just chosen is the engine's own, already on its board
        self._cleanup = [False] * slots

    def _start(self, slot: int) -> GtpProcess:
        process = GtpProcess(self.command, name=f"{self.name} (slot {slot})", timeout=self.timeout, cwd=self.cwd)
        try:
            version = process.ask("protocol_version")
            if version.strip() != "2":
                raise GtpEngineError(f"{process.name} speaks GTP version {version!r}, not 2")
            for needed in ("boardsize", "komi", "clear_board", "play", "genmove"):
                if process.ask(f"known_command {needed}").strip().lower() != "true":
                    raise GtpEngineError(f"{process.name} does not know the GTP command {needed}")
        except GtpEngineError:
            process.close()
            raise
        return process

    def new_game(self, slot: int, state: np.ndarray) -> None:
        """A fresh game in ``slot`` (from the empty board). Raises GtpEngineError when
        the engine cannot be (re)started or set up: that is no game, but no match."""
        game = self.game
        if game.move_number(state) or game.board(state).any():
            raise ValueError("a GTP player starts from the empty board")
        process = self.processes[slot]
        if process is None or process.closed:
            if process is not None:
                process.close()
            process = self.processes[slot] = self._start(slot)
        try:
            process.ask(f"boardsize {game.size}")
            process.ask(f"komi {game.komi:g}")
            process.ask("clear_board")
        except GtpEngineError as e:
            process.close()
            self.processes[slot] = None
            raise GtpEngineError(f"{self.name} could not set up a {game.size}x{game.size} game: {e}") from None
        self.failures.pop(slot, None)
        self._to_move[slot] = game.to_play(state)
        self._own[slot] = False
        self._cleanup[slot] = False

    def begin_cleanup(self, slot: int, state: np.ndarray) -> None:
        """From now on the slot's moves come from ``kgs-genmove_cleanup`` (or
        ``genmove`` for an engine without it); the engine's board is ``state`` already."""
        self._cleanup[slot] = True

    def forfeit_reason(self, slot: int) -> str:
        """Why the slot's engine left its game (what ``FORFEIT`` stands for)."""
        return self.failures.get(slot, f"{self.name} failed")

    def _fail(self, slot: int, why: str) -> None:
        self.failures[slot] = why
        process = self.processes[slot]
        if process is not None:
            process.close()
        self.processes[slot] = None

    def choose(self, slots: list[int], states: list[np.ndarray], rng: np.random.Generator) -> list[int]:
        game = self.game
        asked: list[tuple[int, str]] = []
        for slot, state in zip(slots, states, strict=True):
            process = self.processes[slot]
            if slot in self.failures or process is None:
                continue
            self._to_move[slot] = game.to_play(state)
            verb = "genmove"
            if self._cleanup[slot] and self._knows(slot, "kgs-genmove_cleanup"):
                verb = "kgs-genmove_cleanup"
            command = f"{verb} {'bw'[game.to_play(state)]}"
            try:
                process.write(command)
            except GtpEngineError as e:
                self._fail(slot, str(e))
                continue
            asked.append((slot, command))
        answers: dict[int, int] = {}
        for slot, command in asked:
            process = self.processes[slot]
            assert process is not None
            try:
                vertex = process.read_reply(command)
            except GtpEngineError as e:
                self._fail(slot, str(e))
                continue
            answers[slot] = self._action(slot, states[slots.index(slot)], vertex, command)
        moves = []
        for slot in slots:
            action = answers.get(slot, FORFEIT)
            self._own[slot] = action >= 0
            moves.append(action)
        return moves

    def _action(self, slot: int, state: np.ndarray, vertex: str, command: str) -> int:
        if vertex.lower() == "resign":
            return RESIGN
        try:
            action = self.game.text_to_action(vertex)
        except ValueError:
            self._fail(slot, f"{self.name} answered {command!r} with {vertex!r}, not a vertex")
            return FORFEIT
        if not self.game.is_legal(state, action):
            self._fail(slot, f"{self.name} played {vertex}, which is not legal on the referee's board")
            return FORFEIT
        return action

    def _knows(self, slot: int, command: str) -> bool:
        process = self.processes[slot]
        if process is None:
            return False
        try:
            return process.ask(f"known_command {command}").strip().lower() == "true"
        except GtpEngineError:
            return False

    def advance(self, slot: int, action: int) -> None:
        color = self._to_move[slot]
        self._to_move[slot] = 1 - color
        if self._own[slot]:
            self._own[slot] = False
            return
        process = self.processes[slot]
        if process is None or slot in self.failures:
            return
        command = f"play {'bw'[color]} {self.game.action_to_text(action)}"
        try:
            process.ask(command)
        except GtpEngineError as e:
            self._fail(slot, str(e))

    # -- the end of a game -------------------------------------------------------------------
    def dead_stones(self, slot: int) -> list[int] | None:
        """The stones the engine calls dead (actions), or None when it cannot tell."""
        process = self.processes[slot]
        if process is None or slot in self.failures:
            return None
        try:
            return [self.game.text_to_action(v) for v in process.ask("final_status_list dead").split()]
        except (GtpRefused, ValueError):
            return None
        except GtpEngineError as e:
            self._fail(slot, str(e))
            return None

    def final_score(self, slot: int) -> str | None:
        """The engine's own ``final_score`` ('B+3.5', 'W+0.5', '0'), or None."""
        process = self.processes[slot]
        if process is None or slot in self.failures:
            return None
        try:
            return process.ask("final_score").split()[0]
        except (GtpRefused, IndexError):
            return None
        except GtpEngineError as e:
            self._fail(slot, str(e))
            return None

    def close(self) -> None:
        for slot, process in enumerate(self.processes):
            if process is not None:
                process.close()
            self.processes[slot] = None
