"""Analysis over the real console script: lz-analyze and kata-analyze stream from a
thread while the engine reads on, a new line ends the stream with its blank line
before the next reply, and every info line parses the way Sabaki and Lizzie parse
it (tests/gtp_clients.py holds those rules, read from the clients' source)."""

from __future__ import annotations

import queue
import subprocess
import threading
import time

import pytest
from gtp_clients import lizzie_parse_info, sabaki_parse_analysis
from gtp_referee import ROOT, tengen_command

from tengen.play.gtp import GtpEngine


class Console:
    """The console script with a line queue on its stdout (reads never block)."""

    def __init__(self, *args: str):
        self.proc = subprocess.Popen(tengen_command(*args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1, cwd=ROOT)
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def line(self, timeout: float = 60) -> str:
        got = self.lines.get(timeout=timeout)
        assert got is not None, "the engine closed its output"
        return got

    def reply(self, timeout: float = 60) -> list[str]:
        """Lines up to the blank line that ends a reply."""
        lines = []
        while (line := self.line(timeout)) != "":
            lines.append(line)
        return lines

    def close(self) -> str:
        try:
            self.send("quit")
        except BrokenPipeError:
            pass
        _, err = self.proc.communicate(timeout=60)
        return err


@pytest.fixture
def console():
    started: list[Console] = []

    def start(*args: str) -> Console:
        c = Console(*args)
        started.append(c)
        return c

    yield start
    for c in started:
        if c.proc.poll() is None:
            c.close()


def test_kata_analyze_streams_until_the_next_command(console) -> None:
    engine = console("--game", "go9", "--seed", "1", "--analysis-sims", "100000")
    engine.send("play b E5")
    assert engine.reply() == ["="]
    engine.send("7 kata-analyze w 10 ownership true")  # Sabaki sends the colour and the interval
    assert engine.line() == "=7"
    infos = [engine.line() for _ in range(3)]  # three intervals of 0.1 s, at least
    engine.send("8 name")
    rest = engine.reply()  # any lines written before the stop, then the blank line
    assert engine.reply() == ["=8 tengen"]  # the next reply only after the stream's end
    for line in infos + rest:
        assert line.startswith("info move ")
        variations, ownership = sabaki_parse_analysis(line, size=9)
        assert variations and all(v["move"] != "E5" for v in variations)
        orders = [v["order"] for v in variations]
        assert orders[0] == 0 and orders == sorted(set(orders))  # Sabaki skips a pass's entry
        assert all(0 <= v["winrate"] <= 100 and v["pv"][0] == v["move"] for v in variations)
        assert ownership is not None and len(ownership) == 81
        assert all(-1 <= x <= 1 for x in ownership)
    visits = [sum(v["visits"] for v in sabaki_parse_analysis(line, size=9)[0]) for line in infos]
    assert visits == sorted(visits) and visits[-1] > visits[0], "the search goes on between lines"
    assert engine.close() == ""  # nothing on stderr


def test_lz_analyze_as_lizzie_sends_it_and_stops_it(console) -> None:
    engine = console("--game", "go9", "--seed", "2", "--analysis-sims", "100000")
    # Lizzie numbers every command, sends only the interval, and ends pondering
    # with 'name'; an empty line also ends a stream (KataGo's rule).
    engine.send("1 lz-analyze 10")
    assert engine.line() == "=1"
    line = engine.line()
    for move in lizzie_parse_info(line):
        assert isinstance(move["winrate"], float) and 0 <= move["winrate"] <= 100
        assert move["playouts"] > 0 and move["variation"][0] == move["coordinate"]
    engine.send("")
    engine.reply()
    engine.send("2 lz-analyze 10 avoid b D4,E5 10")  # accepted, not applied
    assert engine.line() == "=2"
    engine.line()
    engine.send("3 name")
    engine.reply()
    assert engine.reply() == ["=3 tengen"]
    engine.send("4 lz-analyze 0")  # no interval: searches, prints nothing
    assert engine.line() == "=4"
    time.sleep(0.3)
    engine.send("5 protocol_version")  # how Sabaki stops an engine it waits for
    assert engine.reply() == []
    assert engine.reply() == ["=5 2"]


def test_genmove_analyze_streams_then_plays(console) -> None:
    engine = console("--game", "go9", "--seed", "3", "--sims", "2000")
    engine.send("kata-genmove_analyze b 5")
    assert engine.line() == "="
    lines = engine.reply(timeout=120)
    assert lines[-1].startswith("play ") and all(line.startswith("info move ") for line in lines[:-1])
    assert len(lines) >= 2
    played = lines[-1].removeprefix("play ")
    best = sabaki_parse_analysis(lines[-2], size=9)[0][0]["move"]
    assert played == best  # the final snapshot's best move is the move played
    engine.send("final_status_list alive")
    assert engine.reply() == [f"= {played}"]  # played on the board


def test_handle_answers_analysis_with_the_final_snapshot() -> None:
    engine = GtpEngine(size=9, seed=0, analysis_visits=64)
    reply = engine.handle("lz-analyze b 10 maxmoves 3")
    head, line, end = reply.split("\n", 2)
    assert head == "=" and end == "\n"
    moves = lizzie_parse_info(line)
    assert len(moves) == 3 and sum(m["playouts"] for m in moves) <= 64
    assert engine.handle("kata-analyze b 10 bogus 1").startswith("? syntax error")
    assert engine.handle("lz-analyze b 0") == "=\n\n"  # no interval, no lines
