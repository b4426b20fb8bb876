"""JSON as the run writes it into Redis values (metadata, the ladder, notifications,
status fields): numpy scalars and arrays as plain numbers and lists, keys sorted, no
NaN. One definition, so that the Redis parts and their in-process twins write the
same bytes."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

__all__ = ["dumps"]


def _default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(value: Any) -> str:
    return json.dumps(value, default=_default, sort_keys=True, allow_nan=False)
