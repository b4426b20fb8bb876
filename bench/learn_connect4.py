"""Connect Four from scratch on this machine's CPUs: how strong after N minutes, and
how fast, in the README's main job (the Ray run) and in ``--single-process``?

Trains with configs/connect4.yaml by running ``tengen train`` itself (``--mode
cluster``: the main job, local Ray and embedded Redis; ``--mode single``: the same
loop in one process; ``--mode both``: one after the other, each for ``--minutes``),
while sampling where the CPU goes by part (testing/cpu_by_part.py). Marks are taken
from the run directory afterwards, so that training is not paused for them: the
best model at every ``--eval-every`` minutes is the last one on ladder.json promoted
by then (its weights are in models/), with the games and learner steps of the last
status line before then (status.jsonl), saved as ``RUN_DIR/marks/0015.0min/``. Then,
so that grading takes none of training's CPU, every mark is graded with its search
(``--simulations``, 400 by default) as play/grading.py does:

- its share of optimal moves (the fastest win, the draw, the slowest loss) and of
  moves that keep the outcome, on ~1,000 solver-labelled positions from 8 to 30
  stones (play/data/connect4_positions.txt, made by bench/label_connect4.py);
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
import dataclasses
from pathlib import Path

from tengen.engine.network import CompiledModel
from tengen.play.grading import (
    DEFAULT_PATH,
    Grades,
    grade_model,
    ratio_lines,
    read_positions,
    table_header,
    table_row,
)
from tengen.run.checkpoint import load_model
from tengen.testing.training_run import marks_in, ratio_lines_cluster_vs_single, train


def grade(models: list[Path], args: argparse.Namespace) -> None:
    positions = read_positions(args.positions)
    print(f"grading {len(models)} model(s) on {len(positions)} positions and {args.eval_games} games "
          f"per opponent, {args.simulations} simulations", flush=True)
    rows: list[tuple[str, Grades]] = []
    for path in models:
        config, game, model = load_model(path)
        print(f"{path}:", flush=True)
        settings = dataclasses.replace(config.play_search(), simulations=args.simulations)
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
    parser.add_argument("--eval-games", type=int, default=200,
                        help="games against each MCTS opponent (0: grade the positions only)")
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
    if args.eval_games < 0:  # before an hour of training, not after it
        parser.error(f"--eval-games must be 0 (positions only) or more, got {args.eval_games}")

    if args.grade_only:
        grade(marks_in(Path(args.grade_only), args.grade_marks), args)
        return
    modes = ["single", "cluster"] if args.mode == "both" else [args.mode]
    runs = {mode: train(mode, config=args.config, run_dir=Path(args.run_dir) / mode, minutes=args.minutes,
                        every=args.eval_every) for mode in modes}
    if args.mode == "both":
        for line in ratio_lines_cluster_vs_single(runs["cluster"], runs["single"]):
            print(line)
    if not args.no_grade:
        for mode in modes:
            grade(marks_in(runs[mode]["run_dir"], args.grade_marks), args)


if __name__ == "__main__":
    main()
