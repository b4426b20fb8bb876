"""What the driver does when a part of the run fails: replace it, after a pause that
grows with each failure in a row, and stop the run when the same part keeps failing.

A part is a name (``learner``, ``gatekeeper``, ``worker w003``, ``inference gpu:...``).
Each failure is logged: the first of its kind with the whole error (a Ray task error
carries the remote traceback), a repeat of the same error in one line. A part that
fails ``failures`` times in a row, each within ``window_s`` of the one before, is in a
crash loop (a config that cannot work, a node that cannot run it): ``CrashLoop`` ends
the run with that error rather than restarting forever. A success resets the count.

The driver keeps no per-part state of its own beyond this: ``report()`` is what
``tengen status`` shows per part (restarts, the last error, when it last reported),
and the replacements waiting out their pause are here too (``replace``, started by
``start_due`` on the driver's next pass), so that every part (workers, servers, the
learner, the gatekeeper) is replaced alike, whichever class of the driver holds it.

Whether failures come "in a row", and when a pause is over, is read from ``clock``
(``time.monotonic`` unless given: a test passes its own and moves it, rather than
sleeping past ``window_s``).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import ray

from tengen.cluster.deadlines import Hung
from tengen.cluster.redis_client import RedisUnavailable

__all__ = ["CrashLoop", "Supervisor", "describe_error", "kill_actor", "node_lost", "root_cause"]

_BACKOFF_BASE_S = 1.0
_BACKOFF_CAP_S = 60.0
_ERROR_CHARS = 400


class CrashLoop(RuntimeError):
    """A part of the run failed too often in a row; the message names it and the error."""


def describe_error(error: BaseException) -> str:
    """One line for ``error``: its type and what went wrong. A Ray task error's first
    line names the remote exception; an actor whose constructor raised carries only
    the remote traceback in its text, whose last ``Name: message`` line is the one that
    says why (e.g. a path that cannot be written), so that line is the one kept."""
    cause = root_cause(error)
    lines = [_ANSI.sub("", line).rstrip() for line in str(cause).strip().splitlines()]
    raised = [line for line in lines[1:] if _RAISED.match(line)]
    text = raised[-1] if raised else (lines[0] if lines else "")
    return f"{type(cause).__name__}: {text}"[:_ERROR_CHARS]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


def root_cause(error: BaseException) -> BaseException:
    """The exception under Ray's wrappers (a RayTaskError's ``cause``, recursively)."""
    seen = 0
    while getattr(error, "cause", None) is not None and seen < 10:
        error = error.cause  # type: ignore[attr-defined]
        seen += 1
    return error


def node_lost(error: BaseException) -> bool:
    """Whether ``error`` says that the part's node went, not the part: Ray's actor death
    for a node that died (preempted, or cut off past its health checks: "its node has
    died"), or an actor unavailable (its node unreachable). A node that goes takes its
    parts with it, and for a while (until Ray declares it dead) a part started again
    may be sent there and lost again: no crash loop of the part's own."""
    cause = root_cause(error)
    if isinstance(cause, ray.exceptions.ActorUnavailableError):
        return True
    return isinstance(cause, ray.exceptions.ActorDiedError) and (cause.preempted or "its node has died" in str(cause))


@dataclass
class _Part:
    restarts: int = 0
    failures_in_a_row: int = 0
    last_failure: float = 0.0
    last_error: str | None = None
    last_report: float | None = None  # unix seconds
    logged: set[str] = field(default_factory=set)


class Supervisor:
    """Counts each part's failures in a row (see the module's docstring). ``clock``
    gives seconds on a monotonic scale; ``window_s`` is measured on it."""

    def __init__(self, *, failures: int, window_s: float, log: Callable[[str], None],
                 clock: Callable[[], float] = time.monotonic):
        if failures < 1:
            raise ValueError(f"failures must be at least 1, got {failures}")
        self.failures = failures
        self.window_s = window_s
        self.log = log
        self._clock = clock
        self._parts: dict[str, _Part] = {}
        #: parts to start again once their pause is over: name -> (when, how)
        self._due: dict[str, tuple[float, Callable[[], None]]] = {}

    def _part(self, name: str) -> _Part:
        return self._parts.setdefault(name, _Part())

    def failed(self, name: str, error: BaseException, *, what: str = "failed", node_gone: bool | None = None) -> float:
        """Record a failure of ``name``; returns the seconds to wait before replacing
        it. Raises CrashLoop when it has failed ``failures`` times in a row. A part
        lost with its node (``node_gone``; None: judged from ``error``, ``node_lost``)
        is replaced after a short pause and does not count toward the crash loop."""
        part = self._part(name)
        now = self._clock()
        gone = node_lost(error) if node_gone is None else node_gone
        streak = part.failures_in_a_row if gone else (
            part.failures_in_a_row + 1 if now - part.last_failure <= self.window_s else 1)
        part.failures_in_a_row, part.last_failure = streak, now
        summary = describe_error(error)
        part.last_error = summary
        if summary in part.logged:
            self.log(f"{name} {what} again: {summary}")
        else:
            part.logged.add(summary)
            self.log(f"{name} {what}: {error}")
        if gone:
            part.restarts += 1
            return _BACKOFF_BASE_S
        if streak >= self.failures:
            raise CrashLoop(f"{name} failed {streak} times in a row within {self.window_s:g} s each; "
                            f"stopping the run. Last error: {summary}")
        part.restarts += 1
        return min(_BACKOFF_CAP_S, _BACKOFF_BASE_S * 2 ** (streak - 1)) if streak > 1 else 0.0

    def replace(self, name: str, error: BaseException, restart: Callable[[], None], *, lost: Any = None) -> None:
        """The actor ``name`` failed: stop the run if Redis is gone for good (its
        ``RedisUnavailable`` raised again), else kill what is left of it (``lost``, its
        handle) and call ``restart`` from ``start_due`` once the pause is over (a crash
        loop raises ``CrashLoop``)."""
        cause = root_cause(error)
        if isinstance(cause, RedisUnavailable) and cause.expired:
            raise cause
        what = ("lost" if isinstance(error, ray.exceptions.RayActorError)
                else "hung" if isinstance(error, Hung) else "failed")
        delay = self.failed(name, error, what=what)
        if lost is not None:
            kill_actor(lost)
        self.schedule(name, delay, restart)

    def schedule(self, name: str, delay: float, restart: Callable[[], None]) -> None:
        """Call ``restart`` from ``start_due`` ``delay`` seconds from now."""
        self._due[name] = (self._clock() + delay, restart)

    def waiting(self) -> list[str]:
        """The parts whose replacement waits out its pause."""
        return list(self._due)

    def start_due(self) -> None:
        """Start the replacements whose pause is over."""
        now = self._clock()
        for name, (when, start) in list(self._due.items()):
            if when <= now:
                del self._due[name]
                start()

    def succeeded(self, name: str) -> None:
        part = self._part(name)
        part.failures_in_a_row = 0
        part.last_report = time.time()

    def forget(self, name: str) -> None:
        """A part the run no longer has (a worker scaled away): its record, and its
        replacement if one was waiting."""
        self._parts.pop(name, None)
        self._due.pop(name, None)

    def report(self) -> dict[str, dict]:
        return {name: {"restarts": p.restarts, "last_error": p.last_error, "last_report": p.last_report,
                       "failures_in_a_row": p.failures_in_a_row}
                for name, p in sorted(self._parts.items())}


def kill_actor(handle: Any) -> None:
    """Stop a Ray actor; a no-op for one that is gone already, and without a Ray
    connection (there is no actor then, and ``ray.kill`` would start a local Ray)."""
    if not ray.is_initialized():
        return
    try:
        ray.kill(handle)
    except (ValueError, ray.exceptions.RayError):
        pass  # gone already
