"""What a run reports about itself, per component, and the board in this process.

A status is stored as one JSON value per field (``status_fields``) and read back
through the same decoding (``status_from_fields``), on Redis (cluster/status_board.py's
``StatusBoard``) and in this process (``LocalStatusBoard``) alike; entries age out
``ttl_s`` after their last update, so a dead worker drops off the board. Both are
``StatusBoardLike``.
"""

from __future__ import annotations

import json
import threading
import time
from typing import TYPE_CHECKING, Protocol

from tengen.run.json_values import dumps
from tengen.run.run_dir import check_run_id

__all__ = ["StatusBoardLike", "LocalStatusBoard", "status_fields", "status_from_fields"]


class StatusBoardLike(Protocol):
    """Where components report their status and the driver and ``tengen status`` read it."""

    def set_status(self, component: str, status: dict, *, wait: bool = True) -> None:
        """Replace ``component``'s status (``wait=False``: try once, for a reporter that
        must not stall during an outage)."""
        ...

    def get_status(self) -> dict[str, dict]:
        """``{component: status}`` of every component that reported within the TTL."""
        ...


def status_fields(status: dict) -> dict[str, str]:
    """A status as stored: each field JSON, and the time of the update in ``_updated``."""
    return {str(k): dumps(v) for k, v in status.items()} | {"_updated": dumps(time.time())}


def status_from_fields(fields: dict) -> dict:
    return {(k.decode() if isinstance(k, bytes) else k): json.loads(v) for k, v in fields.items()}


class LocalStatusBoard(StatusBoardLike):
    """``StatusBoard`` in this process (entries expire the same way)."""

    def __init__(self, run_id: str = "local", *, ttl_s: float = 60.0):
        self.run_id = check_run_id(run_id)
        self.ttl_s = ttl_s
        self._board: dict[str, tuple[float, dict[str, str]]] = {}  # component -> (expiry, fields)
        self._lock = threading.Lock()

    def set_status(self, component: str, status: dict, *, wait: bool = True) -> None:
        fields = status_fields(status)
        with self._lock:
            self._board[component] = (time.monotonic() + self.ttl_s, fields)

    def get_status(self) -> dict[str, dict]:
        now = time.monotonic()
        with self._lock:
            self._board = {c: v for c, v in self._board.items() if v[0] > now}
            return {c: status_from_fields(v[1]) for c, v in sorted(self._board.items())}


if TYPE_CHECKING:
    # Nothing the type checker reads makes the in-process twin (tests do), so this
    # does: a twin that lacks a method of the interface is abstract and cannot be made.
    _LOCAL_TWIN: StatusBoardLike = LocalStatusBoard()
