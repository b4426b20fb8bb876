"""Has the single-process run got slower than at an earlier commit? (issue 12: "the
single-process run does not get slower than today's".)

Trains the same config with ``tengen train <config> --single-process`` from a git
worktree of the baseline commit and from this checkout, one after the other (the
baseline first, then this code, ``--rounds`` times), each for ``--minutes`` minutes, and
compares their rates between ``--from-minute`` and the end, which leaves start-up and
the search kernels' compilation out:

- learner steps per minute, what the issue's line counts (the learner is at its
  reuse cap in the default config, so steps follow the positions recorded);
- positions recorded per minute: self-play's throughput, which games that grow
  longer as the models get stronger do not change (games per minute they do).

Each run starts from scratch with the config's seed, in its own run directory, and
prints its progress to ``<run-dir>/<name>.log``. The machine should be otherwise
quiet: the two codes are timed minutes apart, not side by side.

    python bench/single_process_speed.py --baseline d5cb884 [--config connect4]
        [--minutes 10] [--from-minute 4] [--rounds 1] [--run-dir DIR]

With two rounds or more it also prints how far each code's own runs differ (the
noise between runs: 38% between two 20-minute runs of one commit on 2026-12-03).
Ends with (this code's rate over the baseline's, medians over the rounds):

    RATIO single_process_steps_per_min <x> vs <commit> target 1.0
    RATIO single_process_positions_per_min <x> vs <commit> target 1.0
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from tengen.run.records import StatusLine, read_status_history
from tengen.run.run_dir import RunDir

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Rates:
    steps_per_min: float
    positions_per_min: float


def rates(status_lines: list[StatusLine], from_minute: float) -> Rates:
    """Steps and positions per minute from the first status at or after ``from_minute``
    to the last one (``status.jsonl``'s lines, oldest first)."""
    start = next((s for s in status_lines if s.elapsed_s >= from_minute * 60), None)
    end = status_lines[-1] if status_lines else None
    if start is None or end is None or end.elapsed_s - start.elapsed_s < 60:
        raise ValueError(f"the run has no full minute of status after minute {from_minute}")
    minutes = (end.elapsed_s - start.elapsed_s) / 60
    return Rates(steps_per_min=(end.learner_step - start.learner_step) / minutes,
                 positions_per_min=(end.totals["positions"] - start.totals["positions"]) / minutes)


def spread(values: list[float]) -> float:
    """How far apart runs of one code landed: the largest over the smallest, minus 1
    (0 for a single run). Sequential runs on a shared machine differ by training's
    chances (game lengths, gating) and by the machine's own speed, so a RATIO that is
    off 1.0 by less than this is no measured change."""
    return max(values) / min(values) - 1.0 if len(values) > 1 else 0.0


def read_status(run_dir: Path) -> list[StatusLine]:
    """The run's status lines, whichever tengen wrote them (the baseline's may be of
    an older format: run/records.py reads those too)."""
    try:
        return read_status_history(RunDir(run_dir))
    except FileNotFoundError:
        raise RuntimeError(f"{run_dir}: the run wrote no status.jsonl") from None


def worktree(commit: str, parent: Path) -> Path:
    """A detached worktree of ``commit`` under ``parent`` (removed by ``remove_worktree``)."""
    path = parent / f"baseline-{commit[:12]}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), commit], check=True,
                   stdout=subprocess.DEVNULL)
    return path


def remove_worktree(path: Path) -> None:
    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(path)], check=False)


def environment(code: Path) -> dict[str, str]:
    """This interpreter's environment with ``code`` first on the import path; refuses
    to go on when ``tengen`` still imports from elsewhere (an editable install's
    finder can come before PYTHONPATH)."""
    env = dict(os.environ, PYTHONPATH=str(code))
    probe = "import pathlib, tengen; print(pathlib.Path(tengen.__file__).resolve())"
    where = subprocess.run([sys.executable, "-c", probe], env=env, cwd=code, capture_output=True, text=True,
                           check=True).stdout.strip()
    if not Path(where).is_relative_to(code.resolve()):
        raise RuntimeError(f"with PYTHONPATH={code}, tengen imports from {where}: "
                           "the comparison would time one code twice")
    return env


def train(code: Path, config: str, minutes: float, run_dir: Path, log: Path) -> list[StatusLine]:
    if run_dir.exists():
        raise RuntimeError(f"{run_dir} exists: a run there would resume, not start from scratch")
    # the command's module where that code has it (before issue 41's restructuring: tengen.cluster.cli)
    cli = "tengen.cli" if (code / "tengen" / "cli.py").exists() else "tengen.cluster.cli"
    command = [sys.executable, "-m", cli, "train", config, "--single-process",
               "--minutes", str(minutes), "--run-dir", str(run_dir)]
    with log.open("w") as out:
        done = subprocess.run(command, env=environment(code), cwd=code, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} (in {code}) failed with {done.returncode}: see {log}")
    return read_status(run_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--baseline", required=True, help="the commit to compare with")
    parser.add_argument("--config", default="connect4", help="a packaged config's name or a file")
    parser.add_argument("--minutes", type=float, default=10.0, help="training time per run")
    parser.add_argument("--from-minute", type=float, default=4.0, help="the rates are measured from here on")
    parser.add_argument("--rounds", type=int, default=1, help="baseline-then-current pairs")
    parser.add_argument("--run-dir", type=Path, default=None, help="where the runs go (default: a temporary folder)")
    args = parser.parse_args()
    if not 0 <= args.from_minute < args.minutes - 1:
        parser.error("--from-minute must leave at least a minute before --minutes")
    config = str(Path(args.config).resolve()) if Path(args.config).is_file() else args.config
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", args.baseline], check=True,
                            capture_output=True, text=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="tengen-speed-") as scratch:
        runs = args.run_dir or Path(scratch)
        runs.mkdir(parents=True, exist_ok=True)
        base = worktree(commit, Path(scratch))
        try:
            measured: dict[str, list[Rates]] = {"baseline": [], "current": []}
            for r in range(args.rounds):
                for name, code in (("baseline", base), ("current", ROOT)):
                    label = f"{name}-{r}"
                    print(f"{label}: tengen train {config} --single-process --minutes {args.minutes} "
                          f"({code})", flush=True)
                    status = train(code, config, args.minutes, runs / label, runs / f"{label}.log")
                    got = rates(status, args.from_minute)
                    measured[name].append(got)
                    print(f"  {got.steps_per_min:.1f} steps/min, {got.positions_per_min:.0f} positions/min "
                          f"(minutes {args.from_minute:g}-{status[-1].elapsed_s / 60:.1f})", flush=True)
        finally:
            remove_worktree(base)
    steps = statistics.median(c.steps_per_min / b.steps_per_min
                              for b, c in zip(measured["baseline"], measured["current"], strict=True))
    positions = statistics.median(c.positions_per_min / b.positions_per_min
                                  for b, c in zip(measured["baseline"], measured["current"], strict=True))
    for name, runs_of in measured.items():
        if len(runs_of) > 1:
            print(f"{name}: its {len(runs_of)} runs differ by {spread([r.steps_per_min for r in runs_of]):.0%} "
                  f"in steps/min, the noise this comparison cannot see through", flush=True)
    print(f"RATIO single_process_steps_per_min {steps:.3f} vs {commit} target 1.0")
    print(f"RATIO single_process_positions_per_min {positions:.3f} vs {commit} target 1.0")


if __name__ == "__main__":
    main()
