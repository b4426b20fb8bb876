"""What a Ray run says about itself, every few seconds and at its end.

The driver (cluster/driver.py) keeps the run going; this is the part of it that
reports. Every ``REPORT_S`` the loop's status line (run/loop.py: ``status.json``,
``status.jsonl``, the terminal) gets what this wiring adds (the fleet's workers and
servers that run and those that do not yet, the parts that have waited past
``cluster.start_timeout_s`` with the reason (``not_started``, cluster/placement.py)
and the part the workers make room for (``held_for``), the servers' mean batch, the
stream's length, the Redis outage and the Redis memory by part, refreshed every
``MEMORY_REPORT_S``, and every part's restarts and last error from the Supervisor),
and the line goes on the run's status board as the ``driver`` entry, which ``tengen
status`` reads while the run lives; the run directory's sample of games is read from
the stream then too. While Redis is away each of these is tried once and skipped, so
that a report never stalls the driver; the final report is written to the run
directory even then.
"""

from __future__ import annotations

import time

from tengen.cluster.fleet import Fleet
from tengen.cluster.metrics import RunMetrics
from tengen.cluster.redis_client import RedisUnavailable, ResilientRedis
from tengen.cluster.status_board import StatusBoard, memory_by_part
from tengen.cluster.stream import SampleStream
from tengen.cluster.supervision import Supervisor
from tengen.run.loop import TrainingLoop

__all__ = ["Reporting", "REPORT_S", "MEMORY_REPORT_S"]

#: seconds between two reports (and two syncs of the fleet)
REPORT_S = 5.0
#: seconds between two reads of the Redis memory by part (it scans the run's keys)
MEMORY_REPORT_S = 30.0


class Reporting:
    """The driver's reports: ``due()`` says when, ``report()`` and ``final()`` write
    them. ``run_id`` names the run's keys in Redis."""

    def __init__(self, loop: TrainingLoop, fleet: Fleet, supervisor: Supervisor, *, run_id: str,
                 client: ResilientRedis, stream: SampleStream, status: StatusBoard, metrics: RunMetrics):
        self.loop = loop
        self.fleet = fleet
        self.supervisor = supervisor
        self.run_id = run_id
        self.client = client
        self.stream = stream
        self.status = status
        self.metrics = metrics
        #: the Redis memory by part, as last read
        self.memory: dict[str, int] = {}
        self._last_report = time.monotonic()
        self._last_memory = 0.0

    def due(self) -> bool:
        """Whether a report is due, ``REPORT_S`` after the last; True starts the next
        interval (the driver syncs its fleet, then reports)."""
        now = time.monotonic()
        if now - self._last_report < REPORT_S:
            return False
        self._last_report = now
        return True

    def report(self) -> None:
        """The periodic report: the live workers as a metric, the memory by part when
        it is due, the status line."""
        self.metrics.set("tengen_workers_alive", len(self.fleet.running_workers()))
        if time.monotonic() - self._last_memory >= MEMORY_REPORT_S:
            self._last_memory = time.monotonic()
            self.memory = self.client.try_once(lambda: memory_by_part(self.client, self.run_id)) or self.memory
        self._line()

    def final(self) -> None:
        """The run's last report, with the memory by part now; to the run directory
        alone while Redis is away (once each: a stop must not wait out an outage)."""
        try:
            with self.client.impatient():
                self.memory = memory_by_part(self.client, self.run_id)
                self._line(final=True)
        except RedisUnavailable:
            self._line(redis=False, final=True)  # status.json at least

    def _line(self, *, redis: bool = True, final: bool = False) -> None:
        """The loop's status line with what this wiring adds (workers, servers, Redis),
        also on the run's status board while Redis answers; the run directory's sample
        of games is read from the stream then too."""
        client, stream, fleet = self.client, self.stream, self.fleet
        if redis:
            client.try_once(lambda: self.loop.keep_games(stream))
        running, servers = fleet.running_workers(), fleet.pool.running()
        line = self.loop.report(
            final=final, mean_batch=round(fleet.server_stats.get("mean_batch_size", 0.0), 1),
            workers=len(running), workers_starting=len(fleet.workers) - len(running),
            target_workers=fleet.target_workers, inference_servers=len(servers),
            inference_servers_starting=len(fleet.pool.servers) - len(servers),
            not_started=fleet.starting.report(), held_for=fleet.held_for,
            stream_length=client.try_once(stream.length) if redis else None,
            redis_outage_s=round(client.outage_seconds, 1), redis_memory=self.memory,
            components=self.supervisor.report())
        if redis:
            client.try_once(lambda: self.status.set_status("driver", line.to_json(), wait=False))
