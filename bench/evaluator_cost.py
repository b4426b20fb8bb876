"""What the strength evaluator costs the main job: the same Connect Four run (same
config, same seed) for a few minutes with the evaluator off and on, and the positions
each recorded per minute; the main job itself (``--mode cluster``: local Ray, the
embedded Redis) or ``--single-process``.

The evaluator runs at nice 19, held to ``evaluation.cpu_share``: a child process of a
single-process run (run/strength_process.py), an actor that asks Ray for no CPU in the
main job (cluster/strength.py). To measure the most it can cost, the run with it on
measures every new best (``evaluation.min_interval_s`` 0), so the evaluator is busy
for as much of the run as the promotions keep it; a real run's interval (300 s by
default) leaves it idle between evaluations. The last line:

    RATIO evaluator_cost positions_per_min <on/off> vs evaluator_off target 0.95

Run: ``python bench/evaluator_cost.py [--mode cluster] [--minutes 4] [--share 0.5]``.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tengen.run.records import read_evaluations, read_status
from tengen.run.run_dir import RunDir

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.95


def run(config: str, mode: str, run_dir: Path, minutes: float, settings: list[str]) -> dict:
    """``tengen train`` (``--single-process`` in that mode) for ``minutes``; its positions
    per minute and the evaluations it recorded."""
    command = [sys.executable, "-m", "tengen.cli", "train", config, "--run-dir", str(run_dir),
               "--minutes", str(minutes)]
    command += (["--single-process"] if mode == "single" else []) + [arg for s in settings for arg in ("--set", s)]
    print(" ".join(command[2:]), flush=True)
    started = time.monotonic()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise SystemExit(f"tengen train exited with {done.returncode}: {done.stderr[-2000:]}")
    files = RunDir(run_dir)
    last = read_status(files)
    try:
        evaluations = read_evaluations(files)
    except FileNotFoundError:
        evaluations = []
    minutes_run = last.elapsed_s / 60
    result = {"positions_per_min": last.totals["positions"] / minutes_run, "steps": last.learner_step,
              "games": last.games, "evaluations": len(evaluations),
              "evaluation_s": sum(e.elapsed_s for e in evaluations),
              "evaluation_cpu_s": sum(e.cpu_s for e in evaluations),
              "wall_s": time.monotonic() - started}
    print(f"  {result['positions_per_min']:,.0f} positions/min, {result['games']:,} games, {result['steps']:,} steps, "
          f"{result['evaluations']} evaluations ({result['evaluation_s']:.0f} s wall, "
          f"{result['evaluation_cpu_s']:.0f} s CPU)", flush=True)
    for line in evaluations:
        print(f"    {line.text()} ({line.elapsed_s:.0f} s, {line.cpu_s:.0f} s CPU)")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/connect4.yaml")
    parser.add_argument("--mode", choices=("cluster", "single"), default="single",
                        help="the main job (Ray + embedded Redis) or --single-process")
    parser.add_argument("--minutes", type=float, default=4.0)
    parser.add_argument("--share", type=float, default=None, help="evaluation.cpu_share (default: the config's)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="tengen-evaluator-cost-"))
    common = [f"seed={args.seed}"]
    try:
        off = run(args.config, args.mode, base / "off", args.minutes, [*common, "evaluation.enabled=false"])
        on = run(args.config, args.mode, base / "on", args.minutes,
                 [*common, "evaluation.min_interval_s=0"]
                 + ([f"evaluation.cpu_share={args.share}"] if args.share is not None else []))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    ratio = on["positions_per_min"] / off["positions_per_min"]
    print(f"RATIO evaluator_cost positions_per_min {ratio:.3f} vs evaluator_off target {TARGET}")


if __name__ == "__main__":
    main()
