"""Kill each part of a real run and check that the run carries on and keeps what it
had: ``tengen train`` in a child process, real Ray, the real Redis server killed and
restarted, processes killed with SIGKILL. The faults themselves are in
testing/chaos.py, shared with bench/chaos.py, which times them.

Time bounds here are generous (this machine is shared and slow); the seconds each
recovery takes are the benchmark's figures, not assertions. The tests of a module
share one run and go in order, each injecting its own fault.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tengen.cluster.redis_server import EmbeddedRedis
from tengen.run.run_dir import RunDir
from tengen.testing import chaos

RECOVERY_S = 180


@pytest.fixture(scope="module")
def external(tmp_path_factory):
    """A run on a Redis server of its own (AOF, loopback), as on a cluster; it plays
    and trains before the first test."""
    base = tmp_path_factory.mktemp("chaos")
    server = EmbeddedRedis(data_dir=base / "redis").start()
    run = chaos.Run(base / "ttt", redis_url=server.url, env={"TENGEN_REDIS_PASSWORD": server.password}).start()
    try:
        run.wait_until_playing(games=50, steps=1)
        yield run, server
    finally:
        run.stop(signal.SIGKILL)
        server.stop()


def test_a_killed_worker_is_replaced(external):
    chaos.kill_a_worker(external[0], timeout_s=RECOVERY_S)


def test_a_killed_inference_server_is_restarted_and_keeps_its_workers(external):
    chaos.kill_the_inference_server(external[0], timeout_s=RECOVERY_S)


def test_a_killed_learner_resumes_past_where_it_was(external):
    chaos.kill_the_learner(external[0], timeout_s=RECOVERY_S)


def test_a_gatekeeper_killed_mid_match_has_the_match_played_again(external):
    chaos.kill_the_gatekeeper_mid_match(external[0], timeout_s=RECOVERY_S)


def test_redis_killed_and_restarted_on_its_aof(external):
    run, server = external
    chaos.kill_redis_and_restart_it(run, server, down_s=8, timeout_s=RECOVERY_S)


def test_no_finished_game_was_lost_and_the_run_says_what_it_went_through(external):
    run, server = external
    chaos.wait_for(lambda: not chaos.finished_games_lost(run, server.password, server.url), timeout_s=30,
                   what="every game a worker reported in the stream")
    status = run.status()
    assert status is not None and status.error is None
    components = status.wiring["components"]
    assert components["learner"]["restarts"] >= 1 and components["gatekeeper"]["restarts"] >= 1
    assert components["inference cpu"]["restarts"] >= 1 and components["learner"]["last_error"]


def test_redis_gone_for_good_stops_the_run_with_the_reason_after_a_checkpoint(external):
    run, server = external
    checkpoint = RunDir(run.run_dir).learner / "learner.ckpt"
    written = checkpoint.stat().st_mtime
    server._kill()
    assert run.process.wait(timeout=RECOVERY_S) == 1  # `tengen train` says it stopped early
    log = run.log()
    assert "stopping: redis 127.0.0.1" in log and "was unreachable for 30 s (redis.outage_s is 30)" in log, log[-2000:]
    assert checkpoint.stat().st_mtime > written and "final learner checkpoint failed" not in log


@pytest.fixture(scope="module")
def main_job(tmp_path_factory):
    """The README's main job: an embedded Redis owned by the driver."""
    run = chaos.Run(tmp_path_factory.mktemp("chaos-main") / "ttt").start()
    try:
        run.wait_until_playing(games=50, steps=1)
        yield run
    finally:
        run.stop(signal.SIGKILL)


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
    chaos.kill_the_embedded_redis(main_job, timeout_s=RECOVERY_S)


def test_sigterm_stops_cleanly_and_resume_continues(main_job):
    chaos.sigterm_then_resume(main_job, timeout_s=RECOVERY_S + 120)


def test_sigkill_of_the_driver_leaves_nothing_behind_and_resume_continues(main_job):
    _, left = chaos.sigkill_then_resume(main_job, timeout_s=RECOVERY_S + 120)
    assert main_job.stop(signal.SIGTERM) == 0
    # Ray's own processes of the killed driver leave once they miss their raylet.
    chaos.wait_for(lambda: not any(chaos.alive(pid) for pid in left), timeout_s=180,
                   what="the killed driver's processes gone")
