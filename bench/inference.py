"""Evaluations per second through the InferenceServer actor vs a raw compiled model call.

The server runs as a Ray actor (1 CPU, async, ``max_concurrency`` 64) fed by client
actors (0 CPUs) that each send the same ready-made uint8 leaf batch over and over,
keeping two requests in flight (the design's two half-batches: the next request is
sent before the previous answer is awaited), so the server never idles for lack of
work. The peer is the raw ``CompiledModel`` call on one batch of the merged size
(clients x request), in the driver process with the same TensorFlow thread count,
measured in halves before and after the server run so that drift in the machine's
load hits both sides alike.

    python bench/inference.py [--seconds 10] [--clients 4] [--request 128] [--max-batch 512]
    python bench/inference.py --gpu     # mixed precision, merged batches 256, 512, 1024

CPU mode is Connect Four with a 5-block, 64-filter net; ``--gpu`` uses a 9x9 Go
net (10 blocks, 128 filters) so that the GPU has real work. Ends with

    RATIO inference_server_vs_raw <fraction> vs raw_compiled_call target 0.85

and, for the server as a run's CPU server is set up (``cluster.cpu_server_model_calls``,
2: two batches in the model at once, each op on half the cores; on a couple of cores
one call cannot keep them all busy),

    RATIO inference_server_two_calls_vs_raw <fraction> vs raw_compiled_call target 1.0

(``--gpu``: one ``RATIO gpu_inference_server_vs_raw_b<B>`` line per merged batch size,
then ``RATIO gpu_inference_server_vs_raw`` for the largest; a GPU server makes one call
at a time).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import deque
from typing import Any

# The same intra-op thread count in the driver (raw call) and in the server actor, and
# GPU memory taken as needed (two processes share one GPU: by default TensorFlow takes
# it all in the first). TensorFlow reads these when it starts: set before its import.
THREADS = str(os.cpu_count() or 1)
TF_ENV = {"TF_NUM_INTRAOP_THREADS": THREADS, "OMP_NUM_THREADS": THREADS, "TF_FORCE_GPU_ALLOW_GROWTH": "true"}
os.environ.update(TF_ENV)

import numpy as np  # noqa: E402
import ray  # noqa: E402

from tengen.engine.network import CompiledModel  # noqa: E402
from tengen.engine.network_spec import NetworkSpec  # noqa: E402
from tengen.workers.inference_server import InferenceServer  # noqa: E402

CPU_NET = NetworkSpec(input_shape=(6, 7, 3), num_actions=7, blocks=5, filters=64, l2=1e-4, value_hidden=64,
                   ownership=False)
GPU_NET = NetworkSpec(input_shape=(9, 9, 17), num_actions=82, blocks=10, filters=128, l2=1e-4, value_hidden=128,
                   ownership=False)


class Client:
    """A stand-in self-play worker: sends one ready-made batch, two requests in flight."""

    def __init__(self, server, planes: np.ndarray):
        self.server = server
        self.planes = planes

    def run(self, seconds: float) -> int:
        """Rows evaluated in about ``seconds`` (every request sent is also awaited)."""
        rows = self.planes.shape[0]
        in_flight = deque([self.server.evaluate.remote(self.planes) for _ in range(2)])
        done = 0
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            ray.get(in_flight.popleft())
            done += rows
            in_flight.append(self.server.evaluate.remote(self.planes))
        for answer in ray.get(list(in_flight)):
            done += answer[0].shape[0]
        return done


def random_planes(net: NetworkSpec, batch: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, size=(batch, *net.input_shape), dtype=np.uint8)


def raw_rate(model: CompiledModel, planes: np.ndarray, seconds: float) -> float:
    """Evaluations/s of back-to-back raw calls on ``planes`` (already traced)."""
    done = 0
    start = time.perf_counter()
    while True:
        model(planes)
        done += planes.shape[0]
        elapsed = time.perf_counter() - start
        if elapsed >= seconds:
            return done / elapsed


def server_rate(server, clients: list, seconds: float) -> tuple[float, float, dict, dict]:
    """Evaluations/s through the server, the seconds it took, its stats before and after."""
    before = ray.get(server.stats.remote())
    start = time.perf_counter()
    rows = sum(ray.get([c.run.remote(seconds) for c in clients]))
    elapsed = time.perf_counter() - start
    after = ray.get(server.stats.remote())
    return rows / elapsed, elapsed, before, after


def compare(
    *,
    net: NetworkSpec,
    clients: int,
    request: int,
    max_batch: int,
    seconds: float,
    mixed_precision: bool,
    warmup: float,
    num_gpus: int = 0,
    model_calls: int = 1,
) -> float:
    merged = clients * request
    print(
        f"-- net {net.blocks}x{net.filters} {net.input_shape}, {clients} clients x {request} rows "
        f"(merged {merged}), max_batch {max_batch}, mixed_precision {mixed_precision}, threads {THREADS}, "
        f"server model calls {model_calls}",
        flush=True,
    )
    raw = CompiledModel(net.build(mixed_precision=mixed_precision))
    raw_planes = random_planes(net, merged, seed=1)
    raw(raw_planes)  # trace outside the timing
    raw_rate(raw, raw_planes, warmup)

    server: Any = (
        ray.remote(InferenceServer)
        .options(num_cpus=1, num_gpus=num_gpus, max_concurrency=64, runtime_env={"env_vars": TF_ENV})
        .remote(
            network=net,
            clients=clients,
            max_batch=max_batch,
            batch_timeout_ms=5.0,
            mixed_precision=mixed_precision,
            model_calls=model_calls,
        )
    )
    actors: list[Any] = [
        ray.remote(Client).options(num_cpus=0).remote(server, random_planes(net, request, seed=10 + i))
        for i in range(clients)
    ]
    ray.get([c.run.remote(warmup) for c in actors])  # start-up and traces outside the timing

    first = raw_rate(raw, raw_planes, seconds / 2)
    served, elapsed, before, after = server_rate(server, actors, seconds)
    second = raw_rate(raw, raw_planes, seconds / 2)
    raw_evals = (first + second) / 2

    batches = after["batches"] - before["batches"]
    evaluations = after["evaluations"] - before["evaluations"]
    model_seconds = after["model_seconds"] - before["model_seconds"]
    print(f"raw compiled call, batch {merged}: {first:,.0f} then {second:,.0f} evaluations/s", flush=True)
    print(
        f"inference server: {served:,.0f} evaluations/s; {batches} model calls, mean batch "
        f"{evaluations / max(batches, 1):.1f}, model busy {model_seconds / elapsed:.0%} of the time, "
        f"model-only rate {evaluations / max(model_seconds, 1e-9):,.0f} evaluations/s, traces {after['traces']}",
        flush=True,
    )
    for actor in actors:
        ray.kill(actor)
    ray.kill(server)
    return served / raw_evals


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="mixed precision, Go 9x9 net, merged batches 256-1024")
    parser.add_argument("--seconds", type=float, default=None, help="timed seconds per side (default 10; 4 on GPU)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--request", type=int, default=128, help="rows per client request (CPU mode)")
    parser.add_argument("--max-batch", type=int, default=512, help="server max_batch (CPU mode)")
    args = parser.parse_args(argv)

    cpus = os.cpu_count() or 1
    ray.init(num_cpus=max(cpus, 2), include_dashboard=False, log_to_driver=False)
    try:
        if not args.gpu:
            print(
                "note: on a shared machine absolute rates are noisy; the ratio is measured in one run", flush=True
            )
            ratios = {
                calls: compare(
                    net=CPU_NET,
                    clients=args.clients,
                    request=args.request,
                    max_batch=args.max_batch,
                    seconds=args.seconds or 10.0,
                    mixed_precision=False,
                    warmup=2.0,
                    model_calls=calls,
                )
                for calls in (1, 2)
            }
            print(f"RATIO inference_server_vs_raw {ratios[1]:.3f} vs raw_compiled_call target 0.85", flush=True)
            print(f"RATIO inference_server_two_calls_vs_raw {ratios[2]:.3f} vs raw_compiled_call target 1.0",
                  flush=True)
            return 0

        from tengen.engine.backend import gpu_available

        if not gpu_available():
            print("warning: --gpu but TensorFlow sees no GPU; measuring on CPU", file=sys.stderr, flush=True)
        ratios = {}
        for merged in (256, 512, 1024):
            ratios[merged] = compare(
                net=GPU_NET,
                clients=args.clients,
                request=merged // args.clients,
                max_batch=merged,
                seconds=args.seconds or 4.0,
                mixed_precision=True,
                warmup=3.0,
                num_gpus=1 if gpu_available() else 0,  # the design's one GPU per server
            )
            print(
                f"RATIO gpu_inference_server_vs_raw_b{merged} {ratios[merged]:.3f} vs raw_compiled_call target 0.85",
                flush=True,
            )
        print(f"RATIO gpu_inference_server_vs_raw {ratios[1024]:.3f} vs raw_compiled_call target 0.85", flush=True)
        return 0
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
