"""The network on each Keras backend, side by side on this machine: the compiled
inference call (rows/s at batch 256 and 1,024) and the train step (steps/s at the
config's batch) of the Connect Four and go9 nets, on TensorFlow, JAX and PyTorch.

Keras picks its backend once per process, so each backend lives in a child process of
its own (this script with ``--child``), built and warmed up (every compilation done)
before any timing. The parent then times them in alternating slices, one backend at a
time while the others wait on a pipe, so that drift in the machine's load hits all of
them alike; each figure is the median of its slices.

    python bench/backends.py [--configs connect4,go9] [--seconds 3] [--slices 3]

Ends with one line per config, measure and backend other than TensorFlow:

    RATIO backend_<config>_<measure>_<backend> <x> vs tensorflow target 1.0
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

BACKENDS = ("tensorflow", "jax", "torch")
MEASURES = ("infer256", "infer1024", "train")


def child(backend: str, config_name: str) -> None:
    """Build, warm up, then answer ``MEASURE SECONDS`` lines with a rate each."""
    from tengen.engine.backend import use_backend

    use_backend(backend)
    from tengen.engine.network import CompiledModel
    from tengen.learner.trainer import Trainer
    from tengen.run.config import load_config

    config = load_config(config_name)
    spec = config.network_spec()
    options = config.learner_options()
    rng = np.random.default_rng(0)
    compiled = CompiledModel(spec.build())
    trainer = Trainer(model=spec.build(), optimizer=options.optimizer, learning_rate=options.learning_rate,
                      momentum=options.momentum)
    planes = {n: (rng.random((n, *spec.input_shape)) < 0.25).astype(np.float32) for n in (256, 1024)}
    batch = options.batch_size
    minibatch = ((rng.random((batch, *spec.input_shape)) < 0.25).astype(np.float32),
                 rng.dirichlet(np.ones(spec.num_actions), batch).astype(np.float32),
                 rng.uniform(-1, 1, batch).astype(np.float32))
    for _ in range(2):  # compile, then once more compiled
        for rows in planes.values():
            compiled(rows)
        trainer.train_step(*minibatch)
    print(json.dumps({"ready": backend, "batch": batch}), flush=True)
    for line in sys.stdin:
        measure, seconds = line.split()
        start, done = time.perf_counter(), 0
        while (elapsed := time.perf_counter() - start) < float(seconds):
            if measure == "train":
                trainer.train_step(*minibatch)
                done += 1
            else:
                rows = planes[int(measure.removeprefix("infer"))]
                compiled(rows)
                done += len(rows)
        print(json.dumps({"rate": done / elapsed}), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", default="connect4,go9", help="packaged configs, comma-separated")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds of each timed slice")
    parser.add_argument("--slices", type=int, default=3, help="timed slices of each measure and backend")
    parser.add_argument("--child", nargs=2, metavar=("BACKEND", "CONFIG"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return 0
    backends = [b for b in BACKENDS if importlib.util.find_spec(b) is not None]
    if "tensorflow" not in backends or len(backends) < 2:
        print(f"need TensorFlow and another backend; installed: {', '.join(backends)}", file=sys.stderr)
        return 2
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    ratios = []
    for config in args.configs.split(","):
        children = {b: subprocess.Popen([sys.executable, __file__, "--child", b, config], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
                    for b in backends}
        batch = 0
        try:
            for b, process in children.items():
                assert process.stdout is not None
                ready = json.loads(process.stdout.readline() or "{}")
                if ready.get("ready") != b:
                    raise RuntimeError(f"the {b} child did not start (run it with --child {b} {config})")
                batch = ready["batch"]
            rates: dict[tuple[str, str], list[float]] = {(b, m): [] for b in backends for m in MEASURES}
            for _ in range(args.slices):
                for measure in MEASURES:
                    for b, process in children.items():
                        assert process.stdin is not None and process.stdout is not None
                        process.stdin.write(f"{measure} {args.seconds}\n")
                        process.stdin.flush()
                        rates[b, measure].append(json.loads(process.stdout.readline())["rate"])
        finally:
            for process in children.values():
                if process.stdin is not None:
                    process.stdin.close()
                process.wait(timeout=60)
        print(f"{config}: inference rows/s at 256 and 1,024, train steps/s at batch {batch} (median of {args.slices})")
        for b in backends:
            median = {m: statistics.median(rates[b, m]) for m in MEASURES}
            print(f"  {b:<10} {median['infer256']:>9,.0f} {median['infer1024']:>9,.0f} {median['train']:>7.2f}")
            if b != "tensorflow":
                for m in MEASURES:
                    ratio = median[m] / statistics.median(rates["tensorflow", m])
                    ratios.append(f"RATIO backend_{config}_{m}_{b} {ratio:.3f} vs tensorflow target 1.0")
    print("\n".join(ratios))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
