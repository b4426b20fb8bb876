"""``tengen match`` as a user runs it: a tiny untrained 9x9 model against GNU Go 3.8
at level 1 (Debian's package, fetched by tests/debian.py), two tic-tac-toe models
against each other, and GTP engines that cannot start, hang, or die inside a game.
Every engine is a real process; the models are real (untrained) Keras networks."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from debian import fetch_gnugo
from gtp_referee import ROOT
from play_server import write_checkpoint
from sgfmill import sgf

from tengen.engine.games.mnk import tictactoe
from tengen.play.game_records import read_plain, utc_date
from tengen.play.gtp import GtpEngine
from tengen.play.match import PlayedGame, play_games
from tengen.play.players import RandomPlayer
from tengen.play.sgf import load_sgf

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # GNU Go fetched, matches of whole games

#: GTP answers without a move: the engine of the forfeit test dies on its first genmove
DYING_ENGINE = textwrap.dedent("""
    import sys
    for line in sys.stdin:
        command = line.split()[0] if line.split() else ""
        if command == "genmove":
            sys.exit(7)
        answer = {"protocol_version": "2", "known_command": "true", "name": "dies"}.get(command, "")
        print(f"= {answer}\\n", flush=True)
""")
#: reads every command and never answers
SILENT_ENGINE = "import sys\nfor line in sys.stdin:\n    pass\n"


def tengen_match(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tengen.cli", "match", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout)


def python_engine(tmp_path: Path, name: str, source: str) -> str:
    script = tmp_path / f"{name}.py"
    script.write_text(source)
    return shlex.join([sys.executable, str(script)])


def tiny_model(tmp: Path, game: dict, simulations: int, *, temperature_moves: int = 2) -> Path:
    """A fresh network's best/ directory, with the search and gating a match uses."""
    return write_checkpoint(tmp / "best", game, simulations=simulations, leaves_per_round=8,
                            gating={"games_in_flight": 8, "temperature_moves": temperature_moves})


@pytest.fixture(scope="module")
def gnugo() -> str:
    return shlex.join([str(fetch_gnugo()), "--mode", "gtp", "--chinese-rules", "--level", "1"])


def test_a_tiny_go_model_against_gnugo(tmp_path, gnugo) -> None:
    best = tiny_model(tmp_path, {"name": "go", "size": 9, "komi": 7.5}, simulations=8)
    out = tmp_path / "games"
    done = tengen_match(str(best), "--gtp-engine", gnugo, "--games", "2", "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary == json.loads((out / "summary.json").read_text())
    assert (summary["games"], summary["game"], summary["komi"]) == (2, "go9", 7.5)
    assert summary["wins"] + summary["draws"] + summary["losses"] == 2
    assert summary["elo_low"] <= summary["elo"] <= summary["elo_high"]
    first, second = summary["game_results"]
    assert (first["black"], first["white"]) == (str(best), "gnugo")  # colours alternate
    assert (second["black"], second["white"]) == ("gnugo", str(best))
    assert summary["forfeits"] == 0
    for played in summary["game_results"]:
        record = load_sgf(played["file"])  # play/sgf.py reads it with sgfmill
        raw = sgf.Sgf_game.from_bytes(Path(played["file"]).read_bytes())
        assert raw.get_size() == 9 and raw.get_komi() == 7.5
        assert record.result == played["result"] and record.rules == "Tromp-Taylor"
        assert record.date in {utc_date(time.time()), utc_date(time.time() - 3600)}  # DT: played today (UTC)
        # the model by the version id its checkpoint was published as, and where it is
        model = f"000000 ({best})"
        assert record.players == tuple(model if p == str(best) else p for p in (played["black"], played["white"]))
        assert len(record.moves) == played["moves"]
        assert [m.color for m in record.moves] == [i % 2 for i in range(len(record.moves))]
        if played["end"] == "resignation":
            continue
        # Replayed by tengen's own GTP engine (which plays on after two passes, as the
        # cleanup phase does), the final board has the score the match reported.
        engine = GtpEngine(size=9, komi=7.5, scoring="tromp-taylor")
        assert engine.handle(f"loadsgf {played['file']}").startswith("=")
        assert engine.handle("final_score") == f"= {played['result']}\n\n"
        # GNU Go's own count agrees: at once when it saw no dead stones, else after the
        # cleanup phase took them off (the summary's flag says the same)
        assert played["engine_scores"]["gnugo"] == played["result"] and not played["scores_disagree"], played
    # What people read: one line per game and the W-D-L with the interval.
    assert done.stderr.count("game ") == 2


def test_a_match_ends_at_the_game_its_caller_stops_it() -> None:
    # gating's use of the one match loop: stop at a verdict, drop the games in flight
    game = tictactoe()
    seen: list[int] = []

    def third_game(played: PlayedGame) -> bool:
        seen.append(played.index)
        return len(seen) == 3

    played = play_games(game, RandomPlayer(game, "a"), RandomPlayer(game, "b"), games=20, slots=4,
                        rng=np.random.default_rng(3), until=third_game)
    assert len(played) == 3 and sorted(seen) == [g.index for g in played]
    assert [g.first_is_black for g in played] == [g.index % 2 == 0 for g in played]
    for g in played:  # each a whole game, its outcome the board's
        state, _ = game.state_from_moves(list(g.moves))
        assert game.is_terminal(state) and game.outcome(state) == g.outcome
    # without a stop every game is played
    every = play_games(game, RandomPlayer(game, "a"), RandomPlayer(game, "b"), games=20, slots=4,
                       rng=np.random.default_rng(3))
    assert [g.index for g in every] == list(range(20))


def test_tictactoe_models_draw_each_other(tmp_path) -> None:
    # Only the first move is sampled (every first move draws); a second sampled move
    # can be a reply that loses by force.
    a, b = (tiny_model(tmp_path / side, {"name": "tictactoe"}, simulations=16, temperature_moves=1)
            for side in ("a", "b"))
    out = tmp_path / "games"
    # Untrained value heads mislead a short search (400 visits lost 7 games of 8 to
    # forks); with 3,000 visits, --sims over the configs' 16, 6 to 8 of 8 were drawn
    # in three runs of fresh networks. Random players draw about 1 game in 8.
    done = tengen_match(str(a), str(b), "--games", "8", "--sims", "3000", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert "W-D-L" in done.stdout and "Elo difference" in done.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["wins"] + summary["draws"] + summary["losses"] == 8
    # each game's line says n/N and the running score; the last one's is the match's
    progress = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert [line.split("]")[0] for line in progress] == [f"[{n}/8" for n in range(1, 9)]
    wdl = f"{summary['wins']}-{summary['draws']}-{summary['losses']}"
    assert progress[-1].endswith(f"| so far {a} {wdl} {b} (W-D-L)"), progress[-1]
    assert summary["draws"] >= 5, summary["game_results"]
    assert summary["simulations"] == {str(a): 3000, str(b): 3000}
    lines = (out / "games.txt").read_text().splitlines()
    assert len(lines) == 8
    game = tictactoe()
    for line in lines:  # play/game_records.py's plain line, which checks the result against the moves
        finished, result = read_plain(line, game)
        assert finished.end == "rules" and result in ("1-0", "0-1", "1/2-1/2")
        assert set(finished.players) == {f"000000_({a})", f"000000_({b})"}  # version ids, no spaces


def test_an_engine_that_cannot_start_is_a_clear_error(tmp_path, gnugo) -> None:
    done = tengen_match("gtp:no-such-engine --mode gtp", "--gtp-engine", gnugo, "--games", "1")
    assert done.returncode == 2
    assert "cannot start no-such-engine --mode gtp: No such file or directory" in done.stderr
    done = tengen_match(f"gtp:{sys.executable} -c 'raise SystemExit(3)'", "--gtp-engine", gnugo, "--games", "1")
    assert done.returncode == 2
    assert "exit status 3" in done.stderr and "Traceback" not in done.stderr


def test_a_hung_engine_times_out_with_a_clear_error(tmp_path, gnugo) -> None:
    silent = python_engine(tmp_path, "silent", SILENT_ENGINE)
    done = tengen_match(f"gtp:{silent}", "--gtp-engine", gnugo, "--games", "1", "--timeout", "2", timeout=120)
    assert done.returncode == 2
    assert f"silent.py (slot 0) ({silent}) gave no answer to 'protocol_version' in 2 s (killed)" in done.stderr


def test_an_engine_that_dies_in_a_game_loses_it_by_forfeit(tmp_path, gnugo) -> None:
    dying = python_engine(tmp_path, "dying", DYING_ENGINE)
    done = tengen_match(f"gtp:{dying}", f"gtp:{gnugo}", "--games", "2", "--json", timeout=300)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (summary["wins"], summary["draws"], summary["losses"], summary["forfeits"]) == (0, 0, 2, 2)
    for played in summary["game_results"]:
        assert played["winner"] == "gnugo" and played["end"] == "forfeit"
        assert "closed its output after 'genmove" in played["forfeit_reason"]
        assert "exit status 7" in played["forfeit_reason"]
    assert summary["game_results"][0]["result"] == "W+F" and summary["game_results"][1]["result"] == "B+F"
