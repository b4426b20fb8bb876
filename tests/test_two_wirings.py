"""One training loop, two wirings: the single-process run and the Ray run of the same
seeded config leave the same kinds of artifacts in the same formats, and what reads
a run (``tengen status``, ``bestmove``, ``gtp``) reads both alike.

Two tiny seeded configs: tic-tac-toe, and Go 5x5 so that the GTP engine (a Go
protocol) plays the models too; gating ``none`` promotes every candidate, so both runs
of each have a ladder within a minute.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tengen.cluster.driver import ClusterRun
from tengen.learner.learner import CHECKPOINT_FILE
from tengen.learner.trainer import Trainer
from tengen.run import records
from tengen.run.config import parse_config
from tengen.run.run_dir import RunDir
from tengen.run.single_process import SingleProcessRun
from tengen.run_control import read_status

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]  # a Ray run and a single-process run per game

ROOT = Path(__file__).resolve().parent.parent
SHARED = {
    "network": {"blocks": 1, "filters": 8},
    "mcts": {"simulations": 8, "leaves_per_round": 4},
    "selfplay": {"games_in_flight": 16, "temperature_moves": 4},
    "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 20, "replay_window": 5000},
    "gating": {"rule": "none"},
    "cluster": {"workers": 1, "games_per_worker": 16, "worker_chunk_seconds": 1.0, "batch_timeout_ms": 2.0},
    "stop": {"promotions": 1, "minutes": 3},
    "seed": 7,
}
#: each game's config, and a position to ask ``bestmove`` about
GAMES = {
    "tictactoe": ({**SHARED, "game": {"name": "tictactoe"}}, "5 1"),
    "go5": ({**SHARED, "game": {"name": "go", "size": 5, "komi": 0.5, "history_length": 2}}, "C3"),
}
#: what every run directory holds, whichever wiring made it
ARTIFACTS = ["run.json", "config.yaml", "log.txt", "status.json", "status.jsonl", "ladder.json", "gating.jsonl",
             "best/model.safetensors", "best/config.yaml", "models/000000.safetensors", f"learner/{CHECKPOINT_FILE}"]


@pytest.fixture(scope="module", params=list(GAMES))
def game(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def runs(game, tmp_path_factory):
    base = tmp_path_factory.mktemp(f"wirings-{game}")
    config = parse_config(GAMES[game][0])
    single = SingleProcessRun(config, base / "single", log=lambda line: None).run()
    cluster = ClusterRun(config, base / "cluster", log=lambda line: None).run()
    return {"single": (base / "single", single), "cluster": (base / "cluster", cluster)}


def test_both_runs_promote_and_stop_the_same_way(runs):
    for name, (_, summary) in runs.items():
        assert summary["promotions"] == 1 and summary["error"] is None, (name, summary)
    assert runs["single"][1].keys() == runs["cluster"][1].keys()


def test_both_leave_the_same_files(game, runs):
    for name, (run_dir, _) in runs.items():
        missing = [path for path in ARTIFACTS if not (run_dir / path).exists()]
        assert not missing, (name, missing)
        promoted = records.read_ladder(RunDir(run_dir)).versions[-1]
        # models/ holds each promoted model exactly as the registry held it
        assert (run_dir / "models" / f"{promoted:06d}.safetensors").read_bytes() == (
            run_dir / "best" / "model.safetensors").read_bytes()
        # the sample of games: each incarnation's game 0 at least, as entry and record (SGF, or a plain line)
        kept = sorted((run_dir / "games").glob("*.game"))
        record = ".sgf" if game == "go5" else ".txt"
        assert kept and all(p.with_suffix(record).exists() for p in kept), name


def test_the_ladder_and_status_have_one_format(runs):
    files = [RunDir(runs[name][0]) for name in ("single", "cluster")]
    # run/records.py reads both wirings' records (and refuses anything but its format)
    ladders = [records.read_ladder(f) for f in files]
    assert ladders[0].versions[0] == ladders[1].versions[0] == 0
    assert ladders[0].entries[0]["result"] == ladders[1].entries[0]["result"] == {"initial": True}
    statuses = [records.read_status(f) for f in files]
    # both wirings give what the run page shows of them
    for status in statuses:
        assert {"workers", "inference_servers", "stream_length"} <= status.wiring.keys()
    assert statuses[0].wiring["mode"] == "single-process" and "mode" not in statuses[1].wiring
    for f, status in zip(files, statuses, strict=True):  # every line of the history is a status line
        lines = records.read_status_history(f)
        assert lines and lines[-1] == status.for_history()  # the history leaves out what only the newest shows
        # the last line, and only it, marks the run's end (the run page tells finished from silent by it)
        assert [line.final for line in lines] == [False] * (len(lines) - 1) + [True]


def test_the_learner_checkpoint_is_one_format(game, runs):
    from tengen.run.checkpoint import build_model

    for name, (run_dir, summary) in runs.items():
        trainer = Trainer(model=build_model(parse_config(GAMES[game][0])), optimizer="sgd", learning_rate=0.02)
        extra = trainer.restore_from_bytes((run_dir / "learner" / CHECKPOINT_FILE).read_bytes())
        assert trainer.step == summary["steps"] and int(extra["next_version"]) >= 2, name


def test_status_reads_both_alike(runs):
    reports = {name: read_status(run_dir) for name, (run_dir, _) in runs.items()}
    assert reports["single"].keys() == reports["cluster"].keys()
    for name, (run_dir, _) in runs.items():
        report = reports[name]
        assert not report["live"] and report["ladder"][-1]["version"] >= 1 and report["run_id"]
        shown = _tengen("status", "--run-dir", str(run_dir), "--json", stdin="")
        assert shown.returncode == 3, (name, shown.stderr[-2000:])  # 3: stopped cleanly
        assert json.loads(shown.stdout) == {**json.loads(json.dumps(report, default=str)), "state": "stopped"}, name


def _tengen(*args: str, stdin: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tengen.cli", *args], input=stdin, capture_output=True,
                          text=True, timeout=300, cwd=ROOT)


def test_bestmove_plays_both_models(game, runs):
    for name, (run_dir, _) in runs.items():
        done = _tengen("bestmove", "--checkpoint", str(run_dir / "best"), "--sims", "8", stdin=GAMES[game][1] + "\n")
        assert done.returncode == 0 and done.stdout.strip() not in ("", "error"), (name, done.stderr[-2000:])


def test_gtp_plays_both_go_models_and_refuses_both_others_alike(game, runs):
    for name, (run_dir, _) in runs.items():
        gtp = _tengen("gtp", "--checkpoint", str(run_dir / "best"), "--sims", "8",
                      stdin="boardsize 5\nclear_board\ngenmove b\nquit\n")
        if game == "go5":
            replies = [r for r in gtp.stdout.split("\n\n") if r.strip()]
            assert gtp.returncode == 0 and replies[-2].startswith("= "), (name, gtp.stdout, gtp.stderr[-2000:])
        else:  # GTP is Go's protocol
            assert gtp.returncode != 0 and "plays tictactoe, not go" in gtp.stderr, (name, gtp.stderr[-2000:])
