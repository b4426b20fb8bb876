"""The package a user installs: the wheel, installed on its own, and the pages it ships with.

The wheel test builds the wheel from a copy of the sources (a build in the working
tree would leave ``build/``, whose stale files a later build packs), checks its names,
installs it into a fresh virtual environment in a temporary directory and runs the
``tengen`` command there from a directory outside the repository.

Installing TensorFlow and Ray into that environment would cost minutes and gigabytes,
so the fresh environment borrows the dependencies of the interpreter running the tests:
a ``.pth`` file names that interpreter's site-packages as a plain path. A plain path in
a ``.pth`` is appended to ``sys.path`` without being a site directory, so the ``.pth``
files inside it, among them the editable install's ``__editable__`` finder of the
development checkout, are not processed: the ``tengen`` that the fresh environment
imports is the wheel's, which the test checks (``tengen.__file__``).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tengen"


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def _expected_members() -> set[str]:
    """Every module, packaged config and model, and page file of the source tree, as the wheel must name it."""
    members = set()
    # os.walk, not Path.rglob: it follows the links into the layout's folders.
    for folder, dirs, files in os.walk(PACKAGE, followlinks=True):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for name in files:
            path = Path(folder, name)
            if (path.suffix == ".py" or (path.suffix == ".yaml" and path.parent.name == "configs")
                    or (path.parent.parent.name == "models" and name != "README.md")
                    or (path.suffix in (".html", ".js", ".css") and path.parent.name == "static")):
                members.add(path.relative_to(ROOT).as_posix())
    return members


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(PACKAGE, source / "tengen", symlinks=True, ignore=ignore)
    for link in PACKAGE.iterdir():
        if link.is_symlink():  # tengen/engine -> ../engine: the folder it names comes too
            target = link.resolve()
            shutil.copytree(target, source / target.relative_to(ROOT), ignore=ignore)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(out), str(source)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("*.whl")
    return built


@pytest.mark.timeout(1200)  # the wheel's build may take its 600 s
@pytest.mark.slow
def test_the_wheel_holds_tengen_and_all_of_it(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    project = _project()
    dist_info = f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    # Nothing generic (engine/, cluster/) lands in a user's site-packages.
    assert {name.split("/")[0] for name in names} == {"tengen", dist_info}
    missing = _expected_members() - names
    assert not missing, f"the wheel lacks {sorted(missing)}"
    # the walk did follow the links
    assert {"tengen/configs/connect4.yaml", "tengen/engine/games/go.py", "tengen/web/static/play.html",
            "tengen/models/connect4/model.safetensors"} <= names
    assert wheel.stat().st_size < 3_000_000, f"{wheel.stat().st_size:,} bytes"  # the models keep it small
    entry_points = zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert re.search(r"^tengen = tengen\.cli:main$", entry_points, re.M), entry_points


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment holding the wheel, with the test interpreter's
    dependencies borrowed (see the module docstring)."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    # The running interpreter's pip installs into the new environment: no pip in it needed.
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    borrowed = dict.fromkeys(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))
    (Path(site) / "borrowed_dependencies.pth").write_text("".join(f"{path}\n" for path in borrowed))
    return venv


def _run_installed(venv: Path, cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    # Numba keys its cache by source path: keep this install's kernels out of the user's cache.
    env["NUMBA_CACHE_DIR"] = str(cwd / "numba-cache")
    return subprocess.run(list(args), cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.timeout(2400)  # build 600 s, install 420 s, then a 900 s run: the bounds in this file
@pytest.mark.slow
def test_the_installed_wheel_runs_outside_the_repository(installed, tmp_path):
    venv = installed
    done = _run_installed(venv, tmp_path, str(venv / "bin" / "python"), "-c",
                          "import sys, tengen; print(tengen.__file__); "
                          "print(any('__editable__' in name for name in sys.modules))")
    assert done.returncode == 0, done.stderr
    where, editable = done.stdout.split()
    assert Path(where).is_relative_to(venv) and editable == "False", done.stdout
    done = _run_installed(venv, tmp_path, str(venv / "bin" / "tengen"), "--version")
    assert done.returncode == 0 and done.stdout.strip() == f"tengen {_project()['version']}", done
    done = _run_installed(venv, tmp_path, str(venv / "bin" / "tengen"), "config", "list")
    assert done.returncode == 0 and "connect4" in done.stdout and "go19" in done.stdout, done
    # A packaged config by name, and a run directory relative to the working directory.
    done = _run_installed(venv, tmp_path, str(venv / "bin" / "tengen"), "train", "tictactoe", "--single-process",
                          "--run-dir", "run", "--minutes", "0.2", timeout=900)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tengen train: tictactoe in this process"), done.stdout
    for name in ("config.yaml", "log.txt", "ladder.json", "best/model.safetensors", "best/config.yaml"):
        assert (tmp_path / "run" / name).exists(), name
    assert "done:" in (tmp_path / "run" / "log.txt").read_text()
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "numba-cache")
    # The page's files, and the model that ships with it, come from the installed package.
    play = subprocess.Popen([str(venv / "bin" / "tengen"), "play", "connect4"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert play.stdout is not None
        url = play.stdout.readline().strip()  # the URL is the first line, once the model is loaded
        for path, words in (("", "<svg id=\"board\""), ("static/play.js", "drawBoard"),
                            ("static/board.js", "export function drawBoard"), ("static/style.css", ".goban")):
            with urllib.request.urlopen(url + path, timeout=60) as response:
                assert words in response.read().decode(), path
    finally:
        play.terminate()
        assert play.wait(timeout=60) == 0
    # ... and the run page's, on the run just made
    serve = subprocess.Popen([str(venv / "bin" / "tengen"), "serve", "--run-dir", "run"], cwd=tmp_path,
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert serve.stdout is not None
        url = serve.stdout.readline().strip()
        for path, words in (("", "id=\"ladder-plot\""), ("static/run.js", "linePlot"),
                            ("static/plot.js", "export function linePlot"), ("api/ladder", "\"entries\"")):
            with urllib.request.urlopen(url + path, timeout=60) as response:
                assert words in response.read().decode(), path
    finally:
        serve.terminate()
        assert serve.wait(timeout=60) == 0


# -- the pages --------------------------------------------------------------------------------

#: a path in backticks: `cluster/driver.py`, `deploy/ray/*.yaml`, `tests/golden/`
_PATH = re.compile(r"`([A-Za-z0-9_.*\-]+(?:/[A-Za-z0-9_.*\-]+)*/?)`")
#: a module in backticks: `tengen.cluster.driver`
_MODULE = re.compile(r"`(tengen(?:\.[a-z_][a-z0-9_]*)+)`")


def _repository_paths(text: str) -> list[str]:
    """The paths in backticks that name something in the repository: those whose first
    part is one of its top-level entries (not what .gitignore leaves out: a run's
    ``runs/`` is the user's, not the repository's), and every ``*.py``."""
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".gitignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")}
    top = {entry.name for entry in ROOT.iterdir()} - ignored
    return [path for path in _PATH.findall(text)
            if (path.split("/")[0] in top and "/" in path.rstrip("/")) or path.endswith(".py")]


def _missing(paths: list[str]) -> list[str]:
    return [path for path in paths if not (any(ROOT.glob(path.rstrip("/"))) if "*" in path
                                           else (ROOT / path).exists())]


def test_the_lowest_ci_pass_installs_every_lower_bound_of_pyproject():
    # .ci/lowest tests the ranges' lower ends: its constraints are exactly those bounds
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lower = {}
    for spec in dependencies:
        name = re.match(r"[A-Za-z0-9_.-]+", spec).group(0).lower()
        bound = re.search(r">=([\w.]+)", spec)
        assert bound, f"{spec}: every dependency needs a lower bound that .ci/lowest can test"
        lower[name] = bound.group(1)
    lines = (ROOT / ".ci/lowest-constraints.txt").read_text().splitlines()
    pinned = dict(line.lower().split("==") for line in lines if line.strip() and not line.startswith("#"))
    assert pinned == lower


def test_the_architecture_page_names_only_what_exists():
    text = (ROOT / "docs" / "architecture.md").read_text()
    paths = _repository_paths(text)
    assert len(paths) > 40  # the page names the modules (a broken pattern would check nothing)
    assert not _missing(paths), f"docs/architecture.md names {_missing(paths)}, which do not exist"
    modules = _MODULE.findall(text)
    gone = [m for m in modules if not ((ROOT / Path(*m.split(".")[1:])).with_suffix(".py").exists()
                                       or (ROOT / Path(*m.split(".")[1:]) / "__init__.py").exists())]
    assert not gone, f"docs/architecture.md names modules that do not exist: {gone}"
    # Every module of the package is on the page, so a new one cannot go unmentioned.
    named = set(paths) | {"/".join(m.split(".")[1:]) + ".py" for m in modules}
    # a folder's module by its folder (`engine/network.py`), the package's own by its path (`tengen/cli.py`)
    unnamed = sorted(path for path in _expected_members()
                     if path.endswith(".py") and not path.endswith("__init__.py")
                     and path not in named and path.removeprefix("tengen/") not in named)
    assert not unnamed, f"docs/architecture.md does not name {unnamed}"


def test_the_readme_links_nothing_outside_the_repository():
    text = (ROOT / "README.md").read_text()
    assert "../" not in text and "/work/" not in text
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link.split("#")[0] for link in links if not re.match(r"[a-z]+://|mailto:|#", link)]
    assert not _missing(local), f"README.md links {_missing(local)}, which are not in the repository"
    paths = _repository_paths(text)
    assert not _missing(paths), f"README.md names {_missing(paths)}, which do not exist"
    assert "docs/architecture.md" in text
