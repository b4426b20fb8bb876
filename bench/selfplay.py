"""Self-play throughput of the distributed run against what the model alone can do.

Runs ``tengen train configs/connect4.yaml`` (the ClusterRun: local Ray, embedded
Redis, an inference server, N self-play workers, the learner, the gatekeeper) for
``--seconds`` with 1 and with 2 workers and reads its evaluations/s and positions/s
from the run's report. In the same process it measures:

- the raw compiled model call at batch 128 (evaluations/s): how busy self-play keeps
  the model, ``selfplay_model_busy_vs_raw`` = run evaluations/s / raw evaluations/s;
- a loop of the classic tutorial's shape (one position per model call, the same
  network and simulations, a plain recursive PUCT): ``selfplay_vs_batch1_loop`` =
  run evaluations/s / loop evaluations/s. Evaluations, not moves: the run's
  playout-cap randomisation gives most moves a cheap search, which would flatter
  a per-move figure. On a CPU the ratio cannot exceed the model's own batch-128 /
  batch-1 speed ratio, printed beside it.

    python bench/selfplay.py [--seconds 90]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import numpy as np

from tengen.cluster.driver import ClusterRun
from tengen.engine.network import CompiledModel
from tengen.run.config import load_config
from tengen.run.records import StatusLine, read_status
from tengen.run.run_dir import RunDir


def raw_evaluations_per_s(config, seconds: float = 10.0) -> float:
    game = config.game.make()
    model = CompiledModel(config.network_spec().build())
    planes = np.random.default_rng(0).integers(0, 2, size=(128, *game.planes_shape), dtype=np.uint8)
    model(planes)
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        model(planes)
        calls += 1
    return calls * 128 / (time.perf_counter() - start)


def batch1_loop_evaluations_per_s(config, seconds: float = 30.0) -> float:
    """The classic tutorial's loop: a recursive PUCT search calling the model on one
    position at a time (a tf.function call, not predict), self-play move by move."""
    game = config.game.make()
    model = CompiledModel(config.network_spec().build(), buckets=(1,))
    simulations, c_puct = config.mcts.simulations, config.mcts.c_puct
    rng = np.random.default_rng(0)

    def search(state) -> np.ndarray:
        stats: dict = {}  # key -> [prior, N, W] arrays

        def simulate(s) -> float:
            if game.is_terminal(s):
                o = game.outcome(s)
                return -(o if game.to_play(s) == 0 else -o)  # value for the player who moved into s
            key = s.tobytes()
            if key not in stats:
                policy, value = model(game.encode(s)[None])
                legal = game.legal_mask(s)
                p = np.where(legal, policy[0], 0)
                stats[key] = [p / p.sum(), np.zeros(game.num_actions), np.zeros(game.num_actions)]
                return -float(value[0])
            prior, n, w = stats[key]
            q = np.where(n > 0, w / np.maximum(n, 1), 0.0)
            u = c_puct * prior * math.sqrt(n.sum() + 1) / (1 + n)
            a = int(np.argmax(np.where(prior > 0, q + u, -np.inf)))
            child = s.copy()
            game.play(child, a)
            v = simulate(child)
            n[a] += 1
            w[a] += v
            return -v

        for _ in range(simulations):
            simulate(state)
        return stats[state.tobytes()][1]

    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        state = game.initial_state()
        while not game.is_terminal(state) and time.perf_counter() - start < seconds:
            visits = search(state)
            game.play(state, int(rng.choice(len(visits), p=visits / visits.sum())))
    return model.calls / (time.perf_counter() - start)


def run_rates(config, workers: int, seconds: float) -> StatusLine:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / f"bench-{workers}w"
        ClusterRun(config, run_dir, minutes=seconds / 60, workers=workers, log=lambda line: None).run()
        return read_status(RunDir(run_dir))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="configs/connect4.yaml")
    parser.add_argument("--seconds", type=float, default=90.0, help="length of each run")
    args = parser.parse_args()
    config = load_config(args.config)
    raw = raw_evaluations_per_s(config)
    loop = batch1_loop_evaluations_per_s(config)
    print(f"raw compiled call at batch 128: {raw:,.0f} evaluations/s; batch-1 loop: {loop:,.0f} evaluations/s "
          f"(so at most {raw / loop:.1f}x from batching on this machine)", flush=True)
    best: StatusLine | None = None
    for workers in (1, 2):
        rates = run_rates(config, workers, args.seconds)
        print(f"{workers} worker(s): {rates.evaluations_per_s:,} evaluations/s, {rates.moves_per_s} moves/s "
              f"({rates.positions_per_s} recorded positions/s), {rates.games_per_s} games/s, mean batch "
              f"{rates.wiring.get('mean_batch')}", flush=True)
        if best is None or rates.evaluations_per_s > best.evaluations_per_s:
            best = rates
    assert best is not None
    # The run's last report: rates over its last interval, after start-up.
    print(f"RATIO selfplay_model_busy_vs_raw {best.evaluations_per_s / raw:.2f} vs raw_compiled_call target 0.5")
    print(f"RATIO selfplay_vs_batch1_loop {best.evaluations_per_s / loop:.1f} vs batch1_loop target 50")


if __name__ == "__main__":
    main()
