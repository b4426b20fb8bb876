"""What the driver does with a part that fails: a growing pause before each new one,
each error logged in full once, and a stop with the error when the same part keeps
failing; then the same on a real run whose learner cannot start.

The supervisor's window is read from a clock the tests move (tests/fake_clock.py)."""

from __future__ import annotations

import pytest
import ray
from fake_clock import FakeClock

from tengen.cluster.driver import ClusterRun
from tengen.cluster.redis_client import RedisUnavailable
from tengen.cluster.supervision import CrashLoop, Supervisor, describe_error, node_lost
from tengen.run.config import parse_config


def test_pauses_grow_and_a_crash_loop_stops_with_the_error():
    lines: list[str] = []
    supervisor = Supervisor(failures=4, window_s=60, log=lines.append, clock=FakeClock())
    error = RuntimeError("storage is read-only\nTraceback (most recent call last): ...")
    # The first replacement at once, then 2 s, 4 s: bounded backoff.
    assert [supervisor.failed("learner", error) for _ in range(3)] == [0.0, 2.0, 4.0]
    with pytest.raises(CrashLoop, match="learner failed 4 times in a row within 60 s each.*storage is read-only"):
        supervisor.failed("learner", error)
    # The whole error (a Ray task error carries the remote traceback) once, then one line.
    assert "Traceback" in lines[0] and all("Traceback" not in line for line in lines[1:])
    assert lines[1] == "learner failed again: RuntimeError: storage is read-only"
    assert supervisor.report()["learner"]["last_error"] == "RuntimeError: storage is read-only"


def test_a_part_lost_with_its_node_is_no_crash_loop_of_its_own():
    """A preempted or cut-off node takes its parts with it, and until Ray declares it
    dead a part started again may go there and be lost again: replaced after a short
    pause, each time, without stopping the run (before: a GPU node's server, lost at
    each promotion's push, stopped the run within seconds of a preemption)."""
    supervisor = Supervisor(failures=3, window_s=60, log=lambda line: None, clock=FakeClock())
    unreachable = ray.exceptions.ActorUnavailableError("RpcError: Socket closed", None)
    assert node_lost(unreachable) and not node_lost(ray.exceptions.ActorDiedError())
    assert [supervisor.failed("inference gpu:n1:0", unreachable, what="lost") for _ in range(6)] == [1.0] * 6
    pushed = RuntimeError("it failed to load 000298: ActorDiedError")  # what the caller knew: its node died
    assert supervisor.failed("inference gpu:n1:0", pushed, node_gone=True) == 1.0
    assert supervisor.report()["inference gpu:n1:0"]["restarts"] == 7
    # ... while the part's own failures still stop the run
    supervisor.failed("inference gpu:n1:0", pushed)
    supervisor.failed("inference gpu:n1:0", pushed)
    with pytest.raises(CrashLoop):
        supervisor.failed("inference gpu:n1:0", pushed)


def test_a_success_or_a_quiet_spell_resets_the_count():
    clock = FakeClock()
    supervisor = Supervisor(failures=2, window_s=60, log=lambda line: None, clock=clock)
    supervisor.failed("worker w001", ValueError("x"))
    supervisor.succeeded("worker w001")
    supervisor.failed("worker w001", ValueError("x"))  # not two in a row: a success came between
    clock.advance(60.5)
    supervisor.failed("worker w001", ValueError("x"))  # nor this: the last was past the window
    report = supervisor.report()["worker w001"]
    assert report["restarts"] == 3 and report["failures_in_a_row"] == 1


def test_failures_a_window_apart_are_still_in_a_row():
    clock = FakeClock()
    supervisor = Supervisor(failures=3, window_s=60, log=lambda line: None, clock=clock)
    supervisor.failed("learner", ValueError("x"))
    clock.advance(60)  # each within window_s of the one before: the streak goes on
    assert supervisor.failed("learner", ValueError("x")) == 2.0
    clock.advance(60)
    with pytest.raises(CrashLoop, match="learner failed 3 times in a row"):
        supervisor.failed("learner", ValueError("x"))


def test_parts_are_counted_apart():
    supervisor = Supervisor(failures=2, window_s=60, log=lambda line: None, clock=FakeClock())
    supervisor.failed("worker w000", ValueError("x"))
    supervisor.failed("worker w001", ValueError("x"))
    supervisor.failed("gatekeeper", ValueError("x"))
    with pytest.raises(CrashLoop, match="worker w000"):
        supervisor.failed("worker w000", ValueError("x"))


def test_an_error_is_described_by_its_root_cause():
    class Wrapper(Exception):
        def __init__(self, cause):
            super().__init__("ray task failed")
            self.cause = cause

    assert describe_error(Wrapper(OSError("disk full"))) == "OSError: disk full"


def test_a_replacement_waits_out_its_pause_and_a_part_scaled_away_is_not_replaced():
    supervisor = Supervisor(failures=5, window_s=60, log=lambda line: None)
    started: list[str] = []
    supervisor.replace("worker w000", ValueError("x"), lambda: started.append("w000"))  # the first: no pause
    for _ in range(2):  # the second in a row: a pause of 2 s
        supervisor.replace("worker w001", ValueError("x"), lambda: started.append("w001"))
    supervisor.start_due()
    assert started == ["w000"] and supervisor.waiting() == ["worker w001"]
    supervisor.forget("worker w001")
    supervisor.start_due()
    assert supervisor.waiting() == [] and "worker w001" not in supervisor.report()


def test_redis_gone_for_good_stops_the_run_rather_than_replacing_a_part():
    class TaskError(Exception):  # as Ray wraps what an actor raised
        def __init__(self, cause):
            super().__init__("ray task failed")
            self.cause = cause

    supervisor = Supervisor(failures=5, window_s=60, log=lambda line: None)
    gone = RedisUnavailable("redis was unreachable for 120 s", seconds=120.0, expired=True, out_of_memory=False)
    with pytest.raises(RedisUnavailable, match="unreachable for 120 s"):
        supervisor.replace("learner", TaskError(gone), lambda: None)
    assert supervisor.waiting() == [] and "learner" not in supervisor.report()


@pytest.mark.slow
def test_a_run_whose_learner_cannot_start_stops_with_the_reason(tmp_path):
    """A config that cannot work (checkpoints to a place that cannot be written):
    the learner fails, is replaced, fails again, and the run stops saying why."""
    config = parse_config({
        "game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 8},
        "mcts": {"simulations": 8, "leaves_per_round": 4},
        "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 25, "replay_window": 5000},
        "cluster": {"workers": 1, "games_per_worker": 8, "crash_loop_failures": 3},
        "storage": "/proc/tengen-cannot-write-here",
        "stop": {"minutes": 3},
    })
    lines: list[str] = []
    summary = ClusterRun(config, tmp_path / "run", log=lines.append).run()
    log = "\n".join(lines)
    assert summary["error"] and "learner failed 3 times in a row" in summary["error"], log
    assert "tengen-cannot-write-here" in summary["error"], summary["error"]
    # stopped by the crash loop, not by the time limit (stop.minutes)
    assert "stopping: learner failed 3 times in a row" in log, log
    assert log.count("learner lost") + log.count("learner failed") >= 3
