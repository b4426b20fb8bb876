"""Connect Four from scratch on this machine's CPUs: how strong after N minutes, and
how fast, in the README's main job (the Ray run) and in ``--single-process``?

Trains with configs/connect4.yaml by running ``tengen train`` itself (``--mode
cluster``: the main job, local Ray and embedded Redis; ``--mode single``: the same
loop in one process; ``--mode both``: one after the other, each for ``--minutes``),
while sampling where the CPU goes by part (bench/cpu_by_part.py). Marks are taken
from the run directory afterwards, so that training is not paused for them: the
best model at every ``--eval-every`` minutes is the last one on ladder.json promoted
by then (its weights are in models/), with the games and learner steps of the last
status line before then (status.jsonl), saved as ``RUN_DIR/marks/0015.0min/``. Then,
so that grading takes none of training's CPU, every mark is graded with its search
(``--simulations``, 400 by default) as bench/grade_connect4.py does:

- its share of optimal moves (the fastest win, the draw, the slowest loss) and of
  moves that keep the outcome, on ~1,000 solver-labelled positions from 8 to 30
  stones (bench/data/connect4_positions.txt, made by bench/label_connect4.py);
- its score against pure MCTS with 400 and with 1000 random-rollout simulations,
  ``--eval-games`` (200) games each, colours alternated, draws counting half;

every figure with its standard error. The best model stays in ``RUN_DIR/<mode>/best``,
where ``tengen bestmove --checkpoint`` reads it.

    python bench/learn_connect4.py [--mode cluster|single|both] [--minutes 60] [--eval-every 15]
    python bench/learn_connect4.py --grade-only runs/learn_connect4/cluster  # grade saved marks again
    python bench/learn_connect4.py --grade-only runs/learn_connect4/cluster/best  # or one model

Prints, per mode, games and learner steps per minute and the CPU table; with ``--mode
both``, ``RATIO cluster_vs_single_games_per_min`` and ``RATIO
cluster_vs_single_steps_per_min`` (target 0.9). Ends with the last mark's ``RATIO
connect4_optimal_share``, ``RATIO connect4_outcome_share`` and ``RATIO
connect4_winrate_vs_mcts1000`` (targets 0.9, 0.97 and 0.9 for the main job: 60
minutes on 2 cores). Run it alone: other work on the machine takes the run's CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from cpu_by_part import CpuByPart, table
from grade_connect4 import Grades, SearchSettings, grade_model, ratio_lines, table_header, table_row
from label_connect4 import DEFAULT_PATH, read_positions

from tengen.cluster.keys import version_id
from tengen.cluster.run_dir import RunDir
from tengen.cluster.single_process import load_model
from tengen.engine.network import CompiledModel

MARKS = "marks"
ROOT = Path(__file__).resolve().parent.parent
TARGET_CLUSTER_VS_SINGLE = 0.9


def train(mode: str, args: argparse.Namespace) -> dict:
    """``tengen train`` in ``mode`` for ``--minutes`` into RUN_DIR/<mode>; its rates and CPU by part."""
    run_dir = Path(args.run_dir) / mode
    if run_dir.exists():
        shutil.rmtree(run_dir)
    command = [sys.executable, "-m", "tengen.cluster.cli", "train", args.config, "--run-dir", str(run_dir),
               "--minutes", str(args.minutes)] + (["--single-process"] if mode == "single" else [])
    print(f"{mode}: {' '.join(command[2:])}", flush=True)
    started = time.monotonic()
    with subprocess.Popen(command, cwd=ROOT) as run:
        cpu = CpuByPart(run.pid).start()
        code = run.wait()
    wall_s = time.monotonic() - started
    seconds = cpu.stop()
    if code != 0:
        raise SystemExit(f"{mode}: tengen train exited with {code}; see {run_dir / 'log.txt'}")
    last = json.loads(RunDir(run_dir).status.read_text())
    minutes = last["elapsed_s"] / 60
    rates = {"mode": mode, "run_dir": run_dir, "minutes": minutes, "games": last["games"],
             "steps": last["learner_step"], "games_per_min": last["games"] / minutes,
             "steps_per_min": last["learner_step"] / minutes, "promotions": last["promotions"]}
    print(f"{mode}: {rates['games']} games, {rates['steps']} learner steps, {rates['promotions']} promotions in "
          f"{minutes:.1f} min: {rates['games_per_min']:.0f} games/min, {rates['steps_per_min']:.0f} steps/min")
    for line in table(seconds, wall_s, os.cpu_count() or 1):
        print(f"  {line}")
    save_marks(run_dir, args.eval_every, args.minutes)
    return rates


def save_marks(run_dir: Path, every: float, minutes: float) -> list[Path]:
    """The best model at every ``every`` minutes of the run and at its end, from its
    ladder, models/ and status history, as ``marks/<minutes>min/`` directories."""
    files = RunDir(run_dir)
    statuses = [json.loads(line) for line in files.status_history.read_text().splitlines() if line.strip()]
    ladder = json.loads(files.ladder.read_text())
    started = statuses[0]["time"] - statuses[0]["elapsed_s"]
    marks, at = [], every
    times = []
    while at < minutes:
        times.append(at)
        at += every
    times.append(statuses[-1]["elapsed_s"] / 60)
    for at in times:
        until = started + at * 60
        best = [entry for entry in ladder if entry["time"] <= until][-1]
        before = [line for line in statuses if line["time"] <= until + 1e-6]
        status = before[-1] if before else {"games": 0, "learner_step": 0}
        mark = run_dir / MARKS / f"{at:06.1f}min"
        mark.mkdir(parents=True, exist_ok=True)
        shutil.copy(files.model(int(best["version"])), mark / "model.safetensors")
        shutil.copy(files.config, mark / "config.yaml")
        (mark / "mark.json").write_text(json.dumps({
            "trained_minutes": round(at, 2), "version": version_id(int(best["version"])),
            "games": status["games"], "step": status["learner_step"]}, indent=2))
        print(f"  {at:5.1f} min: games {status['games']} steps {status['learner_step']} best "
              f"{version_id(int(best['version']))} -> {mark}", flush=True)
        marks.append(mark)
    return marks


def models_in(checkpoint: Path, which: str) -> list[Path]:
    """A model directory itself, or a run directory's marks (all, or the last)."""
    if (checkpoint / "model.safetensors").exists():
        return [checkpoint]
    marks = sorted(path for path in (checkpoint / MARKS).glob("*min") if (path / "model.safetensors").exists())
    if not marks:
        raise SystemExit(f"{checkpoint}: neither a model directory nor a run directory with {MARKS}/")
    return marks if which == "all" else marks[-1:]


def grade(models: list[Path], args: argparse.Namespace) -> None:
    positions = read_positions(args.positions)
    print(f"grading {len(models)} model(s) on {len(positions)} positions and {args.eval_games} games "
          f"per opponent, {args.simulations} simulations", flush=True)
    rows: list[tuple[str, Grades]] = []
    for path in models:
        config, game, model = load_model(path)
        mcts = config.mcts
        print(f"{path}:", flush=True)
        settings = SearchSettings(simulations=args.simulations, c_puct=mcts.c_puct,
                                  fpu_reduction=mcts.fpu_reduction, leaves_per_round=mcts.leaves_per_round)
        grades = grade_model(game, CompiledModel(model), positions, settings, games=args.eval_games,
                             seed=args.seed, log=lambda line: print(line, flush=True))
        rows.append((path.name, grades))
    print(table_header())
    for name, grades in rows:
        print(table_row(name, grades))
    for line in ratio_lines(rows[-1][1]):
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="connect4", help="a packaged config's name or a file")
    parser.add_argument("--mode", choices=("cluster", "single", "both"), default="cluster",
                        help="the main job (Ray + embedded Redis), --single-process, or both one after the other")
    parser.add_argument("--minutes", type=float, default=60.0, help="training time per mode")
    parser.add_argument("--eval-every", type=float, default=15.0, help="minutes of training between marks")
    parser.add_argument("--eval-games", type=int, default=200, help="games against each MCTS opponent")
    parser.add_argument("--positions", default=str(DEFAULT_PATH), help="labelled positions (label_connect4.py)")
    # More than self-play's 128: a model is measured with the search it would play with.
    parser.add_argument("--simulations", type=int, default=400, help="the model's search when graded")
    parser.add_argument("--grade-marks", choices=("all", "last"), default="all", help="which marks to grade")
    parser.add_argument("--grade-only", metavar="CHECKPOINT_DIR",
                        help="grade saved models (a run directory's marks, or one model directory); no training")
    parser.add_argument("--no-grade", action="store_true", help="train and save marks only")
    parser.add_argument("--seed", type=int, default=0, help="the matches' seed")
    parser.add_argument("--run-dir", default="runs/learn_connect4", help="the runs go into <run-dir>/<mode>")
    args = parser.parse_args()

    if args.grade_only:
        grade(models_in(Path(args.grade_only), args.grade_marks), args)
        return
    modes = ["single", "cluster"] if args.mode == "both" else [args.mode]
    runs = {mode: train(mode, args) for mode in modes}
    if args.mode == "both":
        for key in ("games_per_min", "steps_per_min"):
            ratio = runs["cluster"][key] / max(runs["single"][key], 1e-9)
            print(f"RATIO cluster_vs_single_{key} {ratio:.3f} vs single target {TARGET_CLUSTER_VS_SINGLE}")
    if not args.no_grade:
        for mode in modes:
            grade(models_in(runs[mode]["run_dir"], args.grade_marks), args)


if __name__ == "__main__":
    main()
