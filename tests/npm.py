"""npm packages the tests need (Sabaki's GTP controller and SGF parser), installed by
the tests' own set-up into the repository's ``.cache/node``: never one this machine
may already have, and CI installs them the same way on a fresh machine."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from unavailable import unavailable

NODE_CACHE = Path(__file__).resolve().parent.parent / ".cache" / "node"


def installed(package: str, name: str) -> Path:
    """The ``node_modules`` folder holding ``package`` (an npm spec such as
    ``@sabaki/sgf@3``, whose module is ``name``), installed there if it is not yet;
    skips the test (fails it on CI) only when there is no node and npm, or the install fails."""
    modules = NODE_CACHE / "node_modules"
    if (modules / name / "package.json").exists():
        return modules
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        unavailable(f"cannot install {package}: no node and npm")
    done = subprocess.run([npm, "install", "--no-audit", "--no-fund", "--prefix", str(NODE_CACHE), package],
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        unavailable(f"cannot install {package}: npm install failed:\n{done.stderr}")
    return modules
