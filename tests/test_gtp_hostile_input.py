"""GTP as a careless or hostile controller drives it: files that are not records,
paths that are not files, numbers no game has, bytes that are not text. Each gets a
'?' reply that says why, and the engine goes on answering."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tengen.play.gtp import GtpEngine
from tengen.play.sgf import MAX_SGF_BYTES

ROOT = Path(__file__).resolve().parent.parent


def still_answers(engine: GtpEngine) -> None:
    assert engine.handle("name") == "= tengen\n\n"


def test_loadsgf_refuses_a_device_without_reading_it():
    engine = GtpEngine(size=9)
    assert engine.handle("loadsgf /dev/zero") == "? cannot load file: cannot read /dev/zero: not a regular file\n\n"
    still_answers(engine)


def test_loadsgf_refuses_a_fifo_without_waiting_for_a_writer(tmp_path):
    fifo = tmp_path / "pipe.sgf"
    os.mkfifo(fifo)
    engine = GtpEngine(size=9)
    assert engine.handle(f"loadsgf {fifo}").endswith("not a regular file\n\n")
    still_answers(engine)


def test_loadsgf_refuses_a_file_over_the_size_limit_and_says_the_limit(tmp_path):
    huge = tmp_path / "huge.sgf"
    huge.write_bytes(b"(;SZ[9]C[" + b"x" * MAX_SGF_BYTES + b"])")
    engine = GtpEngine(size=9)
    engine.handle("play b E5")
    reply = engine.handle(f"loadsgf {huge}")
    assert reply.startswith("? cannot load file:") and f"the {MAX_SGF_BYTES} an SGF file may have" in reply, reply
    assert engine.record.moves_played == 1  # the game as it was


@pytest.mark.parametrize(("root", "why"), [
    ("KM[1e308]", "komi 1e+308 is outside -1000..1000"),
    ("KM[nan]", "not a number"),
    ("KM[6.3]", "komi must be a multiple of 0.5"),
    ("HA[100000000000000000000]", "HA[100000000000000000000] is outside 0..80"),
])
def test_loadsgf_refuses_numbers_no_game_has(tmp_path, root, why):
    path = tmp_path / "odd.sgf"
    path.write_text(f"(;GM[1]FF[4]SZ[9]{root};B[ee])")
    engine = GtpEngine(size=9)
    reply = engine.handle(f"loadsgf {path}")
    assert reply.startswith("? cannot load file:") and why in reply, reply
    still_answers(engine)


def test_printsgf_replaces_a_regular_file_whole(tmp_path):
    path = tmp_path / "game.sgf"
    path.write_text("x" * 10_000)  # longer than the record: nothing of it may remain
    engine = GtpEngine(size=9)
    engine.handle("play b E5")
    assert engine.handle(f"printsgf {path}") == "=\n\n"
    text = path.read_text()
    assert text.startswith("(;") and text.rstrip().endswith(")") and "x" * 10 not in text


def test_printsgf_never_writes_through_a_symbolic_link(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me")
    link = tmp_path / "game.sgf"
    link.symlink_to(precious)
    engine = GtpEngine(size=9)
    assert engine.handle(f"printsgf {link}") == "? cannot write file: a symbolic link\n\n"
    assert precious.read_text() == "keep me"


def test_printsgf_refuses_a_device_or_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    engine = GtpEngine(size=9)
    assert engine.handle(f"printsgf {fifo}").startswith("? cannot write file:")  # no reader: refused, not a hang
    assert engine.handle("printsgf /dev/null") == "? cannot write file: not a regular file\n\n"
    still_answers(engine)


@pytest.mark.parametrize(("command", "reply"), [
    ("komi 1e308", "? komi 1e+308 is outside -1000..1000"),
    ("komi nan", "? syntax error"),
    ("komi 6.3", "? komi must be a multiple of 0.5, not 6.3"),
    ("time_settings 1e308 30 5", "? time 1e+308 s is outside 0..1e+07"),
    ("time_settings 600 30 100000000000000000000", "? count 100000000000000000000 is outside 0..1000000"),
    ("kgs-time_settings byoyomi 600 inf 5", "? time inf s is outside 0..1e+07"),
    ("time_left b nan 0", "? time nan s is outside 0..1e+07"),
    ("lz-analyze 1e308", "? interval 1e+306 s is outside 0..3600"),
    ("place_free_handicap 100000000000000000000", "? invalid handicap"),
])
def test_numbers_out_of_every_range_are_refused_by_name(command, reply):
    engine = GtpEngine(size=9)
    assert engine.handle(command) == reply + "\n\n"
    still_answers(engine)


def test_a_line_that_is_not_utf8_is_answered_and_the_engine_goes_on():
    # A strict locale (PYTHONIOENCODING as a UTF-8 locale's default) made one bad byte a traceback.
    done = subprocess.run([sys.executable, "-m", "tengen.cli", "gtp", "--game", "go9"],
                          input=b"1 name\n2 play b \xff\xfe\n3 play b E5\n4 showboard\nquit\n", capture_output=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "PYTHONIOENCODING": "utf-8:strict"})
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    replies = done.stdout.decode().split("\n\n")
    assert replies[:3] == ["=1 tengen", "?2 invalid UTF-8", "=3"]
    assert replies[3].startswith("=4") and "X" in replies[3]
