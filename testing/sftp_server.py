"""A real OpenSSH server serving sftp, for the checkpoint storage's tests
(tests/test_storage.py) and for the cluster bed's storage outage (testing/cluster_bed.py).

sshd is Debian's, from the ``openssh-server`` package and the libraries it links,
fetched without root into ``.cache/openssh`` (``apt-get download`` and
``dpkg-deb -x``, testing/debian.py). It runs unprivileged (as uid 65534 when the
caller is root), so it needs neither the ``sshd`` privilege-separation user nor
``/run/sshd``; Debian's ``nss_wrapper`` gives it a passwd file of its own with the one
login user, ``tengen``, so nothing on the machine is changed (this machine's
``nobody`` reads as a locked account to sshd).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from tengen.testing import debian
from tengen.testing.waiting import wait_for

__all__ = ["LOGIN", "SftpServer", "fetch_openssh", "write_key"]

#: the server, and the preloaded library that gives it a user without an account
DEBIAN_PACKAGES = ("openssh-server", "libnss-wrapper")
#: dependencies not fetched: the C library must be the loader's own, and this sshd
#: runs without PAM
NOT_FETCHED = {"libc6", "libpam-modules", "libpam-runtime"}
LOGIN = "tengen"
#: sshd's uid when the caller is root (nobody's, without nobody's locked entry)
UNPRIVILEGED_UID = 65534

#: how sshd is started: ``launch(argv, env, uid, gid) -> Popen``, the process being
#: sshd itself (the default: a child of this process, its privileges dropped)
Launch = Callable[[Sequence[str], Mapping[str, str], int, int], subprocess.Popen]


def fetch_openssh() -> Path:
    """openssh-server and the libraries it links (all of them, recursively, but the C
    library) unpacked into the cache: no reliance on what the machine has installed.
    Raises ``debian.ToolUnavailable`` where they cannot be had."""
    return debian.unpacked("openssh", DEBIAN_PACKAGES, needs="usr/sbin/sshd", with_libraries=True,
                           not_fetched=NOT_FETCHED)


def write_key(path: Path) -> str:
    """A new ed25519 private key in OpenSSH's format at ``path``; returns the public line."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    key = Ed25519PrivateKey.generate()
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                       serialization.NoEncryption()))
    path.chmod(0o600)
    return key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``: sshd's per-connection monitor, the process that
    speaks to the network, and the one serving sftp."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:  # gone meanwhile
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        children = [child for child, parent in parents.items() if parent in frontier]
        found += children
        frontier = children
    return found


def _launch_here(argv: Sequence[str], env: Mapping[str, str], uid: int, gid: int) -> subprocess.Popen:
    if os.geteuid() == 0:
        return subprocess.Popen(list(argv), env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                user=uid, group=gid, extra_groups=[])
    return subprocess.Popen(list(argv), env=dict(env), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class SftpServer:
    """Debian's sshd on ``host``, serving sftp to ``LOGIN`` with one key.

    ``url(path)`` names a folder in its ``data`` directory; ``key_file`` is the client's
    private key (give it to fsspec as its ``key_filename`` option, or in a process's
    environment as ``FSSPEC_SFTP_KEY_FILENAME``). ``stop()`` takes it away with every
    connection it serves, ``start()`` brings it back on the same port."""

    def __init__(self, tree: Path, work: Path, *, host: str = "127.0.0.1", port: int | None = None,
                 key_file: Path | None = None, launch: Launch = _launch_here):
        self.work, self.host, self._launch = work, host, launch
        self.uid, self.gid = (UNPRIVILEGED_UID, UNPRIVILEGED_UID) if os.geteuid() == 0 else (os.getuid(), os.getgid())
        # A copy inside the work folder: the uid may not traverse to the repository.
        shutil.copytree(tree, work / "openssh", symlinks=True)
        self.sshd = work / "openssh" / "usr" / "sbin" / "sshd"  # absolute: sshd re-executes itself
        libraries = [str(p) for pattern in ("lib/*-linux-gnu", "usr/lib/*-linux-gnu")
                     for p in sorted((work / "openssh").glob(pattern))]
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_LIBRARY_PATH": ":".join(libraries),
                    "LD_PRELOAD": str(next((work / "openssh").rglob("libnss_wrapper.so"))),
                    "NSS_WRAPPER_PASSWD": str(work / "passwd"), "NSS_WRAPPER_GROUP": str(work / "group")}
        (work / "passwd").write_text(f"{LOGIN}:x:{self.uid}:{self.gid}:tengen test:{work}:/bin/sh\n")
        (work / "group").write_text(f"{LOGIN}:x:{self.gid}:\n")
        write_key(work / "host_key")
        self.key_file = key_file or work / "client_key"
        (work / "authorized_keys").write_text(write_key(self.key_file) + "\n")
        self.data = work / "data"
        self.data.mkdir()
        self.port = port or _free_port()
        (work / "sshd_config").write_text(
            f"ListenAddress {host}:{self.port}\nHostKey {work}/host_key\nPidFile {work}/sshd.pid\n"
            f"AuthorizedKeysFile {work}/authorized_keys\n"
            # The files are the server's own; no PAM, no passwords, sftp inside sshd.
            "StrictModes no\nUsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "PubkeyAuthentication yes\nSubsystem sftp internal-sftp\nLogLevel VERBOSE\n")
        for folder, _, files in os.walk(work):
            for name in [folder, *(os.path.join(folder, f) for f in files)]:
                os.lchown(name, self.uid, self.gid)
        self.process: subprocess.Popen | None = None
        self.start()

    def url(self, path: str) -> str:
        return f"sftp://{LOGIN}@{self.host}:{self.port}{self.data}/{path}"

    def start(self) -> None:
        # sshd writes its own log (-E): the launcher's output may go elsewhere
        argv = [str(self.sshd), "-D", "-E", str(self.work / "sshd.log"), "-f", str(self.work / "sshd_config")]
        self.process = self._launch(argv, self.env, self.uid, self.gid)
        process = self.process

        def listens() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"sshd exited with {process.returncode}:\n{self.log()}")
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
            except OSError:
                return False
            return True

        wait_for(listens, timeout_s=15, every_s=0.05,
                 what=lambda: f"sshd listening on {self.host}:{self.port}\n{self.log()}")

    def stop(self) -> None:
        """Kill the listener and every open connection's process."""
        if self.process is not None:
            for pid in _descendants(self.process.pid):
                with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                    os.kill(pid, signal.SIGKILL)
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def log(self) -> str:
        try:
            return (self.work / "sshd.log").read_text(errors="replace")[-4000:]
        except OSError:
            return ""
