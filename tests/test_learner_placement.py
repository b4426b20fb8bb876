"""The learner placed from the GPUs alive, beside the inference servers: when its GPU
node goes, the new one gets room (a server gives up half of its GPU), and no server is
pinned to a node where it cannot fit.

A real Ray cluster on one machine whose nodes declare GPUs (a resource here:
TensorFlow finds no device and the servers compute on the CPU); a stand-in actor asks
Ray for what the learner asks for.
"""


import numpy as np
import ray
from ray.cluster_utils import Cluster
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from tengen.cluster.inference_pool import InferencePool
from tengen.cluster.placement import LearnerPlan, nodes_alive, plan_learner
from tengen.engine.network import weights_to_bytes
from tengen.run.config import parse_config
from tengen.testing.waiting import wait_for

CONFIG = parse_config({"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 8}})


def new_pool() -> InferencePool:
    return InferencePool(run="learner-placement-test", network=CONFIG.network_spec(), max_batch=64,
                         batch_timeout_ms=2.0, cpu_model_calls=2)


@ray.remote(num_cpus=1)
class StandIn:
    """What the learner asks of Ray, without TensorFlow: a CPU and its GPU share."""

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()


def test_the_learners_gpu_node_lost_a_server_gives_it_half_its_gpu():
    """Two one-GPU nodes: the learner takes one GPU, a server the other. The learner's
    node goes: the new learner is planned from the GPUs alive (half of the one left),
    the server there is restarted with the other half, and both run; a restart of that
    server keeps to its half (before, the pool kept the learner on the lost node, the
    new learner asked for half a GPU that the server held whole, and waited for good)."""
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2})
    nodes = [cluster.add_node(num_cpus=1, num_gpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    ray.init(address=cluster.address)
    try:
        ids = {node["NodeManagerPort"]: node["NodeID"] for node in ray.nodes()}
        blob = weights_to_bytes(CONFIG.network_spec().build(), metadata={"version": 0})
        pool = new_pool()
        plan = plan_learner(nodes_alive(), pool.gpus_held())
        assert plan.gpus == 1.0 and plan.node in {ids[n.node_manager_port] for n in nodes}
        pool.learner_at(plan.node, plan.gpus)
        (key,) = pool.start(blob, 0)  # the other node's whole GPU
        other = pool.servers[key].node
        assert other != plan.node and pool.servers[key].gpus == 1.0
        learner = StandIn.options(num_gpus=plan.gpus, scheduling_strategy=NodeAffinitySchedulingStrategy(
            plan.node, soft=False)).remote()
        assert ray.get(learner.node.remote(), timeout=120) == plan.node

        cluster.remove_node(next(n for n in nodes if ids[n.node_manager_port] == plan.node))
        wait_for(lambda: plan.node not in nodes_alive(), timeout_s=120, what="Ray seeing the learner's node gone")
        again = plan_learner(nodes_alive(), pool.gpus_held())
        assert again == LearnerPlan(other, 0.5, make_room=True)
        restarted, orphans = pool.learner_at(again.node, again.gpus)
        assert restarted == [key] and orphans == [] and pool.servers[key].gpus == 0.5
        learner = StandIn.options(num_gpus=again.gpus, scheduling_strategy=NodeAffinitySchedulingStrategy(
            again.node, soft=False)).remote()
        assert ray.get(learner.node.remote(), timeout=120) == other  # placed: not waiting for good
        planes = np.zeros((2, 3, 3, 3), dtype=np.uint8)
        assert ray.get(pool.handle(key).evaluate.remote(planes), timeout=120)[0].shape == (2, 9)
        pool.restart(key)  # beside the learner: half, never the whole GPU it cannot have
        assert pool.servers[key].gpus == 0.5
        assert ray.get(pool.handle(key).evaluate.remote(planes), timeout=120)[0].shape == (2, 9)
    finally:
        ray.shutdown()
        cluster.shutdown()
