"""A GTP referee for the tests: real engine processes, GNU Go fetched from Debian,
whole games with a KGS-style cleanup phase and clocks kept by the referee.

GNU Go comes from PATH, else from Debian's ``gnugo`` package unpacked without root
into ``.cache/gnugo`` (``apt-get download`` and ``dpkg-deb -x``, as
tests/test_monitoring.py fetches Prometheus); a test skips only when that install
itself fails.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from debian import fetch_gnugo

__all__ = ["ROOT", "fetch_gnugo", "tengen_command", "GtpFailure", "Engine", "GameResult", "play_game"]

ROOT = Path(__file__).resolve().parent.parent


def tengen_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "tengen.cli", "gtp", *args]


class GtpFailure(Exception):
    """An engine answered '?'."""


class Engine:
    """One GTP engine process; ``send`` returns a reply's text (raises GtpFailure on
    '?'). Its stderr goes to a file, read by ``stderr()``."""

    def __init__(self, argv: list[str], name: str):
        self.name = name
        self._err = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     text=True, bufsize=1, cwd=ROOT)
        self.log: list[tuple[str, str]] = []

    def send(self, command: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise EOFError(f"{self.name} closed its output after {command!r}; stderr:\n{self.stderr()}")
            line = line.rstrip("\r\n")
            if line == "" and lines:
                break
            if line or lines:
                lines.append(line)
        reply = "\n".join(lines)
        self.log.append((command, reply))
        if reply.startswith("?"):
            raise GtpFailure(f"{self.name}: {command!r} -> {reply!r}")
        assert reply.startswith("="), reply
        return reply[1:].strip()

    def stderr(self) -> str:
        self._err.flush()
        self._err.seek(0)
        return self._err.read()

    def close(self) -> None:
        try:
            self.send("quit")
        except (EOFError, BrokenPipeError, OSError):
            pass
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class GameResult:
    moves: list[str]
    cleanup_moves: list[str]
    dead: dict[str, set[str]]  # engine name -> its dead stones after the game
    scores: dict[str, str]  # engine name -> final_score at the end
    resigned: str | None = None
    seconds_used: dict[str, float] = field(default_factory=dict)
    time_left: dict[str, float] = field(default_factory=dict)


def _dead(engine: Engine) -> set[str]:
    return set(engine.send("final_status_list dead").split())


def play_game(black: Engine, white: Engine, *, size: int = 9, komi: float = 7.5, max_moves: int = 300,
              main_time: float | None = None, cleanup: str = "on disagreement",
              watchers: tuple[Engine, ...] = (), require_end: bool = True) -> GameResult:
    """A whole game. After two passes each engine lists its dead stones; when they
    disagree (or with ``cleanup="always"``), a KGS-style cleanup phase follows
    (``kgs-genmove_cleanup`` until two passes), and the dead stones are asked again.
    ``main_time``: an absolute clock per player kept by the referee (``time_left``
    before each ``genmove``). ``watchers`` get every move played, and are asked too.
    ``require_end=False``: a game may stop at ``max_moves`` (and is then not scored)."""
    engines = (black, white)
    everyone = (black, white, *watchers)
    for e in everyone:
        e.send(f"boardsize {size}")
        e.send(f"komi {komi}")
        e.send("clear_board")
        if main_time is not None:
            e.send(f"time_settings {main_time:g} 0 0")
    used = {e.name: 0.0 for e in engines}

    def phase(command: str, limit: int) -> tuple[list[str], str | None]:
        moves: list[str] = []
        passes = 0
        while passes < 2 and len(moves) < limit:
            turn = len(moves) % 2
            mover, other = engines[turn], engines[1 - turn]
            color = "bw"[turn]
            if main_time is not None:
                # GTP's time is whole seconds (GNU Go refuses anything else): round down.
                mover.send(f"time_left {color} {max(0, int(main_time - used[mover.name]))} 0")
            start = time.perf_counter()
            vertex = mover.send(f"{command} {color}").upper()
            used[mover.name] += time.perf_counter() - start
            if vertex == "RESIGN":
                return moves, mover.name
            for e in (other, *watchers):
                e.send(f"play {color} {vertex}")
            moves.append(vertex)
            passes = passes + 1 if vertex == "PASS" else 0
        return moves, None

    moves, resigned = phase("genmove", max_moves)
    cleanup: list[str] = []
    if not require_end and len(moves) >= max_moves:
        return GameResult(moves=moves, cleanup_moves=[], dead={}, scores={}, seconds_used=used)
    if resigned is None:
        assert len(moves) < max_moves, f"no two passes in {max_moves} moves: {' '.join(moves)}"
        if cleanup == "always" or _dead(black) != _dead(white):
            cleanup, resigned = phase("kgs-genmove_cleanup", max_moves)
            assert resigned is None, "an engine resigned in the cleanup phase"
            assert len(cleanup) < max_moves, f"no two passes in the cleanup: {' '.join(cleanup)}"
    return GameResult(
        moves=moves,
        cleanup_moves=cleanup,
        dead={e.name: _dead(e) for e in everyone},
        scores={e.name: e.send("final_score") for e in everyone},
        resigned=resigned,
        seconds_used=used,
        time_left={name: (main_time - t if main_time is not None else float("inf")) for name, t in used.items()},
    )
