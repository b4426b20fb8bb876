"""What the gatekeeper's evaluation caches give a gating match: the config's match
(``TengenConfig.gating_options()``: its players, games in flight and opening
temperature) between two models, played with and without a ``CachedEvaluator`` in
front of each side's network, in turns, from the same seed.

Match games share their openings and their trees' transpositions, so many of a
side's leaves are positions it has evaluated before. Both ways must play the same
games (the cache answers as the network would, up to float rounding between batch
sizes), so the bench also prints each way's result.

    python bench/gating_match.py [--config connect4] [--models A B] [--games 60] [--rounds 2]

``--models`` takes two model directories (a run's ``best/``, a mark, or any directory
with model.safetensors and config.yaml; the first is the candidate); without it, two
fresh networks of the config. Ends with

    RATIO gating_cached_vs_uncached <x> vs uncached_match target 1.0
"""

from __future__ import annotations

import argparse
import os
import time

# one process, all the cores: as the gatekeeper's actor calls its networks
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(os.cpu_count() or 1))

import numpy as np  # noqa: E402

from tengen.engine.mcts import CachedEvaluator, Evaluator  # noqa: E402
from tengen.engine.network import CompiledModel  # noqa: E402
from tengen.play.match import play_match  # noqa: E402
from tengen.run.checkpoint import load_model  # noqa: E402
from tengen.run.config import config_path, load_config  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="connect4")
    parser.add_argument("--models", nargs=2, metavar=("CANDIDATE", "BEST"), help="two model directories")
    parser.add_argument("--games", type=int, default=60, help="games a match (the connect4 config's cap: 60)")
    parser.add_argument("--rounds", type=int, default=2, help="matches each way")
    args = parser.parse_args(argv)
    if args.models:
        loaded = [load_model(path) for path in args.models]
        config, game = loaded[0][0], loaded[0][1]
        if loaded[1][1].name != game.name:
            raise SystemExit(f"the two models play different games: {game.name} and {loaded[1][1].name}")
        nets = [net for _, _, net in loaded]
    else:
        config = load_config(config_path(args.config))
        game = config.game.make()
        nets = [config.network_spec().build() for _ in range(2)]
    options = config.gating_options()
    positions = options.cache_positions
    if positions < 1:
        raise SystemExit("the config keeps no evaluation cache (gating.cache_positions 0): nothing to compare")
    models = [CompiledModel(net) for net in nets]
    print(f"{game.name}: {args.games} games a match, {options.games_in_flight} in flight, "
          f"{options.player.search.simulations} simulations, cache {positions:,} positions a side", flush=True)
    seconds = {"uncached": 0.0, "cached": 0.0}
    for round_ in range(args.rounds + 1):  # round 0 compiles the kernels and traces the models
        for way in seconds:
            sides: list[Evaluator] = ([CachedEvaluator(m, positions, game.num_actions) for m in models]
                                      if way == "cached" else list(models))
            players = [options.player.build(game, side, slots=options.games_in_flight, name=name)
                       for side, name in zip(sides, ("candidate", "best"), strict=True)]
            start = time.perf_counter()
            result = play_match(game, players[0], players[1], games=args.games, slots=options.games_in_flight,
                                rng=np.random.default_rng(config.seed))
            took = time.perf_counter() - start
            if round_ == 0:
                continue
            seconds[way] += took
            cached = [side for side in sides if isinstance(side, CachedEvaluator)]
            share = sum(c.hits for c in cached) / max(sum(c.leaves for c in cached), 1)
            print(f"{way:9s} {took:6.1f} s  candidate {result.wins}-{result.draws}-{result.losses}  "
                  f"cache answered {share:.1%}", flush=True)
    print(f"RATIO gating_cached_vs_uncached {seconds['uncached'] / seconds['cached']:.3f} vs uncached_match "
          f"target 1.0")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
