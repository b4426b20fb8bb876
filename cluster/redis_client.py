"""Redis clients that ride out an outage: every command of the run goes through one.

A spot node's Redis restarts, a network blips, a server replays its AOF (``LOADING``),
or refuses writes because it is full (``OOM``, with ``maxmemory-policy noeviction``).
None of these should end a run that has been going for days, so ``ResilientRedis``
wraps a ``redis.Redis`` and retries each command, with exponential backoff and full
jitter, for as long as the outage has lasted less than ``OutagePolicy.outage_s``. Past
that, every command raises ``RedisUnavailable`` at once, whose message says that Redis
was unreachable (or full) and for how long: the run stops on it.

The outage is a property of the client, not of one command: it starts at the first
failure after a success and ends at the next success, across threads, with one log
line at each end. redis-py's own retry is set explicitly to one immediate retry (a
stale pooled socket after an idle spell), so that the behaviour does not depend on the
redis-py version's defaults, which differ across the versions the dependency allows.

A pipeline is recorded and replayed whole on each attempt, because redis-py empties a
pipeline's command stack when its ``execute`` fails. A retried write may therefore
have been applied once already: the writers make that harmless (games carry ids that
the learner deduplicates, registry writes check before they write).

``call(op, wait=False)`` tries once and raises ``RedisUnavailable`` (``expired`` false)
on a transient failure, for callers that have something better to do than wait: a
self-play worker keeps its games in a buffer and plays on; ``try_once(op)`` gives None
then, for the driver's loop.

An outage is measured on ``clock`` and waited out with ``sleep`` (``time.monotonic``
and ``time.sleep`` unless given: a test passes a clock it moves itself).
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tengen.run.outage import Backoff, Outage, ride_out

__all__ = [
    "DEFAULT_POLICY",
    "OutagePolicy",
    "RedisLike",
    "RedisUnavailable",
    "ResilientRedis",
    "TRANSIENT_ERRORS",
    "call_with_retry",
    "client_options",
]

T = TypeVar("T")

#: errors that go away by themselves: the server is down, restarting, loading its AOF,
#: failing over (READONLY, TRYAGAIN), or out of memory until something is deleted
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (
    redis.ConnectionError,  # BusyLoadingError (LOADING) is one
    redis.TimeoutError,
    redis.exceptions.OutOfMemoryError,
    redis.exceptions.ReadOnlyError,
    redis.exceptions.TryAgainError,
)
#: a ConnectionError that waiting does not cure: a wrong password or a missing right
_PERMANENT_ERRORS: tuple[type[Exception], ...] = (
    redis.exceptions.AuthenticationError,
    redis.exceptions.AuthorizationError,
)


def _is_misconf(error: BaseException) -> bool:
    """Redis refuses writes while it cannot persist (a full disk under its AOF): MISCONF,
    as a command's error, or inside a pipeline's or a script's ("Command # 1 ... caused
    error: MISCONF ...", "Error running script ... -MISCONF ...")."""
    return isinstance(error, redis.ResponseError) and "MISCONF " in str(error)


def is_transient(error: BaseException) -> bool:
    """Whether waiting may cure ``error``: the server down, restarting, loading, full,
    or unable to write its disk (which a freed disk cures)."""
    if isinstance(error, _PERMANENT_ERRORS):
        return False
    return isinstance(error, TRANSIENT_ERRORS) or _is_misconf(error)


@dataclass(frozen=True)
class OutagePolicy:
    """How long and how a client waits for Redis (``redis.outage_s`` in the config)."""

    #: the config's default (``redis.outage_s`` in run/config.py, which says why)
    outage_s: float = 900.0
    backoff_base_s: float = 0.05
    backoff_cap_s: float = 5.0
    #: a reply must come within this (the learner's blocking reads wait 0.5 s at most)
    socket_timeout_s: float = 10.0
    connect_timeout_s: float = 5.0
    #: a connection idle this long is PINGed before its next command
    health_check_s: float = 15.0


DEFAULT_POLICY = OutagePolicy()


def client_options(policy: OutagePolicy) -> dict[str, Any]:
    """``redis.Redis`` keyword options, all spelled out (redis-py 5 to 8 differ in their
    defaults: no socket timeout in 5, three retries with backoff in 6 and later)."""
    return {
        "socket_timeout": policy.socket_timeout_s,
        "socket_connect_timeout": policy.connect_timeout_s,
        "socket_keepalive": True,
        "health_check_interval": policy.health_check_s,
        "retry": Retry(NoBackoff(), 1),
        "retry_on_error": [redis.ConnectionError, redis.TimeoutError],
    }


class RedisUnavailable(redis.ConnectionError):
    """Redis did not answer, or refused writes because it is full.

    ``expired`` is true once the outage has lasted past the policy's ``outage_s``: the
    run stops. ``out_of_memory`` says that the server answered, with an OOM refusal.
    """

    def __init__(self, message: str, *, seconds: float, expired: bool, out_of_memory: bool):
        super().__init__(message)
        self.seconds = seconds
        self.expired = expired
        self.out_of_memory = out_of_memory

    def __reduce__(self):  # crosses Ray's process boundary with its fields
        return (_rebuild_unavailable, (str(self), self.seconds, self.expired, self.out_of_memory))


def _rebuild_unavailable(message: str, seconds: float, expired: bool, out_of_memory: bool) -> RedisUnavailable:
    return RedisUnavailable(message, seconds=seconds, expired=expired, out_of_memory=out_of_memory)


def _describe(error: BaseException) -> str:
    if isinstance(error, redis.exceptions.OutOfMemoryError):
        return "out of memory: it refuses writes (maxmemory reached, policy noeviction)"
    if _is_misconf(error):
        return "its disk is full or failing: it refuses writes until it can persist again (MISCONF)"
    if isinstance(error, redis.exceptions.BusyLoadingError):
        return "loading its data (AOF replay)"
    return f"unreachable ({type(error).__name__}: {error})"


class ResilientRedis:
    """A ``redis.Redis`` whose commands ride out an outage of up to ``policy.outage_s``.

    Any command of ``redis.Redis`` can be called on it (``client.xlen(key)``);
    ``pipeline()`` returns a pipeline that is retried whole; ``call(op)`` retries a
    function of the raw client, for a read-check-write that must be retried as one.
    """

    def __init__(self, client: redis.Redis, *, policy: OutagePolicy = DEFAULT_POLICY, label: str = "",
                 log: Callable[[str], None] | None = None, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.raw = client
        self.policy = policy
        self.label = label or _label(client)
        self._outage = Outage(f"redis {self.label}", log, clock=clock, describe=_describe)
        self._backoff = Backoff(policy.backoff_base_s, policy.backoff_cap_s)
        self._sleep = sleep
        # jitter only spreads reconnects out; it needs no seed
        self._rng = rng or random.Random()
        self._local = threading.local()

    @property
    def outage_seconds(self) -> float:
        """How long the current outage has lasted (0: Redis answers)."""
        return self._outage.seconds()

    @property
    def last_error(self) -> BaseException | None:
        return self._outage.last_error

    @contextlib.contextmanager
    def impatient(self) -> Iterator[None]:
        """Within it, this thread's commands are tried once (``wait=False``): for a loop
        that has other work to do while Redis is away."""
        before = getattr(self._local, "impatient", False)
        self._local.impatient = True
        try:
            yield
        finally:
            self._local.impatient = before

    def try_once(self, op: Callable[[], T]) -> T | None:
        """``op()`` with this thread's commands tried once (``impatient``), or None
        while Redis is away: for a loop with other work to do meanwhile (the driver
        keeps its workers busy). Past ``policy.outage_s`` the ``RedisUnavailable`` is
        raised, and the run stops on it."""
        try:
            with self.impatient():
                return op()
        except RedisUnavailable as e:
            if e.expired:
                raise
            return None

    def call(self, op: Callable[[redis.Redis], T], *, wait: bool = True) -> T:
        """``op(raw client)``, retried through an outage (``wait=False``: tried once)."""
        wait = wait and not getattr(self._local, "impatient", False)
        return ride_out(lambda: op(self.raw), outage=self._outage, budget_s=self.policy.outage_s,
                        transient=is_transient, give_up=self._unavailable, backoff=self._backoff, rng=self._rng,
                        sleep=self._sleep, wait=wait)

    def _unavailable(self, error: BaseException, seconds: float, expired: bool) -> RedisUnavailable:
        oom = isinstance(error, redis.exceptions.OutOfMemoryError)
        what = _describe(error)
        if expired:
            message = (f"redis {self.label} was {'full' if oom else 'unreachable'} for {seconds:.0f} s "
                       f"(redis.outage_s is {self.policy.outage_s:g}): {what}")
        else:
            message = f"redis {self.label}: {what}"
        return RedisUnavailable(message, seconds=seconds, expired=expired, out_of_memory=oom)

    def pipeline(self, transaction: bool = True) -> RetriedPipeline:
        return RetriedPipeline(self, transaction)

    def scan_iter(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        # a cursor cannot be resumed across a reconnect: retry the whole scan
        return iter(self.call(lambda c: list(c.scan_iter(*args, **kwargs))))

    def pubsub(self, **kwargs: Any) -> Any:
        return self.raw.pubsub(**kwargs)

    def close(self) -> None:
        self.raw.close()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self.raw, name)
        if not callable(attribute):
            return attribute

        def command(*args: Any, **kwargs: Any) -> Any:
            return self.call(lambda c: getattr(c, name)(*args, **kwargs))

        command.__name__ = name
        return command


class RetriedPipeline:
    """Commands recorded here run in one redis-py pipeline, replayed whole on a retry."""

    def __init__(self, owner: ResilientRedis, transaction: bool):
        self._owner = owner
        self._transaction = transaction
        self._commands: list[tuple[str, tuple, dict]] = []

    def __getattr__(self, name: str) -> Callable[..., RetriedPipeline]:
        if not callable(getattr(redis.client.Pipeline, name, None)):
            raise AttributeError(name)

        def record(*args: Any, **kwargs: Any) -> RetriedPipeline:
            self._commands.append((name, args, kwargs))
            return self

        return record

    def execute(self, *, wait: bool = True) -> list:
        commands, self._commands = self._commands, []

        def run(client: redis.Redis) -> list:
            pipe = client.pipeline(transaction=self._transaction)
            for name, args, kwargs in commands:
                getattr(pipe, name)(*args, **kwargs)
            return pipe.execute()

        return self._owner.call(run, wait=wait)


#: what the run's Redis classes take: a resilient client, or a plain one in tests and tools
RedisLike = redis.Redis | ResilientRedis


def call_with_retry(client: RedisLike, op: Callable[[redis.Redis], T], *, wait: bool = True) -> T:
    """``op(raw client)``, retried as one through an outage when ``client`` rides
    them out (a read-check-write that must not be split)."""
    if isinstance(client, ResilientRedis):
        return client.call(op, wait=wait)
    return op(client)


def _label(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"{kwargs.get('host', '?')}:{kwargs.get('port', '?')}"
