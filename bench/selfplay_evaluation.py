"""What the evaluation cache and unpadded CPU batches give self-play, side by side.

Three in-process self-play workers play the config's games (the single-process run's
wiring: one half, the leaves evaluated by a ``CompiledModel`` of one shared net) in
alternating slices of ``--slice`` seconds, so that the machine's drift hits each alike:

- ``before``: batches padded to the buckets (1, 8, 32, ..., 1024) and no cache, as
  self-play ran on a CPU before 2026-12-05;
- ``unpadded``: any batch as it is (``CompiledModel``'s default without XLA), no cache;
- ``cached``: unpadded, with the config's ``selfplay.cache_positions``.

Each is timed on the leaves its searches evaluate per second (cache hits included:
the search's own throughput), after a first slice of each that compiles and traces.
The net is untrained unless ``--model DIR`` (a run's ``best/``) gives one; a trained
net's sharper priors narrow its trees, so its share of leaves met again may differ.

    python bench/selfplay_evaluation.py [--config connect4] [--seconds 240] [--slice 20] [--model DIR]

Ends with

    RATIO selfplay_unpadded_vs_padded <x> vs padded_buckets target 1.0
    RATIO selfplay_cached_vs_uncached <x> vs unpadded_uncached target 1.0
    RATIO selfplay_cached_unpadded_vs_before <x> vs padded_uncached target 1.0
"""

from __future__ import annotations

import argparse
import os
import time

# one process, both cores: the single-process run's TensorFlow threads
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(os.cpu_count() or 1))

from tengen.engine.network import DEFAULT_BUCKETS, CompiledModel  # noqa: E402
from tengen.run.checkpoint import load_model  # noqa: E402
from tengen.run.config import config_path, load_config  # noqa: E402
from tengen.workers.selfplay_worker import SelfPlayWorker  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="connect4")
    parser.add_argument("--model", help="a model directory (model.safetensors + config.yaml); default: untrained")
    parser.add_argument("--seconds", type=float, default=240.0, help="timed seconds per variant")
    parser.add_argument("--slice", type=float, default=20.0, help="seconds per turn")
    args = parser.parse_args(argv)
    if args.model:
        config, _, net = load_model(args.model)
    else:
        config = load_config(config_path(args.config))
        net = config.network_spec().build()
    if config.selfplay.cache_positions < 1:
        raise SystemExit("the config keeps no evaluation cache (selfplay.cache_positions 0): nothing to compare")
    game = config.game.make()
    variants = {
        "before": (CompiledModel(net, buckets=DEFAULT_BUCKETS, jit_compile=False), 0),
        "unpadded": (CompiledModel(net, jit_compile=False), 0),
        "cached": (CompiledModel(net, jit_compile=False), config.selfplay.cache_positions),
    }
    workers = {
        name: SelfPlayWorker(game=game, selfplay=config.selfplay_settings(), submit=lambda planes: planes,
                             resolve=model, sink=lambda record: None, seed=config.seed, halves=1,
                             games=config.selfplay.games_in_flight, cache_positions=cache)
        for name, (model, cache) in variants.items()
    }
    print(f"{game.name}, {config.network.blocks}x{config.network.filters} net "
          f"({'from ' + args.model if args.model else 'untrained'}), {config.selfplay.games_in_flight} games, "
          f"cache {config.selfplay.cache_positions:,} positions, slices of {args.slice:.0f} s", flush=True)
    for worker in workers.values():  # compile the kernels, trace the models
        worker.run_for(args.slice)
    timed = dict.fromkeys(workers, 0.0)
    leaves = dict.fromkeys(workers, 0)
    games = dict.fromkeys(workers, 0)
    while min(timed.values()) < args.seconds:
        for name, worker in workers.items():
            before = worker.stats()
            start = time.perf_counter()
            after = worker.run_for(args.slice)
            timed[name] += time.perf_counter() - start
            leaves[name] += after["evaluations"] - before["evaluations"]
            games[name] += after["games"] - before["games"]
    rate = {name: leaves[name] / timed[name] for name in workers}
    for name, worker in workers.items():
        stats = worker.stats()
        share = stats["cache_hits"] / stats["evaluations"] if stats["evaluations"] else 0.0
        print(f"{name:9s} {rate[name]:8,.0f} leaves/s  {games[name] / timed[name] * 60:6.0f} games/min  "
              f"cache answered {share:.1%}", flush=True)
    print(f"RATIO selfplay_unpadded_vs_padded {rate['unpadded'] / rate['before']:.3f} vs padded_buckets target 1.0")
    print(f"RATIO selfplay_cached_vs_uncached {rate['cached'] / rate['unpadded']:.3f} vs unpadded_uncached "
          f"target 1.0")
    print(f"RATIO selfplay_cached_unpadded_vs_before {rate['cached'] / rate['before']:.3f} vs padded_uncached "
          f"target 1.0")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
