"""One driver per run: a lease in the run's Redis that the live driver holds and renews.

With an external Redis (every deploy path) two drivers of one run id, say a job that
a scheduler restarted while the old one still ran, would share the learner's consumer
group and race to promote. The lease refuses the second: ``tengen:{<run>}:driver``
holds the holder's host, pid and start time, with a TTL (``TTL_S``) that the live
driver renews every few seconds. A driver killed without a clean stop leaves it to
expire, so a restarted one waits out at most one TTL before it takes the run (at once
when the dead holder was a process of this same machine); one that finds the lease
renewed meanwhile stops, naming the holder and its host.

A driver that cannot renew while Redis is away keeps running (its clients wait out the
outage); once Redis answers, it renews again, or stops if another driver took the run.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import time
from collections.abc import Callable
from typing import Any

import redis

from tengen.cluster.keys import RunKeys
from tengen.cluster.redis_client import RedisLike, call_with_retry
from tengen.run.run_dir import RunDirError

__all__ = ["DriverLease", "LeaseLost", "TTL_S"]

#: how long a lease outlives its last renewal: what a restarted driver may have to wait
TTL_S = 30.0
#: how often the holder renews it
RENEW_EVERY_S = 5.0

#: renew or release only while the lease is still ours (compare and set, in Redis)
_RENEW = ("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) "
          "else return 0 end")
_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end"


def _dead_here(holder: dict) -> bool:
    """Whether ``holder`` was a process of this machine that no longer runs."""
    if holder.get("host") != socket.gethostname() or not isinstance(holder.get("pid"), int):
        return False
    try:
        os.kill(holder["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class LeaseLost(RuntimeError):
    """Another driver holds the run's lease: this one must stop."""


class DriverLease:
    """``lease = DriverLease(client, run_id).acquire()``; ``lease.renew()`` on the
    driver's loop (it renews when due); ``lease.release()`` at a clean stop."""

    def __init__(self, client: RedisLike, run_id: str, *, ttl_s: float = TTL_S,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep):
        self.client: Any = client
        self.key = RunKeys(run_id).driver
        self.run_id = run_id
        self.ttl_s = ttl_s
        self.clock = clock
        self.sleep = sleep
        self.holder = json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "since": round(time.time(), 1),
                                  "token": secrets.token_hex(8)}, sort_keys=True)
        self._renewed: float | None = None

    def acquire(self) -> DriverLease:
        """Take the lease, waiting out at most one TTL for a dead holder's to expire;
        ``RunDirError`` naming the holder when a live one keeps it."""
        deadline = self.clock() + self.ttl_s + 2.0
        while True:
            if call_with_retry(self.client, self._take):
                self._renewed = self.clock()
                return self
            holder = self.current()
            if holder is not None and _dead_here(holder):
                # its driver was a process of this machine that is gone (a SIGKILL, a crash)
                self._release(json.dumps(holder, sort_keys=True))
                continue
            if self.clock() >= deadline:
                raise RunDirError(f"run {self.run_id} already has a driver: {self.describe(self.current())}; "
                                  "stop it first (one driver per run)")
            self.sleep(1.0)

    def _take(self, client: Any) -> bool:
        ttl_ms = int(self.ttl_s * 1000)
        return bool(client.set(self.key, self.holder, nx=True, px=ttl_ms)) or client.get(self.key) in (
            self.holder, self.holder.encode())

    def current(self) -> dict | None:
        """The holder's record, or None when no driver holds the run."""
        value = self.client.get(self.key)
        return None if value is None else json.loads(value)

    @staticmethod
    def describe(holder: dict | None) -> str:
        if holder is None:
            return "none"
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(holder.get("since", 0)))
        return f"pid {holder.get('pid')} on {holder.get('host')}, since {since}"

    def due(self) -> bool:
        return self._renewed is None or self.clock() - self._renewed >= RENEW_EVERY_S

    def renew(self) -> None:
        """Renew when due (one try: while Redis is away the loop goes on and tries
        again); ``LeaseLost`` when another driver holds the run now."""
        if not self.due():
            return
        try:
            renewed = call_with_retry(self.client, lambda c: c.eval(_RENEW, 1, self.key, self.holder,
                                                                    int(self.ttl_s * 1000)), wait=False)
            if not renewed:  # expired while Redis was away: ours again if nobody took it
                renewed = call_with_retry(self.client, self._take, wait=False)
        except redis.ConnectionError:
            return  # Redis away: the run's clients ride the outage out, and so does the lease
        if not renewed:
            raise LeaseLost(f"another driver took run {self.run_id}: {self.describe(self.current())}")
        self._renewed = self.clock()

    def release(self) -> None:
        """Give the lease up at a clean stop (a resumed run need not wait for it)."""
        try:
            self._release(self.holder, wait=False)
        except redis.ConnectionError:
            pass  # it expires by itself

    def _release(self, holder: str, *, wait: bool = True) -> None:
        """Delete the lease if ``holder`` still holds it."""
        call_with_retry(self.client, lambda c: c.eval(_RELEASE, 1, self.key, holder), wait=wait)
