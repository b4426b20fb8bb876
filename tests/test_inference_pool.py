"""Where the inference servers go: one per GPU, on its node, with one fewer on the
learner's node; workers spread over the servers; a node that leaves takes its servers.

A real Ray cluster on one machine whose nodes declare GPUs (Ray's GPU is a resource
here: TensorFlow finds no device and the servers compute on the CPU).
"""

import time

import numpy as np
import pytest
import ray
from ray.cluster_utils import Cluster

from tengen.cluster.inference_pool import CPU_SERVER, INLINE_ANSWER_BYTES, InferencePool, server_options
from tengen.engine.network import weights_to_bytes
from tengen.run.config import parse_config
from tengen.testing.waiting import wait_for

pytestmark = pytest.mark.slow  # Ray clusters

CONFIG = parse_config({"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 8}})


@pytest.fixture(scope="module")
def gpu_cluster():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    one_gpu = cluster.add_node(num_cpus=1, num_gpus=1)
    two_gpus = cluster.add_node(num_cpus=1, num_gpus=2)
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    ids = {node["NodeManagerPort"]: node["NodeID"] for node in ray.nodes()}
    yield cluster, one_gpu, ids[one_gpu.node_manager_port], ids[two_gpus.node_manager_port]
    ray.shutdown()
    cluster.shutdown()


def new_pool() -> InferencePool:
    return InferencePool(run="pool-test", network=CONFIG.network_spec(), max_batch=64, batch_timeout_ms=2.0,
                         cpu_model_calls=2)


def test_a_server_returns_answers_up_to_its_bound_inside_ray_s_reply(gpu_cluster):
    # Ray reads the bound from the environment of the process that returns the object:
    # the server's options put it there, whatever the job's runtime_env holds
    class EnvironmentProbe:  # defined here, so that Ray ships it by value
        def read(self, name: str) -> str | None:
            import os

            return os.environ.get(name)

    probe = ray.remote(EnvironmentProbe).options(**server_options(0)).remote()
    assert ray.get(probe.read.remote("RAY_max_direct_call_object_size")) == str(INLINE_ANSWER_BYTES)
    assert INLINE_ANSWER_BYTES >= 4 * 362 * 512  # a go19 policy for a worker's round of 512 leaves
    ray.kill(probe)


def test_a_server_per_gpu_and_workers_spread_over_them(gpu_cluster):
    cluster, one_gpu, one_gpu_id, two_gpus_id = gpu_cluster
    blob = weights_to_bytes(CONFIG.network_spec().build(), metadata={"version": 0})
    pool = new_pool()
    # The learner took a whole GPU of the two-GPU node: that node keeps one for a server.
    pool.learner_at(two_gpus_id, 1.0)
    started = pool.start(blob, 0)
    assert sorted(started) == sorted([f"gpu:{one_gpu_id}:0", f"gpu:{two_gpus_id}:0"])
    nodes = [pool.attach(f"w{i}")[1] for i in range(4)]
    assert sorted(nodes) == sorted([one_gpu_id, two_gpus_id] * 2)  # two workers beside each server

    planes = np.zeros((5, 3, 3, 3), dtype=np.uint8)
    policy, value = ray.get(pool.servers[started[0]].handle.evaluate.remote(planes))
    assert policy.shape == (5, 9) and value.shape == (5,)
    assert ray.get(pool.servers[started[0]].handle.stats.remote())["model_calls"] == 1, "a GPU takes one at a time"
    stats, failed = pool.stats()
    assert failed == {} and stats["servers"] == 2 and stats["evaluations"] == 5

    # The one-GPU node goes: its server is forgotten and its workers come back as orphans.
    cluster.remove_node(one_gpu)
    deadline = time.monotonic() + 60
    added, orphans = pool.sync()
    while not orphans and time.monotonic() < deadline:
        time.sleep(0.5)
        added, orphans = pool.sync()
    assert added == [] and orphans == [f"w{i}" for i, node in enumerate(nodes) if node == one_gpu_id]
    assert list(pool.servers) == [f"gpu:{two_gpus_id}:0"]
    assert all(pool.server_of(w) is None for w in orphans)

    # The last server stops answering: a CPU server takes over, so the run never stalls.
    left = pool.lost(f"gpu:{two_gpus_id}:0")
    assert len(left) == 2 and list(pool.servers) == [CPU_SERVER]
    handle, node = pool.attach("w9")
    assert node is None and ray.get(handle.evaluate.remote(planes))[0].shape == (5, 9)
    assert ray.get(handle.stats.remote())["model_calls"] == 2, "the CPU server splits its cores"


def test_a_server_that_raises_on_a_batch_is_named_by_its_worker_which_plays_on(gpu_cluster, redis_server):
    """A server whose evaluations raise (here a Connect Four network given a tic-tac-toe
    worker's leaves: every call fails inside the server) is the failing part: the
    worker's chunk comes back naming the server and what it raised, and the driver
    counts it against the server (cluster/fleet.py's chunk_done). Before, the chunk
    itself raised: the worker was replaced, against the same server, until the crash
    loop stopped the run blaming workers."""
    from tengen.cluster.actors import SelfPlayActor
    from tengen.workers.inference_server import InferenceServer

    c4 = parse_config({"game": {"name": "connect4"}, "network": {"blocks": 1, "filters": 8}})
    server = ray.remote(InferenceServer).options(num_cpus=0).remote(
        network=c4.network_spec(), weights=weights_to_bytes(c4.network_spec().build(), metadata={"version": 0}))
    ttt = CONFIG.with_changes({"mcts.simulations": 8, "cluster.games_per_worker": 2})
    worker = ray.remote(SelfPlayActor).options(num_cpus=0).remote(
        ttt.model_dump(mode="json"), "failing-server-test", redis_server.url, redis_server.password, server, "w000",
        0, 0)
    # a chunk may end before its first leaves come back (a loaded machine): the next one says
    reports = []
    wait_for(lambda: reports.append(ray.get(worker.run_for.remote(1.0), timeout=300)) or reports[-1]["server_lost"],
             timeout_s=120, what=lambda: f"a chunk that names the failing server: {reports[-1:]}")
    report = reports[-1]
    assert report["server_lost"] == server._actor_id.hex()
    assert report["server_error"] is not None and "ValueError: planes must be" in report["server_error"], report
    # It plays on once it has a server that answers, with the leaves it was waiting for.
    good = ray.remote(InferenceServer).options(num_cpus=0).remote(
        network=CONFIG.network_spec(), weights=weights_to_bytes(CONFIG.network_spec().build(),
                                                                metadata={"version": 0}))
    ray.get(worker.set_server.remote(good))
    deadline = time.monotonic() + 120
    report = ray.get(worker.run_for.remote(1.0), timeout=300)
    while report["games"] == 0 and time.monotonic() < deadline:
        report = ray.get(worker.run_for.remote(1.0), timeout=300)
    assert report["games"] > 0 and report["server_lost"] is None, report
    for handle in (worker, server, good):
        ray.kill(handle)
