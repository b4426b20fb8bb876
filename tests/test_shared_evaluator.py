"""One evaluator for searches on several threads: the calls that wait while the
network is busy reach it as one batch, and each caller gets its own rows back."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from tengen.engine.mcts.shared_evaluator import SharedEvaluator
from tengen.testing.waiting import wait_for


class GatedNetwork:
    """A network whose answer is each row's sum (as value and as policy), that holds
    its first call until ``release`` is set, and that records the batch sizes it saw."""

    def __init__(self):
        self.release = threading.Event()
        self.batches: list[int] = []

    def __call__(self, planes):
        if not self.batches:
            self.release.wait(timeout=60)
        self.batches.append(len(planes))
        sums = planes.reshape(len(planes), -1).sum(axis=1).astype(np.float32)
        return np.stack([sums, -sums], axis=1), sums


def call_in_thread(evaluate, planes, answers, key):
    thread = threading.Thread(target=lambda: answers.__setitem__(key, evaluate(planes)))
    thread.start()
    return thread


def test_calls_that_wait_on_a_busy_network_go_to_it_as_one_batch():
    network = GatedNetwork()
    shared = SharedEvaluator(network)
    answers: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    first = call_in_thread(shared, np.ones((1, 2, 2, 1)), answers, "first")
    wait_for(lambda: shared.network_calls == 0 and shared.busy, timeout_s=30, what="the first call to run")
    inputs = {"a": np.full((3, 2, 2, 1), 2.0), "b": np.full((2, 2, 2, 1), 5.0)}
    threads = [call_in_thread(shared, planes, answers, key) for key, planes in inputs.items()]
    wait_for(lambda: shared.waiting == 2, timeout_s=30, what="two calls waiting")
    network.release.set()
    for thread in [first, *threads]:
        thread.join(timeout=60)
    assert network.batches == [1, 5] and shared.network_calls == 2 and shared.rows == 6
    assert answers["first"][1].tolist() == [4.0]
    assert answers["a"][1].tolist() == [8.0] * 3 and answers["b"][1].tolist() == [20.0] * 2
    assert answers["b"][0].tolist() == [[20.0, -20.0]] * 2


def test_a_call_alone_runs_at_once_and_a_network_error_reaches_every_caller_of_its_batch():
    shared = SharedEvaluator(lambda planes: (np.zeros((len(planes), 3), np.float32), np.zeros(len(planes))))
    policy, value = shared(np.zeros((4, 1, 1, 1)))
    assert policy.shape == (4, 3) and value.shape == (4,) and shared.network_calls == 1

    def broken(planes):
        raise RuntimeError("out of memory")

    failing = SharedEvaluator(broken)
    with pytest.raises(RuntimeError, match="out of memory"):
        failing(np.zeros((1, 1, 1, 1)))
    assert failing.waiting == 0 and not failing.busy  # the next call runs, and fails the same way
    with pytest.raises(RuntimeError, match="out of memory"):
        failing(np.zeros((1, 1, 1, 1)))
