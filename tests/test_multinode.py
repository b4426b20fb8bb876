"""A run on a multi-node Ray cluster on one machine, with its own Redis server as on a
real cluster (`--redis`, the password in the environment): workers spread over the
nodes, a GPU node that joins gets a server that shares the workers, and the run goes on when
nodes go away."""

import threading
import time

import pytest
import ray
from ray.cluster_utils import Cluster

from tengen.cluster.driver import ClusterRun
from tengen.run.config import parse_config
from tengen.run_control import read_status

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # a Ray cluster of three nodes and a run on it

CONFIG = {
    "game": {"name": "tictactoe"},
    "network": {"blocks": 1, "filters": 8},
    "mcts": {"simulations": 16, "leaves_per_round": 4},
    "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 25, "replay_window": 5000},
    "gating": {"rule": "none"},
    "cluster": {"workers": 3, "workers_per_gpu": 1, "games_per_worker": 8, "worker_chunk_seconds": 1.0,
                "batch_timeout_ms": 2.0},
    "stop": {"minutes": 2},
}


@pytest.fixture(scope="module")
def three_nodes():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 3})
    nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    yield cluster, nodes
    ray.shutdown()  # a run that failed mid-test leaves this process connected, which shutdown refuses
    cluster.shutdown()


def test_workers_spread_and_survive_a_lost_node(three_nodes, redis_server, tmp_path, monkeypatch):
    cluster, nodes = three_nodes
    monkeypatch.setenv("TENGEN_REDIS_PASSWORD", redis_server.password)
    run_dir = tmp_path / "multinode"
    lines: list[str] = []
    result: dict = {}
    run = ClusterRun(parse_config(CONFIG), run_dir, address=cluster.address, redis_url=redis_server.url,
                     log=lines.append)
    thread = threading.Thread(target=lambda: result.update(run.run()))
    thread.start()
    deadline = time.monotonic() + 120
    workers: dict = {}
    while thread.is_alive() and time.monotonic() < deadline and len(workers) < 3:
        if (run_dir / "config.yaml").exists():
            workers = {k: v for k, v in read_status(run_dir).get("components", {}).items()
                       if k.startswith("worker:")}
        time.sleep(0.5)
    assert len(workers) == 3, lines
    assert len({w["node"] for w in workers.values()}) >= 2  # spread over nodes

    # A GPU node joins (an autoscaler's spot instance): the run gives it an inference
    # server, which takes workers from the CPU server (the config fixes the count at
    # 3: no workers_per_gpu more). (Ray's GPU here is only a resource; TensorFlow finds
    # no device and runs on the CPU.)
    gpu_node = cluster.add_node(num_cpus=2, num_gpus=1)
    driver: dict = {}
    while thread.is_alive() and time.monotonic() < deadline + 60 and driver.get("inference_servers") != 2:
        driver = read_status(run_dir).get("components", {}).get("driver", {})
        time.sleep(0.5)
    assert driver.get("inference_servers") == 2, "\n".join(lines)
    assert any("inference servers: 2 (+1 -0)" in line for line in lines), "\n".join(lines)

    cluster.remove_node(gpu_node)
    cluster.remove_node(nodes[0])
    thread.join(timeout=240)
    assert not thread.is_alive()
    assert any("lost" in line for line in lines), "\n".join(lines)
    assert any("inference servers: 1 (+0 -1)" in line for line in lines), "\n".join(lines)
    assert result["promotions"] >= 1 and result["games"] > 0
