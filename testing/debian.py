"""Debian packages the tests and benches need, unpacked into the repository's
``.cache/`` without root (``apt-get download`` reads the package lists only,
``dpkg-deb -x`` unpacks): they never use a copy this machine may already have, and CI
installs them the same way on a fresh machine. Used for Prometheus, GNU Go and
OpenSSH's sshd. A package that cannot be had raises ``ToolUnavailable``: a test skips
on it (fails on CI, tests/unavailable.py), a bench stops with its message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

__all__ = ["CACHE", "ToolUnavailable", "fetch_gnugo", "unpacked"]

CACHE = Path(__file__).resolve().parent.parent / ".cache"


class ToolUnavailable(RuntimeError):
    """A Debian package that cannot be fetched here (no apt-get, or the download failed)."""


def _library_dependencies(dpkg_deb: str, deb: Path, not_fetched: set[str]) -> set[str]:
    """The library packages a .deb depends on (the first of each set of alternatives)."""
    fields = subprocess.run([dpkg_deb, "-f", str(deb), "Pre-Depends", "Depends"], capture_output=True,
                            text=True, check=True).stdout
    names = set()
    for line in fields.splitlines():
        for dependency in line.split(":", 1)[-1].split(","):
            name = dependency.split("|")[0].split("(")[0].strip().removesuffix(":any")
            if name.startswith(("lib", "zlib")) and name not in not_fetched:
                names.add(name)
    return names


def _download(apt_get: str, packages: list[str], work: str) -> subprocess.CompletedProcess:
    download = subprocess.run([apt_get, "download", *packages], cwd=work, capture_output=True, text=True)
    if download.returncode != 0 and os.geteuid() == 0:
        # A fresh machine may have no package lists yet.
        subprocess.run([apt_get, "update"], capture_output=True, text=True)
        download = subprocess.run([apt_get, "download", *packages], cwd=work, capture_output=True, text=True)
    return download


def unpacked(name: str, packages: Iterable[str], *, needs: str, with_libraries: bool = False,
             not_fetched: Iterable[str] = ()) -> Path:
    """``.cache/<name>/root`` holding ``packages`` unpacked (and, ``with_libraries``, the
    library packages they depend on, recursively, but ``not_fetched``); ``needs`` is a
    path inside it that must exist. Raises ToolUnavailable when there is no apt-get to
    fetch with, or the download fails."""
    extracted = CACHE / name / "root"
    if (extracted / needs).exists():
        return extracted
    apt_get, dpkg_deb = shutil.which("apt-get"), shutil.which("dpkg-deb")
    if not apt_get or not dpkg_deb:
        raise ToolUnavailable(f"no apt-get and dpkg-deb to fetch Debian's {' '.join(packages)}")
    (CACHE / name).mkdir(parents=True, exist_ok=True)
    skipped = set(not_fetched)
    with tempfile.TemporaryDirectory(dir=CACHE / name) as work:
        wanted: set[str] = set(packages)
        fetched: set[str] = set()
        while wanted - fetched:
            batch = sorted(wanted - fetched)
            download = _download(apt_get, batch, work)
            if download.returncode != 0:
                raise ToolUnavailable(f"apt-get download {' '.join(batch)} failed:\n{download.stderr}")
            fetched |= set(batch)
            if with_libraries:
                for deb in Path(work).glob("*.deb"):
                    wanted |= _library_dependencies(dpkg_deb, deb, skipped)
        for deb in sorted(Path(work).glob("*.deb")):
            subprocess.run([dpkg_deb, "-x", str(deb), str(Path(work) / "root")], check=True)
        try:
            os.rename(Path(work) / "root", extracted)
        except OSError:  # another test process unpacked it first
            pass
    assert (extracted / needs).exists(), f"Debian's {' '.join(packages)} put no {needs} in {extracted}"
    return extracted


def fetch_gnugo() -> Path:
    """The ``gnugo`` binary (GNU Go 3.8): Debian's package unpacked into the cache (the
    tests never use one this machine may already have)."""
    return unpacked("gnugo", ["gnugo"], needs="usr/games/gnugo") / "usr" / "games" / "gnugo"
