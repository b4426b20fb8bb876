"""Debian's tools for the tests (tengen.testing.debian fetches them): one that cannot be
had skips its test, or fails it on CI (unavailable.py)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from unavailable import unavailable

from tengen.testing import debian


def unpacked(name: str, packages: Iterable[str], *, needs: str, with_libraries: bool = False,
             not_fetched: Iterable[str] = ()) -> Path:
    """``tengen.testing.debian.unpacked``, for a test."""
    try:
        return debian.unpacked(name, packages, needs=needs, with_libraries=with_libraries, not_fetched=not_fetched)
    except debian.ToolUnavailable as e:
        unavailable(str(e))


def fetch_gnugo() -> Path:
    """GNU Go 3.8's ``gnugo`` binary, for a test."""
    try:
        return debian.fetch_gnugo()
    except debian.ToolUnavailable as e:
        unavailable(str(e))
