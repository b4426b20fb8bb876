"""Kill each part of a real run and check that the run carries on and keeps what it
had: ``tengen train`` in a child process, real Ray, the real Redis server killed and
restarted, processes killed with SIGKILL. The faults themselves are in
testing/chaos.py, shared with bench/chaos.py, which times them.

Time bounds here are generous (this machine is shared and slow); the seconds each
recovery takes are the benchmark's figures, not assertions. The tests of a module
share a run while it lives, but none relies on another: each asserts on what its own
fault did (the part's restarts in status.json counted before and after it, the log
from the fault on), and a test whose fault ends the run leaves the next one a new run.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tengen.cluster.redis_server import EmbeddedRedis
from tengen.run.run_dir import RunDir
from tengen.testing import chaos
from tengen.testing.waiting import wait_for

RECOVERY_S = 180
#: a new run plays its first games after Ray starts and the search kernels compile (274 s
#: once on a 2-core machine shared with four other test runs)
START_S = 600
#: a test may start its run, wait for what it needs, inject and recover (a resume twice)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(2 * START_S + 4 * RECOVERY_S + 600)]


@pytest.fixture(scope="module")
def external_runs(tmp_path_factory) -> Iterator[Callable[[], tuple[chaos.Run, EmbeddedRedis]]]:
    """A run on a Redis server of its own (AOF, loopback), as on a cluster, that has
    played and trained: the one the last test left while it lives, else a new one."""
    made: list[tuple[chaos.Run, EmbeddedRedis]] = []

    def live() -> tuple[chaos.Run, EmbeddedRedis]:
        if made:
            run, server = made[-1]
            if run.process is not None and run.process.poll() is None and server.running:
                return run, server
        base = tmp_path_factory.mktemp("chaos")
        server = EmbeddedRedis(data_dir=base / "redis").start()
        run = chaos.Run(base / "ttt", redis_url=server.url, env={"TENGEN_REDIS_PASSWORD": server.password}).start()
        made.append((run, server))
        run.wait_until_playing(games=50, steps=1, timeout_s=START_S)
        return run, server

    try:
        yield live
    finally:
        for run, server in made:
            run.stop(signal.SIGKILL)
            server.stop()


@pytest.fixture
def external(external_runs):
    return external_runs()


def replaced(run: chaos.Run, part: str, before: int) -> None:
    """``part`` replaced once more than the ``before`` counted ahead of the fault, and
    its error shown, in status.json."""
    wait_for(lambda: chaos.restarts(run, part) > before, timeout_s=RECOVERY_S,
                   what=f"status.json counting {part}'s restart (it had {before})")
    assert chaos.last_errors(run, part), chaos.components(run)


def nothing_lost(run: chaos.Run, server: EmbeddedRedis) -> None:
    """No error for the run, and every game a worker reported finished is in the
    stream (only games still being played may be lost)."""
    assert (last := run.status()) is not None and last.error is None
    wait_for(lambda: not chaos.finished_games_lost(run, server.password, server.url), timeout_s=60,
                   what="every game a worker reported in the stream")


def test_a_killed_worker_is_replaced(external):
    run, server = external
    before = chaos.restarts(run, "worker")
    chaos.kill_a_worker(run, timeout_s=RECOVERY_S)
    replaced(run, "worker", before)
    nothing_lost(run, server)


def test_a_killed_inference_server_is_restarted_and_keeps_its_workers(external):
    run, server = external
    before = chaos.restarts(run, "inference cpu")
    chaos.kill_the_inference_server(run, timeout_s=RECOVERY_S)
    replaced(run, "inference cpu", before)
    nothing_lost(run, server)


def test_a_killed_learner_resumes_past_where_it_was(external):
    run, server = external
    before = chaos.restarts(run, "learner")
    chaos.kill_the_learner(run, timeout_s=RECOVERY_S)
    replaced(run, "learner", before)
    nothing_lost(run, server)


def test_a_gatekeeper_killed_mid_match_has_the_match_played_again(external):
    run, server = external
    # A new run's first candidate comes after train.candidate_every steps.
    wait_for(lambda: chaos.actor_pids(run.pid, "ray::GatekeeperActor.gate"), timeout_s=START_S,
                   every_s=0.05, what="a gating match in progress\n" + run.log()[-2000:])
    before = chaos.restarts(run, "gatekeeper")
    chaos.kill_the_gatekeeper_mid_match(run, timeout_s=RECOVERY_S)
    replaced(run, "gatekeeper", before)
    nothing_lost(run, server)


def test_a_hung_worker_is_stopped_and_replaced(external):
    run, server = external
    before = chaos.restarts(run, "worker")
    chaos.hang_a_worker(run, timeout_s=RECOVERY_S)
    replaced(run, "worker", before)
    assert any("Hung: no answer to run_for" in error for error in chaos.last_errors(run, "worker"))
    nothing_lost(run, server)


def test_a_hung_learner_is_stopped_and_replaced(external):
    run, server = external
    before = chaos.restarts(run, "learner")
    chaos.hang_the_learner(run, timeout_s=RECOVERY_S)
    replaced(run, "learner", before)
    nothing_lost(run, server)


def test_a_gatekeeper_hung_mid_match_has_the_match_played_again(external):
    run, server = external
    wait_for(lambda: chaos.actor_pids(run.pid, "ray::GatekeeperActor.gate"), timeout_s=START_S,
                   every_s=0.05, what="a gating match in progress\n" + run.log()[-2000:])
    before = chaos.restarts(run, "gatekeeper")
    chaos.hang_the_gatekeeper_mid_match(run, timeout_s=RECOVERY_S + 120)
    replaced(run, "gatekeeper", before)
    nothing_lost(run, server)


def test_redis_killed_and_restarted_on_its_aof(external):
    run, server = external
    # No part is replaced: the driver and every actor live through it.
    chaos.kill_redis_and_restart_it(run, server, down_s=8, timeout_s=RECOVERY_S)
    nothing_lost(run, server)


def test_redis_gone_for_good_stops_the_run_with_the_reason_after_a_checkpoint(external):
    run, server = external
    checkpoint = RunDir(run.run_dir).learner / "learner.ckpt"
    # The learner writes one with each candidate (train.candidate_every steps).
    wait_for(checkpoint.exists, timeout_s=START_S, what="the learner's first checkpoint")
    written = checkpoint.stat().st_mtime
    log_before = len(run.log())
    server._kill()
    assert run.process is not None and run.process.wait(timeout=RECOVERY_S) == 1  # `tengen train` stopped early
    log = run.log()[log_before:]
    assert "stopping: redis 127.0.0.1" in log and "was unreachable for 30 s (redis.outage_s is 30)" in log, log[-2000:]
    assert checkpoint.stat().st_mtime > written and "final learner checkpoint failed" not in log


@pytest.fixture(scope="module")
def main_job_runs(tmp_path_factory) -> Iterator[Callable[[], chaos.Run]]:
    """The README's main job (an embedded Redis owned by the driver) that has played
    and trained: the one the last test left while it lives, else a new one."""
    made: list[chaos.Run] = []

    def live() -> chaos.Run:
        if made and made[-1].process is not None and made[-1].process.poll() is None:
            return made[-1]
        run = chaos.Run(tmp_path_factory.mktemp("chaos-main") / "ttt").start()
        made.append(run)
        run.wait_until_playing(games=50, steps=1, timeout_s=START_S)
        return run

    try:
        yield live
    finally:
        for run in made:
            run.stop(signal.SIGKILL)


@pytest.fixture
def main_job(main_job_runs):
    return main_job_runs()


def test_the_password_reaches_no_actor_through_its_environment(main_job):
    # The embedded Redis's password goes to the actors through Ray's object store: not
    # runtime_env (which Ray's dashboard shows), nor any process's environment.
    password = json.loads(RunDir(main_job.run_dir).connection.read_text())["password"]
    actors = {pid: title for pid, title in chaos.descendants(main_job.pid).items() if title.startswith("ray::")}
    assert any(title.startswith("ray::SelfPlayActor") for title in actors.values()), actors
    for pid in actors:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
        assert password.encode() not in environ and b"TENGEN_REDIS_PASSWORD=" not in environ, actors[pid]


def test_a_killed_embedded_redis_is_restarted_by_its_driver(main_job):
    before = chaos.restarts(main_job, "redis")
    chaos.kill_the_embedded_redis(main_job, timeout_s=RECOVERY_S)
    replaced(main_job, "redis", before)
    assert (last := main_job.status()) is not None and last.error is None


def test_sigterm_stops_cleanly_and_resume_continues(main_job):
    chaos.sigterm_then_resume(main_job, timeout_s=RECOVERY_S + 120)


def test_sigkill_of_the_driver_leaves_nothing_behind_and_resume_continues(main_job):
    _, left = chaos.sigkill_then_resume(main_job, timeout_s=RECOVERY_S + 120)
    assert main_job.stop(signal.SIGTERM) == 0
    # Ray's own processes of the killed driver leave once they miss their raylet.
    wait_for(lambda: not any(chaos.alive(pid) for pid in left), timeout_s=180,
                   what="the killed driver's processes gone")
