"""``tengen status`` as a person reads it (tengen/status_text.py): whether the run is
running, stopped or stopped on an error, how far it got, what is wrong, and the exit
status that says the same to a script. Run directories as runs leave them
(testing/run_files.py), a real Redis for the live run's lease."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from tengen.cluster.lease import DriverLease
from tengen.run.records import EvaluationLine, append_evaluation, write_status
from tengen.run.records import read_status as read_line
from tengen.run.wording import counted
from tengen.run_control import read_status
from tengen.status_text import EXIT_STATUS, STALE_S, describe_status, run_state
from tengen.testing.run_files import status_line, stopped_run

ROOT = Path(__file__).resolve().parent.parent


def rewrite_last_line(files, **changes) -> float:
    """The run's newest status line with ``changes``; returns its time."""
    line = dataclasses.replace(read_line(files), **changes)
    write_status(files, line)
    return line.time


def test_a_run_that_stopped_cleanly_says_so_with_how_far_it_got(tmp_path):
    files = stopped_run(tmp_path / "run")
    status = read_status(files.path)
    now = read_line(files).time + 600
    assert run_state(status, now=now) == "stopped" and EXIT_STATUS["stopped"] == 3
    lines = describe_status(status, now=now)
    assert lines[0] == f"run {files.run_id()} in {files.path}: stopped cleanly 10 min ago, after 10 s"
    assert lines[1] == "  games 20 (2.0/s), positions 600 (60/s), replay window 40/20,000"
    assert lines[2] == "  learner step 6, loss 2.000 (policy 1.400, value 0.600)"
    assert lines[3] == "  best model 000000, 0 promotions this session"
    assert lines[4] == "  at its last report: 2 self-play workers running; 1 inference server"
    assert "  learner: 1 restart, last error: ValueError: x" in lines
    assert not any("continue it with" in line for line in lines)


def test_status_shows_the_newest_strength_evaluation(tmp_path):
    files = stopped_run(tmp_path / "run")
    assert read_status(files.path)["strength"] is None  # none yet: no line
    scores = [{"reference": "vs_mcts400", "measure": "score", "value": 0.625, "se": 0.0771, "n": 40, "skipped": None},
              {"reference": "vs_gnugo1", "measure": "score", "value": None, "se": None, "n": 0,
               "skipped": "GNU Go is not installed (no gnugo on the PATH)"}]
    at = read_line(files).time
    for version, when in ((0, at - 900), (3, at - 300)):
        append_evaluation(files, EvaluationLine(time=when, version=version, elapsed_s=40.0, cpu_s=20.0,
                                                learner_step=1200 * version, games=50, scores=scores))
    status = read_status(files.path)
    assert status["strength"]["version"] == 3
    lines = describe_status(status, now=at + 600)
    assert ("  strength of 000003 at step 3,600: vs_mcts400 0.625 ± 0.077, vs_gnugo1 skipped (GNU Go is not "
            "installed (no gnugo on the PATH)) (15 min ago)") in lines


def test_a_run_that_stopped_on_an_error_says_why_and_how_to_go_on(tmp_path):
    files = stopped_run(tmp_path / "run")
    memory = {"used_memory": 3 * 2**20, "maxmemory": 2**30, "samples": 2**20, "models": 512 * 2**10}
    when = rewrite_last_line(files, error="redis redis://10.0.0.2:6379/0: unreachable for 900 s",
                             wiring={**read_line(files).wiring, "redis_memory": memory})
    status = read_status(files.path)
    assert run_state(status, now=when + 5) == "failed" and EXIT_STATUS["failed"] == 4
    lines = describe_status(status, now=when + 5)
    assert lines[0].endswith("stopped on an error 5 s ago, after 10 s: redis redis://10.0.0.2:6379/0: "
                             "unreachable for 900 s")
    assert "  Redis 3.0 MB of 1.0 GB (samples 1.0 MB, models 512.0 kB)" in lines
    assert lines[-1] == f"  continue it with: tengen train --resume --run-dir {files.path}"
    # a script sees the same: exit status 4, not 0
    shown = subprocess.run([sys.executable, "-m", "tengen.cli", "status", "--run-dir", str(files.path)],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert shown.returncode == 4 and "stopped on an error" in shown.stdout.splitlines()[0], shown.stderr


def test_a_run_without_its_final_report_is_lost_once_its_report_is_stale(tmp_path):
    files = stopped_run(tmp_path / "run")
    when = rewrite_last_line(files, final=False, loss=None)
    status = read_status(files.path)
    # A single-process run (no Redis, no lease) is running while it reports ...
    assert run_state(status, now=when + STALE_S) == "running"
    lines = describe_status(status, now=when + 4)
    assert "running for 10 s (reported 4 s ago)" in lines[0]
    assert lines[2] == "  learner: waiting for its first batch (train.min_positions; the window holds 40)"
    # ... and lost once its reports stop without a final one
    assert run_state(status, now=when + STALE_S + 1) == "lost" and EXIT_STATUS["lost"] == 4
    lines = describe_status(status, now=when + 3600)
    assert "not running, and it wrote no final report (killed, or its machine lost)" in lines[0]
    assert lines[-1].startswith("  continue it with: tengen train --resume")


def test_a_run_whose_driver_holds_its_lease_is_running_however_old_its_report(tmp_path, redis_server, redis_client):
    import json

    files = stopped_run(tmp_path / "run", redis_url=redis_server.url, password=redis_server.password)
    rewrite_last_line(files, final=False)
    lease = DriverLease(redis_client, files.run_id()).acquire()
    try:
        status = read_status(files.path)
        assert status["driver"]["pid"] > 0 and "token" not in status["driver"]
        assert run_state(status, now=read_line(files).time + 3600) == "running"
        shown = subprocess.run([sys.executable, "-m", "tengen.cli", "status", "--run-dir", str(files.path)],
                               capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert shown.returncode == 0 and ": running for 10 s" in shown.stdout.splitlines()[0], shown.stderr
        shown = subprocess.run([sys.executable, "-m", "tengen.cli", "status", "--run-dir", str(files.path),
                                "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert shown.returncode == 0 and json.loads(shown.stdout)["state"] == "running"
    finally:
        lease.release()
    assert run_state(read_status(files.path)) == "lost"  # its reports stopped long ago, without a final one


def test_status_refuses_a_watch_of_no_time(tmp_path):
    files = stopped_run(tmp_path / "run")
    done = subprocess.run([sys.executable, "-m", "tengen.cli", "status", "--run-dir", str(files.path), "--watch", "0"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2 and "--watch must be a positive number of seconds" in done.stderr


def test_a_report_line_of_a_run_with_many_parts_stays_short():
    line = status_line(3)
    status = {"run_id": "r", "run_dir": "runs/r", "live": False, "last_report": line.to_json(),
              "components": {f"worker w{k:03d}": {"restarts": 0, "last_error": None} for k in range(200)},
              "workers": {"running": 16, "target": 16, "starting": 0}, "inference_servers": {"running": 1}}
    lines = describe_status(status, now=line.time + 1)
    assert len(lines) <= 8, lines  # two hundred quiet workers add no line


def test_status_says_what_the_data_waits_on_or_lost():
    line = status_line(3, trimmed_unread=1200, duplicate_games=1, disk_outage_s=40.0,
                       wiring={"workers": 16, "target_workers": 16, "inference_servers": 1, "redis_outage_s": 300.0})
    status = {"run_id": "r", "run_dir": "runs/r", "live": True, "last_report": line.to_json(),
              "workers": {"running": 16, "target": 16, "starting": 0}, "inference_servers": {"running": 1}}
    assert ("  Redis unreachable for 5 min (waited out up to redis.outage_s); the run directory's disk failing for "
            "40 s; 1,200 games trimmed from the stream before the learner read them (train.replay_window is too "
            "small for the learner's downtime: README); 1 game received twice and dropped"
            ) in describe_status(status, now=line.time + 1)
    quiet = {**status, "last_report": status_line(3).to_json()}
    assert not any("trimmed" in text or "unreachable" in text for text in describe_status(quiet, now=line.time + 1))


def test_a_count_takes_its_noun_in_the_number_it_needs():
    assert counted(1, "self-play worker") == "1 self-play worker"
    assert counted(0, "game") == "0 games" and counted(2, "game") == "2 games"
    assert counted(1_200, "stream entry", "stream entries") == "1,200 stream entries"
    assert counted(1, "try", "tries") == "1 try"
