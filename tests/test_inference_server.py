"""The shared model server: request merging, flush rules, errors, hot swap (tiny nets).

First as a plain object on an asyncio loop (``asyncio.run``: no pytest-asyncio here),
then as a real Ray actor fed by client actors.

The flush rules' timeout is read from a clock the tests move (tests/fake_clock.py);
what must wait is checked once the server is seen waiting (its own state), never
after a sleep, and what must happen is awaited within a generous bound.
"""

import asyncio
import threading

import numpy as np
import pytest
from fake_clock import FakeClock

from tengen.cluster.metrics import RunMetrics
from tengen.engine.network import CompiledModel, blob_sha256, weights_to_bytes
from tengen.engine.network_spec import NetworkSpec
from tengen.workers.inference_server import InferenceServer
from tengen.workers.packed_planes import pack_planes

# connect4-shaped planes, a one-block net: small enough to trace in well under a second
NET = NetworkSpec(input_shape=(6, 7, 3), num_actions=7, blocks=1, filters=8, l2=1e-4, value_hidden=16, ownership=False)
LONG_MS = 30_000.0  # a timeout that never fires within a test
#: how long the server may take to do what a test waits for (a shared, slow machine)
PATIENCE_S = 120.0


async def until(condition, what: str) -> None:
    """Yield to the server's tasks until ``condition()``; AssertionError past PATIENCE_S."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PATIENCE_S
    while not condition():
        assert loop.time() < deadline, f"not within {PATIENCE_S:.0f} s: {what}"
        await asyncio.sleep(0.005)


def net_and_blob(seed: int):
    import keras

    keras.utils.set_random_seed(seed)
    model = NET.build()
    return model, weights_to_bytes(model, metadata={"seed": seed})


@pytest.fixture(scope="module")
def nets():
    """Two networks with different weights: (model, blob) each."""
    return net_and_blob(1), net_and_blob(2)


def planes(batch: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, size=(batch, *NET.input_shape), dtype=np.uint8)


def server_for(blob: bytes, **kwargs) -> InferenceServer:
    return InferenceServer(network=NET, weights=blob, mixed_precision=False, **kwargs)


def assert_rows_match(result, reference):
    np.testing.assert_allclose(result[0], reference[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(result[1], reference[1], rtol=1e-5, atol=1e-6)


def test_four_clients_merge_into_one_model_call_with_the_same_answers(nets):
    (model, blob), _ = nets
    # The server's clock stands still: its timeout cannot fire, only the client count.
    server = server_for(blob, clients=4, batch_timeout_ms=150, clock=FakeClock())
    requests = [planes(n, seed) for seed, n in enumerate((3, 5, 2, 6))]

    async def clients():
        return await asyncio.wait_for(asyncio.gather(*(server.evaluate(p) for p in requests)), PATIENCE_S)

    results = asyncio.run(clients())

    stats = server.stats()
    assert stats["batches"] == 1 and stats["evaluations"] == 16 and stats["mean_batch_size"] == 16
    assert stats["queue_depth"] == 0
    assert not stats["metrics"], "a plain object records no metrics"
    # row for row what one direct call on the same rows gives
    direct = CompiledModel(model)(np.concatenate(requests))
    start = 0
    for request, (policy, value) in zip(requests, results, strict=True):
        n = request.shape[0]
        assert policy.shape == (n, 7) and policy.dtype == np.float32
        assert value.shape == (n,) and value.dtype == np.float32
        assert_rows_match((policy, value), (direct[0][start : start + n], direct[1][start : start + n]))
        start += n


def test_fewer_clients_than_attached_flush_on_the_timeout(nets):
    (model, blob), _ = nets
    clock = FakeClock()
    server = server_for(blob, clients=4, batch_timeout_ms=150, clock=clock)
    a, b = planes(4, 10), planes(4, 11)

    async def two_clients():
        answers = asyncio.gather(server.evaluate(a), server.evaluate(b))
        await until(lambda: server.stats()["queue_depth"] == 2 or server.stats()["batches"], "both requests queued")
        # Short of the deadline on the server's clock, the two wait for the other clients:
        # each time the batcher has looked at its clock again, nothing has gone.
        for seconds in (0.0, 0.149):
            clock.advance(seconds)
            reads = clock.reads
            await until(lambda reads=reads: clock.reads > reads or server.stats()["batches"],
                        "the batcher to look again")
            assert server.stats()["queue_depth"] == 2 and server.stats()["batches"] == 0, seconds
        clock.advance(0.01)  # past it: they go as one batch
        return await asyncio.wait_for(answers, PATIENCE_S)

    results = asyncio.run(two_clients())
    assert server.stats()["batches"] == 1
    direct = CompiledModel(model)
    assert_rows_match(results[0], direct(a))
    assert_rows_match(results[1], direct(b))


def test_max_batch_flushes_without_waiting_and_splits_batches(nets):
    (_, blob), _ = nets
    server = server_for(blob, clients=100, batch_timeout_ms=LONG_MS, max_batch=8)

    async def run():
        return await asyncio.gather(*(server.evaluate(planes(4, s)) for s in range(4)))

    results = asyncio.run(run())
    assert [r[0].shape[0] for r in results] == [4, 4, 4, 4]
    stats = server.stats()
    assert stats["batches"] == 2 and stats["mean_batch_size"] == 8  # 16 rows, at most 8 per call


def test_a_bad_request_fails_alone(nets):
    (model, blob), _ = nets
    server = server_for(blob, clients=2, batch_timeout_ms=LONG_MS)
    good = [planes(3, 20), planes(2, 21)]
    wrong_shape = np.zeros((2, 7, 6, 3), np.uint8)
    wrong_dtype = planes(2, 22).astype(np.float64)

    async def run():
        return await asyncio.gather(
            server.evaluate(good[0]),
            server.evaluate(wrong_shape),
            server.evaluate(wrong_dtype),
            server.evaluate(good[1]),
            return_exceptions=True,
        )

    first, bad_shape, bad_dtype, second = asyncio.run(run())
    assert isinstance(bad_shape, ValueError) and "planes must be" in str(bad_shape)
    assert isinstance(bad_dtype, ValueError) and "float64" in str(bad_dtype)
    direct = CompiledModel(model)
    assert_rows_match(first, direct(good[0]))
    assert_rows_match(second, direct(good[1]))
    assert server.stats()["batches"] == 1  # the two good ones still met the client count


def test_packed_and_plain_requests_merge_and_get_the_answers_of_their_planes(nets):
    (model, blob), _ = nets
    server = server_for(blob, clients=3, batch_timeout_ms=LONG_MS)
    plain, packed = planes(3, 30), planes(5, 31)  # 5 leaves: not a whole byte of rows
    wrong_board = pack_planes(np.zeros((2, 7, 6, 3), np.uint8))

    async def run():
        return await asyncio.gather(server.evaluate(plain), server.evaluate(pack_planes(packed)),
                                    server.evaluate(wrong_board), server.evaluate(pack_planes(plain)),
                                    return_exceptions=True)

    first, second, bad, third = asyncio.run(run())
    assert isinstance(bad, ValueError) and "planes must be" in str(bad)
    direct = CompiledModel(model)
    assert_rows_match(first, direct(plain))
    assert_rows_match(second, direct(packed))
    assert_rows_match(third, direct(plain))
    assert server.stats()["batches"] == 1 and server.stats()["evaluations"] == 11


def test_hot_swap_serves_the_new_weights_and_refuses_a_wrong_hash(nets):
    (model_a, blob_a), (model_b, blob_b) = nets
    server = server_for(blob_a, version=3, clients=1, batch_timeout_ms=LONG_MS)
    x = planes(5, 30)
    before = asyncio.run(server.evaluate(x))
    assert_rows_match(before, CompiledModel(model_a)(x))
    traces = server.stats()["traces"]

    with pytest.raises(ValueError, match="sha256"):
        server.load_weights(blob_b, blob_sha256(blob_a), 4)
    assert server.version() == 3
    assert_rows_match(asyncio.run(server.evaluate(x)), before)

    assert server.load_weights(blob_b, blob_sha256(blob_b), 4) == 4
    assert server.version() == 4 and server.stats()["version"] == 4
    after = asyncio.run(server.evaluate(x))
    assert_rows_match(after, CompiledModel(model_b)(x))
    assert not np.allclose(after[0], before[0])
    assert server.stats()["traces"] == traces, "a hot swap never retraces"

    # Loads are sent without waiting: an older model that arrives after a newer one is
    # not served.
    assert server.load_weights(blob_a, blob_sha256(blob_a), 3) == 4
    assert_rows_match(asyncio.run(server.evaluate(x)), after)


def test_set_clients_changes_the_flush_rule(nets):
    (_, blob), _ = nets
    server = server_for(blob, clients=1, batch_timeout_ms=LONG_MS)
    with pytest.raises(ValueError):
        server.set_clients(0)
    server.set_clients(2)

    async def run():
        return await asyncio.gather(server.evaluate(planes(1, 40)), server.evaluate(planes(1, 41)))

    asyncio.run(run())
    assert server.stats()["batches"] == 1


class HeldModel:
    """The server's compiled model, with a hook that runs in the model thread before
    each call, given its rows (to hold a call inside the model while the test looks)."""

    def __init__(self, compiled: CompiledModel, before_call):
        self.compiled = compiled
        self.before_call = before_call

    def __call__(self, planes):
        self.before_call(planes.shape[0])
        return self.compiled(planes)

    def __getattr__(self, name):
        return getattr(self.compiled, name)


def test_two_model_calls_put_a_second_batch_into_the_model_beside_the_first(nets):
    (model, blob), _ = nets
    # max_batch keeps the two requests apart (merged, they would be one call)
    server = server_for(blob, clients=1, batch_timeout_ms=LONG_MS, max_batch=4, model_calls=2)
    # Each call waits for the other inside the model: calls that took turns would
    # break the barrier after its timeout instead.
    both_inside = threading.Barrier(2, timeout=PATIENCE_S)
    server._model = HeldModel(server._model, lambda rows: both_inside.wait())
    a, b = planes(3, 50), planes(4, 51)

    async def two_requests():
        return await asyncio.gather(server.evaluate(a), server.evaluate(b))

    result_a, result_b = asyncio.run(two_requests())
    assert server.stats()["batches"] == 2 and server.stats()["model_calls"] == 2
    direct = CompiledModel(model)
    assert_rows_match(result_a, direct(a))
    assert_rows_match(result_b, direct(b))


def test_a_hot_swap_waits_for_the_call_in_flight_and_holds_the_next_one_back(nets):
    (model_a, blob_a), (model_b, blob_b) = nets
    server = server_for(blob_a, version=1, clients=1, batch_timeout_ms=LONG_MS, model_calls=2)
    first_inside, let_first_go = threading.Event(), threading.Event()
    entered: list[int] = []  # the rows of each call that got into the model

    def hold_the_first_call(rows: int) -> None:
        entered.append(rows)
        if not first_inside.is_set():
            first_inside.set()
            assert let_first_go.wait(PATIENCE_S)

    server._model = HeldModel(server._model, hold_the_first_call)
    use = server._model_use
    a, b = planes(3, 60), planes(4, 61)

    async def swap_between():
        loop = asyncio.get_running_loop()
        first = asyncio.ensure_future(server.evaluate(a))
        assert await loop.run_in_executor(None, first_inside.wait, PATIENCE_S)
        swap = loop.run_in_executor(None, server.load_weights, blob_b, blob_sha256(blob_b), 2)
        # The swap has begun while the first call is in the model: it must wait for it.
        await until(lambda: use.snapshot()["swapping"] or swap.done(), "the swap to begin")
        assert not swap.done() and use.snapshot()["calls"] == 1, "the swap waits for the call in the model"
        second = asyncio.ensure_future(server.evaluate(b))
        # The second call reaches the model's door: held there, or (wrongly) let in.
        await until(lambda: use.snapshot()["calls_held"] or len(entered) > 1 or second.done(),
                    "the second call to reach the model")
        assert entered == [3] and not second.done(), "a call that came after the swap waits for it"
        assert not swap.done()
        let_first_go.set()
        return await first, await swap, await second

    async def swap_between_then_let_go():
        try:
            return await swap_between()
        finally:
            let_first_go.set()  # a failed check must not leave the model thread held

    first, version, second = asyncio.run(swap_between_then_let_go())
    assert version == 2
    assert_rows_match(first, CompiledModel(model_a)(a))
    assert_rows_match(second, CompiledModel(model_b)(b))


def test_model_calls_must_be_at_least_one(nets):
    (_, blob), _ = nets
    with pytest.raises(ValueError, match="model_calls"):
        server_for(blob, model_calls=0)


# -- through a real Ray ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def client_class(ray):
    # defined in a function so that Ray ships it by value (workers cannot import tests/)
    class Client:
        def __init__(self, server):
            self.server = server

        def run(self, batches):
            """Sends every batch at once and waits for all answers (as a worker with
            several half-batches in flight)."""
            return ray.get([self.server.evaluate.remote(b) for b in batches])

    return Client


@pytest.mark.slow
def test_ray_actor_merges_requests_from_client_actors(ray_cluster, nets):
    ray = ray_cluster
    (model, blob), (model_b, blob_b) = nets
    server = (
        ray.remote(InferenceServer)
        .options(max_concurrency=64, num_cpus=1)
        .remote(network=NET, weights=blob, clients=4, batch_timeout_ms=200.0, mixed_precision=False,
                metrics=RunMetrics("server-test"))
    )
    Client = ray.remote(client_class(ray)).options(num_cpus=0)
    clients = [Client.remote(server) for _ in range(4)]
    work = [[planes(8, 100 * c + i) for i in range(3)] for c in range(4)]

    results = ray.get([client.run.remote(batches) for client, batches in zip(clients, work, strict=True)])

    direct = CompiledModel(model)
    for batches, answers in zip(work, results, strict=True):
        for x, answer in zip(batches, answers, strict=True):
            assert_rows_match(answer, direct(x))
    stats = ray.get(server.stats.remote())
    assert stats["evaluations"] == 4 * 3 * 8
    assert stats["batches"] < 12, f"requests were merged: {stats}"
    assert stats["mean_batch_size"] > 8
    assert stats["metrics"], "given the run's recorder, the server records its metrics"

    # a hot swap through the actor handle
    assert ray.get(server.load_weights.remote(blob_b, blob_sha256(blob_b), 9)) == 9
    assert ray.get(server.version.remote()) == 9
    answers = ray.get(clients[0].run.remote(work[0][:1]))
    assert_rows_match(answers[0], CompiledModel(model_b)(work[0][0]))


def test_the_servers_module_loads_no_tensorflow_until_a_server_is_built():
    # Ray imports an actor's module into every process that gets its handle: each
    # self-play worker would otherwise map TensorFlow (about 480 MiB) it never uses.
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "import tengen.workers.inference_server\n"
        "print('tensorflow' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr
