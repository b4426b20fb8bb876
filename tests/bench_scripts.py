"""The bench scripts as modules, for the tests that check their logic: each is loaded
from its file under a name of its own (``bench_train_step``), once. bench/ is a folder
of programs, not a package, and what the scripts share lives in tengen.testing and
tengen.play, so no script needs bench/ on the import path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCH = Path(__file__).resolve().parent.parent / "bench"


def load(name: str) -> ModuleType:
    """``bench/<name>.py`` as a module."""
    module_name = f"bench_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module
