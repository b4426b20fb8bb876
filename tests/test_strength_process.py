"""The single-process run's strength evaluator in its child process
(run/strength_process.py): a version's weights in, its scores out, never waited for;
the child at nice 19; a child killed mid-evaluation is a failure the run is told of,
and the next request starts a new one."""

from __future__ import annotations

import os
import signal

import pytest

from tengen.engine.network import weights_to_bytes
from tengen.run.config import parse_config
from tengen.run.strength_process import EvaluationFailed, StrengthProcess
from tengen.testing.waiting import wait_for

CONFIG = parse_config({"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 4},
                       "mcts": {"simulations": 8},
                       "evaluation": {"positions": 64, "games": 8, "cpu_share": 1.0}})


@pytest.fixture
def evaluator():
    process = StrengthProcess(CONFIG)
    yield process
    process.close()


def answer(process: StrengthProcess) -> dict:
    results: list = []
    wait_for(lambda: results.append(process.poll()) or results[-1] is not None, timeout_s=300,
             what="the evaluator's answer")
    return results[-1]


def test_a_version_is_measured_in_a_child_at_nice_19(evaluator):
    blob = weights_to_bytes(CONFIG.network_spec().build(), metadata={})
    assert evaluator.poll() is None  # nothing asked
    evaluator.ask(3, blob)
    with pytest.raises(RuntimeError, match="one evaluation at a time"):
        evaluator.ask(4, blob)
    result = answer(evaluator)
    assert result["version"] == 3
    assert {s["reference"]: s["n"] for s in result["scores"]} == {"optimal_moves": 64, "vs_perfect": 8}
    assert evaluator.pid != os.getpid() and os.getpriority(os.PRIO_PROCESS, evaluator.pid) == 19
    evaluator.ask(5, blob)  # the same child again
    assert answer(evaluator)["version"] == 5


def test_a_child_killed_mid_evaluation_is_a_failure_and_the_next_request_starts_another(evaluator):
    blob = weights_to_bytes(CONFIG.network_spec().build(), metadata={})
    evaluator.ask(1, blob)
    first = evaluator.pid
    os.kill(first, signal.SIGKILL)
    failures: list[str] = []

    def failed() -> bool:
        try:
            evaluator.poll()
        except EvaluationFailed as e:
            failures.append(str(e))
        return bool(failures)

    wait_for(failed, timeout_s=60, what="the killed child reported")
    assert "died" in failures[0] and evaluator.asked is None
    evaluator.ask(2, blob)
    assert evaluator.pid != first
    assert answer(evaluator)["version"] == 2


#: a tiny tic-tac-toe run that promotes any candidate not swept, measured as soon as the best changes
RUN = {"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 8},
       "mcts": {"simulations": 8, "leaves_per_round": 4},
       "selfplay": {"games_in_flight": 16, "temperature_moves": 4},
       "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 100, "replay_window": 5000},
       "gating": {"rule": "threshold", "threshold": 0.05, "games": 4, "games_in_flight": 4},
       "evaluation": {"min_interval_s": 0, "positions": 64, "games": 8, "cpu_share": 1.0},
       "seed": 3}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_single_process_run_measures_its_promoted_models(tmp_path):
    from tengen.run import records
    from tengen.run.single_process import SingleProcessRun

    lines: list[str] = []
    run = SingleProcessRun(parse_config(RUN), tmp_path / "run", log=lines.append)

    def measured_a_promoted_model() -> bool:
        run.iterate()
        try:
            return any(line.version > 0 for line in records.read_evaluations(run.files))
        except FileNotFoundError:
            return False

    wait_for(measured_a_promoted_model, timeout_s=600, every_s=0, what="an evaluation of a promoted model")
    summary = run.finish()
    evaluations = records.read_evaluations(run.files)
    ladder = records.read_ladder(run.files).versions
    # the initial network, asked for at the first pass (the log says why, had it been cut off)
    assert evaluations[0].version == 0, [line for line in lines if "strength" in line]
    assert {line.version for line in evaluations} <= set(ladder), (evaluations, ladder)
    versions = [line.version for line in evaluations]
    assert versions == sorted(set(versions))  # each best once, in order
    assert all(line.learner_step <= summary["steps"] for line in evaluations)
    assert any(line.startswith("strength of 000000: optimal_moves") for line in lines)
    assert run.strength is not None and run.strength.pid is None  # the child is stopped with the run
