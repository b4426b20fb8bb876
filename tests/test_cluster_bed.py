"""The cluster bed itself (testing/cluster_bed.py): real Ray nodes on this machine,
each with its own network and its own files, Ray's token on every one, and the faults
that the run's tests and the soak inject. Marked ``bed``: a quick local run leaves
these out (``-m "not bed"``, or ``-m "not slow"`` with the other slow tests); CI runs
them, as root."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from unavailable import unavailable

from tengen.cluster.redis_server import EmbeddedRedis
from tengen.engine.network import weights_metadata
from tengen.learner.learner import CHECKPOINT_FILE
from tengen.run.run_dir import RunDir
from tengen.run_control import read_status
from tengen.testing.chaos import CHAOS_CONFIG, WORKER_LOST, finished_games_lost, games_in_stream, unique
from tengen.testing.cluster_bed import FAST_NODE_DEATH, ClusterBed, unavailable_reason
from tengen.testing.debian import ToolUnavailable
from tengen.testing.sftp_server import SftpServer
from tengen.testing.waiting import wait_for

pytestmark = [pytest.mark.bed, pytest.mark.slow, pytest.mark.timeout(1500)]

#: a Ray program run on a node: where 6 one-CPU tasks ran, by the bed's node names
WHERE_TASKS_RUN = """
import collections, os, ray, time
ray.init(address="auto", logging_level="ERROR")
@ray.remote(num_cpus=1)
def where():
    time.sleep(0.5)
    return os.environ["TENGEN_BED_NODE"]
print(sorted(collections.Counter(ray.get([where.remote() for _ in range(6)]))))
"""


@pytest.fixture(scope="module")
def bed():
    if (reason := unavailable_reason()) is not None:
        unavailable(reason)
    with ClusterBed(ray_env=FAST_NODE_DEATH) as bed:
        bed.start_head(cpus=1)
        bed.add_node("cpu", cpus=1)
        bed.add_node("gpu", cpus=1)
        yield bed


def test_every_node_runs_tasks_and_keeps_its_files_to_itself(bed):
    head, cpu = bed.nodes["head"], bed.nodes["cpu1"]
    done = bed.run_on(head, [sys.executable, "-c", WHERE_TASKS_RUN], timeout_s=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split("\n")[-2] == "['cpu1', 'gpu1', 'head']"
    # A file that a node writes into its home or /tmp, or that the head keeps in its
    # folder, is not there for another node: a restarted part cannot read it.
    secret = f"{os.path.expanduser('~')}/bed-{bed.token}.txt"
    assert bed.run_on(cpu, ["sh", "-c", f"echo cpu1 > {secret} && cat {secret}"]).stdout == "cpu1\n"
    assert not os.path.exists(secret)
    assert bed.run_on(head, ["cat", secret]).returncode != 0
    (bed.head_dir / "run.txt").write_text("the run directory")
    assert bed.run_on(head, ["cat", str(bed.head_dir / "run.txt")]).stdout == "the run directory"
    assert bed.run_on(cpu, ["cat", str(bed.head_dir / "run.txt")]).returncode != 0
    # ... while the code shows through everywhere
    assert bed.run_on(cpu, [sys.executable, "-c", "import tengen; print('ok')"]).stdout == "ok\n"


def test_a_node_without_the_clusters_token_is_refused(bed):
    head = bed.nodes["head"]
    env = {k: v for k, v in bed.node_env(head).items() if not k.startswith("RAY_AUTH")}
    joined = subprocess.run(["nsenter", "--target", str(head.holder_pid), "--mount", "--net", "--", sys.executable,
                             "-c", f"import ray; ray.init(address={bed.ray_address!r})"],
                            capture_output=True, text=True, timeout=180, env=env)
    assert joined.returncode != 0
    assert "token" in joined.stderr.lower(), joined.stderr[-2000:]


def test_a_preempted_node_loses_every_process_at_once_and_a_fresh_one_joins(bed):
    node = bed.add_node("cpu", cpus=1)
    assert len(bed.pids(node)) >= 3  # its holder, ray start, the raylet and their helpers
    bed.preempt(node)
    assert bed.pids(node) == [] and node.gone
    # Ray finds the node gone, and the cluster goes on with a new one
    fresh = bed.add_node("cpu", cpus=1)
    assert fresh.name != node.name and fresh.address != node.address
    bed.wait_for_nodes()


def test_a_cut_link_stops_traffic_until_it_is_healed(bed):
    cpu, head = bed.nodes["cpu1"], bed.nodes["head"]
    probe = [sys.executable, "-c", f"import socket; socket.create_connection(({head.address!r}, 6379), timeout=2)"]
    assert bed.run_on(cpu, probe).returncode == 0
    bed.cut(cpu)
    try:
        assert bed.run_on(cpu, probe).returncode != 0
    finally:
        bed.heal(cpu)
    assert bed.run_on(cpu, probe).returncode == 0


def test_a_slow_link_is_held_to_its_rate(bed):
    cpu, head = bed.nodes["cpu1"], bed.nodes["head"]
    port = 47123
    server = bed.spawn(head, [sys.executable, "-c", (
        "import socket; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
        f"s.bind(({head.address!r}, {port})); s.listen(); c, _ = s.accept(); c.sendall(b'x' * 600_000); c.close()")],
        log="sender")
    receive = [sys.executable, "-c", (
        "import socket, time\n"
        f"for _ in range(50):\n"
        f"    try: c = socket.create_connection(({head.address!r}, {port}), timeout=2); break\n"
        "    except OSError: time.sleep(0.1)\n"
        "start = time.monotonic(); n = 0\n"
        "while (b := c.recv(65536)): n += len(b)\n"
        "print(n, time.monotonic() - start)")]
    bed.slow(cpu, "1mbit")
    try:
        received, seconds = bed.run_on(cpu, receive, timeout_s=120).stdout.split()
    finally:
        bed.unslow(cpu)
        server.kill()
    # 600 kB at 1 Mbit/s takes about 4.8 s; unthrottled, loopback-fast
    assert int(received) == 600_000 and float(seconds) > 2.0


def test_the_head_folder_fills_up_and_frees(bed):
    bed.fill_disk()
    try:
        with pytest.raises(OSError) as full:
            (bed.head_dir / "more.bin").write_bytes(b"\0" * (1 << 20))
        assert full.value.errno == 28  # ENOSPC
    finally:
        bed.free_disk()
    (bed.head_dir / "more.bin").write_bytes(b"\0" * (1 << 20))
    (bed.head_dir / "more.bin").unlink()


# -- a run on the bed ------------------------------------------------------------------------

#: tic-tac-toe with a tiny net that promotes within a minute or two here (testing/chaos.py's)
BED_RUN = {**CHAOS_CONFIG, "cluster": {**CHAOS_CONFIG["cluster"], "workers": 2}}
CANDIDATE_EVERY = BED_RUN["train"]["candidate_every"]


def stop_cleanly(bed: ClusterBed, run) -> None:
    """SIGTERM the run's driver: it stops with 0 (else what it printed, its log after)."""
    code = run.stop()
    assert code == 0, (f"the driver exited with {code}:\n"
                       f"{bed.log_tail(bed.nodes['head'], f'run-{run.run_dir.name}', 6000)}\n{run.log()[-2000:]}")


def bed_with_redis(*, head_cpus: int, nodes: list[tuple[str, int]]) -> Iterator[tuple[ClusterBed, EmbeddedRedis]]:
    """A bed of a head and ``nodes`` (kind, CPUs), with the run's Redis on the head,
    for a module's runs (skipped, with the reason, where namespaces cannot be made)."""
    if (reason := unavailable_reason()) is not None:
        unavailable(reason)
    with ClusterBed(ray_env=FAST_NODE_DEATH) as bed:
        bed.start_head(cpus=head_cpus)
        for kind, cpus in nodes:
            bed.add_node(kind, cpus=cpus)
        redis = bed.start_redis()
        try:
            yield bed, redis
        finally:
            redis.stop()


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
                 timeout_s=600, what=f"two candidates and a checkpoint on the head\n{run.log()[-3000:]}")
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
                 what=f"learner steps past {kept}\n{run.log()[-3000:]}")
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
                 what=f"a checkpoint on the head's sftp\n{run.log()[-3000:]}")
        log_before = len(run.log())
        bed.storage_down(storage, 60)
        kept = checkpoint_step(checkpoint)
        wait_for(lambda: f"learner: storage {url}: answering again" in run.log()[log_before:], timeout_s=300,
                 what=f"the learner's storage back, said in the run's log\n{run.log()[-3000:]}")
        after = run.log()[log_before:]
        assert re.search(rf"learner: storage {re.escape(url)}: .+; retrying", after), after[-3000:]
        assert "learner lost" not in after and "learner hung" not in after, after[-3000:]
        wait_for(lambda: checkpoint_step(checkpoint) > kept, timeout_s=300,
                 what=f"a checkpoint written after the outage\n{run.log()[-3000:]}")
        assert run.process is not None and run.process.poll() is None
        assert (last := run.status()) is not None and last.error is None
    finally:
        stop_cleanly(bed, run)
        storage.stop()


# -- a GPU node whose CPU the learner holds ----------------------------------------------------

def reported(run) -> dict:
    """The run's last status line as written (its wiring's keys beside the loop's; {}
    before the first)."""
    last = run.status()
    return last.to_json() if last is not None else {}


@pytest.fixture(scope="module")
def gpu_bed():
    """The issue's small cluster: a head with 2 CPUs (the driver and Redis live there
    too), a "gpu" node with 1 CPU and a fake GPU, where the learner and the inference
    server go, and a CPU node with 1 CPU."""
    yield from bed_with_redis(head_cpus=2, nodes=[("gpu", 1), ("cpu", 1)])


def test_workers_beside_a_busy_gpu_node_run_where_cpus_are_free(gpu_bed):
    """The learner holds the GPU node's only CPU: the two workers for its server must
    not wait for it (before: sent there with a soft affinity, they waited for good, 0
    games, while the status said 2 workers), but run on the head and the CPU node."""
    bed, redis = gpu_bed
    run = bed.run("busy-gpu-node", BED_RUN, redis=redis).start(minutes=20)
    try:
        run.games_flow(after=20, timeout_s=300)
        ((learner_node, _),) = bed.find("ray::LearnerActor")
        ((server_node, _),) = bed.find("ray::InferenceServer")
        assert learner_node.name == server_node.name == "gpu1"
        workers = sorted(node.name for node, _ in bed.find("ray::SelfPlayActor"))
        assert len(workers) == 2 and "gpu1" not in workers, workers
    finally:
        stop_cleanly(bed, run)


def test_a_worker_without_room_is_counted_apart_reported_with_the_reason_and_tried_again(gpu_bed):
    """Four workers where three CPUs are left: the status counts the three that run and
    the one that waits, which past cluster.start_timeout_s is reported in the status
    and, once, in the log, with Ray's state, what it asks for and what the nodes have
    free, and is tried again (before: the status said 4 workers and nothing else)."""
    bed, redis = gpu_bed
    config = {**BED_RUN, "cluster": {**BED_RUN["cluster"], "workers": 4, "start_timeout_s": 30}}
    run = bed.run("no-room", config, redis=redis).start(minutes=20)
    try:
        run.games_flow(after=20, timeout_s=300)
        wait_for(lambda: reported(run).get("not_started"), timeout_s=120,
                 what=f"a worker reported as not started\n{run.log()[-3000:]}")
        status = reported(run)
        assert (status["workers"], status["workers_starting"], status["target_workers"]) == (3, 1, 4), status
        (waiting,) = status["not_started"]
        assert waiting["part"].startswith("worker ") and waiting["state"] == "PENDING_CREATION", waiting
        assert waiting["asks"] == {"CPU": 1.0} and waiting["free"] and waiting["waited_s"] >= 30
        assert all(free.get("CPU") == 0 for free in waiting["free"].values()), waiting["free"]
        assert "no node alive has {'CPU': 1.0} free" in waiting["why"]
        wait_for(lambda: (reported(run).get("not_started") or [{}])[0].get("tries", 0) >= 2, timeout_s=120,
                 what="the worker tried again")
        assert run.log().count(f"{waiting['part']} has not started in") == 1  # said once, in the status after
        # `tengen status` says it too, as an operator reads it
        told = read_status(run.run_dir)
        assert told["workers"] == {"running": 3, "starting": 1, "target": 4}, told["workers"]
        assert [part["part"] for part in told["not_started"]] == [waiting["part"]]
    finally:
        stop_cleanly(bed, run)


def test_the_learners_gpu_node_preempted_a_worker_makes_room_for_the_learner(gpu_bed):
    """The learner and the server on the gpu node, three workers on the three other
    CPUs; the gpu node is preempted and no node joins. The new learner (a CPU one now:
    no GPU is alive) and the CPU server that takes over find every CPU held by the
    workers: past cluster.start_timeout_s a worker is stopped for the learner (said in
    the log), the learner runs again and its window fills, and the run holds its
    worker count again, reporting the workers that wait (before: the learner waited
    for a CPU for good while self-play went on into a window of 0, with no error)."""
    bed, redis = gpu_bed
    config = {**BED_RUN, "cluster": {**BED_RUN["cluster"], "workers": 3, "start_timeout_s": 30}}
    run = bed.run("learner-gpu-preempted", config, redis=redis).start(minutes=25)
    try:
        wait_for(lambda: reported(run).get("workers") == 3 and reported(run).get("learner_step", 0) >= CANDIDATE_EVERY,
                 timeout_s=600, what=f"3 workers and a candidate\n{run.log()[-3000:]}")
        ((node, _),) = bed.find("ray::LearnerActor")
        assert node.name == "gpu1"
        log_before = len(run.log())
        bed.preempt(node)
        wait_for(lambda: "learner lost" in run.log()[log_before:], timeout_s=300, what="the loss logged")
        wait_for(lambda: "\nlearner runs, " in run.log()[log_before:], timeout_s=600,
                 what=f"the learner running again\n{run.log()[log_before:][-4000:]}")
        after = run.log()[log_before:]
        assert re.search(r"stopped self-play worker w\d+ on \S+ to free a CPU for learner", after), after[-4000:]
        assert "learner has not started in" in after
        ((node, _),) = bed.find("ray::LearnerActor")
        assert node.name != "gpu1"
        # Its window fills from the stream and from the games of the workers left.
        window = reported(run)["window"]
        wait_for(lambda: reported(run).get("window", 0) > max(window, 0), timeout_s=300,
                 what=f"the new learner's window filling\n{run.log()[-3000:]}")
        # Once the learner (and the CPU server) run, the run holds 3 workers again: those
        # without a CPU wait, and the status says so.
        wait_for(lambda: reported(run).get("held_for") is None and reported(run).get("target_workers") == 3
                 and reported(run).get("workers", 0) >= 1, timeout_s=300, what="the worker count held again")
        assert "waits for room: holding 3 self-play workers again" in run.log()[log_before:]
    finally:
        stop_cleanly(bed, run)


def test_a_gpu_node_preempted_and_another_joining_the_run_is_whole_again(gpu_bed):
    """The learner and the inference server on the gpu node, three workers on the
    other CPUs; the gpu node is preempted, and once the run has seen it go (a CPU
    learner, a CPU server standing in) the autoscaler's replacement joins. The run is
    as it was: the learner goes back to a GPU (from its checkpoint), a GPU server
    answers and the CPU server that stood in is stopped, and the three workers run,
    no more (the count is the config's: the new node takes workers, it adds none)."""
    bed, redis = gpu_bed
    if not any(node.kind == "gpu" and not node.gone for node in bed.nodes.values()):
        bed.add_node("gpu", cpus=1)  # the module's earlier test left none
    config = {**BED_RUN, "cluster": {**BED_RUN["cluster"], "workers": 3, "start_timeout_s": 30}}
    run = bed.run("gpu-node-replaced", config, redis=redis).start(minutes=25)
    try:
        wait_for(lambda: reported(run).get("workers") == 3 and run.learner_step() >= CANDIDATE_EVERY,
                 timeout_s=600, what=f"3 workers and a candidate\n{run.log()[-3000:]}")
        ((node, _),) = bed.find("ray::InferenceServer")
        assert node.kind == "gpu" and [n for n, _ in bed.find("ray::LearnerActor")] == [node]
        step, log_before = run.learner_step(), len(run.log())
        bed.preempt(node)
        wait_for(lambda: "learner lost" in run.log()[log_before:] and "inference servers: 1 (+1 -1)"
                 in run.log()[log_before:], timeout_s=300, what="the loss logged, a CPU server standing in")
        fresh = bed.add_node("gpu", cpus=1)
        wait_for(lambda: "the CPU inference server that stood in is stopped" in run.log()[log_before:],
                 timeout_s=600, what=f"the stand-in stopped\n{run.log()[log_before:][-4000:]}")
        # (moved from the CPU, or placed anew there while it waited for a CPU)
        wait_for(lambda: re.search(rf"the learner goes to {re.escape(fresh.address)} with [\d.]+ GPU",
                                   run.log()[log_before:]), timeout_s=600,
                 what=f"the learner given a GPU on {fresh.name}\n{run.log()[log_before:][-4000:]}")
        wait_for(lambda: [n for n, _ in bed.find("ray::LearnerActor")] == [fresh], timeout_s=600,
                 what=f"the learner on {fresh.name}\n{run.log()[log_before:][-4000:]}")
        wait_for(lambda: run.learner_step() > step, timeout_s=600,
                 what=f"the learner past step {step}\n{run.log()[log_before:][-4000:]}")
        wait_for(lambda: [reported(run).get(key) for key in ("workers", "workers_starting", "target_workers")]
                 == [3, 0, 3], timeout_s=600, what=f"3 workers running again\n{reported(run)}\n{run.log()[-3000:]}")
        run.games_flow(after=run.games() + 20, timeout_s=300)
        assert [n for n, _ in bed.find("ray::InferenceServer")] == [fresh]
        assert fresh.name not in {n.name for n, _ in bed.find("ray::SelfPlayActor")}  # the learner has its CPU
        assert unique(run.ladder_versions())
    finally:
        stop_cleanly(bed, run)


def test_a_self_play_node_partitioned_for_60_s_loses_no_finished_game_and_counts_none_twice(gpu_bed):
    """A node with one self-play worker cut off for 60 s. Ray declares it dead within
    seconds (the bed's FAST_NODE_DEATH) and the run counts its worker lost; healed, the
    node does not come back (Ray refuses a node it declared dead), so a fresh one joins
    and the run holds its workers again. Every game a worker reported finished is in
    the stream, and a game in it twice (a write retried) is read once: the games in
    flight on the cut node are the only ones lost."""
    bed, redis = gpu_bed
    if not any(node.kind == "gpu" and not node.gone for node in bed.nodes.values()):
        bed.add_node("gpu", cpus=1)
    config = {**BED_RUN, "cluster": {**BED_RUN["cluster"], "workers": 3, "start_timeout_s": 30}}
    run = bed.run("partition", config, redis=redis).start(minutes=25)
    try:
        wait_for(lambda: reported(run).get("workers") == 3 and run.games() >= 50, timeout_s=600,
                 what=f"3 workers and 50 games\n{run.log()[-3000:]}")
        cut = [node for node, _ in bed.find("ray::SelfPlayActor") if node.kind == "cpu"]
        assert len(cut) == 1, cut
        (node,) = cut
        others = ("ray::LearnerActor", "ray::InferenceServer", "ray::GatekeeperActor")
        assert all(n is not node for title in others for n, _ in bed.find(title))
        log_before = len(run.log())
        bed.partition(node, 60)
        assert WORKER_LOST.search(run.log()[log_before:]), run.log()[log_before:][-3000:]
        bed.wait_until_dropped(node)  # Ray declared it dead: healed, it exits, never rejoins
        bed.add_node("cpu", cpus=1)  # the autoscaler's replacement
        wait_for(lambda: (reported(run).get("workers"), reported(run).get("workers_starting")) == (3, 0),
                 timeout_s=600, what=f"3 workers running again\n{reported(run)}\n{run.log()[-3000:]}")
        run.games_flow(after=run.games() + 20, timeout_s=300)
        wait_for(lambda: not finished_games_lost(run, redis.password, redis.url), timeout_s=60,
                 what="every game reported finished in the stream")
        stored = games_in_stream(run, redis.password, redis.url)
        twice = sum(count - 1 for count in stored.values())
        wait_for(lambda: run.status() is not None and run.status().duplicate_games >= twice, timeout_s=120,
                 what=f"the learner dropping the {twice} entries written twice")
        assert len(stored) >= run.games()  # no game counted that is not in the stream
    finally:
        stop_cleanly(bed, run)
