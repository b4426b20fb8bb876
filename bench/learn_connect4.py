"""Connect Four from scratch on this machine's CPUs: how strong after N minutes?

Trains with configs/connect4.yaml in one process (``SingleProcessRun``, the same loop
as ``tengen train --single-process``) and, every ``--eval-every`` minutes of training
and at the end, saves the best model as a mark (``RUN_DIR/marks/0015.0min/``: its
weights, config and ``mark.json``). After training, so that grading takes none of
training's CPU, grades every mark with its search (``--simulations``, 400 by
default) as bench/grade_connect4.py does:

- its share of optimal moves (the fastest win, the draw, the slowest loss) and of
  moves that keep the outcome, on ~1,000 solver-labelled positions from 8 to 30
  stones (bench/data/connect4_positions.txt, made by bench/label_connect4.py);
- its score against pure MCTS with 400 and with 1000 random-rollout simulations,
  ``--eval-games`` (200) games each, colours alternated, draws counting half;

every figure with its standard error. The best model stays in ``RUN_DIR/best``, where
``tengen bestmove --checkpoint RUN_DIR/best`` reads it.

    python bench/learn_connect4.py [--minutes 60] [--eval-every 15] [--run-dir runs/learn_connect4]
    python bench/learn_connect4.py --grade-only runs/learn_connect4      # grade saved marks again
    python bench/learn_connect4.py --grade-only runs/learn_connect4/best # or one model

Ends with the last mark's ``RATIO connect4_optimal_share``, ``RATIO connect4_outcome_share``
and ``RATIO connect4_winrate_vs_mcts1000`` (targets 0.9, 0.97 and 0.9 for the main job:
60 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from grade_connect4 import Grades, SearchSettings, grade_model, ratio_lines, table_header, table_row
from label_connect4 import DEFAULT_PATH, read_positions

from tengen.cluster.checkpoint import load_model
from tengen.cluster.config import load_config
from tengen.cluster.single_process import SingleProcessRun, model_version_id
from tengen.engine.network import CompiledModel, save_weights_file

MARKS = "marks"


def save_mark(run: SingleProcessRun, trained_minutes: float) -> Path:
    """The best model now, as ``RUN_DIR/marks/<minutes>min/`` (a directory ``load_model`` reads)."""
    mark = run.run_dir / MARKS / f"{trained_minutes:06.1f}min"
    mark.mkdir(parents=True, exist_ok=True)
    meta = {"version": model_version_id(run.version), "step": run.trainer.step, "game": run.game.name}
    save_weights_file(run.best, mark / "model.safetensors", metadata=meta)
    (mark / "config.yaml").write_text(run.config.to_yaml())
    (mark / "mark.json").write_text(json.dumps({"trained_minutes": round(trained_minutes, 2),
                                                "games": run.games_played, **meta}, indent=2))
    return mark


def train(args: argparse.Namespace) -> Path:
    """Train for ``--minutes``, saving a mark every ``--eval-every`` minutes and at the end."""
    config = load_config(args.config)
    run = SingleProcessRun(config, args.run_dir, log=lambda line: None)
    trained = 0.0
    next_mark = args.eval_every
    while True:
        start = time.monotonic()
        run.iterate()
        trained += (time.monotonic() - start) / 60
        if trained >= next_mark or trained >= args.minutes:
            mark = save_mark(run, trained)
            print(f"{trained:5.1f} min: games {run.games_played} steps {run.trainer.step} best "
                  f"{model_version_id(run.version)} -> {mark}", flush=True)
            next_mark += args.eval_every
        if trained >= args.minutes:
            break
    run.finish()
    print(f"model: {run.run_dir / 'best'}")
    return run.run_dir


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
    parser.add_argument("--config", default="configs/connect4.yaml")
    parser.add_argument("--minutes", type=float, default=60.0, help="training time")
    parser.add_argument("--eval-every", type=float, default=15.0, help="minutes of training between marks")
    parser.add_argument("--eval-games", type=int, default=200, help="games against each MCTS opponent")
    parser.add_argument("--positions", default=str(DEFAULT_PATH), help="labelled positions (label_connect4.py)")
    # More than self-play's 128: a model is measured with the search it would play with.
    parser.add_argument("--simulations", type=int, default=400, help="the model's search when graded")
    parser.add_argument("--grade-marks", choices=("all", "last"), default="all", help="which marks to grade")
    parser.add_argument("--grade-only", metavar="CHECKPOINT_DIR",
                        help="grade saved models (a run directory's marks, or one model directory); no training")
    parser.add_argument("--seed", type=int, default=0, help="the matches' seed")
    parser.add_argument("--run-dir", default="runs/learn_connect4")
    args = parser.parse_args()

    run_dir = Path(args.grade_only) if args.grade_only else train(args)
    grade(models_in(run_dir, args.grade_marks), args)


if __name__ == "__main__":
    main()
