"""Words for people: a count with its noun in the number it takes."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: float, one: str, many: str | None = None) -> str:
    """``n`` with ``one`` or, for any other count, ``many`` (``one`` + "s" unless
    given): "1 self-play worker", "0 games", "1,200 stream entries"."""
    return f"{int(n):,} {one if n == 1 else (many or one + 's')}"
