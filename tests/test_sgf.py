"""Go records in SGF (play/sgf.py): reading, writing, round trips, and the GTP
commands that use them (loadsgf, printsgf) on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from tengen.engine.games.go import GoGame
from tengen.play.gtp import GtpEngine
from tengen.play.sgf import GoRecord, Move, Setup, SgfError, load_sgf, read_sgf, write_sgf

GOLDEN_SGF = Path(__file__).parent / "golden" / "sgf"


def test_reads_setup_moves_and_passes_as_actions() -> None:
    record = load_sgf(GOLDEN_SGF / "handicap9.sgf")
    game = GoGame(size=9)
    assert (record.size, record.komi, record.handicap, record.to_play) == (9, 0.5, 2, 1)
    assert record.players == ("one", "two") and record.rules == "Chinese"
    [setup, *moves] = record.events
    assert isinstance(setup, Setup)
    assert sorted(game.action_to_text(a) for a in setup.black) == ["C3", "G7"]
    assert [("BW"[m.color], game.action_to_text(m.action)) for m in moves] == [
        ("W", "E5"), ("B", "D7"), ("W", "E7"), ("B", "D6"), ("W", "D5"), ("B", "C5"), ("W", "C4"),
        ("B", "pass"), ("W", "E6")]


def test_handicap_stones_without_pl_leave_white_to_move(tmp_path) -> None:
    # Files from other programs often give HA and AB only: white moves next after them.
    path = tmp_path / "handicap.sgf"
    path.write_text("(;GM[1]FF[4]SZ[9]KM[0.5]HA[2]AB[cg][gc])")
    assert load_sgf(path).to_play == 1 and read_sgf("(;SZ[9]AB[cg][gc])").to_play is None
    engine = GtpEngine(size=9)
    assert engine.handle(f"loadsgf {path}") == "=\n\n"
    assert "White to play" in engine.handle("showboard")


def test_write_then_read_is_the_same_record() -> None:
    record = GoRecord(size=13, komi=6.5, handicap=2,
                      events=(Setup(black=(3, 160)), Move(1, 84), Move(0, 169), Setup(white=(0,), empty=(84,)),
                              Move(1, 12)),
                      result="W+R", rules="Chinese", players=("b", "w"))
    again = read_sgf(write_sgf(record))
    assert again == record


@pytest.mark.parametrize(("text", "why"), [
    ("not sgf at all", "not an SGF file"),
    ("(;GM[2]SZ[9])", "is not Go"),
    ("(;SZ[25])", "outside 5..19"),
])
def test_bad_files_are_refused_with_a_reason(text, why) -> None:
    with pytest.raises(SgfError, match=why):
        read_sgf(text)


def test_printsgf_then_loadsgf_restores_the_game(tmp_path) -> None:
    engine = GtpEngine(size=9, komi=6.5, seed=4)
    engine.handle("fixed_handicap 2")
    for n in range(30):
        engine.handle(f"genmove {'wb'[n % 2]}")
    path = tmp_path / "game.sgf"
    assert engine.handle(f"printsgf {path}") == "=\n\n"
    shown = engine.handle("showboard")
    other = GtpEngine(size=19)
    assert other.handle(f"loadsgf {path}") == "=\n\n"
    assert other.handle("showboard") == shown
    assert other.game.komi == 6.5
    assert other.handle(f"loadsgf {path} 11") == "=\n\n"  # before move 11: handicap and 10 moves
    assert other.record.moves_played == 10
    for _ in range(20):
        assert engine.handle("undo") == "=\n\n"
    assert other.handle("showboard") == engine.handle("showboard")


def test_loadsgf_of_an_illegal_record_keeps_the_game(tmp_path) -> None:
    path = tmp_path / "bad.sgf"
    path.write_text("(;SZ[9];B[ee];W[ee])")
    engine = GtpEngine(size=9)
    engine.handle("play b C3")
    reply = engine.handle(f"loadsgf {path}")
    assert reply.startswith("? cannot load file: move 2 is illegal"), reply
    assert engine.game.size == 9 and engine.record.moves_played == 1
