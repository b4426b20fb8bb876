"""Where a run's CPU goes: CPU seconds by part (self-play workers, inference servers,
the learner, the gatekeeper, Ray's own processes, Redis, the driver), read from
``/proc`` while the run goes.

Ray names its worker processes by what they run (``ray::SelfPlayActor.run_for``,
``ray::InferenceServer.evaluate``), so a part is recognised by its command line. A
process's CPU time is the last value seen for it (its utime + stime), so a process
that exits between two samples keeps what it had used at the last one: sample often
enough (every second or two) and the loss is that last stretch.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

__all__ = ["CpuByPart", "part_of", "resident_mib_by_part"]

#: command-line patterns, first match wins; the run's driver is named by its pid
PARTS = (
    ("self-play", re.compile(r"ray::SelfPlay")),
    ("inference", re.compile(r"ray::InferenceServer")),
    ("learner", re.compile(r"ray::Learner")),
    ("gatekeeper", re.compile(r"ray::Gatekeeper")),
    ("redis", re.compile(r"redis-server")),
    ("ray (idle workers)", re.compile(r"ray::IDLE")),
    ("ray (raylet, gcs, dashboard, logs)", re.compile(r"raylet|gcs_server|dashboard|log_monitor|ray/_private|"
                                                      r"ray::|runtime_env|monitor\.py")),
)
_TICKS = os.sysconf("SC_CLK_TCK")


def part_of(cmdline: str) -> str | None:
    for name, pattern in PARTS:
        if pattern.search(cmdline):
            return name
    return None


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime, fields 14-15 of stat(5) (12-13 after "(comm)"); not the reaped
    # children's cutime/cstime, which their own samples already count
    return sum(int(x) for x in fields[11:13]) / _TICKS


def _descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class CpuByPart:
    """Samples ``/proc`` every ``every_s`` seconds on a thread until ``stop()``.

    ``driver`` is the run's process; its descendants count (a local Ray's raylet and
    GCS are its children, the actors the raylet's, the embedded Redis its child in a
    session of its own), by the part their command line names, else as the driver.
    Other runs on the machine do not count, though they take CPU from this one."""

    def __init__(self, driver: int, *, every_s: float = 1.0):
        self.driver = driver
        self.every_s = every_s
        self._seen: dict[int, tuple[str, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, name="cpu-by-part", daemon=True)

    def start(self) -> CpuByPart:
        self._thread.start()
        return self

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return self.seconds()

    def seconds(self) -> dict[str, float]:
        totals: dict[str, float] = {}
        for part, seconds in self._seen.values():
            totals[part] = totals.get(part, 0.0) + seconds
        return dict(sorted(totals.items(), key=lambda item: -item[1]))

    def _sample_until_stopped(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.every_s)

    def sample(self) -> None:
        for pid in _descendants(self.driver) | {self.driver}:
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                seconds = _cpu_seconds(pid)
            except (OSError, IndexError, ValueError):
                continue  # gone between listing and reading
            part = part_of(cmdline) or "driver"
            if not cmdline.strip() and pid in self._seen:
                # an exited process not yet reaped (a zombie, as Ray's actors are while the
                # run shuts down) has an empty command line but keeps its CPU time: it stays
                # the part it was, or a run's last sample would count every actor as the driver
                part = self._seen[pid][0]
            self._seen[pid] = (part, seconds)


def resident_mib_by_part(driver: int) -> dict[str, list[float]]:
    """Each part's processes' resident memory now, MiB (``VmRSS``), the driver's
    descendants named as ``CpuByPart`` names them."""
    found: dict[str, list[float]] = {}
    for pid in _descendants(driver) | {driver}:
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue  # gone between listing and reading
        rss = re.search(r"^VmRSS:\s+(\d+) kB", status, re.M)
        if rss is not None:  # a zombie has none
            found.setdefault(part_of(cmdline) or "driver", []).append(int(rss.group(1)) / 1024)
    return found


def table(seconds: dict[str, float], wall_s: float, cores: int) -> list[str]:
    """Lines: each part's CPU seconds, its share of what was used and of the cores."""
    used = sum(seconds.values()) or 1.0
    lines = [f"{'part':36s} {'cpu s':>9s} {'of used':>8s} {'of cores':>9s}"]
    for part, value in seconds.items():
        lines.append(f"{part:36s} {value:9.1f} {value / used:8.1%} {value / (wall_s * cores):9.1%}")
    lines.append(f"{'all':36s} {used:9.1f} {1:8.0%} {used / (wall_s * cores):9.1%}")
    return lines
