"""Riding out an outage of a service the run needs: Redis (cluster/redis_client.py) and
the learner's checkpoint storage (``ResilientStorage`` below) alike.

An outage is a property of the client, not of one call: it starts at the first
failure after a success and ends at the next success, across threads, with one log
line at each end (``Outage``). A call that fails with a transient error is tried
again after a pause that grows exponentially with full jitter (``Backoff``), for as
long as the outage has lasted less than its budget; past it, the caller's own error
says the service was away and for how long (``ride_out``), and the run stops on it
after a final checkpoint, or goes on without the service where it can. The clock and
the sleep are arguments, so that a test moves time itself.

``ResilientStorage`` puts a learner's ``CheckpointStorage`` behind this: every read
and write rides out an outage of ``storage_outage_s`` (the run config's), and each
call has a deadline (``call_timeout_s``), because a backend may hang rather than fail
(sftp has no timeout of its own): a call past it is abandoned on its thread, counted
as a failure, and tried again on a storage opened afresh.
"""

from __future__ import annotations

import concurrent.futures
import errno
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from tengen.learner.storage import CheckpointStorage

__all__ = ["Backoff", "Outage", "ride_out", "ResilientStorage", "StorageUnavailable"]

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    """Pauses between tries: up to ``base_s * 2**attempt``, capped at ``cap_s``, each
    drawn uniformly below that (full jitter: clients do not come back in step)."""

    base_s: float = 0.05
    cap_s: float = 5.0

    def pause(self, attempt: int, rng: random.Random) -> float:
        return rng.uniform(0, min(self.cap_s, self.base_s * 2 ** min(attempt, 30)))


class Outage:
    """When the current outage of ``what`` started (None: it answers), shared by all
    threads; ``describe`` words an error for the log."""

    def __init__(self, what: str, log: Callable[[str], None] | None, *, clock: Callable[[], float] = time.monotonic,
                 describe: Callable[[BaseException], str] = lambda e: f"{type(e).__name__}: {e}"):
        self.what = what
        self.log = log
        self.describe = describe
        self._clock = clock
        self.since: float | None = None
        self.last_error: BaseException | None = None
        self._lock = threading.Lock()

    def failed(self, error: BaseException) -> float:
        """Record a failure; returns how long the outage has lasted."""
        now = self._clock()
        with self._lock:
            self.last_error = error
            if self.since is None:
                self.since = now
                if self.log is not None:
                    self.log(f"{self.what}: {self.describe(error)}; retrying")
            return now - self.since

    def ended(self) -> None:
        if self.since is None:  # the common case: no lock on the hot path
            return
        with self._lock:
            if self.since is None:
                return
            seconds, self.since = self._clock() - self.since, None
        if self.log is not None:
            self.log(f"{self.what}: answering again after {seconds:.1f} s")

    def seconds(self) -> float:
        since = self.since
        return 0.0 if since is None else self._clock() - since


def ride_out(op: Callable[[], T], *, outage: Outage, budget_s: float, transient: Callable[[BaseException], bool],
             give_up: Callable[[BaseException, float, bool], BaseException], backoff: Backoff = Backoff(),
             rng: random.Random | None = None, sleep: Callable[[float], None] = time.sleep, wait: bool = True) -> T:
    """``op()``, tried again after each transient failure while the outage has lasted
    less than ``budget_s``; ``give_up(error, seconds, expired)`` is what is raised
    past it, or at once with ``wait=False`` (one try). Other errors pass through."""
    rng = rng or random.Random()  # jitter only spreads reconnects out; it needs no seed
    attempt = 0
    while True:
        try:
            result = op()
        except Exception as error:
            if not transient(error):
                raise
            seconds = outage.failed(error)
            expired = seconds >= budget_s
            if expired or not wait:
                raise give_up(error, seconds, expired) from error
            sleep(min(backoff.pause(attempt, rng), budget_s - seconds))
            attempt += 1
            continue
        outage.ended()
        return result


class StorageUnavailable(OSError):
    """The checkpoint storage did not answer, or failed, for the whole of its outage
    budget (``expired``), or on the one try of a caller that does not wait."""

    def __init__(self, message: str, *, seconds: float, expired: bool):
        super().__init__(message)
        self.seconds = seconds
        self.expired = expired

    def __reduce__(self):  # crosses Ray's process boundary with its fields
        return (_rebuild_unavailable, (str(self), self.seconds, self.expired))


def _rebuild_unavailable(message: str, seconds: float, expired: bool) -> StorageUnavailable:
    return StorageUnavailable(message, seconds=seconds, expired=expired)


#: a storage call that has not answered in this long is abandoned (and tried again)
CALL_TIMEOUT_S = 120.0

#: errors that waiting does not cure: the storage is misconfigured, not away (a path
#: that cannot be: a directory under /proc, a file where a folder should be)
_PERMANENT = (PermissionError, FileNotFoundError, NotADirectoryError, IsADirectoryError, FileExistsError,
              ValueError, TypeError, NotImplementedError)


def _transient(error: BaseException) -> bool:
    return not isinstance(error, _PERMANENT) and getattr(error, "errno", None) != errno.EROFS


class ResilientStorage:
    """A ``CheckpointStorage`` (``open_storage``'s) whose every call rides out an
    outage of up to ``outage_s``, each call given ``call_timeout_s``. ``open`` makes
    the storage (at the first call, and again after a call that hung: its connection
    may be what hangs); ``url`` names it in the log and in errors."""

    def __init__(self, open: Callable[[], CheckpointStorage], *, url: str, outage_s: float,
                 call_timeout_s: float = CALL_TIMEOUT_S, log: Callable[[str], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None):
        self._open = open
        self._storage: CheckpointStorage | None = None  # opened at the first call
        self.url = url
        self.outage_s = outage_s
        self.call_timeout_s = call_timeout_s
        self._sleep = sleep
        self._rng = rng
        self._calls = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage")
        self._outage = Outage(f"storage {url}", log, clock=clock)

    @property
    def outage_seconds(self) -> float:
        return self._outage.seconds()

    def _current(self) -> CheckpointStorage:
        if self._storage is None:
            self._storage = self._open()
        return self._storage

    def _call(self, op: Callable[[CheckpointStorage], T]) -> T:
        future = self._calls.submit(lambda: op(self._current()))
        try:
            return future.result(timeout=self.call_timeout_s)
        except concurrent.futures.TimeoutError:
            # The call hangs: leave it on its thread, and go on with a fresh storage on a
            # fresh thread (the hung one's connection is the likely culprit).
            self._calls.shutdown(wait=False)
            self._calls = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="storage")
            self._storage = None
            raise TimeoutError(f"no answer within {self.call_timeout_s:g} s") from None

    def _ride_out(self, op: Callable[[CheckpointStorage], T], *, wait: bool = True) -> T:
        def give_up(error: BaseException, seconds: float, expired: bool) -> BaseException:
            if expired:
                return StorageUnavailable(f"storage {self.url} failed for {seconds:.0f} s (storage_outage_s is "
                                          f"{self.outage_s:g}): {type(error).__name__}: {error}",
                                          seconds=seconds, expired=True)
            return StorageUnavailable(f"storage {self.url}: {type(error).__name__}: {error}", seconds=seconds,
                                      expired=False)

        return ride_out(lambda: self._call(op), outage=self._outage, budget_s=self.outage_s,
                        transient=_transient, give_up=give_up, rng=self._rng,
                        sleep=self._sleep, wait=wait)

    def read_bytes(self, name: str) -> bytes | None:
        return self._ride_out(lambda s: s.read_bytes(name))

    def write_bytes(self, name: str, data: bytes) -> None:
        self._ride_out(lambda s: s.write_bytes(name, data))

    def exists(self, name: str) -> bool:
        return self._ride_out(lambda s: s.exists(name))

    def try_write(self, name: str, data: bytes) -> bool:
        """One try (no waiting): whether ``data`` was written; ``StorageUnavailable``
        once the outage has outlasted its budget. For a loop with other work to do
        while the storage is away (the driver keeps its workers busy)."""
        try:
            self._ride_out(lambda s: s.write_bytes(name, data), wait=False)
            return True
        except StorageUnavailable as e:
            if e.expired:
                raise
            return False
