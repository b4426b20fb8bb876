"""``tengen status`` for a person: a few lines that say whether the run lives, how far
it got and what is wrong, read from ``run_control.read_status``'s dict (``--json``
prints that dict itself), and the exit status that says the same to a script.

The run's state (``run_state``):

- ``running``: its driver holds the run's lease in Redis, or (a single-process run,
  which has no Redis) its newest report is no older than ``STALE_S``;
- ``stopped``: it wrote its final report, without an error;
- ``failed``: its final report carries the error it stopped on;
- ``lost``: no final report and nothing running: the driver was killed or its machine
  lost (``tengen train --resume`` continues it).
"""

from __future__ import annotations

import time
from typing import Any

from tengen.run import records
from tengen.run.wording import counted

__all__ = ["STALE_S", "EXIT_STATUS", "run_state", "describe_status"]

#: a report older than this, from a run that holds no lease, is not a live run's
#: (every run reports every 5 s)
STALE_S = 30.0
#: the exit status of ``tengen status`` per state: 0 running, 3 stopped cleanly, 4 stopped
#: on an error or lost (2 is a usage error, as for every command)
EXIT_STATUS = {"running": 0, "stopped": 3, "failed": 4, "lost": 4}


def run_state(status: dict[str, Any], *, now: float | None = None) -> str:
    """``running``, ``stopped``, ``failed`` or ``lost`` (see the module docstring)."""
    now = time.time() if now is None else now
    last = status.get("last_report")
    if status.get("driver"):
        return "running"
    if last is None:
        return "lost"
    if last.get("final"):
        return "failed" if last.get("error") else "stopped"
    if not status.get("live") and now - float(last.get("time", 0)) <= STALE_S:
        return "running"  # a single-process run: no Redis, a fresh report
    return "lost"


def _ago(seconds: float) -> str:
    return f"{_span(seconds)} ago"


def _span(seconds: float) -> str:
    seconds = max(0.0, float(seconds))
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 48 * 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _count(n: float) -> str:
    return f"{int(n):,}"


def _bytes(n: float) -> str:
    for unit, size in (("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{int(n)} B"


def _gating(g: dict[str, Any]) -> str:
    return (f"{g['candidate']:06d} vs {g['best']:06d}: {g['wins']}-{g['draws']}-{g['losses']} (W-D-L), "
            f"{g['decision']}")


def _trouble(last: dict[str, Any]) -> list[str]:
    """What the newest report says is wrong with the data: an outage under way, and games
    the learner lost or refused (each a count the run keeps since its start)."""
    said = []
    if last.get("redis_outage_s"):
        said.append(f"Redis unreachable for {_span(last['redis_outage_s'])} (waited out up to redis.outage_s)")
    if last.get("disk_outage_s"):
        said.append(f"the run directory's disk failing for {_span(last['disk_outage_s'])}")
    if last.get("trimmed_unread"):
        said.append(f"{counted(last['trimmed_unread'], 'game')} trimmed from the stream before the learner "
                    "read them (train.replay_window is too small for the learner's downtime: README)")
    if last.get("duplicate_games"):
        said.append(f"{counted(last['duplicate_games'], 'game')} received twice and dropped")
    if last.get("bad_entries"):
        said.append(f"{counted(last['bad_entries'], 'stream entry', 'stream entries')} the learner could not read")
    return said


def describe_status(status: dict[str, Any], *, now: float | None = None) -> list[str]:
    """The lines ``tengen status`` prints for ``status`` (read_status's dict)."""
    now = time.time() if now is None else now
    state = run_state(status, now=now)
    last = status.get("last_report")
    run = f"run {status['run_id']} in {status['run_dir']}"
    if last is None:
        head = {"running": "starting: no report yet", "lost": "no report: it stopped before its first"}[state]
        return [f"{run}: {head}"]
    when = _ago(now - last["time"])
    lines = [{
        "running": f"{run}: running for {_span(last['elapsed_s'])} (reported {when})",
        "stopped": f"{run}: stopped cleanly {when}, after {_span(last['elapsed_s'])}",
        "failed": f"{run}: stopped on an error {when}, after {_span(last['elapsed_s'])}: {last.get('error')}",
        "lost": f"{run}: not running, and it wrote no final report (killed, or its machine lost); "
                f"its last report is from {when}",
    }[state]]
    totals = last.get("totals", {})
    lines.append(f"  games {_count(last['games'])} ({last['games_per_s']:.1f}/s), "
                 f"positions {_count(totals.get('positions', 0))} ({last['positions_per_s']:.0f}/s), "
                 f"replay window {_count(last['window'])}/{_count(last['window_capacity'])}")
    losses = last.get("losses") or {}
    parts = ", ".join(f"{name.removesuffix('_loss')} {value:.3f}" for name, value in losses.items()
                      if name.endswith("_loss"))
    if last.get("loss") is None:
        learner = (f"  learner: waiting for its first batch (train.min_positions; the window holds "
                   f"{_count(last['window'])})")
    else:
        learner = f"  learner step {_count(last['learner_step'])}, loss {last['loss']:.3f}" + (f" ({parts})" if parts
                                                                                               else "")
    lines.append(learner)
    best = f"  best model {last['best']}, {counted(last['promotions'], 'promotion')} this session"
    if last.get("last_gating"):
        best += f"; last gating {_gating(last['last_gating'])}"
    lines.append(best)
    strength = status.get("strength")
    if strength:
        line = records.EvaluationLine.from_json(strength, "the status's strength")
        lines.append(f"  strength of {line.text()} ({_ago(now - line.time)})")
    workers, servers = status.get("workers") or {}, status.get("inference_servers") or {}
    if workers.get("running") is not None:
        lines.append(("  " if state == "running" else "  at its last report: ")
                     + f"{counted(workers['running'], 'self-play worker')} running"
                     + (f" (target {workers['target']})" if workers.get("target") is not None else "")
                     + (f", {workers['starting']} starting" if workers.get("starting") else "")
                     + f"; {counted(servers.get('running') or 0, 'inference server')}")
    for part, info in sorted((status.get("components") or {}).items()):
        if not isinstance(info, dict) or not (info.get("restarts") or info.get("last_error")):
            continue
        lines.append(f"  {part}: {counted(info.get('restarts') or 0, 'restart')}"
                     + (f", last error: {info['last_error']}" if info.get("last_error") else ""))
    trouble = _trouble(last)
    if trouble:
        lines.append("  " + "; ".join(trouble))
    for waiting in status.get("not_started") or []:
        lines.append(f"  not started after {waiting['waited_s']:.0f} s: {waiting['part']}: {waiting['why']}")
    memory = status.get("redis_memory") or last.get("redis_memory")
    if memory:
        used, cap = memory.get("used_memory", 0), memory.get("maxmemory") or 0
        lines.append(f"  Redis {_bytes(used)}" + (f" of {_bytes(cap)}" if cap else "")
                     + f" (samples {_bytes(memory.get('samples', 0))}, models {_bytes(memory.get('models', 0))})"
                     + (f"; {status['redis_server']}" if status.get("redis_server") else ""))
    if state in ("failed", "lost"):
        lines.append(f"  continue it with: tengen train --resume --run-dir {status['run_dir']}")
    return lines
