"""Learner steps per second on a config's net and batch size, two Trainers side by side
in one process: the step compiled with XLA (the Trainer's default) vs the plain
``tf.function`` (``--compare xla``), or the XLA step in mixed float16 vs float32
(``--compare precision``, for a GPU).

Both trainers train nets built alike on the same random minibatches (positions with a
quarter of the cells set, Dirichlet policies, uniform values). Each is warmed up first
(XLA compiles once per batch size), then the two are timed in alternating slices, so
that drift in the machine's load hits both alike.

    python bench/train_step.py [--config connect4] [--seconds 20] [--batch N]
        [--compare xla|precision] [--mixed-precision]

Ends with

    RATIO train_step_xla_vs_plain <x> vs plain_tf_function target 1.0
    RATIO train_step_mixed_vs_float32 <x> vs float32_train_step target 1.5
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from tengen.learner.trainer import Trainer
from tengen.run.config import load_config

SLICES = 4

# --compare: the two sides as (name, jit_compile, mixed precision or None for the
# --mixed-precision flag), and the RATIO line's name and target
COMPARISONS = {
    "xla": ((("xla", True, None), ("plain", False, None)), "train_step_xla_vs_plain", "plain_tf_function", 1.0),
    "precision": ((("mixed_float16", True, True), ("float32", True, False)),
                  "train_step_mixed_vs_float32", "float32_train_step", 1.5),
}


def minibatch(spec, batch: int, rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    planes = (rng.random((batch, *spec.input_shape)) < 0.25).astype(np.float32)
    policy = rng.dirichlet(np.ones(spec.num_actions), batch).astype(np.float32)
    value = rng.uniform(-1, 1, batch).astype(np.float32)
    return planes, policy, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="connect4", help="a packaged config's name or a file")
    parser.add_argument("--seconds", type=float, default=20.0, help="timed seconds for each side")
    parser.add_argument("--batch", type=int, default=0, help="minibatch size (default: the config's)")
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="xla",
                        help="XLA vs the plain step, or mixed float16 vs float32 (both XLA)")
    parser.add_argument("--mixed-precision", action="store_true",
                        help="--compare xla: build both nets in mixed float16 (GPU)")
    args = parser.parse_args(argv)
    if args.mixed_precision and args.compare == "precision":
        parser.error("--mixed-precision is for --compare xla: --compare precision sets each side's precision")
    config = load_config(args.config)
    spec = config.network_spec()
    batch = args.batch or config.train.batch_size
    rng = np.random.default_rng(0)
    batches = [minibatch(spec, batch, rng) for _ in range(8)]

    sides, ratio_name, peer, target = COMPARISONS[args.compare]
    trainers = {}
    for name, jit, mixed in sides:
        model = spec.build(mixed_precision=args.mixed_precision if mixed is None else mixed)
        trainer = Trainer(model=model, optimizer=config.train.optimizer,
                          learning_rate=0.01, momentum=config.train.momentum, jit_compile=jit)
        start = time.perf_counter()
        for data in batches:
            trainer.train_step(*data)
        print(f"{name}: warm-up (compile and {len(batches)} steps) {time.perf_counter() - start:.1f} s", flush=True)
        trainers[name] = trainer

    steps = dict.fromkeys(trainers, 0)
    seconds = dict.fromkeys(trainers, 0.0)
    for _ in range(SLICES):
        for name, trainer in trainers.items():
            start = time.perf_counter()
            while time.perf_counter() - start < args.seconds / SLICES:
                trainer.train_step(*batches[steps[name] % len(batches)])  # returns floats: one sync a step
                steps[name] += 1
            seconds[name] += time.perf_counter() - start
    rates = {name: steps[name] / seconds[name] for name in trainers}
    for name, rate in rates.items():
        trainer = trainers[name]
        print(f"{name}: {rate:.1f} steps/s ({rate * batch:,.0f} positions/s) at batch {batch}, "
              f"{trainer.trace_count} trace(s), {trainer.model.get_layer('stem_conv').dtype_policy.name}", flush=True)
    print(f"{spec.blocks} blocks x {spec.filters} filters, {args.config}", flush=True)
    first, second = trainers
    print(f"RATIO {ratio_name} {rates[first] / rates[second]:.3f} vs {peer} target {target}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
