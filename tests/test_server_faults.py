"""Inference servers that fail, as the driver sees them, on a real Ray cluster.

- One that raises on every batch is the failing part, not its workers: a real run (Ray,
  Redis, the driver in this process) whose server is started again, each time, with a
  network of another game (every batch of tic-tac-toe leaves raises inside it, as a
  broken GPU or model would). The driver restarts the server and counts each failure
  against it; the crash loop stops the run naming the server and what it raised, and no
  worker is blamed or replaced.
- One that hangs (SIGSTOP) while a promoted model is pushed to it does not hold up the
  driver: the push returns at once, the load is due within its deadline, and past it the
  server is restarted with the new model."""

from __future__ import annotations

import contextlib
import os
import signal
import threading

import pytest
import ray
from fake_clock import FakeClock
from ray.cluster_utils import Cluster

from tengen.cluster.actors import ActorSetup
from tengen.cluster.deadlines import Deadlines
from tengen.cluster.driver import ClusterRun
from tengen.cluster.fleet import Fleet
from tengen.cluster.inference_pool import CPU_SERVER
from tengen.cluster.placement import Starting
from tengen.cluster.promotion import LOAD_DEADLINE_S, Promotion
from tengen.cluster.supervision import Supervisor
from tengen.engine.network import blob_sha256, weights_to_bytes
from tengen.run.config import parse_config
from tengen.run.loop import TrainingLoop
from tengen.run.model_registry import LocalModelRegistry
from tengen.run.run_dir import RunDir
from tengen.run_control import read_status
from tengen.testing.waiting import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]  # a Ray cluster and a run on it

CONFIG = {
    "game": {"name": "tictactoe"},
    "network": {"blocks": 1, "filters": 8},
    "mcts": {"simulations": 16, "leaves_per_round": 4},
    # no candidate within a test: a promoted model pushed to the failing server is another test's
    "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 100_000, "replay_window": 5000},
    "cluster": {"workers": 2, "games_per_worker": 8, "worker_chunk_seconds": 1.0, "batch_timeout_ms": 2.0,
                "crash_loop_failures": 3},
    "stop": {"minutes": 10},
}


@pytest.fixture(scope="module")
def one_node():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 6})
    yield cluster
    ray.shutdown()  # a run that failed mid-test leaves this process connected, which shutdown refuses
    cluster.shutdown()


def test_a_server_that_raises_on_every_batch_stops_the_run_naming_the_server(one_node, redis_server, tmp_path,
                                                                              monkeypatch):
    monkeypatch.setenv("TENGEN_REDIS_PASSWORD", redis_server.password)
    run_dir = tmp_path / "run"
    lines: list[str] = []
    result: dict = {}
    run = ClusterRun(parse_config(CONFIG), run_dir, address=one_node.address, redis_url=redis_server.url,
                     log=lines.append)
    thread = threading.Thread(target=lambda: result.update(run.run()))
    thread.start()

    def playing() -> bool:
        return (run_dir / "status.json").exists() and read_status(run_dir)["last_report"]["games"] > 0

    wait_for(lambda: playing() or not thread.is_alive(), timeout_s=300, what="the run's first games")
    assert thread.is_alive(), "\n".join(lines)

    # From now on every server the pool starts holds a Connect Four network and its weights
    # (the server there now refuses them and plays on: it is killed next).
    assert run.fleet is not None
    connect4 = parse_config({"game": {"name": "connect4"}, "network": {"blocks": 1, "filters": 8}}).network_spec()
    blob = weights_to_bytes(connect4.build(), metadata={"version": 0})
    run.fleet.pool.network = connect4
    run.fleet.pool.send_weights(blob, blob_sha256(blob), 0)
    ray.kill(run.fleet.pool.handle(CPU_SERVER))
    thread.join(timeout=300)
    assert not thread.is_alive(), "\n".join(lines)

    said = "\n".join(lines)
    assert result["error"] is not None and result["error"].startswith(f"inference {CPU_SERVER} failed 3 times"), said
    assert "planes must be" in result["error"], said  # what the server raised, in the reason the run gives
    assert any(line.startswith(f"inference server {CPU_SERVER} restarted") for line in lines), said
    components = read_status(run_dir)["components"]
    workers = {name: part for name, part in components.items() if name.startswith("worker")}
    assert workers and all(part.get("restarts", 0) == 0 for part in workers.values()), components


def test_a_push_to_a_hung_server_does_not_hold_up_the_driver_and_is_caught_by_its_deadline(one_node, redis_client,
                                                                                             tmp_path):
    if not ray.is_initialized():
        ray.init(address=one_node.address)
    config = parse_config(CONFIG)
    lines: list[str] = []
    files = RunDir(tmp_path / "run")
    run_id = files.create_identity()
    loop = TrainingLoop(config, files, LocalModelRegistry(run_id), log=lines.append)
    best = loop.begin(resume=False)
    blob, metadata = loop.registry.fetch(best)
    clock = FakeClock()
    starting = Starting(bound_s=config.cluster.start_timeout_s, log=lines.append)
    deadlines = Deadlines(exempt=starting.waits, clock=clock)
    supervisor = Supervisor(failures=5, window_s=300, log=lines.append)
    setup = ActorSetup(config.model_dump(mode="json"), run_id, "redis://unused", None)
    fleet = Fleet(config, setup, supervisor, loop, starting=starting, deadlines=deadlines, log=lines.append)
    promotion = Promotion(config, setup, supervisor, loop, fleet, client=redis_client, deadlines=deadlines,
                          log=lines.append)
    assert fleet.start_servers(blob, best) == [CPU_SERVER]
    hung = fleet.pool.handle(CPU_SERVER)
    pid = ray.get(hung.__ray_call__.remote(lambda server: os.getpid()), timeout=300)
    os.kill(pid, signal.SIGSTOP)
    try:
        loop.registry.publish(1, blob, metadata)
        pushed = threading.Thread(target=promotion.push, args=(1,), daemon=True)
        pushed.start()
        wait_for(lambda: not pushed.is_alive(), timeout_s=60, what="push to return while its server is stopped")
        (load,) = promotion.refs()
        assert ray.wait([load], timeout=0)[0] == []  # not loaded: the server is stopped
        deadlines.check()
        assert promotion.refs() == [load]  # within its deadline: still waited for
        clock.advance(LOAD_DEADLINE_S + 1)
        deadlines.check()
    finally:
        with contextlib.suppress(ProcessLookupError):  # killed by its restart, as it should be
            os.kill(pid, signal.SIGCONT)
    assert promotion.refs() == []
    said = "\n".join(lines)
    assert "inference cpu lost: it failed to load 000001: Hung" in said, said
    assert f"inference server {CPU_SERVER} restarted" in said, said
    restarted = fleet.pool.handle(CPU_SERVER)
    assert restarted._actor_id != hung._actor_id
    assert ray.get(restarted.stats.remote(), timeout=300)["version"] == 1  # it started with the new model
    ray.kill(restarted)
