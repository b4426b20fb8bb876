"""How many evaluations per second per core the path around the network carries.

A GPU answers leaves far faster than a CPU: whether the rest of the path (the
workers' tree work, the Ray call, the inference server's merging and splitting, the
evaluation cache, the finished games' trip to Redis) could keep one busy is measured
here without a GPU. The network is replaced by tengen.testing's ``InstantEvaluator``
(uniform policy, value zero, at once), and the run's real path carries it: a local
Ray, an InferenceServer actor with the CPU server's options, N ``SelfPlayActor``s (the
run's worker actor, sending its games to an embedded Redis), each game's shipped
config (``games_per_worker``, ``max_batch``, ``batch_timeout_ms``, the cache, the
search). Its peer is the same search (a ``SelfPlayWorker``, the same games, halves
and cache) calling the stand-in directly in this process.

Rates are per CPU-second actually used, read from /proc (tengen.testing.cpu_by_part):
the workers' and the server's processes for the pipeline, this process for the
peer. Evaluations are the leaves the searches evaluated (cache hits too, the same
counter on both sides); "model rows" are what reached the server, which is what a
GPU would have to answer, so cores = (a GPU's evaluations/s) / (model rows/s per core).

Ends with one ``RATIO pipeline_evals_per_s_vs_in_process_<game>`` line per game (at
the most workers measured: a GPU node runs many workers to one server, so the
server's share is spread thinnest there), then ``RATIO
pipeline_evals_per_s_vs_in_process``, the worst game's: a GPU node is sized for the
game it runs, so the claim that the plumbing keeps up holds only as far as its
weakest game.

    python bench/pipeline_ceiling.py [--seconds 20] [--games connect4,go9,go19] [--workers 1,2]
                                  [--inline-answer-bytes 102400]   # Ray's own bound
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import ray

from tengen.cluster.actors import SelfPlayActor
from tengen.cluster.inference_pool import INLINE_ANSWER_BYTES, server_options
from tengen.cluster.redis_server import EmbeddedRedis
from tengen.run.config import TengenConfig, load_config
from tengen.testing.cpu_by_part import CpuByPart, resident_mib_by_part
from tengen.testing.instant_evaluator import InstantEvaluator
from tengen.workers.inference_server import InferenceServer
from tengen.workers.selfplay_worker import SelfPlayWorker

TARGET = 0.8
#: seconds of play before the timing starts, once the first round is done (which
#: compiles the search's numba kernels, in each new worker process)
WARM_UP_S = 2.0


@dataclass(frozen=True)
class Rate:
    """Counts over one timed stretch."""

    evaluations: int  # leaves the searches evaluated (cache hits included)
    model_rows: int  # leaves sent to the model (the server's rows, or the peer's calls' rows)
    games: int
    wall_s: float
    cpu_s: float  # CPU seconds the measured processes used
    mean_batch: float  # rows per model call
    worker_mib: float = 0.0  # the largest self-play worker's resident memory at the end (0: in-process)

    @property
    def per_s(self) -> float:
        return self.evaluations / self.wall_s

    @property
    def per_core(self) -> float:
        return self.evaluations / self.cpu_s

    @property
    def rows_per_core(self) -> float:
        return self.model_rows / self.cpu_s

    @property
    def cores(self) -> float:
        return self.cpu_s / self.wall_s


def in_process(config: TengenConfig, seconds: float) -> Rate:
    """The worker's own search calling the stand-in directly: no Ray, no server."""
    evaluate = InstantEvaluator.like(config.network_spec())
    model_rows: list[int] = []

    def answer(planes):
        model_rows.append(len(planes))
        return evaluate(planes)

    worker = SelfPlayWorker(game=config.game.make(), selfplay=config.selfplay_settings(), submit=lambda p: p,
                            resolve=answer, sink=lambda record: None, seed=0,
                            games=config.cluster.games_per_worker, cache_positions=config.selfplay.cache_positions)
    while worker.run_for(WARM_UP_S)["rounds"] < 2:
        pass
    before, calls_before = worker.stats(), len(model_rows)
    cpu, start = time.process_time(), time.perf_counter()
    after = worker.run_for(seconds)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    rows = model_rows[calls_before:]
    return Rate(evaluations=after["evaluations"] - before["evaluations"], model_rows=sum(rows),
                games=after["games"] - before["games"], wall_s=wall, cpu_s=cpu,
                mean_batch=sum(rows) / max(1, len(rows)))


def pipeline(config: TengenConfig, workers: int, seconds: float, redis: EmbeddedRedis, *,
             inline_answer_bytes: int = INLINE_ANSWER_BYTES) -> Rate:
    """``workers`` SelfPlayActors and one InferenceServer answering with the stand-in."""
    spec, cluster = config.network_spec(), config.cluster
    # the CPU server's options and arguments (cluster/inference_pool.py), the stand-in for its network
    options = server_options(0, inline_answer_bytes=inline_answer_bytes)
    server = ray.remote(InferenceServer).options(**options).remote(
        network=spec, max_batch=cluster.max_batch, batch_timeout_ms=cluster.batch_timeout_ms, clients=workers,
        model=InstantEvaluator.like(spec))
    dump = config.model_dump(mode="json")
    actors = [ray.remote(SelfPlayActor).options(num_cpus=1).remote(
        dump, f"pipeline-{config.game.name}-{workers}w", redis.url, redis.password, server, f"w{i:03d}", i, 0)
        for i in range(workers)]
    try:
        warm = ray.get([actor.run_for.remote(WARM_UP_S) for actor in actors])
        while min(report["rounds"] for report in warm) < 2:
            warm = ray.get([actor.run_for.remote(WARM_UP_S) for actor in actors])
        cpu = CpuByPart(os.getpid())
        cpu.sample()
        cpu_before, server_before = cpu.seconds(), ray.get(server.stats.remote())
        start = time.perf_counter()
        reports = ray.get([actor.run_for.remote(seconds) for actor in actors])
        wall = time.perf_counter() - start
        cpu.sample()
        cpu_after, server_after = cpu.seconds(), ray.get(server.stats.remote())
        worker_mib = max(resident_mib_by_part(os.getpid()).get("self-play", [0.0]))
    finally:
        for handle in (*actors, server):
            ray.kill(handle)
    used = sum(cpu_after.get(part, 0.0) - cpu_before.get(part, 0.0) for part in ("self-play", "inference"))
    rows = server_after["evaluations"] - server_before["evaluations"]
    batches = server_after["batches"] - server_before["batches"]
    # a worker's report counts from its start: the warm-up's counts are taken off
    return Rate(evaluations=sum(r["evaluations"] - w["evaluations"] for r, w in zip(reports, warm, strict=True)),
                model_rows=rows, games=sum(r["games"] - w["games"] for r, w in zip(reports, warm, strict=True)),
                wall_s=wall, cpu_s=used, mean_batch=rows / max(1, batches), worker_mib=worker_mib)


def table(results: dict[str, tuple[Rate, dict[int, Rate]]]) -> list[str]:
    """One line per game and worker count: the pipeline's rates beside the in-process
    search's (its own line, workers "-")."""
    lines = [f"{'game':9s} {'workers':>7s} {'evals/s':>9s} {'cores':>5s} {'evals/s/core':>12s} "
             f"{'model rows/s/core':>17s} {'mean batch':>10s} {'games':>5s} {'vs in-process':>13s} "
             f"{'vs 1 worker':>11s} {'MiB/worker':>10s}"]
    for name, (alone, piped) in results.items():
        lines.append(f"{name:9s} {'-':>7s} {alone.per_s:9,.0f} {alone.cores:5.2f} {alone.per_core:12,.0f} "
                     f"{alone.rows_per_core:17,.0f} {alone.mean_batch:10.0f} {alone.games:5d} {'1.00':>13s} "
                     f"{'':>11s}")
        one = piped.get(1)
        for workers, rate in piped.items():
            growth = f"{rate.per_s / one.per_s:.2f}" if one is not None else "-"
            lines.append(f"{name:9s} {workers:7d} {rate.per_s:9,.0f} {rate.cores:5.2f} {rate.per_core:12,.0f} "
                         f"{rate.rows_per_core:17,.0f} {rate.mean_batch:10.0f} {rate.games:5d} "
                         f"{rate.per_core / alone.per_core:13.2f} {growth:>11s} {rate.worker_mib:10,.0f}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="length of each timed stretch")
    parser.add_argument("--games", default="connect4,go9,go19", help="the shipped configs to run")
    parser.add_argument("--workers", default="1,2", help="the worker counts to run the pipeline with")
    parser.add_argument("--inline-answer-bytes", type=int, default=INLINE_ANSWER_BYTES,
                        help="the largest server answer returned inside Ray's reply (Ray's default: 102400)")
    args = parser.parse_args(argv)
    games = [name.strip() for name in args.games.split(",") if name.strip()]
    counts = sorted({int(n) for n in args.workers.split(",")})
    results: dict[str, tuple[Rate, dict[int, Rate]]] = {}
    ray.init(num_cpus=max(counts) + 1, include_dashboard=False, log_to_driver=False)
    try:
        with tempfile.TemporaryDirectory() as tmp, EmbeddedRedis(data_dir=Path(tmp) / "redis") as redis:
            for name in games:
                config = load_config(name)
                alone = in_process(config, args.seconds)
                print(f"{name}: in-process {alone.per_core:,.0f} evaluations/s per core", flush=True)
                piped = {n: pipeline(config, n, args.seconds, redis, inline_answer_bytes=args.inline_answer_bytes)
                         for n in counts}
                results[name] = (alone, piped)
    finally:
        ray.shutdown()
    for line in table(results):
        print(line)
    ratios = {name: piped[counts[-1]].per_core / alone.per_core for name, (alone, piped) in results.items()}
    for name, ratio in ratios.items():
        print(f"RATIO pipeline_evals_per_s_vs_in_process_{name} {ratio:.2f} vs in_process_search target {TARGET}")
    print(f"RATIO pipeline_evals_per_s_vs_in_process {min(ratios.values()):.2f} vs in_process_search "
          f"target {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
