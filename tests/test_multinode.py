"""A run on a multi-node Ray cluster on one machine: workers spread over the nodes,
and the run goes on when a node goes away."""

import threading
import time

import pytest
from ray.cluster_utils import Cluster

from cluster.config import parse_config
from cluster.driver import ClusterRun
from cluster.run_control import read_status

CONFIG = {
    "game": {"name": "tictactoe"},
    "network": {"blocks": 1, "filters": 8},
    "mcts": {"simulations": 16, "leaves_per_round": 4},
    "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 25, "replay_window": 5000},
    "gating": {"rule": "none"},
    "cluster": {"workers": 3, "games_per_worker": 8, "worker_chunk_seconds": 1.0, "batch_timeout_ms": 2.0},
    "stop": {"minutes": 1.5},
}


@pytest.fixture(scope="module")
def three_nodes():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 3})
    nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    yield cluster, nodes
    cluster.shutdown()


def test_workers_spread_and_survive_a_lost_node(three_nodes, tmp_path):
    cluster, nodes = three_nodes
    run_dir = tmp_path / "multinode"
    lines: list[str] = []
    result: dict = {}
    run = ClusterRun(parse_config(CONFIG), run_dir, address=cluster.address, log=lines.append)
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
    cluster.remove_node(nodes[0])
    thread.join(timeout=240)
    assert not thread.is_alive()
    assert any("lost" in line for line in lines), "\n".join(lines)
    assert result["promotions"] >= 1 and result["games"] > 0
