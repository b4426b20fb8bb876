"""Connect Four from scratch on this machine's CPUs: how strong after N minutes?

Trains with configs/connect4.yaml in one process (``SingleProcessRun``, the same loop
as ``tengen train --single-process``) and, every ``--eval-every`` minutes of training,
measures the best model with search (``--simulations``, 400 by default):

- its win rate against pure MCTS with 400 and with 1000 random-rollout simulations
  (colours alternated, draws count half);
- its share of optimal moves on positions labelled by the exact solver
  (engine/solvers.py), keeping only positions where some move is not optimal.

Evaluation time is not counted as training time. The best model stays in
``RUN_DIR/best``, where ``tengen bestmove --checkpoint RUN_DIR/best`` reads it.

    python bench/learn_connect4.py [--minutes 60] [--eval-every 15] [--run-dir runs/learn_connect4]

Ends with ``RATIO connect4_winrate_vs_mcts1000 <rate> vs mcts1000 target 0.9``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tengen.cluster.config import load_config
from tengen.cluster.single_process import SingleProcessRun
from tengen.engine.arena import MctsPlayer, RolloutMctsPlayer, play_match
from tengen.engine.mcts import Search
from tengen.engine.network import CompiledModel
from tengen.engine.solvers import connect4_labelled_positions


def optimal_share(run: SingleProcessRun, labelled, simulations: int) -> float:
    game, mcts = run.game, run.config.mcts
    search = Search(game, games=len(labelled), simulations=simulations, c_puct=mcts.c_puct,
                    fpu_reduction=mcts.fpu_reduction, leaves_per_round=mcts.leaves_per_round)
    for i, (state, _) in enumerate(labelled):
        search.reset(i, state)
    search.run(run.best_eval)
    good = 0
    for i, (state, optimal) in enumerate(labelled):
        move = int(np.argmax(np.where(game.legal_mask(state), search.root_visits(i), -1)))
        good += move in optimal
    return good / len(labelled)


def evaluate(run: SingleProcessRun, labelled, *, games: int, simulations: int, seed: int) -> dict:
    game, mcts = run.game, run.config.mcts
    rng = np.random.default_rng(seed)
    result = {}
    for rollouts_sims in (400, 1000):
        player = MctsPlayer(game, CompiledModel(run.best), slots=games, simulations=simulations, name="model",
                            c_puct=mcts.c_puct, fpu_reduction=mcts.fpu_reduction,
                            leaves_per_round=mcts.leaves_per_round, temperature_moves=2)
        opponent = RolloutMctsPlayer(game, slots=games, simulations=rollouts_sims, seed=seed)
        match = play_match(game, player, opponent, games=games, slots=games, rng=rng)
        result[f"mcts{rollouts_sims}"] = match.score
    result["optimal"] = optimal_share(run, labelled, simulations)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/connect4.yaml")
    parser.add_argument("--minutes", type=float, default=60.0, help="training time")
    parser.add_argument("--eval-every", type=float, default=15.0, help="minutes of training between evaluations")
    parser.add_argument("--eval-games", type=int, default=40, help="games against each MCTS opponent")
    parser.add_argument("--positions", type=int, default=200, help="solver-labelled positions")
    # More than self-play's 128: a model is measured with the search it would play with.
    parser.add_argument("--simulations", type=int, default=400, help="the model's search when measured")
    parser.add_argument("--run-dir", default="runs/learn_connect4")
    args = parser.parse_args()

    config = load_config(args.config)
    simulations = args.simulations
    print(f"labelling {args.positions} positions with the solver...", flush=True)
    labelled = connect4_labelled_positions(args.positions, min_stones=12, max_stones=24, seed=1,
                                           informative_only=True)
    run = SingleProcessRun(config, args.run_dir, log=lambda line: None)
    trained = 0.0
    next_eval = args.eval_every
    scores: dict = {}
    while True:
        start = time.monotonic()
        run.iterate()
        trained += (time.monotonic() - start) / 60
        if trained >= next_eval or trained >= args.minutes:
            scores = evaluate(run, labelled, games=args.eval_games, simulations=simulations, seed=int(trained))
            print(f"{trained:5.1f} min: games {run.games_played} steps {run.trainer.step} best "
                  f"{run.version:06d} | vs mcts400 {scores['mcts400']:.2f} vs mcts1000 {scores['mcts1000']:.2f} "
                  f"| optimal moves {scores['optimal']:.2f}", flush=True)
            next_eval += args.eval_every
        if trained >= args.minutes:
            break
    run.finish()
    print(f"model: {run.run_dir / 'best'}")
    print(f"RATIO connect4_winrate_vs_mcts1000 {scores['mcts1000']:.2f} vs mcts1000 target 0.9")


if __name__ == "__main__":
    main()
