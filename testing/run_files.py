"""A run directory's files made by hand, for the tests and benchmarks of what reads
one (``tengen status``, ``tengen scale``, ``tengen serve``, the benches' readers):
status lines as the training loop writes them (run/records.py's ``StatusLine``), and
a whole directory as a finished run leaves it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from tengen.run.config import load_config
from tengen.run.records import Ladder, StatusLine, ladder_entry, write_ladder, write_status
from tengen.run.run_dir import RunDir

__all__ = ["status_line", "stopped_run"]


def status_line(i: int = 0, **changes: Any) -> StatusLine:
    """The ``i``-th line of a Ray run that reports every 5 s, with its 200 worker
    counters (what makes a line kilobytes); ``changes`` replace fields."""
    line = StatusLine(
        time=1_800_000_000.0 + 5 * i, elapsed_s=5.0 * i, games=10 * i,
        totals={"games": 10 * i, "positions": 300 * i, "evaluations": 9000 * i, "cache_hits": 3000 * i,
                "moves": 310 * i},
        games_per_s=2.0, moves_per_s=62.0, positions_per_s=60.0, evaluations_per_s=1800, cache_hit_share=0.333,
        learner_step=3 * i, loss=2.0 - i * 1e-5, losses={"loss": 2.0, "policy_loss": 1.4, "value_loss": 0.6},
        window=min(20 * i, 20000), window_capacity=20000, best="000003", promotions=3, last_gating=None,
        bad_entries=0, duplicate_games=0, trimmed_unread=0, disk_outage_s=0.0, error=None, final=False,
        reported_games={f"w{k:03d}.abcdef": 1000 + i for k in range(200)},
        wiring={"mean_batch": 118.5, "workers": 16, "target_workers": 16, "inference_servers": 1,
                "stream_length": 4000, "redis_outage_s": 0.0},
    )
    return dataclasses.replace(line, **changes)


def stopped_run(path: Path, *, redis_url: str | None = None, password: str | None = None) -> RunDir:
    """A tic-tac-toe run's directory as a finished Ray run leaves it: its identity and
    config, its last status line (its learner replaced once on the way), the ladder of
    its initial network, and with ``redis_url`` the connection file of its Redis (a
    live run's, or one gone)."""
    files = RunDir(path)
    files.create_identity()
    files.config.write_text(load_config("tictactoe").to_yaml())
    components = {"learner": {"restarts": 1, "last_error": "ValueError: x", "last_report": 1_800_000_000.0,
                              "failures_in_a_row": 0}}
    write_status(files, status_line(2, best="000000", promotions=0, final=True,
                                    wiring={"workers": 2, "inference_servers": 1, "components": components}))
    write_ladder(files, Ladder((ladder_entry(0, "9f" * 32, 0.0, {"initial": True}, 1_800_000_000.0),)))
    if redis_url is not None:
        files.write_private(files.connection, json.dumps({"url": redis_url, "password": password}).encode())
    return files
