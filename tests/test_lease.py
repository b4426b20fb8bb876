"""One driver per run (cluster/lease.py), against a real Redis: a second driver of a
run is refused with the holder named, a dead driver's lease expires so that a
restarted one takes the run, and a driver that finds its run taken stops."""

from __future__ import annotations

import json
import socket
import time

import pytest
from fake_clock import FakeClock

from tengen.cluster.lease import DriverLease, LeaseLost
from tengen.run.run_dir import RunDirError


def test_a_second_driver_of_a_run_is_refused_naming_the_holder(redis_client):
    first = DriverLease(redis_client, "one-driver").acquire()
    clock = FakeClock()
    with pytest.raises(RunDirError) as refused:
        DriverLease(redis_client, "one-driver", clock=clock, sleep=clock.sleep).acquire()
    # it waited out one TTL for a dead holder's lease, no longer
    assert first.ttl_s <= sum(clock.sleeps) <= first.ttl_s + 3
    message = str(refused.value)
    assert "run one-driver already has a driver" in message and socket.gethostname() in message
    first.release()
    assert DriverLease(redis_client, "one-driver", clock=clock, sleep=clock.sleep).acquire().current() is not None


def test_a_dead_drivers_lease_expires_and_a_restarted_driver_takes_the_run(redis_client):
    DriverLease(redis_client, "restarted", ttl_s=1.0).acquire()  # then SIGKILLed: never renewed, never released
    started = time.monotonic()
    restarted = DriverLease(redis_client, "restarted", ttl_s=1.0).acquire()
    assert time.monotonic() - started < 10  # within the dead one's TTL and a poll, not forever
    assert restarted.current()["token"] in restarted.holder


def test_a_dead_driver_of_this_machine_is_not_waited_for(redis_client):
    lease = DriverLease(redis_client, "crashed-here")
    record = json.loads(lease.holder)
    record["pid"] = 2**22 + 7  # past Linux's largest pid: no such process
    redis_client.set(lease.key, json.dumps(record, sort_keys=True), px=30_000)  # left by a SIGKILLed driver
    clock = FakeClock()
    DriverLease(redis_client, "crashed-here", clock=clock, sleep=clock.sleep).acquire()
    assert sum(clock.sleeps) == 0


def test_a_driver_whose_run_was_taken_stops_at_its_next_renewal(redis_client):
    clock = FakeClock()
    old = DriverLease(redis_client, "taken", ttl_s=1.0, clock=clock, sleep=clock.sleep).acquire()
    time.sleep(1.5)  # Redis expires it (the old driver was away, say, paused)
    DriverLease(redis_client, "taken").acquire()  # a new driver took the run
    clock.advance(10)  # the old one's renewal is due
    with pytest.raises(LeaseLost, match="another driver took run taken"):
        old.renew()


def test_a_lease_renewed_in_time_is_kept(redis_client):
    clock = FakeClock()
    lease = DriverLease(redis_client, "renewed", ttl_s=2.0, clock=clock, sleep=clock.sleep).acquire()
    for _ in range(3):
        time.sleep(1.0)
        clock.advance(10)
        lease.renew()
    assert redis_client.pttl(lease.key) > 1000  # it would have expired without the renewals
    assert lease.current()["pid"] == DriverLease(redis_client, "renewed").current()["pid"]
