"""The cluster bed itself (testing/cluster_bed.py): real Ray nodes on this machine,
each with its own network and its own files, Ray's token on every one, and the faults
that the run's tests and the soak inject. Marked ``bed``: a quick local run leaves
these out (``-m "not bed"``, or ``-m "not slow"`` with the other slow tests); CI runs
them, as root."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from unavailable import unavailable

from tengen.testing.cluster_bed import FAST_NODE_DEATH, ClusterBed, unavailable_reason

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


def test_a_driver_without_the_clusters_token_is_refused(bed):
    # (every node of the bed joins with the token: each test here runs on them)
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
