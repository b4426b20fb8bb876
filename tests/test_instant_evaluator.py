"""The network stand-in that bench/pipeline_ceiling.py measures the plumbing with: it
answers like a CompiledModel (shapes, dtypes), with nothing learned in it, and an
inference server given it serves its answers without building a network."""

import asyncio
import subprocess
import sys

import numpy as np
import pytest

from tengen.engine.network_spec import NetworkSpec
from tengen.testing.instant_evaluator import InstantEvaluator
from tengen.workers.inference_server import InferenceServer

# Go 9x9's planes (17 of them) and actions (81 points and the pass)
GO9 = NetworkSpec(input_shape=(9, 9, 17), num_actions=82, blocks=4, filters=32, l2=1e-4, value_hidden=64,
                  ownership=True)


def test_every_position_gets_a_uniform_policy_and_value_zero():
    evaluate = InstantEvaluator.like(GO9)
    planes = np.random.default_rng(0).integers(0, 2, size=(5, 9, 9, 17), dtype=np.uint8)

    policy, value = evaluate(planes)

    assert policy.shape == (5, 82) and policy.dtype == np.float32
    assert value.shape == (5,) and value.dtype == np.float32
    assert np.all(policy == np.float32(1 / 82))  # every action alike, whatever the board
    assert np.all(value == 0.0)
    np.testing.assert_allclose(policy.sum(axis=1), 1.0, rtol=1e-5)


def test_an_empty_batch_and_a_wrong_board_are_answered_as_the_network_would():
    evaluate = InstantEvaluator(input_shape=(6, 7, 3), num_actions=7)
    policy, value = evaluate(np.zeros((0, 6, 7, 3), np.uint8))
    assert policy.shape == (0, 7) and value.shape == (0,)
    with pytest.raises(ValueError, match=r"planes must be \[B, 6, 7, 3\], got \(2, 9, 9, 17\)"):
        evaluate(np.zeros((2, 9, 9, 17), np.uint8))


def test_a_server_given_the_stand_in_merges_and_splits_its_answers():
    server = InferenceServer(network=GO9, model=InstantEvaluator.like(GO9), clients=2, weights=b"ignored")
    requests = [np.zeros((3, 9, 9, 17), np.uint8), np.ones((4, 9, 9, 17), np.uint8)]

    async def two_workers():
        return await asyncio.wait_for(asyncio.gather(*(server.evaluate(p) for p in requests)), 60)

    (policy_a, value_a), (policy_b, value_b) = asyncio.run(two_workers())
    assert policy_a.shape == (3, 82) and policy_b.shape == (4, 82) and value_b.shape == (4,)
    stats = server.stats()
    assert stats["batches"] == 1 and stats["evaluations"] == 7 and stats["traces"] == 0
    assert not server.mixed_precision


def test_a_server_with_the_stand_in_starts_no_backend():
    # the plumbing is measured without TensorFlow's threads or memory in the server
    probe = ("import sys\n"
             "from tengen.engine.network_spec import NetworkSpec\n"
             "from tengen.testing.instant_evaluator import InstantEvaluator\n"
             "from tengen.workers.inference_server import InferenceServer\n"
             "spec = NetworkSpec(input_shape=(3, 3, 3), num_actions=9, blocks=1, filters=8, l2=0.0,"
             " value_hidden=8, ownership=False)\n"
             "InferenceServer(network=spec, model=InstantEvaluator.like(spec), model_calls=2)\n"
             "print(sorted({'keras', 'tensorflow'} & set(sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "[]", out.stderr
