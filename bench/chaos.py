"""Kill each part of a real tic-tac-toe run, one after another, and print what survived.

    .venv/bin/python bench/chaos.py            # about 10 minutes on 2 cores

A run with 2 self-play workers on an external Redis (the project's own redis-server,
AOF, loopback) gets, each with a recovery window: a worker, the inference server, the
learner and the gatekeeper (mid-match) killed with SIGKILL, then each stopped with
SIGSTOP (hung: replaced past its call's deadline, cluster/deadlines.py), and
redis-server killed and started again 15 s later on its AOF. A 3-node ``ray.cluster_utils`` cluster loses
a node under a run. The README's main job (embedded Redis) gets its Redis killed,
then its driver stopped with SIGTERM and resumed, then killed with SIGKILL and
resumed. The faults are tengen.testing.chaos's (testing/chaos.py), which tests/test_chaos.py checks.

One line per fault: survived or not, seconds to recover, finished games lost (every
game a worker reported finished must be in the stream: only unfinished ones may be
lost), and at the end ``RATIO chaos_faults_survived <n> vs faults target <total>``.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tengen.cluster.redis_server import EmbeddedRedis
from tengen.testing import chaos
from tengen.testing.waiting import wait_for

WINDOW_S = 120


def _fault(results: list, name: str, inject: Callable[[], float], lost: Callable[[], list[str]]) -> None:
    try:
        seconds = inject()
    except AssertionError as e:
        results.append(False)
        print(f"FAULT {name}: NOT SURVIVED ({str(e).splitlines()[0]})", flush=True)
        return
    # The games of the last chunk reach the stream and the driver's report within seconds.
    deadline = time.monotonic() + 20
    missing = lost()
    while missing and time.monotonic() < deadline:
        time.sleep(1)
        missing = lost()
    results.append(not missing)
    print(f"FAULT {name}: {'survived' if not missing else 'NOT SURVIVED'} in {seconds:.1f} s; "
          f"finished games lost {len(missing)}", flush=True)


def _external_faults(base: Path, results: list) -> None:
    server = EmbeddedRedis(data_dir=base / "redis").start()
    run = chaos.Run(base / "ttt", redis_url=server.url, env={"TENGEN_REDIS_PASSWORD": server.password}).start()

    def lost() -> list[str]:
        return chaos.finished_games_lost(run, server.password, server.url)

    try:
        run.wait_until_playing(games=50, steps=1)
        _fault(results, "SIGKILL a self-play worker", lambda: chaos.kill_a_worker(run, timeout_s=WINDOW_S), lost)
        _fault(results, "SIGKILL the inference server",
               lambda: chaos.kill_the_inference_server(run, timeout_s=WINDOW_S), lost)
        _fault(results, "SIGKILL the learner", lambda: chaos.kill_the_learner(run, timeout_s=WINDOW_S), lost)
        _fault(results, "SIGKILL the gatekeeper mid-match",
               lambda: chaos.kill_the_gatekeeper_mid_match(run, timeout_s=WINDOW_S), lost)
        _fault(results, "SIGSTOP a self-play worker (hung)",
               lambda: chaos.hang_a_worker(run, timeout_s=WINDOW_S + 60), lost)
        _fault(results, "SIGSTOP the learner (hung)", lambda: chaos.hang_the_learner(run, timeout_s=WINDOW_S), lost)
        _fault(results, "SIGSTOP the gatekeeper mid-match (hung)",
               lambda: chaos.hang_the_gatekeeper_mid_match(run, timeout_s=WINDOW_S + 120), lost)
        _fault(results, "SIGKILL redis-server, restart it 15 s later",
               lambda: chaos.kill_redis_and_restart_it(run, server, down_s=15, timeout_s=WINDOW_S), lost)
    finally:
        run.stop(signal.SIGKILL)
        server.stop()


def _node_fault(base: Path, results: list) -> None:
    from ray.cluster_utils import Cluster

    from tengen.cluster.driver import ClusterRun
    from tengen.run.config import parse_config

    server = EmbeddedRedis(data_dir=base / "redis-nodes").start()
    # 6 CPUs: 3 workers, the learner and the server still fit when a 1-CPU node goes.
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 4})
    nodes = [cluster.add_node(num_cpus=1) for _ in range(2)]
    cluster.wait_for_nodes()
    config = parse_config({**chaos.CHAOS_CONFIG, "cluster": {**chaos.CHAOS_CONFIG["cluster"], "workers": 3}})
    os.environ["TENGEN_REDIS_PASSWORD"] = server.password
    run = ClusterRun(config, base / "nodes", address=cluster.address, redis_url=server.url, minutes=6,
                     log=lambda line: None)
    thread = threading.Thread(target=run.run, daemon=True)
    thread.start()
    view = chaos.Run(base / "nodes")

    def inject() -> float:
        view.wait_until_playing(games=50, steps=1)
        cluster.remove_node(nodes[0])
        removed = time.monotonic()
        view.games_flow(after=view.games() + 20, timeout_s=WINDOW_S)
        wait_for(lambda: view.workers() == 3, timeout_s=WINDOW_S, what="3 workers again")
        last = view.status()
        assert thread.is_alive() and last is not None and last.error is None
        return time.monotonic() - removed

    try:
        _fault(results, "a node removed from a 3-node cluster", inject,
               lambda: chaos.finished_games_lost(view, server.password, server.url))
    finally:
        run.request_stop()
        thread.join(timeout=300)
        cluster.shutdown()
        server.stop()


def _driver_faults(base: Path, results: list) -> None:
    run = chaos.Run(base / "main").start()

    def lost() -> list[str]:
        return chaos.finished_games_lost(run, None)

    try:
        run.wait_until_playing(games=50, steps=1)
        _fault(results, "SIGTERM the driver, then --resume",
               lambda: chaos.sigterm_then_resume(run, timeout_s=WINDOW_S + 120), lost)
        _fault(results, "SIGKILL the driver, then --resume",
               lambda: chaos.sigkill_then_resume(run, timeout_s=WINDOW_S + 120)[0], lost)
        _fault(results, "SIGKILL the embedded Redis of the main job",
               lambda: chaos.kill_the_embedded_redis(run, timeout_s=WINDOW_S), lost)
    finally:
        run.stop(signal.SIGKILL)


def main() -> None:
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    results: list[bool] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tengen-chaos-") as tmp:
        base = Path(tmp)
        _external_faults(base / "external", results)
        _node_fault(base / "cluster", results)
        _driver_faults(base / "driver", results)
    print(f"chaos: {len(results)} faults in {(time.monotonic() - started) / 60:.1f} minutes")
    print(f"RATIO chaos_faults_survived {sum(results)} vs faults target {len(results)}")


if __name__ == "__main__":
    main()
