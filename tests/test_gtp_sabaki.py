"""Sabaki's GTP controller, ``@sabaki/gtp`` from npm, drives the real engine as
Sabaki does (tests/sabaki_driver.js): start-up, syncs with replay, extension,
undo and branch, genmove, kata-analyze aborted by protocol_version, and
kata-genmove_analyze. The package is installed by npm into ``.cache/node``; the
test skips only when that install fails."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import npm
import pytest
from gtp_clients import sabaki_parse_analysis
from gtp_referee import ROOT, tengen_command

from tengen.play.gtp import GtpEngine

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # npm packages fetched, then node drives the engine

PACKAGE = "@sabaki/gtp@3"  # tested with 3.0.0


@pytest.fixture(scope="module")
def node_modules() -> Path:
    return npm.installed(PACKAGE, "@sabaki/gtp")


def expected_board(history: list[str]) -> str:
    """The showboard of replaying a tracker history on a fresh engine (trimmed, as
    @sabaki/gtp trims every response)."""
    engine = GtpEngine(size=9, komi=0.5)
    for command in history:
        assert engine.handle(command) == "=\n\n", command
    return engine.handle("showboard")[2:-2].strip()


def test_sabaki_controller_drives_the_engine(node_modules: Path) -> None:
    argv = tengen_command("--seed", "5", "--sims", "200", "--analysis-sims", "100000")
    done = subprocess.run(["node", str(ROOT / "tests" / "sabaki_driver.js"), json.dumps(argv)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NODE_PATH": str(node_modules)})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["stderr"] == []
    startup = report["startup"]
    assert (startup["name"], startup["protocol"]) == ("tengen", "2")
    # What Sabaki looks for in list_commands to offer analysis and handicap.
    for command in ("kata-analyze", "kata-genmove_analyze", "set_free_handicap", "undo"):
        assert command in startup["commands"]

    syncs = {s["label"]: s for s in report["syncs"]}
    # The first sync replays everything, sent without waiting for each reply.
    assert syncs["replay"]["sent"] == ["komi 0.5", "boardsize 9", "clear_board", "set_free_handicap C3 G7",
                                       "play W E5", "play B D4", "play W F3"]
    genmove = report["genmove"]
    assert syncs["extend"]["sent"] == ["play W J9"]  # only what is new
    assert syncs["extend"]["history"][-2:] == [f"play B {genmove}", "play W J9"]
    assert syncs["undo"]["sent"] == ["undo", "undo"]  # J9 and the genmove
    assert syncs["branch"]["sent"] == ["undo", "play W D5", "play B E4"]
    for s in syncs.values():
        assert s["board"] == expected_board(s["history"]), s["label"]

    analysis = report["analysis"]
    assert analysis["error"] is False and analysis["abort"] == "2"
    infos = [line for line in analysis["lines"] if line.startswith("info ")]
    assert len(infos) >= 2 and analysis["lines"][0] == "="
    for line in infos:
        variations, _ = sabaki_parse_analysis(line, size=9)
        assert variations and all(v["visits"] > 0 and 0 <= v["winrate"] <= 100 for v in variations)

    lines = report["genmoveAnalyze"]["lines"]
    played = [line for line in lines if line.startswith("play ")]
    assert len(played) == 1
    assert report["genmoveAnalyze"]["history"][-1] == f"play W {played[0].removeprefix('play ')}"
    assert report["finalBoard"] == expected_board(report["genmoveAnalyze"]["history"])
    assert report["finalScore"][0] in "BW0"
