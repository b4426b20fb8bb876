"""Ship a run's best model with tengen: copy it into ``models/NAME/`` (its weights and
config, as a run's ``best/``) and measure it against the game's fixed references with
more positions and games than a run's evaluations use, into ``strength.json``, with
what the run was (games, learner steps, minutes) and the command that trained it.

    python bench/package_model.py --run-dir runs/connect4 --name connect4 \
        --trained-with "tengen train connect4 --run-dir runs/connect4 --minutes 30"

Prints the scores and ends with a ``RATIO`` line: the model's first score against
its reference's (tic-tac-toe: the share of optimal moves, 1.0 is perfect play;
Connect Four: the share of solver-optimal moves of the 1,012 labelled positions).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import time
from pathlib import Path

from tengen.run.config import load_config
from tengen.run.packaged_models import STRENGTH_FILE
from tengen.run.run_dir import CONFIG_FILE, MODEL_FILE

ROOT = Path(__file__).resolve().parent.parent


def run_summary(run_dir: Path) -> dict:
    """The run's last ``done:`` line (its games, steps and best version), with the
    minutes of all its sessions (a resumed run writes one such line per session)."""
    done = [json.loads(line.split("done: ", 1)[1])
            for line in (run_dir / "log.txt").read_text().splitlines() if "done: {" in line]
    if not done:
        raise SystemExit(f"{run_dir} has not finished (no 'done:' line in its log.txt)")
    if done[-1].get("error"):
        raise SystemExit(f"{run_dir} stopped on an error: {done[-1]['error']}")
    return done[-1] | {"minutes": round(sum(session["minutes"] for session in done), 1), "sessions": len(done)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, required=True, help="a finished run")
    parser.add_argument("--name", required=True, help="the packaged config the run trained (tictactoe, connect4)")
    parser.add_argument("--trained-with", required=True, help="the command that trained it, as it was typed")
    parser.add_argument("--positions", type=int, default=5000, help="positions graded (capped at the game's own)")
    parser.add_argument("--games", type=int, default=100, help="games against each reference opponent")
    args = parser.parse_args()

    best = args.run_dir / "best"
    summary = run_summary(args.run_dir)
    config = load_config(best / CONFIG_FILE)
    config = config.with_changes({"evaluation.positions": args.positions, "evaluation.games": args.games},
                                 source="bench/package_model.py")
    from tengen.workers.strength import StrengthEvaluator

    options = config.strength_options()
    evaluator = StrengthEvaluator(game=config.game.make(), options=options, network=config.network_spec())
    result = evaluator.evaluate(int(summary["best"]), (best / MODEL_FILE).read_bytes())
    target = ROOT / "models" / args.name
    target.mkdir(parents=True, exist_ok=True)
    for name in (MODEL_FILE, CONFIG_FILE):
        shutil.copyfile(best / name, target / name)
    strength = {
        "version": summary["best"],
        "trained_with": args.trained_with,
        "run": {key: summary[key] for key in ("games", "steps", "minutes", "sessions") if key in summary},
        "measured": time.strftime("%Y-%m-%d"),
        "measured_with": {**dataclasses.asdict(options), "player": {
            "simulations": options.player.search.simulations, "temperature_moves": options.player.temperature_moves}},
        "scores": result["scores"],
    }
    (target / STRENGTH_FILE).write_text(json.dumps(strength, indent=1) + "\n")
    for score in result["scores"]:
        print(f"{score['reference']:>16} {score['measure']:>8} {score['value']} +- {score['se']} (n={score['n']})")
    print(f"{target}: {(target / MODEL_FILE).stat().st_size:,} bytes of weights")
    first = result["scores"][0]
    print(f"RATIO packaged_{args.name}_{first['reference']} {first['value']} vs perfect 1.0")


if __name__ == "__main__":
    main()
