"""How close self-play's network call runs to what this machine's cores can compute: the
call's floating-point rate against numpy's float32 matrix product (the BLAS sgemm that
numpy ships), both on all the cores, timed in alternating slices.

Self-play on a CPU spends most of its time in the network (testing/cpu_by_part.py: 57% of a
Connect Four main job's CPU). If the call already runs near the machine's dense rate,
more games an hour can only come from fewer evaluations (the evaluation cache, cheaper
searches, a smaller net), not from a faster call.

- The call: ``CompiledModel`` as self-play uses it (unpadded without XLA), on batches of
  ``--batch`` random positions (self-play's batches on 2 cores are 300-1,024 rows).
- Its rate counts the multiply-adds of the convolutions and dense layers, twice each
  (``network_flops``); batch norm, activations and the softmax are left out, so the
  rate is a little low.
- The peer: ``a @ b`` on two ``--matrix`` square float32 matrices, 2 n^3 operations.

    python bench/inference_flops.py [--config connect4] [--seconds 30] [--slice 5] [--batch 512]

Measured on 2 cores (2026-12-05), Connect Four's 4x32 net (6.28 MFLOP a position):
105 GFLOP/s (16,767 positions/s) against 173 GFLOP/s for sgemm, 0.608. So a Connect
Four game an hour more on this machine comes from fewer evaluations, not a faster call.

Ends with

    RATIO inference_flops_vs_sgemm <x> vs numpy_sgemm target 0.5
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable

# one process, all the cores: as the single-process run and the inference server call
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", str(os.cpu_count() or 1))

import keras  # noqa: E402
import numpy as np  # noqa: E402

from tengen.engine.network import CompiledModel  # noqa: E402
from tengen.run.config import config_path, load_config  # noqa: E402

TARGET = 0.5


def network_flops(model: keras.Model) -> int:
    """Floating-point operations of one position through ``model``: two per multiply-add of
    its Conv2D and Dense layers."""
    multiply_adds = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):
            _, height, width, _ = layer.output.shape
            multiply_adds += int(np.prod(layer.kernel.shape)) * height * width
        elif isinstance(layer, keras.layers.Dense):
            multiply_adds += int(np.prod(layer.kernel.shape))
    return 2 * multiply_adds


def rate_in_slices(calls: dict[str, tuple[Callable[[], object], int]], seconds: float,
                   slice_s: float) -> dict[str, float]:
    """Operations per second of each ``(call, operations per call)``, timed in turns of
    ``slice_s`` seconds until each has ``seconds``, after one untimed call each."""
    for call, _ in calls.values():
        call()
    timed = dict.fromkeys(calls, 0.0)
    operations = dict.fromkeys(calls, 0)
    while min(timed.values()) < seconds:
        for name, (call, per_call) in calls.items():
            start = time.perf_counter()
            while time.perf_counter() - start < slice_s:
                call()
                operations[name] += per_call
            timed[name] += time.perf_counter() - start
    return {name: operations[name] / timed[name] for name in calls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="connect4")
    parser.add_argument("--seconds", type=float, default=30.0, help="timed seconds per side")
    parser.add_argument("--slice", type=float, default=5.0, help="seconds per turn")
    parser.add_argument("--batch", type=int, default=512, help="positions per network call")
    parser.add_argument("--matrix", type=int, default=1024, help="the side of the peer's square matrices")
    args = parser.parse_args(argv)
    config = load_config(config_path(args.config))
    net = config.network_spec().build()
    model = CompiledModel(net)
    rng = np.random.default_rng(config.seed)
    positions = (rng.random((args.batch, *net.input_shape[1:])) < 0.3).astype(np.float32)
    a, b = (rng.standard_normal((args.matrix, args.matrix), dtype=np.float32) for _ in range(2))
    per_position = network_flops(net)
    rates = rate_in_slices({"network": (lambda: model(positions), per_position * args.batch),
                            "sgemm": (lambda: a @ b, 2 * args.matrix ** 3)}, args.seconds, args.slice)
    print(f"{config.game.name}, {config.network.blocks}x{config.network.filters} net: "
          f"{per_position / 1e6:.2f} MFLOP a position, batches of {args.batch}, {os.cpu_count()} cores")
    print(f"network  {rates['network'] / 1e9:7.1f} GFLOP/s ({rates['network'] / per_position:,.0f} positions/s)")
    print(f"sgemm    {rates['sgemm'] / 1e9:7.1f} GFLOP/s ({args.matrix}x{args.matrix} float32)")
    print(f"RATIO inference_flops_vs_sgemm {rates['network'] / rates['sgemm']:.3f} vs numpy_sgemm target {TARGET}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
