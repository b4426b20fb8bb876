"""Runs on a bed of CPU nodes (tests/bed_runs.py): the learner's node preempted, a
second driver of a run, the head's disk full, the sftp storage down. Marked ``bed``
(a quick local run leaves them out); CI runs them, as root."""

from __future__ import annotations

import re
import time

import pytest
from bed_runs import BED_RUN, CANDIDATE_EVERY, bed_with_redis, stop_cleanly
from unavailable import unavailable

from tengen.engine.network import weights_metadata
from tengen.learner.learner import CHECKPOINT_FILE
from tengen.run.run_dir import RunDir
from tengen.testing.chaos import unique
from tengen.testing.cluster_bed import ClusterBed
from tengen.testing.debian import ToolUnavailable
from tengen.testing.sftp_server import SftpServer
from tengen.testing.waiting import wait_for

pytestmark = [pytest.mark.bed, pytest.mark.slow, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def cpu_bed():
    """A head without CPUs for Ray (the driver and Redis live there, as on a cluster
    whose head schedules nothing) and two CPU nodes where the run's parts go."""
    yield from bed_with_redis(head_cpus=0, nodes=[("cpu", 2), ("cpu", 2)])


def test_the_learners_node_preempted_the_run_goes_on_from_its_checkpoint(cpu_bed):
    bed, redis = cpu_bed
    run = bed.run("learner-preempted", BED_RUN, redis=redis).start(minutes=20)
    try:
        # By default the checkpoints reach the run directory on the driver's node (the
        # head), whatever node the learner runs on.
        checkpoint = RunDir(run.run_dir).learner / CHECKPOINT_FILE
        wait_for(lambda: checkpoint.exists() and run.learner_step() >= 2 * CANDIDATE_EVERY,
                 timeout_s=600, what=lambda: f"two candidates and a checkpoint on the head\n{run.log()[-3000:]}")
        ((node, _),) = bed.find("ray::LearnerActor")
        kept = int(weights_metadata(checkpoint.read_bytes())["step"])  # the step it resumes from
        log_before = len(run.log())
        bed.preempt(node)  # the learner, and whatever else ran there, gone with its files
        bed.add_node("cpu", cpus=2)  # the autoscaler's replacement
        wait_for(lambda: "learner lost" in run.log()[log_before:], timeout_s=300, what="the loss logged")
        # The new learner, on another node, resumed from the head's checkpoint: its steps
        # go on from there (not from 0), its window was rebuilt from the stream, and it
        # published no version that its predecessor had.
        wait_for(lambda: run.learner_step() > kept + CANDIDATE_EVERY, timeout_s=600,
                 what=lambda: f"learner steps past {kept}\n{run.log()[-3000:]}")
        assert (last := run.status()) is not None and last.window > 0
        assert unique(run.ladder_versions())
        assert "already published" not in run.log()
    finally:
        stop_cleanly(bed, run)


def test_a_second_driver_of_a_run_is_refused_and_the_first_goes_on(cpu_bed):
    bed, redis = cpu_bed
    run = bed.run("two-drivers", BED_RUN, redis=redis).start(minutes=20)
    try:
        run.wait_until_playing(timeout_s=600, games=20)
        # The same run started again (a scheduler that restarted a job whose driver still
        # ran): it waits out the lease's TTL for a dead holder, then refuses, naming the
        # live one; it writes nothing into the run directory meanwhile.
        config_before = RunDir(run.run_dir).config.read_bytes()
        second = bed.run("two-drivers", BED_RUN, redis=redis)
        second.start(resume=True, minutes=20)
        assert second.process is not None
        assert second.process.wait(timeout=300) == 2
        said = bed.log_tail(bed.nodes["head"], "run-two-drivers", chars=20_000)
        assert "already has a driver" in said and "pid" in said
        assert RunDir(run.run_dir).config.read_bytes() == config_before
        games = run.games()
        run.games_flow(after=games + 10, timeout_s=300)  # the first goes on
    finally:
        stop_cleanly(bed, run)


def test_the_head_disk_full_for_30_s_is_an_outage_the_run_goes_through(cpu_bed):
    bed, redis = cpu_bed
    # Outage budgets longer than the outage (BED_RUN's Redis budget is chaos's 30 s)
    config = {**BED_RUN, "redis": {"outage_s": 300}, "storage_outage_s": 300}
    run = bed.run("disk-full", config, redis=redis).start(minutes=20)
    try:
        run.wait_until_playing(timeout_s=600, games=20, steps=CANDIDATE_EVERY)
        log_before = len(run.log())
        # The head's disk holds the run directory and Redis's AOF: both fail to write.
        bed.fill_disk()
        try:
            wait_for(lambda: "No space left on device" in bed.log_tail(bed.nodes["head"], "run-disk-full", 50_000),
                     timeout_s=120, what="the run saying its disk is full")
            time.sleep(30)  # the outage the issue names; the run must live through it
        finally:
            bed.free_disk()
        said = bed.log_tail(bed.nodes["head"], "run-disk-full", 20_000)
        assert run.process is not None and run.process.poll() is None, said  # it did not stop
        games = run.games()
        run.games_flow(after=games + 20, timeout_s=600)  # status.json is written again, with new games
        after = run.log()[log_before:]
        assert "answering again" in after, after[-3000:]
        assert "MISCONF" in said or "run directory" in said  # the outage it rode out, said
        last = run.status()
        assert last is not None and last.error is None and last.disk_outage_s == 0
    finally:
        stop_cleanly(bed, run)


def sftp_on_head(bed: ClusterBed) -> SftpServer:
    try:
        return bed.start_sftp()
    except ToolUnavailable as e:
        unavailable(str(e))


def checkpoint_step(path) -> int:
    """The training step a learner checkpoint holds (0: none yet)."""
    return int(weights_metadata(path.read_bytes())["step"]) if path.exists() else 0


def test_the_storage_down_for_60_s_the_learner_waits_it_out_and_goes_on(cpu_bed):
    """Checkpoints go to sftp on the head, from a learner on another node; sshd goes
    away for 60 s with every connection it served. The learner's writes wait the
    outage out (``storage_outage_s``, a deadline on every call), the run's log says so
    at both ends, the learner is neither replaced nor reset, and its next checkpoint
    reaches the storage (before: one retry, then five quick learner failures stopped
    the run)."""
    bed, redis = cpu_bed
    storage = sftp_on_head(bed)
    url = storage.url("storage-down")
    run = bed.run("storage-down", {**BED_RUN, "storage": url, "storage_outage_s": 300}, redis=redis)
    run.start(minutes=20)
    checkpoint = storage.data / "storage-down" / CHECKPOINT_FILE
    try:
        wait_for(lambda: checkpoint_step(checkpoint) >= CANDIDATE_EVERY, timeout_s=600,
                 what=lambda: f"a checkpoint on the head's sftp\n{run.log()[-3000:]}")
        log_before = len(run.log())
        bed.storage_down(storage, 60)
        kept = checkpoint_step(checkpoint)
        wait_for(lambda: f"learner: storage {url}: answering again" in run.log()[log_before:], timeout_s=300,
                 what=lambda: f"the learner's storage back, said in the run's log\n{run.log()[-3000:]}")
        after = run.log()[log_before:]
        assert re.search(rf"learner: storage {re.escape(url)}: .+; retrying", after), after[-3000:]
        assert "learner lost" not in after and "learner hung" not in after, after[-3000:]
        wait_for(lambda: checkpoint_step(checkpoint) > kept, timeout_s=300,
                 what=lambda: f"a checkpoint written after the outage\n{run.log()[-3000:]}")
        assert run.process is not None and run.process.poll() is None
        assert (last := run.status()) is not None and last.error is None
    finally:
        stop_cleanly(bed, run)
        storage.stop()
