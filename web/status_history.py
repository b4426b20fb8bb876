"""The run's status lines (``status.jsonl``, one JSON object a line, appended by
run/loop.py's ``TrainingLoop.report``, each read as run/records.py's ``StatusLine``)
as the run page plots them, without sending megabytes per poll.

A run of days writes a line every few seconds, each a few kilobytes (its
``reported_games`` alone can be 200 entries), so the file reaches hundreds of
megabytes. ``read_history`` answers with *points*: each line cut down to the
numbers the plots draw (``POINT_FIELDS``), at most ``max_points`` of them, and the
byte offset to ask from next time:

- the first request (``after=None``) gets the whole run thinned to ``max_points``: a
  small file is read whole and every k-th line kept; a big one is sampled by seeking
  to ``max_points`` evenly spaced offsets and reading the line that starts after
  each (lines are alike in size, so this is close to evenly spaced in time), which
  reads kilobytes, not the file;
- later polls (``after=OFFSET``) get only the complete lines appended since, at most
  ``MAX_READ_BYTES`` of them a call (``more`` says there is more to read);
- an offset past the end (the file was replaced) answers as a first request, with
  ``reset``.

A line still being written (no newline yet) is never read: the next offset stops
before it; a line a crash cut short is skipped. A line of a format this tengen does
not read, or a damaged one, is refused (``RecordError``, naming the file). The
newest complete line goes out whole as ``latest`` (without ``reported_games``), for
what the page shows as it is now.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from tengen.run.records import StatusLine, parse_line

__all__ = ["POINT_FIELDS", "MAX_POINTS", "MAX_READ_BYTES", "READ_ALL_BYTES", "History", "read_history", "point"]

#: what a point keeps of a status line: the numbers the page plots (``losses`` is the
#: learner's dict of loss parts, the total among them)
POINT_FIELDS = ("time", "learner_step", "losses", "games_per_s", "positions_per_s", "evaluations_per_s", "mean_batch",
                "window", "window_capacity")
#: the most points one answer holds
MAX_POINTS = 1500
#: the most bytes a poll reads after its offset
MAX_READ_BYTES = 4 << 20
#: files up to this size are read whole on the first request; bigger ones are sampled
READ_ALL_BYTES = 8 << 20
#: how much of a big file's end is read for its last line (a line is kilobytes)
_TAIL_BYTES = 1 << 20
#: left out of ``latest``: large and not shown
_NOT_LATEST = ("reported_games",)


@dataclass(frozen=True)
class History:
    points: list[dict[str, Any]]  # oldest first
    next: int  # the offset to ask from next time
    latest: dict[str, Any] | None  # the newest line read, None when no new line came
    reset: bool  # the answer starts the history afresh (the client drops what it had)
    more: bool  # more complete lines wait after ``next``
    size: int  # the file's size in bytes now

    def to_json(self) -> dict[str, Any]:
        return {"points": self.points, "next": self.next, "latest": self.latest, "reset": self.reset,
                "more": self.more, "size": self.size}


def point(line: StatusLine) -> dict[str, Any]:
    """The plotted numbers of one status line (a wiring's it lacks are left out)."""
    data = line.to_json()
    return {key: data[key] for key in POINT_FIELDS if key in data}


def _latest(line: StatusLine | None) -> dict[str, Any] | None:
    return None if line is None else {k: v for k, v in line.to_json().items() if k not in _NOT_LATEST}


def _parse(raw: bytes, path: Path, offset: int) -> StatusLine | None:
    """A status line, None for one a crash cut short (the rest of the history stands)."""
    return parse_line(raw, StatusLine, f"{path}, the line at byte {offset}")


def _parsed(raw: list[tuple[int, bytes]], path: Path) -> list[StatusLine]:
    return [line for offset, data in raw if (line := _parse(data, path, offset)) is not None]


def _thin(lines: list[StatusLine], max_points: int) -> list[StatusLine]:
    """``max_points`` lines evenly spaced, the oldest and the newest among them."""
    if len(lines) <= max_points:
        return lines
    last = len(lines) - 1
    return [lines[round(i * last / (max_points - 1))] for i in range(max_points)]


def _complete_lines(data: bytes, start: int) -> tuple[list[tuple[int, bytes]], int]:
    """The complete lines of ``data``, read from the file's byte ``start``, each with
    its offset in the file, and how many bytes they span."""
    end = data.rfind(b"\n") + 1
    lines, offset = [], start
    for raw in data[:end].split(b"\n"):
        if raw.strip():
            lines.append((offset, raw))
        offset += len(raw) + 1
    return lines, end


def _read_all(f: BinaryIO, path: Path, max_points: int) -> tuple[list[StatusLine], int, StatusLine | None]:
    raw, end = _complete_lines(f.read(), 0)
    lines = _parsed(raw, path)
    return _thin(lines, max_points), end, lines[-1] if lines else None


def _sampled(f: BinaryIO, path: Path, size: int, max_points: int) -> tuple[list[StatusLine], int, StatusLine | None]:
    """One line at each of ``max_points`` evenly spaced offsets, and the last one."""
    tail = min(size, _TAIL_BYTES)
    f.seek(size - tail)
    last_raw, tail_end = _complete_lines(f.read(tail), size - tail)
    end = size - tail + tail_end  # past the last complete line
    starts_seen: set[int] = set()
    lines: list[StatusLine] = []
    for i in range(max_points - 1):
        offset = i * end // (max_points - 1)
        if offset:
            # From one byte before: when ``offset`` starts a line, the newline before it
            # is what readline skips, and that line is the one read.
            f.seek(offset - 1)
            f.readline()
        else:
            f.seek(0)
        start = f.tell()
        if start >= end or start in starts_seen:
            continue
        starts_seen.add(start)
        parsed = _parse(f.readline(), path, start)
        if parsed is not None:
            lines.append(parsed)
    last = _parse(last_raw[-1][1], path, last_raw[-1][0]) if last_raw else None
    if last is not None and (not lines or lines[-1] != last):
        lines.append(last)
    return lines, end, last


def read_history(path: Path, *, after: int | None = None, max_points: int = MAX_POINTS,
                 read_all_bytes: int = READ_ALL_BYTES) -> History:
    """The points of ``path`` (a status.jsonl) for a first request (``after`` None) or
    those after the offset ``after``; see the module docstring. Files bigger than
    ``read_all_bytes`` are sampled on a first request."""
    if after is not None and after < 0:
        raise ValueError(f"after must be an offset >= 0, not {after}")
    if max_points < 2:
        raise ValueError(f"max_points must be at least 2, not {max_points}")
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return History([], 0, None, reset=after is not None and after > 0, more=False, size=0)
    with f:
        size = os.fstat(f.fileno()).st_size
        if after is not None and after <= size:
            f.seek(after)
            chunk = f.read(MAX_READ_BYTES)
            raw, span = _complete_lines(chunk, after)
            lines = _parsed(raw, path)
            more = len(chunk) == MAX_READ_BYTES and after + span < size
            return History([point(line) for line in _thin(lines, max_points)], after + span,
                           _latest(lines[-1] if lines else None), reset=False, more=more, size=size)
        if size <= read_all_bytes:
            lines, end, last = _read_all(f, path, max_points)
        else:
            lines, end, last = _sampled(f, path, size, max_points)
        return History([point(line) for line in lines], end, _latest(last), reset=after is not None, more=False,
                       size=size)
