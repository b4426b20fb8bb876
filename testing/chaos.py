"""Faults injected for real into a real run: the tests (tests/test_chaos.py) and the
benchmark (bench/chaos.py) both drive a run through this module.

A run is ``tengen train`` in a child process, started as a user starts it. Its parts
are found by the titles Ray gives its worker processes (``ray::SelfPlayActor``,
``ray::InferenceServer``, ``ray::LearnerActor``, ``ray::GatekeeperActor``), among
the descendants of that run's driver only, so that other runs on the machine are
never touched; they are killed with SIGKILL. What survived is read from the run
directory (status.json, log.txt, ladder.json) and from the run's Redis.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tengen.cluster.keys import RunKeys
from tengen.cluster.redis_server import EmbeddedRedis, connect
from tengen.engine.games import make_game
from tengen.run.codec import decode_game_meta
from tengen.run.records import StatusLine, read_ladder, read_status
from tengen.run.run_dir import RunDir
from tengen.run.sample_stream import ENTRY_FIELD
from tengen.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent

#: tic-tac-toe, tiny: a run that promotes within a minute on two cores, whose gating
#: matches take a few seconds (so one can be cut off), with a stream long enough to
#: keep every game of a test (each game's id is checked against what workers reported)
CHAOS_CONFIG = {
    "game": {"name": "tictactoe"},
    "network": {"blocks": 1, "filters": 8},
    "mcts": {"simulations": 16, "leaves_per_round": 4},
    "selfplay": {"temperature_moves": 9},
    # a window (and so a stream) that MAXLEN does not trim within a test module's run: at
    # 100-200 games/s (the evaluation cache answers most of tic-tac-toe) 400,000 positions
    # were trimmed within 8 minutes, and a trimmed game reads as lost to the checks here
    "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 40, "replay_window": 4_000_000,
              "max_reuse": 4},
    "gating": {"rule": "threshold", "threshold": 0.3, "games": 48, "games_in_flight": 16, "simulations": 16},
    "redis": {"outage_s": 30},
    "cluster": {"workers": 2, "games_per_worker": 16, "worker_chunk_seconds": 1.0, "batch_timeout_ms": 2.0,
                # deadlines of a minute or two, so that a hung part is seen within a test's window
                "hang_grace_s": 20, "evaluation_timeout_s": 20, "match_deadline_s": 60},
}


def descendants(root: int) -> dict[int, str]:
    """pid -> command line of every live process under ``root`` (from /proc)."""
    parents: dict[int, int] = {}
    titles: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        pid = int(entry)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] == "Z":
            continue
        parents[pid] = int(fields[1])
        titles[pid] = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
    out = {}
    for pid, title in titles.items():
        up, hops = parents.get(pid), 0
        while up and up != root and hops < 20:
            up, hops = parents.get(up), hops + 1
        if up == root:
            out[pid] = title
    return out


def actor_pids(driver: int, title: str) -> list[int]:
    """The run's processes whose Ray title starts with ``title`` (``ray::LearnerActor``)."""
    return sorted(pid for pid, t in descendants(driver).items() if t.startswith(title))


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@dataclass
class Run:
    """``tengen train`` in a child process, with its run directory."""

    run_dir: Path
    config: dict = field(default_factory=lambda: dict(CHAOS_CONFIG))
    redis_url: str | None = None
    env: dict = field(default_factory=dict)
    process: subprocess.Popen | None = None
    #: how the driver is started: ``launch(command, env) -> Popen`` (default: a child
    #: process of this one; the cluster bed starts it on its head node)
    launch: Callable[[list[str], dict], subprocess.Popen] | None = None

    def start(self, *, resume: bool = False, minutes: float = 30) -> Run:
        self.run_dir.parent.mkdir(parents=True, exist_ok=True)
        config_path = self.run_dir.parent / f"{self.run_dir.name}.yaml"
        config_path.write_text(yaml.safe_dump(self.config))
        command = [sys.executable, "-m", "tengen.cli", "train", "--run-dir", str(self.run_dir),
                   "--minutes", str(minutes)]
        command += ["--resume"] if resume else [str(config_path)]
        if self.redis_url:
            command += ["--redis", self.redis_url]
        if self.launch is not None:
            self.process = self.launch(command, self.env)
            return self
        log = open(self.run_dir.parent / f"{self.run_dir.name}.out", "ab")  # noqa: SIM115
        self.process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                        env={**os.environ, **self.env})
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def status(self) -> StatusLine | None:
        """The run's last status line (None before its first)."""
        try:
            return read_status(RunDir(self.run_dir))
        except FileNotFoundError:
            return None

    def log(self) -> str:
        try:
            return RunDir(self.run_dir).log.read_text()
        except OSError:
            return ""

    def games(self) -> int:
        last = self.status()
        return last.games if last is not None else 0

    def learner_step(self) -> int:
        last = self.status()
        return last.learner_step if last is not None else 0

    def workers(self) -> int | None:
        """How many self-play workers the last status line counted (None: no line yet)."""
        last = self.status()
        return last.wiring.get("workers") if last is not None else None

    def wait_until_playing(self, *, timeout_s: float = 300, games: int = 1, steps: int = 0) -> None:
        wait_for(lambda: self.games() >= games and self.learner_step() >= steps,
                 timeout_s=timeout_s, what=lambda: f"{games} games and {steps} learner steps\n{self.log()[-3000:]}")

    def games_flow(self, *, after: int, timeout_s: float) -> float:
        """Seconds until the run's game total passes ``after``."""
        return wait_for(lambda: self.games() > after, timeout_s=timeout_s,
                        what=lambda: f"games past {after}\n{self.log()[-3000:]}")

    def kill(self, title: str, sig: int = signal.SIGKILL) -> int:
        """Send ``sig`` (SIGKILL; SIGSTOP: a hung process) to one of the run's processes
        titled ``title``; returns its pid."""
        pids = actor_pids(self.pid, title)
        assert pids, f"no {title} process under the driver {self.pid}"
        os.kill(pids[0], sig)
        return pids[0]

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 180) -> int:
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(timeout=timeout_s)

    def ladder_versions(self) -> list[int]:
        try:
            return read_ladder(RunDir(self.run_dir)).versions
        except FileNotFoundError:
            return []


def games_in_stream(run: Run, password: str | None, url: str | None = None) -> Counter[str]:
    """How many entries of the run's stream hold each game id (more than one: a write
    that was tried again after its reply was lost, which the learner must read once)."""
    files = RunDir(run.run_dir)
    if url is None:
        connection = json.loads(files.connection.read_text())
        url, password = connection["url"], connection.get("password", password)
    client = connect(url, password=password)
    keys = RunKeys(files.run_id())
    game = make_game("tictactoe")  # CHAOS_CONFIG's game
    stored: Counter[str] = Counter()
    start = "-"
    while True:
        page = client.xrange(keys.samples, start, "+", count=500)
        for _, fields in page:
            _, meta = decode_game_meta(fields[ENTRY_FIELD], planes_shape=game.planes_shape,
                                       num_actions=game.num_actions, game_name=game.name)
            if meta.game_id:
                stored[meta.game_id] += 1
        if len(page) < 500:
            break
        start = "(" + page[-1][0].decode()
    client.close()
    return stored


def finished_games_lost(run: Run, password: str | None, url: str | None = None) -> list[str]:
    """Game ids that a worker reported finished but that are not in the stream (every
    finished game must reach it; only games still being played may be lost)."""
    stored = games_in_stream(run, password, url)
    last = run.status()
    reported = last.reported_games if last is not None else {}
    return [f"{inc}:{n}" for inc, count in reported.items() for n in range(count) if f"{inc}:{n}" not in stored]


# -- the faults: each injects one, waits for the run to recover, and returns the seconds
#    that took (AssertionError, naming what did not come back, past ``timeout_s``) ----------

WORKER_LOST = re.compile(r"worker w\d+ (lost|failed)")


def kill_a_worker(run: Run, *, timeout_s: float) -> float:
    """SIGKILL a self-play worker: the run is back to its worker count, games flowing."""
    workers, log_before = run.workers(), len(run.log())
    run.kill("ray::SelfPlayActor")
    killed = time.monotonic()
    before = run.games()
    wait_for(lambda: WORKER_LOST.search(run.log()[log_before:]), timeout_s=timeout_s, what="the loss logged")
    run.games_flow(after=before + 10, timeout_s=timeout_s)
    wait_for(lambda: run.workers() == workers and
             len(actor_pids(run.pid, "ray::SelfPlayActor")) == workers, timeout_s=timeout_s,
             what=f"{workers} workers again")
    return time.monotonic() - killed


def kill_the_inference_server(run: Run, *, timeout_s: float) -> float:
    """SIGKILL the inference server: a new one with the same workers, games flowing."""
    workers, log_before = run.workers(), len(run.log())
    run.kill("ray::InferenceServer")
    killed = time.monotonic()
    wait_for(lambda: f"restarted with {workers} workers" in run.log()[log_before:], timeout_s=timeout_s,
             what="the server restarted with its workers\n" + run.log()[-2000:])
    run.games_flow(after=run.games() + 10, timeout_s=timeout_s)
    assert not WORKER_LOST.search(run.log()[log_before:]), "a worker was lost with its server"
    assert run.workers() == workers
    return time.monotonic() - killed


def kill_the_learner(run: Run, *, timeout_s: float) -> float:
    """SIGKILL the learner: a new one steps past where the old one was, no version repeated."""
    step, log_before = run.learner_step(), len(run.log())
    run.kill("ray::LearnerActor")
    killed = time.monotonic()
    wait_for(lambda: "learner lost" in run.log()[log_before:], timeout_s=timeout_s, what="the loss logged")
    wait_for(lambda: run.learner_step() > step, timeout_s=timeout_s,
             what=lambda: f"learner steps past {step}\n{run.log()[-2000:]}")
    assert unique(run.ladder_versions())
    return time.monotonic() - killed


def kill_the_gatekeeper_mid_match(run: Run, *, timeout_s: float) -> float:
    """SIGKILL the gatekeeper while it plays a match: the match is played again, and
    decided once."""
    wait_for(lambda: actor_pids(run.pid, "ray::GatekeeperActor.gate"), timeout_s=timeout_s, every_s=0.05,
             what="a gating match in progress")
    log_before = len(run.log())
    run.kill("ray::GatekeeperActor.gate")
    killed = time.monotonic()
    wait_for(lambda: "gatekeeper lost" in run.log()[log_before:], timeout_s=timeout_s, what="the loss logged")
    wait_for(lambda: "\ngating " in run.log()[log_before - 1:], timeout_s=timeout_s,
             what="a match decided after the loss\n" + run.log()[-2000:])
    assert unique(run.ladder_versions())  # one decision per match: no version promoted twice
    return time.monotonic() - killed


def hang_a_worker(run: Run, *, timeout_s: float) -> float:
    """SIGSTOP a self-play worker (hung, not dead: Ray still sees it alive): past its
    chunk's deadline it is stopped and replaced, and the run is back to its worker count."""
    workers, log_before = run.workers(), len(run.log())
    pid = run.kill("ray::SelfPlayActor", signal.SIGSTOP)
    stopped = time.monotonic()
    wait_for(lambda: re.search(r"worker w\d+ hung: no answer to run_for", run.log()[log_before:]),
             timeout_s=timeout_s, what="the hang logged\n" + run.log()[-2000:])
    run.games_flow(after=run.games() + 10, timeout_s=timeout_s)
    wait_for(lambda: run.workers() == workers and not alive(pid), timeout_s=timeout_s,
             what=f"{workers} workers again, the hung one gone")
    return time.monotonic() - stopped


def hang_the_learner(run: Run, *, timeout_s: float) -> float:
    """SIGSTOP the learner: past its step's deadline it is stopped and replaced, and the
    new one steps past where it was, no version repeated."""
    step, log_before = run.learner_step(), len(run.log())
    pid = run.kill("ray::LearnerActor", signal.SIGSTOP)
    stopped = time.monotonic()
    wait_for(lambda: "learner hung: no answer to step" in run.log()[log_before:], timeout_s=timeout_s,
             what="the hang logged\n" + run.log()[-2000:])
    wait_for(lambda: run.learner_step() > step and not alive(pid), timeout_s=timeout_s,
             what=lambda: f"learner steps past {step}, the hung one gone\n{run.log()[-2000:]}")
    assert unique(run.ladder_versions())
    return time.monotonic() - stopped


def hang_the_gatekeeper_mid_match(run: Run, *, timeout_s: float) -> float:
    """SIGSTOP the gatekeeper while it plays a match: past the match's deadline it is
    stopped and replaced, the match played again and decided once."""
    wait_for(lambda: actor_pids(run.pid, "ray::GatekeeperActor.gate"), timeout_s=timeout_s, every_s=0.05,
             what="a gating match in progress")
    log_before = len(run.log())
    pid = run.kill("ray::GatekeeperActor.gate", signal.SIGSTOP)
    stopped = time.monotonic()
    wait_for(lambda: "gatekeeper hung: no answer to gate" in run.log()[log_before:], timeout_s=timeout_s,
             what="the hang logged\n" + run.log()[-2000:])
    wait_for(lambda: "\ngating " in run.log()[log_before - 1:] and not alive(pid), timeout_s=timeout_s,
             what="a match decided after the hang\n" + run.log()[-2000:])
    assert unique(run.ladder_versions())
    return time.monotonic() - stopped


def kill_redis_and_restart_it(run: Run, server: EmbeddedRedis, *, down_s: float, timeout_s: float) -> float:
    """SIGKILL the run's external Redis, start it again on its AOF ``down_s`` later: the
    driver and every actor live through it, and no game the learner had acknowledged
    (a second before the kill: appendfsync everysec) is lost. Returns the seconds from
    the restart until games flow again."""
    client: Any = server.client()  # redis-py's stubs type every reply as a sync/async union
    keys = RunKeys(RunDir(run.run_dir).run_id())
    acknowledged = client.xinfo_groups(keys.samples)[0]["last-delivered-id"]
    kept = {entry_id for entry_id, _ in client.xrange(keys.samples, "-", acknowledged)}
    client.close()
    time.sleep(1.5)
    log_before = len(run.log())
    server._kill()
    time.sleep(down_s)  # the workers play on, holding their games
    server.restart()  # from this thread: the kernel stops a server whose starting thread exits
    restarted = time.monotonic()
    run.games_flow(after=run.games() + 10, timeout_s=timeout_s)
    seconds = time.monotonic() - restarted
    assert run.process is not None and run.process.poll() is None, run.log()[-3000:]
    after = run.log()[log_before:]
    assert "answering again" in after and "stopping" not in after, after
    client = server.client()
    assert {i for i, _ in client.xrange(keys.samples, "-", acknowledged)} == kept
    client.close()
    return seconds


def kill_the_embedded_redis(run: Run, *, timeout_s: float) -> float:
    """SIGKILL the main job's own Redis: its driver starts it again on its AOF."""
    old, log_before = redis_pid(run), len(run.log())
    os.kill(old, signal.SIGKILL)
    killed = time.monotonic()
    wait_for(lambda: "the run's Redis is back" in run.log()[log_before:], timeout_s=timeout_s,
             what="Redis restarted")
    run.games_flow(after=run.games() + 10, timeout_s=timeout_s)
    assert redis_pid(run) != old and alive(redis_pid(run))
    return time.monotonic() - killed


def sigterm_then_resume(run: Run, *, timeout_s: float) -> float:
    """SIGTERM the driver: a clean stop (final checkpoint, best model, then Redis);
    ``tengen train --resume`` continues from its checkpoint and stream. Returns the
    seconds from the resume until the learner steps past where it stopped."""
    steps, log_before = run.learner_step(), len(run.log())
    assert run.stop(signal.SIGTERM) == 0, run.log()[-3000:]
    log = run.log()[log_before:]
    assert "SIGTERM: stopping cleanly" in log and "final learner checkpoint failed" not in log, log[-2000:]
    assert '"error": null' in log.rsplit("done: ", 1)[1]
    assert not (RunDir(run.run_dir).redis / "redis.pid").exists()  # Redis stopped, last
    resumed, log_before = time.monotonic(), len(run.log())
    run.start(resume=True)
    wait_for(lambda: run.learner_step() > steps and "resumed" in run.log()[log_before:],
             timeout_s=timeout_s, what=lambda: f"the resumed learner past step {steps}\n{run.log()[-2000:]}")
    return time.monotonic() - resumed


def sigkill_then_resume(run: Run, *, timeout_s: float) -> tuple[float, set[int]]:
    """SIGKILL the driver: its Redis goes with it (nothing holds the AOF), and
    ``--resume`` continues with no version repeated. Returns the seconds from the
    resume until games flow, and the killed driver's processes (Ray's own leave once
    they miss their raylet: check them later)."""
    redis = redis_pid(run)
    children = set(descendants(run.pid))
    assert redis in children
    ladder = run.ladder_versions()
    run.stop(signal.SIGKILL)
    wait_for(lambda: not alive(redis), timeout_s=30, what="the driver's Redis gone with it")
    resumed, log_before = time.monotonic(), len(run.log())
    run.start(resume=True)  # at once: the old Redis no longer holds the AOF
    run.wait_until_playing(games=run.games() + 10, timeout_s=timeout_s)
    seconds = time.monotonic() - resumed
    assert "stopped the Redis" not in run.log()[log_before:]  # none was left to stop
    wait_for(lambda: len(run.ladder_versions()) >= len(ladder), timeout_s=timeout_s, what="the ladder back")
    assert unique(run.ladder_versions()) and run.ladder_versions()[:len(ladder)] == ladder
    return seconds, children - {redis}


def components(run: Run) -> dict:
    """Each part's restarts and last error, as the last status line has them."""
    last = run.status()
    return last.wiring.get("components", {}) if last is not None else {}


def restarts(run: Run, part: str) -> int:
    """How many times the run has replaced ``part`` (``learner``, ``gatekeeper``,
    ``inference cpu``, ``redis``; ``worker`` counts every worker), from status.json."""
    return sum(c.get("restarts", 0) for name, c in components(run).items()
               if name == part or name.startswith(part + " "))


def last_errors(run: Run, part: str) -> list[str]:
    """The last error status.json shows for ``part`` (each worker's, for ``worker``)."""
    return [c["last_error"] for name, c in components(run).items()
            if (name == part or name.startswith(part + " ")) and c.get("last_error")]


def unique(versions: list[int]) -> bool:
    return versions == sorted(set(versions))


def redis_pid(run: Run) -> int:
    return int((RunDir(run.run_dir).redis / "redis.pid").read_text())
