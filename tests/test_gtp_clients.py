"""The clients that cannot run here (Sabaki's app, Lizzie, GoGui, KGS's kgsGtp,
gtp2ogs): golden transcripts of what each sends (tests/golden/gtp_client_*.txt,
checked reply for reply by test_gtp.py), and here their replies read the way each
client reads them (tests/gtp_clients.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from gtp_clients import lizzie_parse_info, sabaki_parse_analysis
from test_gtp import GOLDEN, Exchange, load_transcript

VERTEX = re.compile(r"[A-HJ-T](?:[1-9]|1[0-9])")


def exchanges(client: str) -> list[Exchange]:
    return load_transcript(GOLDEN / f"gtp_client_{client}.txt")[1]


def result(ex: Exchange) -> str:
    """The reply's text after '=' (and the id)."""
    assert ex.reply is not None and ex.reply.startswith("="), (ex.command, ex.reply)
    return re.sub(r"^=\d*\s?", "", ex.reply[:-2], count=1)


def by_command(client: str, prefix: str) -> list[Exchange]:
    found = [ex for ex in exchanges(client) if re.sub(r"^\d+ ", "", ex.command).startswith(prefix)]
    assert found, f"gtp_client_{client}.txt sends no {prefix}"
    return found


@pytest.mark.parametrize("path", sorted(GOLDEN.glob("gtp_client_*.txt")), ids=lambda p: p.stem)
def test_every_reply_starts_as_gtp_says(path: Path) -> None:
    # Sabaki's StreamController drops lines before one starting with '=' or '?';
    # Lizzie reads '=N' as the number of the command answered.
    for ex in load_transcript(path)[1]:
        assert ex.reply is not None and ex.reply[0] in "=?", ex.command
        number = ex.command.split()[0]
        if number.isdigit():
            assert ex.reply.split()[0][1:] == number, ex.command


def test_sabaki_reads_the_analysis_and_the_move() -> None:
    [analyze] = by_command("sabaki", "kata-analyze")
    lines = result(analyze).split("\n")
    assert lines and all(line.startswith("info ") for line in lines)
    variations, _ = sabaki_parse_analysis(lines[-1], size=9)
    assert variations and all(v["pv"] and v["pv"][0] == v["move"] for v in variations)
    [genmove] = by_command("sabaki", "kata-genmove_analyze")
    lines = result(genmove).split("\n")
    assert [line for line in lines if line.startswith("play ")] == [lines[-1]]
    assert sabaki_parse_analysis(lines[0], size=9)[0]


def test_lizzie_reads_the_analysis_the_version_and_the_handicap() -> None:
    [version] = by_command("lizzie", "version")
    major, minor, *_ = result(version).split(".")  # Lizzie: split("\\.") then parseInt of [1]
    assert major.isdigit() and minor.isdigit()
    [analyze] = by_command("lizzie", "lz-analyze")
    for line in result(analyze).split("\n"):
        moves = lizzie_parse_info(line)
        assert moves and all(m["playouts"] >= 1 and VERTEX.fullmatch(m["coordinate"]) or m["coordinate"] == "pass"
                             for m in moves)
    [genmove] = by_command("lizzie", "lz-genmove_analyze")
    *infos, play = result(genmove).split("\n")
    assert play.startswith("play ") and all(lizzie_parse_info(line) for line in infos)
    [handicap] = by_command("lizzie", "fixed_handicap")
    assert all(VERTEX.fullmatch(v) for v in result(handicap).split())


def test_gogui_reads_points_and_moves() -> None:
    for ex in by_command("gogui", "final_status_list"):
        assert all(VERTEX.fullmatch(v) for v in result(ex).split())  # GtpUtil.parsePointList
    for ex in by_command("gogui", "genmove"):
        assert VERTEX.fullmatch(result(ex).upper()) or result(ex).upper() in ("PASS", "RESIGN")


def test_kgs_cleanup_captures_before_passing() -> None:
    [dead] = by_command("kgs", "final_status_list dead")
    assert result(dead).split() == ["B5"]
    for ex in by_command("kgs", "kgs-genmove_cleanup"):
        assert result(ex) in ("C5", "B6", "A5", "B4")  # the dead stone's liberties, never a pass


def test_gtp2ogs_gets_every_command_it_needs_and_whole_handicaps() -> None:
    [listed] = by_command("gtp2ogs", "list_commands")
    available = set(result(listed).split("\n"))
    sent = {re.sub(r"^\d+ ", "", ex.command).split()[0] for ex in exchanges("gtp2ogs")}
    assert sent <= available | {"list_commands"}  # gtp2ogs skips what is not listed
    [handicap] = by_command("gtp2ogs", "place_free_handicap 3")
    stones = result(handicap).split()
    assert len(set(stones)) == 3 and all(VERTEX.fullmatch(v) for v in stones)  # else it resigns
    for ex in by_command("gtp2ogs", "genmove"):
        move = result(ex).lower()  # Bot.getMoves: letter, then the row number
        assert move in ("pass", "resign") or (move[0].isalpha() and move[1:].isdigit())
