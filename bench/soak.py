"""A run of hours on the cluster bed with a seeded random fault every few minutes, and
an independent check of what it kept (issue 42's soak).

    .venv/bin/python bench/soak.py --hours 2          # 2 h 15 min: the run, then its checks
    .venv/bin/python bench/soak.py --hours 0.2 --every-s 60   # 15 minutes: a try

As root (the bed's namespaces), on a machine with a few GB free. The bed
(tengen/testing/cluster_bed.py): a head (the driver, the run directory and the run's
Redis), a "gpu" node and two CPU nodes. Tic-tac-toe with CHAOS_CONFIG's tiny net and a
replay window (and so a stream MAXLEN) that the run never fills, outage budgets longer
than any injected outage. Every client of the run reaches Redis through the checker's
``AckProxy`` on the host's bridge address, which records each acknowledged game and
drops one reply in ``--drop-reply`` after Redis applied it. The driver runs under a
wrapper (``DriverWrapper``) that starts it again with ``--resume-if-exists`` whenever
it exits: after an injected SIGKILL or SIGTERM that is the fault's recovery; any other
exit is an unplanned exit.

Every ``--every-s`` (0.5x to 1.5x, drawn from ``--seed``), once the run has recovered
from the fault before, one fault drawn from ``FAULTS``: a non-head node preempted (a
fresh one of its kind joins 5-60 s later), partitioned for 2-60 s (past Ray's 5 s
health check it is dead to Ray and does not rejoin: a fresh one joins), its link slowed
to 256 kbit/s for 20-90 s; SIGKILL of a self-play worker, the inference server, the
learner or the gatekeeper; Redis SIGKILLed and started again on its AOF 1-60 s later;
the driver SIGKILLed or SIGTERMed (the wrapper resumes it); the head's disk full for
5-60 s; the learner's checkpoint storage (sftp to an sshd on the head, the bed's
``start_sftp``) down for 5-60 s.

A fault is survived when, within ``--recovery-s`` of its end, the run is whole again:
a status line written after the fault with games and learner steps going on from the
first line after it, the config's worker count running, no error, the driver running
and the part hit running again; its recovery time is the seconds from the fault's end
to then.

Printed: a line per fault as it happens; then a table per fault kind (count, survived,
recovery p50/p95/max), RSS growth per process after ``--warmup-s``, the run
directory's and the AOF's bytes per hour, and the checker's findings
(bench/soak_checker.py, which imports nothing from tengen): acknowledged games lost
(outside the second before a Redis kill), positions counted twice by the learner,
versions whose bytes changed, unplanned exits, and whether the final model plays
tic-tac-toe perfectly by the checker's own minimax (as the first and second player,
every position it can reach). Last, the two RATIO lines:

    RATIO soak_acked_games_lost <n> vs target 0
    RATIO soak_faults_survived <n> vs faults <N>

``--out`` keeps soak.json (every fault, sample and check) and the run's logs.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import redis

# bench/ is this script's folder, first on sys.path when it is run: the checker is a
# file beside it, not part of tengen (it must not import tengen, nor tengen it)
import soak_checker as checker
import yaml

from tengen.cluster.redis_server import EmbeddedRedis
from tengen.testing import cluster_bed
from tengen.testing.chaos import CHAOS_CONFIG, ROOT, Run
from tengen.testing.cluster_bed import FAST_NODE_DEATH, ClusterBed, Node
from tengen.testing.sftp_server import SftpServer

#: the Ray titles of the run's parts, and what else RSS is sampled for (by command line)
PARTS = {"ray::SelfPlayActor": "worker", "ray::InferenceServer": "inference", "ray::LearnerActor": "learner",
         "ray::GatekeeperActor": "gatekeeper"}
#: the longest injected outage (Redis down, disk full, a partition): the run's budgets are longer
LONGEST_OUTAGE_S = 90
#: tic-tac-toe positions a second the bed makes at most (2 workers x 16 games, 2 cores
#: shared): the window is sized from it so that it never fills. The 2-hour soak of
#: 2026-12-06 made 900/s on average and filled a window sized at 600/s (its window
#: check was then not valid); 1500 leaves room for a faster machine.
POSITIONS_PER_S = 1500
#: the AOF's growth measured on the bed (2 cores, shared): 320 MB/h; with room for a faster machine
AOF_BYTES_PER_H = 500 * 2**20
#: tic-tac-toe with a tiny net that promotes within a minute or two (testing/chaos.py's)
BASE_CONFIG: dict[str, Any] = dict(CHAOS_CONFIG)


# -- the run's config --------------------------------------------------------------------------


def soak_config(hours: float, storage: str) -> dict:
    """CHAOS_CONFIG with a window that the run never fills (so MAXLEN never trims the
    stream and the learner's window holds every game it read), outage budgets longer
    than any injected outage, and the checkpoints in ``storage``."""
    window = max(BASE_CONFIG["train"]["replay_window"], int(hours * 3600 * POSITIONS_PER_S * 1.5))
    return {**BASE_CONFIG, "storage": storage,
            "train": {**BASE_CONFIG["train"], "replay_window": window},
            "redis": {"outage_s": 5 * LONGEST_OUTAGE_S},
            "storage_outage_s": 5 * LONGEST_OUTAGE_S,
            "cluster": {**BASE_CONFIG["cluster"], "workers": 2}}


def head_size(hours: float) -> str:
    """The head folder's tmpfs for a soak of ``hours``: the AOF (``AOF_BYTES_PER_H``)
    twice over (Redis rewrites it beside the old one), the run directory, and room."""
    return f"{max(768, int(2 * hours * AOF_BYTES_PER_H / 2**20) + 512)}m"


# -- the driver under a wrapper ------------------------------------------------------------------


@dataclass
class DriverExit:
    at: float  # time.time()
    returncode: int
    planned: str | None  # the injected fault that ended it (None: unplanned)
    clean: bool  # what the fault asked for: SIGTERM -> 0, SIGKILL -> -9


class DriverWrapper:
    """``tengen train --resume-if-exists`` on the head, started again whenever it exits
    (as a job scheduler restarts a job), in a thread of its own."""

    def __init__(self, bed: ClusterBed, argv: list[str], env: dict[str, str], *, log: str):
        self.bed, self.argv, self.env, self.log = bed, argv, env, log
        self.process: subprocess.Popen | None = None
        self.exits: list[DriverExit] = []
        self.starts: list[float] = []
        self._planned: str | None = None
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._keep_running, name="driver-wrapper", daemon=True)

    def start(self) -> DriverWrapper:
        self._spawn()
        self._thread.start()
        return self

    def _spawn(self) -> None:
        self.process = self.bed.spawn(self.bed.nodes["head"], self.argv, log=self.log, env=self.env, cwd=ROOT)
        self.starts.append(time.time())

    def _keep_running(self) -> None:
        while True:
            assert self.process is not None
            returncode = self.process.wait()
            planned, self._planned = self._planned, None
            expected = {"driver SIGTERM": 0, "driver SIGKILL": -signal.SIGKILL, "stop": 0}.get(planned or "")
            self.exits.append(DriverExit(time.time(), returncode, planned, returncode == expected))
            if self._stopping.is_set():
                return
            self._spawn()

    def signal(self, sig: int, fault: str) -> None:
        """Send ``sig`` to the driver as the fault ``fault`` (its exit is planned)."""
        assert self.process is not None
        self._planned = fault
        self.process.send_signal(sig)

    @property
    def unplanned(self) -> list[DriverExit]:
        """Exits that no fault asked for, or not as it asked (a SIGTERM that did not stop cleanly)."""
        return [e for e in self.exits if not e.clean]

    def stop(self, timeout_s: float = 300) -> int | None:
        """SIGTERM, not started again; its return code (None: it had to be killed)."""
        self._stopping.set()
        assert self.process is not None
        if self.process.poll() is None:
            self._planned = "stop"
            self.process.send_signal(signal.SIGTERM)
        try:
            returncode = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            returncode = None
        self._thread.join(timeout=30)
        return returncode


# -- what is sampled over the run ----------------------------------------------------------------


def part_of(command_line: str) -> str | None:
    """The part a process of the bed is, by its command line (None: not sampled)."""
    for title, part in PARTS.items():
        if command_line.startswith(title):
            return part
    if "tengen.cli train" in command_line:
        return "driver"
    if "redis-server" in command_line:
        return "redis"
    if "/raylet" in command_line.split(" ", 1)[0]:
        return "raylet"
    if "gcs_server" in command_line.split(" ", 1)[0]:
        return "gcs"
    return None


def rss_bytes(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def tree_bytes(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


@dataclass
class Samples:
    """RSS per process, the run directory's and Redis's bytes, over time."""

    rss: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # "part pid" -> [(t, bytes)]
    run_dir_bytes: list[tuple[float, int]] = field(default_factory=list)
    aof_bytes: list[tuple[float, int]] = field(default_factory=list)


def growth_per_hour(series: list[tuple[float, int]], since: float) -> float | None:
    """Bytes per hour between the first sample at or after ``since`` and the last."""
    kept = [(t, v) for t, v in series if t >= since]
    if len(kept) < 2 or kept[-1][0] - kept[0][0] < 60:
        return None
    return (kept[-1][1] - kept[0][1]) / ((kept[-1][0] - kept[0][0]) / 3600)


def rss_growth_by_part(samples: Samples, *, since: float, min_span_s: float) -> dict[str, dict[str, float]]:
    """Per part: the largest RSS growth (MB/h) of its processes that lived ``min_span_s``
    after ``since`` (restarted ones start again), and the largest RSS last seen (MB)."""
    out: dict[str, dict[str, float]] = {}
    for key, series in samples.rss.items():
        part = key.split(" ")[0]
        kept = [(t, v) for t, v in series if t >= since]
        if not kept:
            continue
        row = out.setdefault(part, {"processes": 0, "max_growth_mb_per_h": float("nan"), "max_rss_mb": 0.0})
        row["max_rss_mb"] = max(row["max_rss_mb"], kept[-1][1] / 2**20)
        if kept[-1][0] - kept[0][0] >= min_span_s:
            row["processes"] += 1
            growth = (kept[-1][1] - kept[0][1]) / 2**20 / ((kept[-1][0] - kept[0][0]) / 3600)
            best = row["max_growth_mb_per_h"]
            row["max_growth_mb_per_h"] = growth if best != best or growth > best else best  # nan: none yet
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


# -- the soak ---------------------------------------------------------------------------------------


@dataclass
class FaultResult:
    kind: str
    detail: str
    injected_at: float
    ended_at: float
    survived: bool
    recovery_s: float | None
    why: str = ""


class Soak:
    """The bed, the run on it, its Redis behind the proxy, the wrapper, the samples."""

    def __init__(self, bed: ClusterBed, redis_server: EmbeddedRedis, proxy: checker.AckProxy, wrapper: DriverWrapper,
                 run_dir: Path, *, recovery_s: float):
        self.bed, self.redis, self.proxy, self.wrapper = bed, redis_server, proxy, wrapper
        self.run_dir, self.recovery_s = run_dir, recovery_s
        #: the learner's checkpoint storage on the head (the bed's sftp server)
        self.storage: SftpServer | None = None
        self.view = Run(run_dir=run_dir)  # the run's records, read as an operator does
        self.redis_kills: list[float] = []
        self.workers = int(BASE_CONFIG["cluster"]["workers"])  # what the soak's config asks for
        #: the target worker counts the run's status said after faults
        self.targets_seen: set[int] = set()
        self.results: list[FaultResult] = []
        self.samples = Samples()
        self.ledger = checker.VersionLedger()
        self._sampler_stop = threading.Event()

    def direct_client(self) -> redis.Redis:
        """A client of the run's Redis itself, past the proxy (the checker's own)."""
        return redis.Redis(host=self.redis.host, port=self.redis.port, password=self.redis.password,
                           socket_timeout=10, socket_connect_timeout=5)

    # -- sampling, in a thread of its own -------------------------------------------------
    def start_sampling(self, every_s: float) -> None:
        threading.Thread(target=self._sample_loop, args=(every_s,), name="soak-sampler", daemon=True).start()

    def _sample_loop(self, every_s: float) -> None:
        while not self._sampler_stop.wait(every_s):
            self.sample()

    def sample(self) -> None:
        now = time.time()
        for node in list(self.bed.nodes.values()):
            if node.gone:
                continue
            for pid, line in self.bed.titles(node).items():
                part = part_of(line)
                if part is None or (rss := rss_bytes(pid)) is None:
                    continue
                self.samples.rss.setdefault(f"{part} {pid}", []).append((now, rss))
        self.samples.run_dir_bytes.append((now, tree_bytes(self.run_dir)))
        self.samples.aof_bytes.append((now, tree_bytes(self.redis.data_dir)))
        try:
            client = self.direct_client()
            try:
                checker.sample_versions(self.ledger, self.run_dir, client, checker.run_keys_prefix(self.run_dir))
            finally:
                client.close()
        except (redis.RedisError, OSError, ValueError, KeyError):
            checker.sample_versions(self.ledger, self.run_dir, None, "")  # Redis away: the files alone

    def stop_sampling(self) -> None:
        self._sampler_stop.set()

    # -- recovery ---------------------------------------------------------------------------
    def status(self) -> dict:
        last = self.view.status()
        return last.to_json() if last is not None else {}

    def wait_recovered(self, ended_at: float, part_back: Callable[[], bool] = lambda: True) -> float:
        """Seconds from ``ended_at`` until the run is whole again (AssertionError, with
        what is missing, past the recovery window)."""
        first: dict | None = None
        deadline = ended_at + self.recovery_s
        missing = "no status line after the fault"
        while time.time() < deadline:
            status = self.status()
            if status.get("time", 0) > ended_at:
                first = first or status
                self.targets_seen.add(int(status.get("target_workers", 0)))
                conditions = {
                    "games going on": status["games"] >= first["games"] + 10,
                    "learner stepping": status["learner_step"] > first["learner_step"],
                    # the config's count, not the status's target: a GPU node that joins adds
                    # workers_per_gpu to the target even with cluster.workers set (fleet.py), more
                    # than the bed has CPUs for (said in the report)
                    "workers back": status.get("workers", 0) >= self.workers,
                    "no error": status.get("error") is None,
                    "the part back": part_back(),
                    "the driver running": self.wrapper.process is not None and self.wrapper.process.poll() is None,
                }
                missing = ", ".join(name for name, ok in conditions.items() if not ok)
                if not missing:
                    return time.time() - ended_at
            time.sleep(1.0)
        raise AssertionError(f"not whole within {self.recovery_s:.0f} s: {missing or 'unknown'}")

    def parts_running(self, title: str, *, count: int = 1, not_pid: int | None = None) -> bool:
        pids = [pid for _, pid in self.bed.find(title)]
        return len(pids) >= count and not_pid not in pids


# -- the faults: each injects one and returns (detail, when it ended, what says the part is back) ---

Injected = tuple[str, float, Callable[[], bool]]


def _victim_node(soak: Soak, rng: random.Random) -> Node:
    return rng.choice(sorted((n for n in soak.bed.nodes.values() if not n.gone and n.kind != "head"),
                             key=lambda n: n.name))


def _replace(soak: Soak, node: Node) -> Node:
    """A fresh node of ``node``'s kind and size, joined (the autoscaler's replacement)."""
    return soak.bed.add_node(node.kind, cpus=node.cpus, gpus=node.gpus)


def preempt_a_node(soak: Soak, rng: random.Random) -> Injected:
    node, delay = _victim_node(soak, rng), rng.uniform(5, 60)
    soak.bed.preempt(node)
    time.sleep(delay)
    fresh = _replace(soak, node)
    return f"{node.name} preempted, {fresh.name} joined {delay:.0f} s later", time.time(), lambda: True


def partition_a_node(soak: Soak, rng: random.Random) -> Injected:
    node, seconds = _victim_node(soak, rng), rng.uniform(2, 60)
    soak.bed.partition(node, seconds)
    # Past Ray's health check (FAST_NODE_DEATH: 5 s) the node is dead to Ray: its raylet
    # exits when it hears so, and it does not rejoin.
    deadline = time.time() + 30
    while time.time() < deadline and node.ray is not None and node.ray.poll() is None:
        time.sleep(0.5)
    if node.ray is not None and node.ray.poll() is not None:
        soak.bed.preempt(node)  # what is left of it
        fresh = _replace(soak, node)
        return f"{node.name} cut off {seconds:.0f} s, dead to Ray: {fresh.name} joined", time.time(), lambda: True
    return f"{node.name} cut off {seconds:.0f} s, back", time.time(), lambda: True


def slow_a_link(soak: Soak, rng: random.Random) -> Injected:
    node, seconds = _victim_node(soak, rng), rng.uniform(20, 90)
    soak.bed.slow(node, "256kbit")
    try:
        time.sleep(seconds)
    finally:
        soak.bed.unslow(node)
    return f"{node.name} at 256 kbit/s for {seconds:.0f} s", time.time(), lambda: True


def _kill_part(title: str) -> Callable[[Soak, random.Random], Injected]:
    def kill(soak: Soak, rng: random.Random) -> Injected:
        found = sorted(soak.bed.find(title), key=lambda found: found[1])
        if not found:
            raise AssertionError(f"no {title} process to kill")
        node, pid = rng.choice(found)
        count = len(found)
        os.kill(pid, signal.SIGKILL)
        return (f"{title} pid {pid} on {node.name} SIGKILLed", time.time(),
                lambda: soak.parts_running(title, count=count, not_pid=pid))
    return kill


def kill_redis(soak: Soak, rng: random.Random) -> Injected:
    down_s = rng.uniform(1, 60)
    soak.redis_kills.append(time.time())
    soak.redis._kill()
    time.sleep(down_s)
    soak.redis.restart()  # from the main thread: the kernel stops a server whose starting thread exits
    return f"redis-server SIGKILLed, restarted {down_s:.0f} s later", time.time(), lambda: soak.redis.running


def _signal_driver(sig: int, kind: str) -> Callable[[Soak, random.Random], Injected]:
    def inject(soak: Soak, rng: random.Random) -> Injected:
        starts = len(soak.wrapper.starts)
        soak.wrapper.signal(sig, kind)
        deadline = time.time() + 600
        while len(soak.wrapper.starts) == starts:  # a SIGTERM'd driver first stops cleanly
            if time.time() > deadline:
                raise AssertionError("the driver did not exit within 600 s")
            time.sleep(0.5)
        last_exit = soak.wrapper.exits[-1]
        return (f"driver {signal.Signals(sig).name}: exit {last_exit.returncode}, resumed", soak.wrapper.starts[-1],
                lambda: True)
    return inject


def storage_down(soak: Soak, rng: random.Random) -> Injected:
    seconds = rng.uniform(5, 60)
    assert soak.storage is not None
    soak.bed.storage_down(soak.storage, seconds)
    return f"sftp storage down for {seconds:.0f} s", time.time(), lambda: True


def fill_the_disk(soak: Soak, rng: random.Random) -> Injected:
    seconds = rng.uniform(5, 60)
    soak.bed.fill_disk()
    try:
        time.sleep(seconds)
    finally:
        soak.bed.free_disk()
    return f"head disk full for {seconds:.0f} s", time.time(), lambda: True


#: the faults the soak draws from, equally likely
FAULTS: dict[str, Callable[[Soak, random.Random], Injected]] = {
    "preempt node": preempt_a_node,
    "partition node": partition_a_node,
    "slow link": slow_a_link,
    "kill worker": _kill_part("ray::SelfPlayActor"),
    "kill inference": _kill_part("ray::InferenceServer"),
    "kill learner": _kill_part("ray::LearnerActor"),
    "kill gatekeeper": _kill_part("ray::GatekeeperActor"),
    "kill redis": kill_redis,
    "driver SIGKILL": _signal_driver(signal.SIGKILL, "driver SIGKILL"),
    "driver SIGTERM": _signal_driver(signal.SIGTERM, "driver SIGTERM"),
    "disk full": fill_the_disk,
    "storage down": storage_down,
}


def inject(soak: Soak, kind: str, rng: random.Random) -> FaultResult:
    injected = time.time()
    try:
        detail, ended, part_back = FAULTS[kind](soak, rng)
    except AssertionError as e:
        return FaultResult(kind, "", injected, time.time(), False, None, f"not injected: {e}")
    try:
        seconds = soak.wait_recovered(ended, part_back)
    except AssertionError as e:
        return FaultResult(kind, detail, injected, ended, False, None, str(e))
    # whole again, but through a restart of the whole run that no fault asked for
    if exits := [e for e in soak.wrapper.unplanned if e.at >= injected]:
        return FaultResult(kind, detail, injected, ended, False, seconds,
                           f"the driver exited on its own (exit {exits[0].returncode}); resumed by the wrapper")
    return FaultResult(kind, detail, injected, ended, True, seconds)


# -- the end checks ------------------------------------------------------------------------------


def end_checks(soak: Soak, *, bestmove_sims: int) -> dict[str, Any]:
    """The checker's findings, the run stopped."""
    client = soak.direct_client()
    prefix = checker.run_keys_prefix(soak.run_dir)
    key = f"{prefix}:samples"
    delivered_to = checker.last_delivered(client, key)
    ids: list[str | None] = []
    delivered: list[checker.GameHeader] = []
    undecodable = 0
    for entry_id, header in checker.read_stream(client, key):
        if isinstance(header, checker.EntryFormatError):
            undecodable += 1
            continue
        ids.append(header.game_id)
        if delivered_to is not None and checker.stream_id_le(entry_id, delivered_to):
            delivered.append(header)
    stream = checker.check_stream(soak.proxy.acked, ids, redis_kills=soak.redis_kills, undecodable=undecodable)
    window = checker.check_window(soak.status(), delivered)
    checker.sample_versions(soak.ledger, soak.run_dir, client, prefix)
    client.close()
    bestmove = checker.BestMoveProcess([sys.executable, "-m", "tengen.cli", "bestmove", "--checkpoint",
                                        str(soak.run_dir / "best"), "--sims", str(bestmove_sims)], cwd=str(ROOT))
    try:
        play: checker.PlayCheck | None = checker.check_perfect_play(bestmove)
        play_error = ""
    except RuntimeError as e:
        play, play_error = None, str(e)
    finally:
        bestmove.close()
    return {"stream": stream, "window": window, "changed_versions": soak.ledger.changed(),
            "versions_seen": len(soak.ledger.seen), "play": play, "play_error": play_error}


# -- the report ------------------------------------------------------------------------------------


def fault_table(results: list[FaultResult]) -> list[str]:
    lines = [f"{'fault':<18} {'count':>5} {'survived':>8} {'p50 s':>7} {'p95 s':>7} {'max s':>7}"]
    for kind in FAULTS:
        these = [r for r in results if r.kind == kind]
        if not these:
            continue
        times = [r.recovery_s for r in these if r.recovery_s is not None]
        cells = [f"{percentile(times, q):7.1f}" for q in (0.5, 0.95, 1.0)] if times else [f"{'-':>7}"] * 3
        lines.append(f"{kind:<18} {len(these):>5} {sum(r.survived for r in these):>8} {' '.join(cells)}")
    return lines


def report(soak: Soak, results: list[FaultResult], checks: dict[str, Any], *, since: float, hours: float) -> list[str]:
    stream: checker.StreamCheck = checks["stream"]
    window: checker.WindowCheck = checks["window"]
    play: checker.PlayCheck | None = checks["play"]
    lines = ["", "faults (recovery: seconds from the fault's end until the run is whole again)"]
    lines += fault_table(results)
    lines += ["", f"RSS after warm-up, per part: largest growth of a process that lived {hours / 3:.2f} h of it"]
    for part, row in sorted(rss_growth_by_part(soak.samples, since=since, min_span_s=hours * 3600 / 3).items()):
        growth = row["max_growth_mb_per_h"]
        lines.append(f"  {part:<11} {row['max_rss_mb']:7.0f} MB last; growth "
                     + (f"{growth:+7.1f} MB/h" if growth == growth else "      - (none lived long enough)")
                     + f" over {row['processes']:.0f} processes")
    for name, series in (("run directory", soak.samples.run_dir_bytes), ("Redis AOF", soak.samples.aof_bytes)):
        rate = growth_per_hour(series, since)
        size = series[-1][1] / 2**20 if series else 0
        lines.append(f"  {name:<14} {size:7.1f} MB at the end; "
                     + (f"{rate / 2**20:+.1f} MB/h after warm-up" if rate is not None else "- MB/h"))
    if soak.targets_seen - {soak.workers}:
        lines.append(f"  the run's target worker count after faults: {sorted(soak.targets_seen)} "
                     f"(the config asks for {soak.workers})")
    exits = soak.wrapper.exits
    lines += ["", f"driver exits: {len(exits)} ({len(soak.wrapper.unplanned)} unplanned"
              + "".join(f"; {time.strftime('%H:%M:%S', time.localtime(e.at))} rc {e.returncode}"
                        + (f" after {e.planned}" if e.planned else "") for e in soak.wrapper.unplanned) + ")"]
    lines += [f"acknowledged games: {stream.acknowledged} ({soak.proxy.ack_count} acknowledgements, "
              f"{len(soak.proxy.dropped)} replies dropped after Redis applied them; "
              f"{acked_again_summary(soak)})",
              f"stream: {stream.entries} entries, {stream.distinct_games} distinct games, {stream.repeated_entries} "
              f"entries repeating a game, {stream.undecodable} undecodable",
              f"acknowledged games lost: {len(stream.lost)} (and {len(stream.lost_in_fsync_window)} within "
              f"{checker.FSYNC_WINDOW_S:.0f} s before one of {len(soak.redis_kills)} Redis kills)"
              + (f": {stream.lost[:10]}" if stream.lost else ""),
              f"learner window: {window.window} positions, distinct games delivered {window.expected}: "
              f"{window.counted_twice} counted twice, {window.missing} missing "
              f"({window.learner_duplicates} duplicates the learner dropped"
              + ("" if window.valid else "; NOT VALID: the window is full") + ")",
              f"versions whose bytes changed: {len(checks['changed_versions'])} of {checks['versions_seen']} seen"
              + (f": {checks['changed_versions']}" if checks["changed_versions"] else "")]
    if play is None:
        lines.append(f"final model: not checked ({checks['play_error'][-500:]})")
    else:
        lines.append(f"final model: {'plays perfectly' if play.perfect else 'NOT perfect'}: "
                     f"{len(play.imperfect)} imperfect moves in {play.positions} positions"
                     + (f", e.g. {play.imperfect[:5]} (position, its move, its value, best)" if play.imperfect else ""))
    lost = len(stream.lost)
    lines += ["", f"RATIO soak_acked_games_lost {lost} vs target 0",
              f"RATIO soak_faults_survived {sum(r.survived for r in results)} vs faults {len(results)}"]
    return lines


def acked_again_summary(soak: Soak) -> str:
    """How many games were acknowledged twice, and how many of those near a fault."""
    again = soak.proxy.acked_again
    if not again:
        return "none acknowledged twice"
    near = [a for a in again if any(0 <= a[2] - f.injected_at <= f.ended_at - f.injected_at + 60
                                     for f in soak.results)]
    return (f"{len(again)} acknowledged again, {len(near)} of them during a fault or within 60 s after, "
            f"the second a median {statistics.median(a[2] - a[1] for a in again):.1f} s after the first")


def dump(soak: Soak, results: list[FaultResult], checks: dict[str, Any], out: Path) -> None:
    def plain(value: Any) -> Any:
        if hasattr(value, "__dataclass_fields__"):
            return asdict(value)
        return str(value)

    data = {"faults": [asdict(r) for r in results], "redis_kills": soak.redis_kills,
            "driver_exits": [asdict(e) for e in soak.wrapper.exits], "dropped": [asdict(a) for a in soak.proxy.dropped],
            "acked_again": soak.proxy.acked_again,
            "samples": asdict(soak.samples), "checks": {k: plain(v) for k, v in checks.items()}}
    (out / "soak.json").write_text(json.dumps(data, indent=1, default=str))


# -- main -----------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hours", type=float, default=2.0, help="how long the run goes on under faults")
    parser.add_argument("--every-s", type=float, default=180.0, help="mean seconds between faults")
    parser.add_argument("--seed", type=int, default=42, help="draws the faults, their victims and lengths")
    parser.add_argument("--faults", default=",".join(FAULTS), help="the fault kinds to draw from, comma-separated")
    parser.add_argument("--recovery-s", type=float, default=600.0, help="a fault not recovered from within is lost")
    parser.add_argument("--warmup-s", type=float, default=None, help="before RSS growth counts (default: 10%%)")
    parser.add_argument("--drop-reply", type=float, default=0.001,
                        help="the share of acknowledged game writes whose reply the proxy drops")
    parser.add_argument("--sample-s", type=float, default=30.0, help="seconds between RSS and size samples")
    parser.add_argument("--bestmove-sims", type=int, default=200, help="the final model's search in the play check")
    parser.add_argument("--head-size", default=None,
                        help="the head's tmpfs (run directory, AOF), e.g. 4g (default: room for --hours' AOF twice)")
    parser.add_argument("--out", default=None,
                        help="keep soak.json and the logs here (default: /var/tmp/tengen-soak-*)")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.faults.split(",") if k.strip()]
    if unknown := [k for k in kinds if k not in FAULTS]:
        parser.error(f"unknown faults {unknown}; known: {', '.join(FAULTS)}")
    if (reason := cluster_bed.unavailable_reason()) is not None:
        sys.exit(f"soak: {reason}")
    # read when the bed mounts its head folder: the bed's own 768 MB hold a test's run, not
    # a soak's AOF (about 320 MB an hour here, and twice that while Redis rewrites it)
    cluster_bed.HEAD_SIZE = args.head_size or head_size(args.hours)
    out = Path(args.out or f"/var/tmp/tengen-soak-{time.strftime('%Y%m%d-%H%M%S')}")
    out.mkdir(parents=True, exist_ok=True)
    warmup_s = args.warmup_s if args.warmup_s is not None else 0.1 * args.hours * 3600
    rng = random.Random(args.seed)
    say = _printer(out / "soak.log")
    say(f"soak: {args.hours} h, a fault every ~{args.every_s:.0f} s from {len(kinds)} kinds, seed {args.seed}; "
        f"output in {out}")
    started = time.time()
    with ClusterBed(ray_env=FAST_NODE_DEATH) as bed:
        bed.start_head(cpus=1)
        bed.add_node("gpu", cpus=1)
        bed.add_node("cpu", cpus=1)
        bed.add_node("cpu", cpus=1)
        redis_server = bed.start_redis()
        storage = bed.start_sftp()
        proxy = checker.AckProxy(redis_server.host, redis_server.port, listen_host=bed.host_address,
                                 drop_probability=args.drop_reply, seed=args.seed).start()
        _check_every_node_reaches(bed, proxy)
        run_dir = bed.head_dir / "runs" / "soak"
        run_dir.parent.mkdir(parents=True)
        config_path = bed.head_dir / "runs" / "soak.yaml"
        config_path.write_text(yaml.safe_dump(soak_config(args.hours, storage.url("soak/learner"))))
        argv = [sys.executable, "-m", "tengen.cli", "train", str(config_path), "--run-dir", str(run_dir),
                "--resume-if-exists", "--minutes", str(args.hours * 60 + 120), "--redis", proxy.url,
                "--address", bed.ray_address]
        wrapper = DriverWrapper(bed, argv, {"TENGEN_REDIS_PASSWORD": redis_server.password}, log="run-soak").start()
        soak = Soak(bed, redis_server, proxy, wrapper, run_dir, recovery_s=args.recovery_s)
        soak.storage = storage
        results = soak.results
        checks: dict[str, Any] = {}
        try:
            soak.view.wait_until_playing(timeout_s=600, games=50, steps=BASE_CONFIG["train"]["candidate_every"])
            say(f"playing after {time.time() - started:.0f} s: {soak.status().get('games')} games, "
                f"learner step {soak.status().get('learner_step')}")
            soak.start_sampling(args.sample_s)
            playing = time.time()
            end = playing + args.hours * 3600
            while True:
                wait = rng.uniform(0.5, 1.5) * args.every_s
                if time.time() + wait >= end:
                    break
                time.sleep(wait)
                kind = rng.choice(kinds)
                result = inject(soak, kind, rng)
                results.append(result)
                say(f"FAULT {len(results)} {kind}: {result.detail or '-'}: "
                    + (f"survived, whole again in {result.recovery_s:.0f} s" if result.survived
                       else f"NOT SURVIVED ({result.why.splitlines()[0] if result.why else ''})"))
            time.sleep(max(0.0, end - time.time()))
            soak.sample()
            soak.stop_sampling()
            returncode = wrapper.stop()
            say(f"run stopped (driver exit {returncode}) after {(time.time() - playing) / 3600:.2f} h of faults; "
                "checking")
            checks = end_checks(soak, bestmove_sims=args.bestmove_sims)
            for line in report(soak, results, checks, since=playing + warmup_s, hours=args.hours):
                say(line)
        finally:
            soak.stop_sampling()
            if wrapper.process is not None and wrapper.process.poll() is None:
                wrapper.stop(timeout_s=120)
            dump(soak, results, checks, out)
            proxy.stop()
            redis_server.stop()
            storage.stop()
            shutil.copytree(bed.logs, out / "logs", dirs_exist_ok=True)
            for kept in ("log.txt", "status.jsonl", "gating.jsonl", "config.yaml", "ladder.json"):
                if (run_dir / kept).exists():
                    shutil.copy(run_dir / kept, out / f"run-{kept}")
    say(f"soak: {(time.time() - started) / 60:.1f} minutes in all")


def _check_every_node_reaches(bed: ClusterBed, proxy: checker.AckProxy) -> None:
    """Every node reaches the proxy on the host's bridge address (else the run cannot start)."""
    probe = [sys.executable, "-c",
             f"import socket; socket.create_connection(({proxy.listen_host!r}, {proxy.listen_port}), timeout=5)"]
    for node in bed.nodes.values():
        done = bed.run_on(node, probe)
        if done.returncode != 0:
            raise SystemExit(f"soak: {node.name} cannot reach the proxy at {proxy.url}: {done.stderr[-500:]}")


def _printer(path: Path) -> Callable[[str], None]:
    def say(line: str) -> None:
        print(line, flush=True)
        with open(path, "a") as f:
            f.write(line + "\n")
    return say


if __name__ == "__main__":
    main()
