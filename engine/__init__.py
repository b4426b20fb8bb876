"""The pure core of tengen: rules, search, network, self-play and match statistics.

Nothing here imports Ray, Redis, Prometheus or the other top-level folders.
"""

import hashlib
import os
from pathlib import Path


def _key_numba_cache_to_sources() -> None:
    """Numba's on-disk cache checks only the file of the function it compiled, not
    the files of the kernels that function calls: after a rule kernel changed, the
    search went on running its stale compiled copy (here 40% slower; wrong, had the
    rules changed). So the cache lives in a folder named by a hash of all of the
    engine's sources, and any change to them starts a fresh one. This has to run
    before the first ``@njit(cache=True)`` function is defined."""
    from numba.core import config

    root = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    base = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "tengen", "numba")
    config.CACHE_DIR = os.path.join(base, digest.hexdigest()[:16])  # type: ignore[attr-defined]


_key_numba_cache_to_sources()
