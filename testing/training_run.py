"""One training run of a benchmark: ``tengen train`` itself, in either wiring, with
where its CPU goes (cpu_by_part.py) and, afterwards, its marks: the best model at
every N minutes, taken from the run directory (ladder.json, models/, status.jsonl)
so that training is never paused for them. bench/learn_connect4.py and
bench/learn_go9.py train through it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from tengen.run.records import read_ladder, read_status, read_status_history
from tengen.run.run_dir import CONFIG_FILE, MODEL_FILE, RunDir
from tengen.testing.cpu_by_part import CpuByPart, table

__all__ = ["MARKS", "TARGET_CLUSTER_VS_SINGLE", "train", "mark_times", "save_marks", "marks_in",
           "ratio_lines_cluster_vs_single"]

MARKS = "marks"
ROOT = Path(__file__).resolve().parent.parent
#: issue 12: the main job plays and trains at least this share of --single-process's rate
TARGET_CLUSTER_VS_SINGLE = 0.9


def train(mode: str, *, config: str, run_dir: Path, minutes: float, every: float,
          settings: Sequence[str] = ()) -> dict:
    """``tengen train config`` in ``mode`` (cluster: the README's main job; single:
    ``--single-process``) for ``minutes`` into ``run_dir``, with marks every ``every``
    minutes, each of ``settings`` (``KEY=VALUE``) given as ``--set``; its rates, and
    its CPU by part printed."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    command = [sys.executable, "-m", "tengen.cli", "train", config, "--run-dir", str(run_dir),
               "--minutes", str(minutes)] + (["--single-process"] if mode == "single" else [])
    command += [arg for setting in settings for arg in ("--set", setting)]
    print(f"{mode}: {' '.join(command[2:])}", flush=True)
    started = time.monotonic()
    with subprocess.Popen(command, cwd=ROOT) as run:
        cpu = CpuByPart(run.pid).start()
        code = run.wait()
    wall_s = time.monotonic() - started
    seconds = cpu.stop()
    if code != 0:
        raise SystemExit(f"{mode}: tengen train exited with {code}; see {RunDir(run_dir).log}")
    last = read_status(RunDir(run_dir))
    minutes = last.elapsed_s / 60
    rates = {"mode": mode, "run_dir": run_dir, "minutes": minutes, "games": last.games,
             "steps": last.learner_step, "games_per_min": last.games / minutes,
             "steps_per_min": last.learner_step / minutes, "promotions": last.promotions}
    print(f"{mode}: {rates['games']} games, {rates['steps']} learner steps, {rates['promotions']} promotions in "
          f"{minutes:.1f} min: {rates['games_per_min']:.0f} games/min, {rates['steps_per_min']:.0f} steps/min")
    for line in table(seconds, wall_s, os.cpu_count() or 1):
        print(f"  {line}")
    save_marks(run_dir, every, minutes)
    return rates


def mark_times(every: float, minutes: float, end: float) -> list[tuple[float, float]]:
    """The marks of a run of ``minutes`` that ended at ``end`` minutes, every ``every``
    minutes and at its end, each as (its name's minutes, the minute its model is taken
    at). A run stopped by its limit ends a few seconds past it; its last mark is named
    by the limit, so that runs of one length meet mark by mark (learn_go9's --versus)."""
    times, at = [], every
    while at < minutes - 1e-6 and at < end - every / 4:  # the end's own mark follows
        times.append((at, at))
        at += every
    times.append((minutes if abs(end - minutes) < every / 4 else end, end))
    return times


def save_marks(run_dir: Path, every: float, minutes: float) -> list[Path]:
    """The best model at every ``every`` minutes of the run and at its end, from its
    ladder, models/ and status history, as ``marks/<minutes>min/`` directories."""
    files = RunDir(run_dir)
    statuses = read_status_history(files)
    ladder = read_ladder(files).entries
    started = statuses[0].time - statuses[0].elapsed_s
    marks = []
    for at, taken_at in mark_times(every, minutes, statuses[-1].elapsed_s / 60):
        until = started + taken_at * 60
        best = [entry for entry in ladder if entry["time"] <= until][-1]
        before = [line for line in statuses if line.time <= until + 1e-6]
        games, steps = (before[-1].games, before[-1].learner_step) if before else (0, 0)
        mark = run_dir / MARKS / f"{at:06.1f}min"
        mark.mkdir(parents=True, exist_ok=True)
        shutil.copy(files.model(best["version"]), mark / MODEL_FILE)  # a checkpoint directory, as best/
        shutil.copy(files.config, mark / CONFIG_FILE)
        (mark / "mark.json").write_text(json.dumps({
            "trained_minutes": round(taken_at, 2), "version": best["id"], "games": games, "step": steps}, indent=2))
        print(f"  {taken_at:5.1f} min: games {games} steps {steps} best {best['id']} -> {mark}", flush=True)
        marks.append(mark)
    return marks


def marks_in(checkpoint: Path, which: str = "all") -> list[Path]:
    """A model directory itself, or a run directory's marks (all, or the last)."""
    if (checkpoint / MODEL_FILE).exists():
        return [checkpoint]
    marks = sorted(path for path in (checkpoint / MARKS).glob("*min") if (path / MODEL_FILE).exists())
    if not marks:
        raise SystemExit(f"{checkpoint}: neither a model directory nor a run directory with {MARKS}/")
    return marks if which == "all" else marks[-1:]


def ratio_lines_cluster_vs_single(cluster: dict, single: dict) -> list[str]:
    return [f"RATIO cluster_vs_single_{key} {cluster[key] / max(single[key], 1e-9):.3f} vs single target "
            f"{TARGET_CLUSTER_VS_SINGLE}" for key in ("games_per_min", "steps_per_min")]
