"""What the bed's run tests share (tests/test_bed_cpu_runs.py, test_bed_gpu_runs.py):
a bed with the run's Redis on its head, the run's config, and how a run is stopped
and read."""

from __future__ import annotations

from collections.abc import Iterator

from unavailable import unavailable

from tengen.cluster.redis_server import EmbeddedRedis
from tengen.testing.chaos import CHAOS_CONFIG, Run
from tengen.testing.cluster_bed import FAST_NODE_DEATH, ClusterBed, unavailable_reason

#: tic-tac-toe with a tiny net that promotes within a minute or two here (testing/chaos.py's)
BED_RUN = {**CHAOS_CONFIG, "cluster": {**CHAOS_CONFIG["cluster"], "workers": 2}}
CANDIDATE_EVERY = BED_RUN["train"]["candidate_every"]


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


def stop_cleanly(bed: ClusterBed, run: Run) -> None:
    """SIGTERM the run's driver: it stops with 0 (else what it printed, its log after)."""
    code = run.stop()
    assert code == 0, (f"the driver exited with {code}:\n"
                       f"{bed.log_tail(bed.nodes['head'], f'run-{run.run_dir.name}', 6000)}\n{run.log()[-2000:]}")


def reported(run: Run) -> dict:
    """The run's last status line as written (its wiring's keys beside the loop's; {}
    before the first)."""
    last = run.status()
    return last.to_json() if last is not None else {}
