"""A Ray cluster of real nodes on this one machine, built to be broken on purpose: the
bed that tests/test_cluster_bed.py checks, and that tests/test_bed_*_runs.py and bench/soak.py
run tengen on.

Each node is a Linux network namespace with its own address on a bridge that the bed
makes and removes (a /24 of 10.213.0.0/16 that no interface here uses; nothing is
routed anywhere else), its own ``ray start`` (the head ``--head``, the others
``--address``; a "gpu" node says ``--num-gpus 1``, a resource only: no device is
there) with its own temp dir, and a private filesystem for everything that is not
the code: a mount namespace with a tmpfs over /tmp, the home directory and the bed's
head folder, so that a part restarted on another node cannot read a dead node's files,
as on a cluster of machines. The head alone sees the bed's head folder, where the run
directory, the run's Redis (``start_redis``) and its sftp storage (``start_sftp``) live,
as on a cluster made by deploy/ray/: the test reads them from outside, as an operator
does over SSH. What every node's image carries (the cluster's sftp key) is in the bed's
``image`` folder, the same on every node.

Every process of a node runs in its namespaces (``spawn``, through nsenter into the
node's first process, which holds them), with Ray's token authentication on and the
cluster's token in its environment (``RAY_AUTH_MODE=token``, ``RAY_AUTH_TOKEN``), as
the deploy files carry it to every node. A node that the bed did not give the token is
refused by Ray (``InvalidAuthToken``).

The faults, each a method:

- ``preempt(node)``: every process of the node killed at once with SIGKILL, its
  namespaces and files gone, as a spot instance goes; ``add_node`` brings a fresh one;
- ``cut(node)`` / ``heal(node)`` and ``partition(node, seconds)``: its link down and up
  (``wait_until_dropped(node)`` after a cut that Ray took for a death);
  ``slow(node, rate)``: its link held to a rate by a token bucket (``tc tbf``; this
  kernel has no netem for delay or loss), ``unslow(node)``;
- ``fill_disk()`` / ``free_disk()``: the head folder, a small tmpfs, filled to ENOSPC;
- ``storage_down(storage, seconds)``: ``start_sftp()``'s server away, then back;
- process kills are the caller's: ``pids(node)`` and ``titles(node)`` name them.

It needs root (namespaces, links, mounts) and iproute2's ``ip``, ``tc``, util-linux's
``unshare`` and ``nsenter``: ``unavailable_reason()`` says what is missing, so that a
test skips with the reason (and fails on CI).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tengen.cluster.redis_server import EmbeddedRedis, redis_executable
from tengen.testing.chaos import ROOT, Run
from tengen.testing.sftp_server import SftpServer, fetch_openssh
from tengen.testing.waiting import wait_for

__all__ = ["ClusterBed", "Node", "BedError", "unavailable_reason", "FAST_NODE_DEATH", "RAY_PORT", "REDIS_PORT"]

#: the head's GCS port (Ray's default)
RAY_PORT = 6379
#: the run's Redis on the head (beside the GCS, as the launcher's head runs it)
REDIS_PORT = 6380
#: where beds keep their folders: not under /tmp, which every node hides
BED_ROOT = Path("/var/tmp")
#: the compiled kernels' cache, shared by every node of every bed (a cache, not state:
#: a real node would compile them itself, in a minute of CPU the tests cannot spare)
SHARED_CACHE = Path("/var/tmp/tengen-bed-cache")
#: the head folder's size: the run directory and Redis's AOF of a test or a soak fit,
#: and filling it (``fill_disk``) takes a moment
HEAD_SIZE = "768m"
#: each node's object store: runs of the bed move weights blobs and games, never big
#: arrays, and every node's store lives in this one machine's /dev/shm
OBJECT_STORE_BYTES = 256 * 2**20
#: how the head tells a node is gone (Ray's defaults, 3 s x 5, are a cloud's): what a
#: test may pass as ``ray_env``
FAST_NODE_DEATH = {"RAY_health_check_period_ms": "1000", "RAY_health_check_timeout_ms": "1000",
                   "RAY_health_check_failure_threshold": "5"}
_TOOLS = ("ip", "tc", "unshare", "nsenter", "mount")


class BedError(RuntimeError):
    """The bed could not be built or a node did not come up (with what it said)."""


def unavailable_reason() -> str | None:
    """Why a bed cannot be built on this machine, or None when it can."""
    if sys.platform != "linux":
        return f"network namespaces are Linux's, not {sys.platform}'s"
    if os.geteuid() != 0:
        return "the cluster bed needs root (network and mount namespaces, links, tmpfs mounts)"
    missing = [tool for tool in _TOOLS if shutil.which(tool) is None]
    if missing:
        return f"the cluster bed needs {', '.join(missing)} (Debian's iproute2 and util-linux)"
    return None


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(argv, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise BedError(f"{' '.join(argv)}: {done.stderr.strip() or done.stdout.strip()}")
    return done


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10.213.0.0/16 that no interface of this machine has an address in."""
    used = _run("ip", "-4", "-o", "addr", "show").stdout
    taken = {ipaddress.IPv4Interface(word).network for line in used.splitlines()
             for word in line.split() if "/" in word and word[0].isdigit()}
    for subnet in ipaddress.IPv4Network("10.213.0.0/16").subnets(new_prefix=24):
        if not any(subnet.overlaps(other) for other in taken):
            return subnet
    raise BedError("no free /24 in 10.213.0.0/16 for a bed")


@dataclass
class Node:
    """One machine of the bed."""

    name: str  # head, gpu1, cpu2, ...
    kind: str  # head, gpu or cpu
    address: str  # on the bridge
    cpus: int
    gpus: int
    namespace: str  # its network namespace
    link: str  # the host's end of its veth pair
    holder: subprocess.Popen | None = field(default=None, repr=False)  # holds its mount namespace
    ray: subprocess.Popen | None = field(default=None, repr=False)  # its `ray start --block`
    gone: bool = False

    @property
    def holder_pid(self) -> int:
        assert self.holder is not None
        return self.holder.pid


class ClusterBed:
    """``with ClusterBed() as bed: head = bed.start_head(cpus=2); bed.add_node("cpu", cpus=1)``."""

    def __init__(self, *, name: str | None = None, ray_env: Mapping[str, str] | None = None):
        reason = unavailable_reason()
        if reason:
            raise BedError(reason)
        self.token = secrets.token_hex(3)
        self.name = name or f"tgb{self.token}"  # an interface name: at most 15 characters
        self.root = BED_ROOT / f"tengen-bed-{self.token}"
        self.head_dir = self.root / "head"
        self.logs = self.root / "logs"  # the host's: what each node's processes printed
        self.image = self.root / "image"  # what every node's image carries, the same on each
        #: the client key of the head's sftp storage (``start_sftp``), in every node's
        #: environment as fsspec reads it, as a deploy's node setup would put it
        self.sftp_key = self.image / "sftp_key"
        self.subnet = _free_subnet()
        hosts = self.subnet.hosts()
        self.host_address = str(next(hosts))  # the host's end of the bridge
        self._addresses: Iterator[ipaddress.IPv4Address] = hosts
        self.nodes: dict[str, Node] = {}
        self._counts: dict[str, int] = {}
        self.auth_token = secrets.token_hex(32)
        #: more environment for every node's Ray (e.g. faster health checks in tests)
        self.ray_env = dict(ray_env or {})
        self._filler: Path | None = None
        self._built = False

    # -- the bed ---------------------------------------------------------------------------
    def __enter__(self) -> ClusterBed:
        self.build()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def build(self) -> ClusterBed:
        sweep_stale_beds()
        self.root.mkdir(parents=True)
        (self.root / OWNER_FILE).write_text(f"{os.getpid()}\n")
        self.head_dir.mkdir()
        self.logs.mkdir()
        self.image.mkdir()
        SHARED_CACHE.mkdir(parents=True, exist_ok=True)
        _run("mount", "-t", "tmpfs", "-o", f"size={HEAD_SIZE},mode=0755", f"tengen-bed-{self.token}",
             str(self.head_dir))
        self._built = True
        _run("ip", "link", "add", self.name, "type", "bridge")
        _run("ip", "addr", "add", f"{self.host_address}/{self.subnet.prefixlen}", "dev", self.name)
        _run("ip", "link", "set", self.name, "up")
        return self

    def close(self) -> None:
        """Every node gone, the bridge and the head folder removed."""
        for node in list(self.nodes.values()):
            if not node.gone:
                self._kill_node(node)
        _run("ip", "link", "del", self.name, check=False)
        if self._built:
            _run("umount", "-l", str(self.head_dir), check=False)
        shutil.rmtree(self.root, ignore_errors=True)

    @property
    def ray_address(self) -> str:
        return f"{self.nodes['head'].address}:{RAY_PORT}"

    def node_env(self, node: Node) -> dict[str, str]:
        """The environment of a process on ``node``: Ray's token, a private home, the
        shared kernel cache, this interpreter's paths."""
        env = {key: value for key, value in os.environ.items() if not key.startswith(("RAY_", "TENGEN_"))}
        env.update({
            "HOME": node_home(),
            "TMPDIR": "/tmp",
            "XDG_CACHE_HOME": str(SHARED_CACHE),
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN": self.auth_token,
            "RAY_USAGE_STATS_ENABLED": "0",
            "TENGEN_BED_NODE": node.name,
            "FSSPEC_SFTP_KEY_FILENAME": str(self.sftp_key),
            **self.ray_env,
        })
        return env

    # -- nodes -----------------------------------------------------------------------------
    def start_head(self, *, cpus: int, gpus: int = 0) -> Node:
        if "head" in self.nodes:
            raise BedError("the bed has a head already")
        return self._start(self._make_node("head", "head", cpus, gpus))

    def add_node(self, kind: str, *, cpus: int, gpus: int | None = None) -> Node:
        """A fresh node of ``kind`` ("gpu": a fake GPU, or "cpu") joined to the head."""
        if kind not in ("gpu", "cpu"):
            raise ValueError(f"a node is a gpu or a cpu node, not {kind!r}")
        if "head" not in self.nodes:
            raise BedError("start the head first")
        self._counts[kind] = self._counts.get(kind, 0) + 1
        gpus = (1 if kind == "gpu" else 0) if gpus is None else gpus
        node = self._make_node(f"{kind}{self._counts[kind]}", kind, cpus, gpus)
        return self._start(node)

    def _make_node(self, name: str, kind: str, cpus: int, gpus: int) -> Node:
        address = str(next(self._addresses))
        namespace = f"{self.name}-{name}"
        link = f"{self.name[:9]}{name[:1]}{address.rsplit('.', 1)[1]}"[:15]
        peer = f"{link[:12]}p"
        _run("ip", "netns", "add", namespace)
        _run("ip", "link", "add", link, "type", "veth", "peer", "name", peer)
        _run("ip", "link", "set", peer, "netns", namespace)
        _run("ip", "link", "set", link, "master", self.name)
        _run("ip", "link", "set", link, "up")
        inside = ("ip", "netns", "exec", namespace)
        _run(*inside, "ip", "link", "set", "lo", "up")
        _run(*inside, "ip", "link", "set", peer, "name", "eth0")
        _run(*inside, "ip", "addr", "add", f"{address}/{self.subnet.prefixlen}", "dev", "eth0")
        _run(*inside, "ip", "link", "set", "eth0", "up")
        node = Node(name=name, kind=kind, address=address, cpus=cpus, gpus=gpus, namespace=namespace, link=link)
        # The node's first process makes its mount namespace and holds it: a tmpfs over
        # /tmp and the home directory, and on all but the head over the bed's folder;
        # the code (the interpreter, the virtual environment, the sources) shows through.
        hidden = ["/tmp", node_home()]
        kept = [path for path in _code_paths() if any(_under(path, h) for h in hidden)]
        steps = []
        for i, path in enumerate(kept):  # held aside, then put back over the tmpfs
            aside = self.root / "kept" / name / str(i)
            aside.mkdir(parents=True, exist_ok=True)
            steps.append(f"mount --bind {path} {aside}")
        steps += [f"mount -t tmpfs -o mode=1777 tengen-{name} {path}" for path in hidden]
        for i, path in enumerate(kept):
            steps += [f"mkdir -p {path}", f"mount --bind {self.root / 'kept' / name / str(i)} {path}"]
        if kind != "head":  # the head's files and the host's logs are not theirs
            steps += [f"mount -t tmpfs -o mode=0755 tengen-{name} {path}" for path in (self.head_dir, self.logs)]
        node.holder = subprocess.Popen(
            [*inside, "unshare", "--mount", "--propagation", "private", "sh", "-c",
             " && ".join(steps) + " && mkdir -p /tmp/ray && echo ready && exec sleep infinity"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
        assert node.holder.stdout is not None
        if node.holder.stdout.readline().strip() != "ready":
            said = node.holder.stderr.read() if node.holder.stderr else ""
            raise BedError(f"node {name} could not make its filesystem: {said}")
        self.nodes[name] = node
        return node

    def _start(self, node: Node) -> Node:
        common = ["--node-ip-address", node.address, "--num-cpus", str(node.cpus), "--num-gpus", str(node.gpus),
                  "--object-store-memory", str(OBJECT_STORE_BYTES), "--temp-dir", "/tmp/ray",
                  "--disable-usage-stats", "--block"]
        if node.kind == "head":
            argv = ["ray", "start", "--head", "--port", str(RAY_PORT), "--include-dashboard", "false", *common]
        else:
            argv = ["ray", "start", "--address", self.ray_address, *common]
        node.ray = self.spawn(node, [str(Path(sys.executable).with_name("ray")), *argv[1:]], log="ray")
        self.wait_for_nodes()
        return node

    def spawn(self, node: Node, argv: Sequence[str], *, log: str, env: Mapping[str, str] | None = None,
              cwd: str | os.PathLike | None = None) -> subprocess.Popen:
        """``argv`` as a process of ``node`` (its network, its filesystem, its Ray token),
        its output appended to the host's ``logs/<node>-<log>.out``."""
        if node.gone:
            raise BedError(f"node {node.name} is gone")
        out = open(self.logs / f"{node.name}-{log}.out", "ab")  # noqa: SIM115
        wd = str(cwd or Path.cwd())
        return subprocess.Popen(["nsenter", "--target", str(node.holder_pid), "--mount", "--net", f"--wd={wd}",
                                 "--", *argv], stdout=out, stderr=subprocess.STDOUT,
                                env={**self.node_env(node), **(env or {})}, start_new_session=True)

    def run_on(self, node: Node, argv: Sequence[str], *, timeout_s: float = 60) -> subprocess.CompletedProcess:
        """``argv`` on ``node``, waited for: its output as text."""
        return subprocess.run(["nsenter", "--target", str(node.holder_pid), "--mount", "--net", "--", *argv],
                              capture_output=True, text=True, timeout=timeout_s, env=self.node_env(node))

    def wait_for_nodes(self, timeout_s: float = 180) -> None:
        """Until Ray counts every node of the bed alive."""
        wanted = sum(1 for n in self.nodes.values() if not n.gone)
        head = self.nodes["head"]
        deadline = time.monotonic() + timeout_s
        while not _accepts(head.address, RAY_PORT):
            self._check_ray_lives()
            if time.monotonic() > deadline:
                raise BedError(f"the head's GCS did not listen within {timeout_s:.0f} s: {self.log_tail(head, 'ray')}")
            time.sleep(0.5)
        script = (f"import ray, json; ray.init(address={self.ray_address!r}, logging_level='ERROR'); "
                  "print(json.dumps(sum(1 for n in ray.nodes() if n['Alive'])))")
        last = ""
        while time.monotonic() < deadline:
            self._check_ray_lives()
            try:
                done = self.run_on(head, [sys.executable, "-c", script],
                                   timeout_s=max(10.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                break
            last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-500:]
            if done.returncode == 0 and last.isdigit() and int(last) >= wanted:
                return
            time.sleep(1.0)
        raise BedError(f"Ray did not count {wanted} nodes alive within {timeout_s:.0f} s: {last}")

    def _check_ray_lives(self) -> None:
        for node in self.nodes.values():
            if node.ray is not None and not node.gone and node.ray.poll() is not None:
                raise BedError(f"ray on {node.name} exited with {node.ray.returncode}: {self.log_tail(node, 'ray')}")

    def log_tail(self, node: Node, log: str, chars: int = 3000) -> str:
        try:
            return (self.logs / f"{node.name}-{log}.out").read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    # -- a run on the bed --------------------------------------------------------------------
    def start_redis(self, *, port: int = REDIS_PORT) -> EmbeddedRedis:
        """The run's Redis on the head, on its address (every node reaches it), its AOF
        in the head folder: as the launcher's head runs it (deploy/ray/)."""
        head = self.nodes["head"]
        wrapper = self.head_dir / "redis-server-on-head"
        wrapper.write_text(f"#!/bin/sh\nexec nsenter --target {head.holder_pid} --mount --net -- "
                           f"{redis_executable()} \"$@\"\n")
        wrapper.chmod(0o755)
        return EmbeddedRedis(data_dir=self.head_dir / "redis", host=head.address, port=port,
                             executable=str(wrapper)).start()

    def start_sftp(self) -> SftpServer:
        """sftp storage on the head: Debian's sshd on the head's address (unprivileged, in
        its namespaces), its files in the head folder; every node reaches it with the
        cluster's key (``sftp_key``). ``stop()`` then ``start()`` is a storage outage.
        Raises ``debian.ToolUnavailable`` where sshd cannot be fetched."""
        head = self.nodes["head"]
        work = self.head_dir / "sshd"
        work.mkdir()

        def launch(argv: Sequence[str], env: Mapping[str, str], uid: int, gid: int) -> subprocess.Popen:
            # nsenter drops to sshd's user once inside; the loader's variables are set
            # for sshd alone, by env, not for nsenter
            return subprocess.Popen(["nsenter", "--target", str(head.holder_pid), "--mount", "--net",
                                     f"--setuid={uid}", f"--setgid={gid}", "--", "env",
                                     *(f"{key}={value}" for key, value in env.items()), *argv],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

        return SftpServer(fetch_openssh(), work, host=head.address, key_file=self.sftp_key, launch=launch)

    def run(self, name: str, config: Mapping, *, redis: EmbeddedRedis) -> Run:
        """``tengen train`` of ``config`` on the head, joined to the bed's Ray and using
        ``redis`` (its password in the driver's environment, as deploy/ passes it), into
        ``<head folder>/runs/<name>``; ``.start()`` starts it."""
        head = self.nodes["head"]

        def launch(command: list[str], env: dict) -> subprocess.Popen:
            argv = [*command, "--address", self.ray_address]
            return self.spawn(head, argv, log=f"run-{name}", env={**env, "TENGEN_REDIS_PASSWORD": redis.password},
                              cwd=ROOT)

        return Run(run_dir=self.head_dir / "runs" / name, config=dict(config), redis_url=redis.url, launch=launch)

    def find(self, title: str) -> list[tuple[Node, int]]:
        """(node, pid) of every process of the bed whose command line starts with
        ``title`` (``ray::LearnerActor``)."""
        return [(node, pid) for node in self.nodes.values() if not node.gone
                for pid, line in self.titles(node).items() if line.startswith(title)]

    # -- what runs where ---------------------------------------------------------------------
    def pids(self, node: Node) -> list[int]:
        """Every process of ``node`` (those in its network namespace)."""
        done = _run("ip", "netns", "pids", node.namespace, check=False)
        return [int(word) for word in done.stdout.split() if word.isdigit()]

    def titles(self, node: Node) -> dict[int, str]:
        """pid -> command line of every process of ``node``."""
        out = {}
        for pid in self.pids(node):
            try:
                out[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
        return out

    def node_of(self, pid: int) -> Node | None:
        """The node a process runs on, or None."""
        for node in self.nodes.values():
            if not node.gone and pid in self.pids(node):
                return node
        return None

    # -- faults ----------------------------------------------------------------------------
    def preempt(self, node: Node) -> None:
        """A spot preemption: every process of the node SIGKILLed at once, then its
        network and its private files gone."""
        if node.kind == "head":
            raise BedError("the head is not preempted: it holds the run directory and Redis")
        self._kill_node(node)

    def _kill_node(self, node: Node) -> None:
        for _ in range(3):  # processes may fork while they are being killed
            pids = self.pids(node) + ([node.holder.pid] if node.holder and node.holder.poll() is None else [])
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        for process in (node.holder, node.ray):
            if process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=10)
        _run("ip", "link", "del", node.link, check=False)
        _run("ip", "netns", "del", node.namespace, check=False)
        node.gone = True

    def wait_until_dropped(self, node: Node, timeout_s: float = 120) -> None:
        """Until Ray, which declared ``node`` dead while it was cut off, has its raylet
        exit (a node declared dead never rejoins); then what is left of it goes, as an
        autoscaler terminates an instance its cluster no longer counts."""
        assert node.ray is not None
        ray_start = node.ray
        wait_for(lambda: ray_start.poll() is not None, timeout_s=timeout_s,
                 what=lambda: f"{node.name}'s raylet exiting\n{self.log_tail(node, 'ray')}")
        self._kill_node(node)

    def cut(self, node: Node) -> None:
        """The node's link down: it and the rest of the cluster no longer reach each other."""
        _run("ip", "link", "set", node.link, "down")

    def heal(self, node: Node) -> None:
        """The node's link up again, and back when this returns: the link carries
        traffic, and the neighbour entries that failed during the cut are forgotten
        (else the first packets get "No route to host" until they expire)."""
        _run("ip", "link", "set", node.link, "up")
        operstate = Path(f"/sys/class/net/{node.link}/operstate")
        wait_for(lambda: operstate.read_text().strip() == "up", timeout_s=10, every_s=0.05,
                 what=f"{node.name}'s link up")
        _run("ip", "-n", node.namespace, "neigh", "flush", "all", check=False)
        for other in self.nodes.values():
            if other is not node and not other.gone:
                _run("ip", "-n", other.namespace, "neigh", "flush", "to", node.address, check=False)

    def partition(self, node: Node, seconds: float) -> None:
        """The node cut off for ``seconds``, then back."""
        self.cut(node)
        try:
            time.sleep(seconds)
        finally:
            self.heal(node)

    def storage_down(self, storage: SftpServer, seconds: float) -> None:
        """The head's sftp storage (``start_sftp``) away for ``seconds``, every connection
        it served gone with it, then back on its port."""
        storage.stop()
        try:
            time.sleep(seconds)
        finally:
            storage.start()

    def slow(self, node: Node, rate: str = "256kbit") -> None:
        """The node's traffic from the bridge held to ``rate`` (a token bucket)."""
        _run("tc", "qdisc", "replace", "dev", node.link, "root", "tbf", "rate", rate, "burst", "32kbit",
             "latency", "400ms")

    def unslow(self, node: Node) -> None:
        _run("tc", "qdisc", "del", "dev", node.link, "root", check=False)

    def fill_disk(self) -> None:
        """The head folder (the run directory, Redis's AOF) full: writes there fail with ENOSPC."""
        self._filler = self.head_dir / ".filler"
        chunk = b"\0" * (1 << 20)
        with contextlib.suppress(OSError), open(self._filler, "ab", buffering=0) as f:  # ENOSPC: full
            while True:
                f.write(chunk)
        with contextlib.suppress(OSError), open(self._filler, "ab", buffering=0) as f:  # the last bytes
            while True:
                f.write(b"\0" * 4096)

    def free_disk(self) -> None:
        if self._filler is not None:
            self._filler.unlink(missing_ok=True)
            self._filler = None


def _accepts(host: str, port: int) -> bool:
    import socket

    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=1.0):
        return True
    return False


def _under(path: str, folder: str) -> bool:
    return Path(path) == Path(folder) or Path(folder) in Path(path).parents


def _code_paths() -> list[str]:
    """What a node's processes must see of this machine: the interpreter, the virtual
    environment, tengen's sources (a repository checkout or site-packages)."""
    import tengen

    paths = {sys.base_prefix, sys.prefix, str(Path(tengen.__file__).resolve().parent.parent)}
    paths |= {p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p}
    # the outermost of nested ones: a bind of the outer one shows the inner
    return sorted(p for p in paths if not any(p != q and _under(p, q) for q in paths))


#: the file in a bed's folder that names the process that built it
OWNER_FILE = "owner.pid"


def _owner_alive(root: Path) -> bool:
    """Whether the process that built the bed in ``root`` still runs (a bed without an
    owner file, from an older tengen, is taken for alive for its first six hours)."""
    try:
        os.kill(int((root / OWNER_FILE).read_text()), 0)
    except FileNotFoundError:
        try:
            return time.time() - root.stat().st_mtime < 6 * 3600
        except OSError:
            return False
    except (OSError, ValueError):
        return False
    return True


def sweep_stale_beds() -> list[str]:
    """Remove what beds left behind when their process died before its teardown (a
    test killed, a CI job cancelled): their nodes' processes and namespaces, their
    bridge, their head's tmpfs, their folder. Beds whose builder lives are left alone.
    Returns the bed names swept."""
    stale = {root.name.removeprefix("tengen-bed-") for root in BED_ROOT.glob("tengen-bed-*")
             if root.is_dir() and root != SHARED_CACHE and not _owner_alive(root)}
    namespaces = _run("ip", "netns", "list", check=False).stdout.split()
    live = {root.name.removeprefix("tengen-bed-") for root in BED_ROOT.glob("tengen-bed-*") if _owner_alive(root)}
    # namespaces of a bed whose folder is gone too
    stale |= {ns.split("-")[0].removeprefix("tgb") for ns in namespaces
              if ns.startswith("tgb") and "-" in ns and ns.split("-")[0].removeprefix("tgb") not in live}
    for token in sorted(stale):
        for namespace in [ns for ns in namespaces if ns.startswith(f"tgb{token}-")]:
            for word in _run("ip", "netns", "pids", namespace, check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(word), signal.SIGKILL)
            _run("ip", "netns", "del", namespace, check=False)
        _run("ip", "link", "del", f"tgb{token}", check=False)
        root = BED_ROOT / f"tengen-bed-{token}"
        _run("umount", "-l", str(root / "head"), check=False)
        shutil.rmtree(root, ignore_errors=True)
    return sorted(stale)


def node_home() -> str:
    """The home directory every node hides behind its own tmpfs."""
    return os.path.expanduser("~")
