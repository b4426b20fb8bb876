"""The trained models that ship with tengen (``models/``, laid out as a run's
``best/``: ``model.safetensors``, the ``config.yaml`` it was trained with, and
``strength.json``, what it was measured at), so that a fresh install plays before it
has trained anything: ``tengen play connect4``, ``--checkpoint packaged:connect4``
wherever a checkpoint is taken. Light: the commands resolve the name before they
load TensorFlow."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path
from typing import Any

from tengen.run.run_dir import MODEL_FILE

__all__ = ["PACKAGED", "STRENGTH_FILE", "checkpoint_path", "packaged_models", "packaged_strength"]

#: how a command names the model tengen ships: ``packaged:connect4``
PACKAGED = "packaged"
#: beside a packaged model: its strength against the fixed references when it was packaged
STRENGTH_FILE = "strength.json"


def packaged_models() -> dict[str, Path]:
    """The trained models that ship with tengen, by the name of their config
    (``tictactoe``, ``connect4``): each a directory laid out as a run's ``best/``."""
    folder = Path(str(files("tengen") / "models"))
    return {path.parent.name: path.parent for path in sorted(folder.glob(f"*/{MODEL_FILE}"))}


def checkpoint_path(checkpoint: str | Path) -> Path:
    """Where a checkpoint is: the path given, or for ``packaged:GAME`` the packaged
    model's directory (FileNotFoundError naming those that ship when there is none)."""
    text = str(checkpoint)
    if text != PACKAGED and not text.startswith(PACKAGED + ":"):
        return Path(checkpoint)
    name = text.partition(":")[2]
    models = packaged_models()
    shipped = ", ".join(f"{PACKAGED}:{n}" for n in models)
    if not name:
        raise FileNotFoundError(f"{text}: say which game's model: {shipped}")
    if name not in models:
        raise FileNotFoundError(f"{text}: tengen ships no model for {name}; it ships {shipped}. Train one "
                                f"(`tengen train {name}`) and give its best/ directory")
    return models[name]


def packaged_strength(name: str) -> dict[str, Any]:
    """What the packaged model ``name`` was measured at (its ``strength.json``)."""
    return json.loads((packaged_models()[name] / STRENGTH_FILE).read_text())
