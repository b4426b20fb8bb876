"""The figures of bench/gpu.sh, one step on one Keras backend per process (Keras takes
its backend once per process, and a step that fails or hangs leaves the others be):

    python bench/gpu_figures.py STEP --backend jax|torch --out FIGURES.json [--smoke]

STEP is one of

* ``device``: what the backend sees (version, devices, GPU or not, its mixed policy);
* ``infer``: the raw compiled call (``CompiledModel``) of the go9 and go19 nets at
  batch 256, 1,024 and 4,096, float32 and mixed precision: rows/s;
* ``server``: the same nets through ``InferenceServer`` in this process, without Ray:
  concurrent callers (asyncio tasks, two requests in flight each, as a worker keeps its
  two halves) merged into batches of 1,024, against the raw call at that batch, timed in
  halves before and after so that drift hits both alike;
* ``train``: the Trainer's step on go19's net (10x128) at batch 1,024, mixed vs float32;
* ``selfplay``: ``tengen train go9|go19 --single-process`` for some minutes, read back
  from the run's status lines: games/min, positions/s, evaluations/s, mean batch and
  the share of wall time self-play's model spent in its compiled call.

Each figure is printed as ``FIGURE <backend>.<step>.<name> <value>`` and merged into
the JSON file ``--out`` (``{backend: {step: {name: value}}}``); ratios are printed in the
house format, e.g. ``RATIO gpu_inference_server_vs_raw_jax 0.93 vs raw_compiled_call
target 0.9``. ``--smoke`` shrinks every step to seconds and small batches, to check on
a CPU that the step runs at all.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from collections import deque
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

NETS = ("go9", "go19")
BATCHES = (256, 1024, 4096)
SMOKE_BATCHES = (8, 32)
PRECISIONS = {"float32": False, "mixed": True}


class Figures:
    """The figures of one step, printed as they come and merged into ``out`` at the end."""

    def __init__(self, out: Path, backend: str, step: str):
        self.out, self.backend, self.step = out, backend, step
        self.values: dict[str, Any] = {}

    def __setitem__(self, name: str, value: Any) -> None:
        self.values[name] = value
        shown = f"{value:,.3f}" if isinstance(value, float) else value
        print(f"FIGURE {self.backend}.{self.step}.{name} {shown}", flush=True)

    def ratio(self, name: str, value: float, peer: str, target: float) -> None:
        self[f"ratio_{name}"] = round(value, 3)
        print(f"RATIO {name}_{self.backend} {value:.3f} vs {peer} target {target}", flush=True)

    def save(self) -> None:
        data = json.loads(self.out.read_text()) if self.out.exists() else {}
        data.setdefault(self.backend, {})[self.step] = self.values
        self.out.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")


def rate(call, rows: int, seconds: float) -> float:
    """Rows/s of back-to-back ``call()`` for about ``seconds`` (each call is ``rows``)."""
    done, start = 0, time.perf_counter()
    while True:
        call()
        done += rows
        if (elapsed := time.perf_counter() - start) >= seconds:
            return done / elapsed


def planes(spec, batch: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.random((batch, *spec.input_shape)) < 0.25).astype(np.float32)


def device(figures: Figures, smoke: bool) -> None:
    from tengen.engine.backend import backend, gpu_available, mixed_precision_policy

    which = backend()
    if which == "jax":
        import jax

        figures["version"] = jax.__version__
        figures["devices"] = [str(d) for d in jax.devices()]
    else:
        import torch

        figures["version"] = torch.__version__
        figures["cuda_build"] = str(torch.version.cuda)
        figures["devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    figures["gpu"] = gpu_available()
    figures["mixed_policy"] = mixed_precision_policy()


def infer(figures: Figures, smoke: bool) -> None:
    from tengen.engine.network import CompiledModel
    from tengen.run.config import load_config

    batches = SMOKE_BATCHES if smoke else BATCHES
    for net in NETS:
        spec = load_config(net).network_spec()
        for precision, mixed in PRECISIONS.items():
            # one program per batch size tried: a batch of 4,096 is one call, not four
            model = CompiledModel(spec.build(mixed_precision=mixed), buckets=batches)
            for batch in batches:
                rows = planes(spec, batch, seed=batch)
                model(rows)  # compile outside the timing
                model(rows)
                figures[f"{net}_{precision}_b{batch}_rows_per_s"] = round(
                    rate(partial(model, rows), batch, 0.3 if smoke else 1.5))


async def _served(server, requests: list[np.ndarray], seconds: float) -> int:
    """Rows the server answers in about ``seconds`` to one asyncio task per request
    batch, each keeping two requests in flight."""
    end = time.perf_counter() + seconds

    async def caller(rows: np.ndarray) -> int:
        in_flight = deque(asyncio.ensure_future(server.evaluate(rows)) for _ in range(2))
        done = 0
        while time.perf_counter() < end:
            await in_flight.popleft()
            done += len(rows)
            in_flight.append(asyncio.ensure_future(server.evaluate(rows)))
        for answer in in_flight:
            done += len((await answer)[0])
        return done

    return sum(await asyncio.gather(*(caller(rows) for rows in requests)))


def server(figures: Figures, smoke: bool) -> None:
    from tengen.engine.backend import gpu_available
    from tengen.engine.network import CompiledModel
    from tengen.run.config import load_config
    from tengen.workers.inference_server import InferenceServer

    callers, request = (4, 8) if smoke else (4, 256)
    merged, seconds, mixed = callers * request, 1.0 if smoke else 6.0, gpu_available()
    figures["merged_batch"] = merged
    figures["mixed_precision"] = mixed
    for net in NETS:
        spec = load_config(net).network_spec()
        raw = CompiledModel(spec.build(mixed_precision=mixed))
        raw_rows = planes(spec, merged, seed=1)
        served_by = InferenceServer(network=spec, clients=callers, max_batch=merged, batch_timeout_ms=5.0,
                                    mixed_precision=mixed)
        requests = [planes(spec, request, seed=10 + i) for i in range(callers)]
        raw(raw_rows)
        rate(partial(raw, raw_rows), merged, 0.2 if smoke else 1.0)
        asyncio.run(_served(served_by, requests, 0.2 if smoke else 2.0))  # compiles, fills the executor

        first = rate(partial(raw, raw_rows), merged, seconds / 2)
        before = served_by.stats()
        start = time.perf_counter()
        rows = asyncio.run(_served(served_by, requests, seconds))
        elapsed = time.perf_counter() - start
        after = served_by.stats()
        second = rate(partial(raw, raw_rows), merged, seconds / 2)

        batches = after["batches"] - before["batches"]
        figures[f"{net}_raw_rows_per_s"] = round((first + second) / 2)
        figures[f"{net}_server_rows_per_s"] = round(rows / elapsed)
        figures[f"{net}_server_mean_batch"] = round((after["evaluations"] - before["evaluations"]) / max(batches, 1), 1)
        figures[f"{net}_server_model_busy"] = round((after["model_seconds"] - before["model_seconds"]) / elapsed, 3)
        figures.ratio(f"gpu_inference_server_vs_raw_{net}", rows / elapsed / ((first + second) / 2),
                      "raw_compiled_call", 0.9)
    # the figure: the net that gives the GPU real work
    figures.ratio("gpu_inference_server_vs_raw", figures.values["ratio_gpu_inference_server_vs_raw_go19"],
                  "raw_compiled_call", 0.9)


def train(figures: Figures, smoke: bool) -> None:
    from tengen.learner.trainer import Trainer
    from tengen.run.config import load_config

    config = load_config("go19")
    spec = config.network_spec()
    batch = 16 if smoke else config.train.batch_size
    rng = np.random.default_rng(0)
    data = (planes(spec, batch, seed=0), rng.dirichlet(np.ones(spec.num_actions), batch).astype(np.float32),
            rng.uniform(-1, 1, batch).astype(np.float32))
    figures["net"] = f"{spec.blocks}x{spec.filters}"
    figures["batch"] = batch
    steps_per_s = {}
    for precision, mixed in PRECISIONS.items():
        trainer = Trainer(model=spec.build(mixed_precision=mixed), optimizer=config.train.optimizer,
                          learning_rate=0.01, momentum=config.train.momentum)
        for _ in range(2):  # compile, then once compiled
            trainer.train_step(*data)
        # a step returns its losses as floats: one sync with the device a step
        steps_per_s[precision] = rate(lambda trainer=trainer: trainer.train_step(*data), 1, 1.0 if smoke else 8.0)
        figures[f"{precision}_steps_per_s"] = round(steps_per_s[precision], 2)
    figures.ratio("gpu_train_step_mixed_vs_float32", steps_per_s["mixed"] / steps_per_s["float32"],
                  "float32_train_step", 1.5)


def selfplay_figures(lines: list[dict[str, Any]], warm_s: float) -> dict[str, float]:
    """Rates over a run's status lines (status.jsonl, oldest first) from the first line
    at least ``warm_s`` into the run (compilation left out) to the last before the final
    one; the model's busy share from its cumulative seconds where the lines carry them,
    else weighted by each line's interval."""
    lines = [line for line in lines if not line.get("final")]
    steady = [line for line in lines if line["elapsed_s"] >= warm_s]
    if len(steady) < 2:
        steady = lines[-2:]
    if len(steady) < 2:
        raise ValueError(f"{len(lines)} status line(s): too few to take rates from")
    first, last = steady[0], steady[-1]
    seconds = last["elapsed_s"] - first["elapsed_s"]
    totals = {key: (last["totals"][key] - first["totals"][key]) / seconds for key in last["totals"]}
    if "model_s" in last:
        busy = (last["model_s"] - first["model_s"]) / seconds
    else:
        busy = sum((b["elapsed_s"] - a["elapsed_s"]) * b.get("model_busy", 0.0)
                   for a, b in zip(steady, steady[1:], strict=False)) / seconds
    return {
        "seconds": round(seconds, 1),
        "games_per_min": round(totals["games"] * 60, 1),
        "positions_per_s": round(totals["positions"], 1),
        "evaluations_per_s": round(totals["evaluations"]),
        "mean_batch": last.get("mean_batch", 0.0),
        "model_busy": round(busy, 3),
        "learner_step": last["learner_step"],
    }


def selfplay(figures: Figures, smoke: bool, *, config: str, minutes: float, run_dir: Path) -> None:
    settings = ["network.backend=" + figures.backend, "evaluation.enabled=false"]
    if smoke:  # a CPU's seconds: few games, short searches
        settings += ["selfplay.games_in_flight=8", "mcts.simulations=16", "selfplay.cheap_simulations=8"]
    command = [sys.executable, "-c", "import sys; from tengen.cli import main; sys.exit(main())", "train", config,
               "--single-process", "--minutes", str(minutes), "--run-dir", str(run_dir)]
    for setting in settings:
        command += ["--set", setting]
    print("$ " + " ".join(command[3:]), flush=True)
    subprocess.run(command, check=True, timeout=minutes * 60 + 240)
    lines = [json.loads(line) for line in (run_dir / "status.jsonl").read_text().splitlines() if line.strip()]
    for name, value in selfplay_figures(lines, warm_s=0.0 if smoke else 30.0).items():
        figures[f"{config}_{name}"] = value
    figures.ratio(f"gpu_selfplay_model_busy_{config}", figures.values[f"{config}_model_busy"], "wall_time", 0.8)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("step", choices=("device", "infer", "server", "train", "selfplay"))
    parser.add_argument("--backend", choices=("jax", "torch"), required=True)
    parser.add_argument("--out", type=Path, required=True, help="the JSON file of the figures (merged into)")
    parser.add_argument("--smoke", action="store_true", help="seconds and small batches: a CPU's check")
    parser.add_argument("--config", default="go9", help="selfplay: the packaged config")
    parser.add_argument("--minutes", type=float, default=3.0, help="selfplay: minutes of the run")
    parser.add_argument("--run-dir", type=Path, help="selfplay: the run directory (default: next to --out)")
    args = parser.parse_args(argv)
    os.environ["KERAS_BACKEND"] = args.backend
    from tengen.engine.backend import use_backend

    use_backend(args.backend)
    figures = Figures(args.out, args.backend, args.step if args.step != "selfplay" else f"selfplay_{args.config}")
    try:
        if args.step == "selfplay":
            run_dir = args.run_dir or args.out.parent / f"run-{args.config}-{args.backend}"
            selfplay(figures, args.smoke, config=args.config, minutes=args.minutes, run_dir=run_dir)
        else:
            {"device": device, "infer": infer, "server": server, "train": train}[args.step](figures, args.smoke)
    finally:
        figures.save()  # what was measured before a failure still counts
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
