"""deploy/monitoring against a real Prometheus and a real run.

promtool lints every scrape config. Then a real Prometheus, started with the
repository's local scrape config, scrapes a short real training run (local Ray,
embedded Redis, a tiny tic-tac-toe net, two workers, SPRT gating that promotes)
through Ray's metrics agent, and every PromQL query of every Grafana dashboard
must return data for that run, except the panels marked as GPU-only. The
dashboards' structure (uids, datasource variable, metric names) is checked too.

Prometheus and promtool come from PATH, else from Debian's ``prometheus`` package,
fetched without root into ``.cache/prometheus`` (``apt-get download`` and
``dpkg-deb -x``).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import debian
import pytest
import ray
import yaml
from test_cluster import TINY_TICTACTOE

from tengen.cluster.driver import ClusterRun
from tengen.cluster.metrics import METRICS
from tengen.run.config import ConfigError, parse_config

ROOT = Path(__file__).resolve().parent.parent
MONITORING = ROOT / "deploy" / "monitoring"
PROMETHEUS_CONFIGS = MONITORING / "prometheus"
DASHBOARDS = MONITORING / "grafana" / "dashboards"

#: file -> uid; links and bookmarks use the uid, so it never changes
DASHBOARD_UIDS = {
    "overview.json": "tengen-overview",
    "selfplay-inference.json": "tengen-selfplay-inference",
    "learner.json": "tengen-learner",
    "redis.json": "tengen-redis",
}
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
#: Ray's own node metrics that the dashboards use (the reporter agent on each node)
RAY_NODE_METRICS = {"ray_node_cpu_utilization", "ray_node_mem_used", "ray_node_gpus_utilization",
                    "ray_node_gram_used"}
#: Ray records these only on nodes that have a GPU
GPU_ONLY_METRICS = {"ray_node_gpus_utilization", "ray_node_gram_used"}
#: how a panel says that it can only have data on a GPU node
GPU_MARK = "GPU nodes only."
#: the port the scrape configs expect the local Ray's metrics on (ray.metrics_export_port)
CONFIGURED_METRICS_PORT = "8080"
SD_FILE = "/tmp/ray/prom_metrics_service_discovery.json"
#: Grafana's $__rate_interval with the provisioned timeInterval of 10 s is at least 4 scrapes: 40 s
GRAFANA_VARIABLES = {"$__rate_interval": "40s", "$__interval": "10s", "$__range": "5m"}
#: the test's Prometheus scrapes faster than the configs' 10 s, for a short run
SCRAPE_INTERVAL = "1s"


# -- tools ---------------------------------------------------------------------------------
def _tools_in(folder: Path) -> tuple[Path, Path] | None:
    prometheus, promtool = folder / "prometheus", folder / "promtool"
    return (prometheus, promtool) if prometheus.exists() and promtool.exists() else None


def _fetch_debian_prometheus() -> tuple[Path, Path]:
    """Debian's prometheus package unpacked into the cache."""
    tools = _tools_in(debian.unpacked("prometheus", ["prometheus"], needs="usr/bin/promtool") / "usr" / "bin")
    assert tools, "Debian's prometheus package has no usr/bin/prometheus"
    return tools


@pytest.fixture(scope="session")
def prometheus_tools() -> tuple[Path, Path]:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if prometheus and promtool:
        return Path(prometheus), Path(promtool)
    return _fetch_debian_prometheus()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, timeout: float = 10.0) -> dict:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:
            return json.loads(reply.read())
    except urllib.error.HTTPError as e:  # Prometheus says why in the body (a bad query)
        raise AssertionError(f"{url}: {e.code} {e.read().decode(errors='replace')}") from None


# -- dashboards ----------------------------------------------------------------------------
def _load_dashboards() -> dict[str, dict]:
    return {path.name: json.loads(path.read_text()) for path in sorted(DASHBOARDS.glob("*.json"))}


def _panels(board: dict) -> list[dict]:
    """Every panel with queries (rows only group them; a collapsed row holds its own)."""
    found = []
    for panel in board["panels"]:
        if panel["type"] == "row":
            found.extend(panel.get("panels", []))
        else:
            found.append(panel)
    return found


def _queries() -> list[tuple[str, str, str, bool]]:
    """(dashboard, panel title, expr, GPU-only) for every query of every panel."""
    return [(name, panel["title"], target.get("expr", ""), GPU_MARK in panel.get("description", ""))
            for name, board in _load_dashboards().items() for panel in _panels(board)
            for target in panel.get("targets", [])]


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(?:ray|tengen)_[a-z0-9_]+", expr))


def _known_metrics() -> set[str]:
    """What Ray exports for our metrics: a ``ray_`` prefix, and histograms as their
    _bucket, _sum and _count series (checked by scraping a run)."""
    known = set(RAY_NODE_METRICS)
    for name, (kind, *_) in METRICS.items():
        if kind == "histogram":
            known |= {f"ray_{name}_bucket", f"ray_{name}_sum", f"ray_{name}_count"}
        else:
            known.add(f"ray_{name}")
    return known


def _concrete(expr: str, run_id: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    # Run ids are [A-Za-z0-9_.-] (cluster.run_dir): as a regex, each matches itself.
    expr = expr.replace("${run}", run_id).replace("$run", run_id)
    assert "$" not in expr, f"a Grafana variable the test does not know: {expr}"
    return expr


def _has_data(result: list[dict]) -> bool:
    values = [v for series in result for _, v in series.get("values", [series.get("value", (0, "NaN"))])]
    return any(math.isfinite(float(v)) for v in values)


# -- the run -------------------------------------------------------------------------------
def _render_local_config(metrics_port: int) -> str:
    config = yaml.safe_load((PROMETHEUS_CONFIGS / "local.yml").read_text())
    config["global"]["scrape_interval"] = SCRAPE_INTERVAL
    targets = [t for job in config["scrape_configs"] for static in job.get("static_configs", [])
               for t in static["targets"]]
    assert f"127.0.0.1:{CONFIGURED_METRICS_PORT}" in targets, targets
    text = yaml.safe_dump(config)
    return text.replace(f"127.0.0.1:{CONFIGURED_METRICS_PORT}", f"127.0.0.1:{metrics_port}")


class _Prometheus:
    def __init__(self, binary: Path, config: Path, data: Path):
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(data.parent / "prometheus.log", "wb")  # noqa: SIM115
        self.process = subprocess.Popen(
            [str(binary), f"--config.file={config}", f"--storage.tsdb.path={data}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--storage.tsdb.retention.time=1h"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            assert self.process.poll() is None, (data.parent / "prometheus.log").read_text()
            try:
                with urllib.request.urlopen(self.url + "/-/ready", timeout=2) as reply:
                    if reply.status == 200:
                        return
            except OSError:
                pass
            assert time.monotonic() < deadline, "Prometheus did not get ready in 60 s"
            time.sleep(0.3)

    def query(self, expr: str) -> list[dict]:
        reply = _get(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
        assert reply["status"] == "success", reply
        return reply["data"]["result"]

    def query_range(self, expr: str, start: float, end: float) -> list[dict]:
        params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": "2"}
        reply = _get(f"{self.url}/api/v1/query_range?{urllib.parse.urlencode(params)}")
        assert reply["status"] == "success", reply
        return reply["data"]["result"]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def _write_ray_service_discovery(folder: Path) -> Path:
    """The service-discovery file that Ray's head writes, written by Ray's own writer
    for the live local Ray (without the dashboard Ray does not run it)."""
    from ray._private.metrics_agent import PrometheusServiceDiscoveryWriter

    writer = PrometheusServiceDiscoveryWriter(ray.get_runtime_context().gcs_address, str(folder), str(folder))
    writer.write()
    return Path(writer.get_target_file_name())


@pytest.fixture(scope="module")
def scraped_run(tmp_path_factory, prometheus_tools):
    """A run scraped by Prometheus until every non-GPU dashboard query has had data
    (or a time limit), then stopped; Prometheus stays up for the tests."""
    prometheus_bin, _ = prometheus_tools
    work = tmp_path_factory.mktemp("monitoring")
    metrics_port = _free_port()
    config_path = work / "prometheus.yml"
    config_path.write_text(_render_local_config(metrics_port))
    prometheus = _Prometheus(prometheus_bin, config_path, work / "tsdb")
    try:
        yield _scrape_a_run(prometheus, work, metrics_port)
    finally:
        prometheus.stop()


def _scrape_a_run(prometheus: _Prometheus, work: Path, metrics_port: int) -> dict:
    config = parse_config({
        **TINY_TICTACTOE,
        # Wide SPRT bounds promote any candidate that is not far weaker, after a match
        # that records a score and an LLR: every gating panel gets data.
        "gating": {"rule": "sprt", "elo0": -400, "elo1": -300, "max_games": 32, "games_in_flight": 16,
                   "simulations": 8},
        "cluster": {**TINY_TICTACTOE["cluster"], "workers": 2},
        # The strength panels need an evaluation while two workers keep both cores busy:
        # at nice 19 the evaluator would get what they leave, which may be nothing.
        "evaluation": {"nice": 0, "positions": 32, "games": 4},
        "ray": {"metrics_export_port": metrics_port},
        "stop": {"minutes": 8},
    })
    lines: list[str] = []
    run = ClusterRun(config, work / "ttt-monitoring", log=lines.append)
    failures: list[BaseException] = []

    def target() -> None:
        try:
            run.run()
        except BaseException as e:  # re-raised in the fixture, where pytest shows it
            failures.append(e)

    thread = threading.Thread(target=target)
    start = time.time()
    thread.start()
    pending = {expr for _, _, expr, gpu in _queries() if not gpu}
    sd_file: Path | None = None
    gpus = 0.0
    # a fresh install compiles the search kernels first (a minute or more on 2 cores)
    deadline = time.monotonic() + 300
    try:
        while pending and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(3)
            pending = {expr for expr in pending if not _has_data(prometheus.query(_concrete(expr, run.run_id)))}
        if thread.is_alive():
            gpus = ray.cluster_resources().get("GPU", 0.0)
            sd_file = _write_ray_service_discovery(work)
    finally:
        run.request_stop()  # the driver stops at its loop's next pass (within a second)
        thread.join(timeout=180)
    assert not thread.is_alive(), "the run did not stop"
    if failures:
        raise failures[0]
    return {"prometheus": prometheus, "run_id": run.run_id, "start": start, "end": time.time(), "lines": lines,
            "metrics_port": metrics_port, "sd_file": sd_file, "gpus": gpus}


# -- tests: configs ------------------------------------------------------------------------
def _promtool_check(promtool: Path, config: Path) -> None:
    check = subprocess.run([str(promtool), "check", "config", str(config)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert "WARNING" not in check.stdout + check.stderr, check.stdout + check.stderr


@pytest.mark.slow
def test_local_and_compose_scrape_configs_pass_promtool(prometheus_tools):
    _, promtool = prometheus_tools
    for name in ("local.yml", "compose.yml"):
        _promtool_check(promtool, PROMETHEUS_CONFIGS / name)


@pytest.mark.timeout(1200)  # scraped_run's setup counts: Ray, up to 300 s for data, 180 s to stop
@pytest.mark.slow
def test_cluster_scrape_config_passes_promtool_with_rays_discovery_file(scraped_run, prometheus_tools, tmp_path):
    """The cluster config reads the file Ray writes; promtool checks that file too,
    here the one Ray's writer made for the run's Ray."""
    _, promtool = prometheus_tools
    sd_file = scraped_run["sd_file"]
    assert sd_file is not None and sd_file.exists(), "\n".join(scraped_run["lines"])
    text = (PROMETHEUS_CONFIGS / "cluster.yml").read_text()
    assert SD_FILE in text
    rendered = tmp_path / "cluster.yml"
    rendered.write_text(text.replace(SD_FILE, str(sd_file)))
    _promtool_check(promtool, rendered)
    # The same metrics agent that the local config scrapes, found through discovery.
    [group] = json.loads(sd_file.read_text())
    assert any(t.endswith(f":{scraped_run['metrics_port']}") for t in group["targets"]), group


def test_a_fixed_metrics_port_is_for_a_local_ray_only():
    local = parse_config({"game": {"name": "tictactoe"}, "ray": {"metrics_export_port": 8080}})
    assert local.ray.metrics_export_port == 8080
    with pytest.raises(ConfigError, match="ray: metrics_export_port applies to a local Ray only"):
        parse_config({"game": {"name": "tictactoe"}, "ray": {"address": "auto", "metrics_export_port": 8080}})


def test_compose_binds_loopback_and_takes_secrets_from_the_environment():
    text = (MONITORING / "docker-compose.yml").read_text()
    compose = yaml.safe_load(text)
    services = compose["services"]
    assert {"redis", "prometheus", "grafana"} <= set(services)
    for name, service in services.items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
    # Compose refuses to start without them (${VAR:?message}); no value is written here.
    assert "${TENGEN_REDIS_PASSWORD:?" in text and "${GRAFANA_ADMIN_PASSWORD:?" in text
    assert services["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"].startswith("${GRAFANA_ADMIN_PASSWORD:?")
    assert "requirepass" in " ".join(services["redis"]["command"])
    # Every file a service mounts from the repository exists.
    for service in services.values():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (MONITORING / source).exists(), volume


def test_grafana_provisioning_loads_the_dashboards():
    compose = yaml.safe_load((MONITORING / "docker-compose.yml").read_text())
    mounts = dict(v.split(":")[:2] for v in compose["services"]["grafana"]["volumes"] if v.startswith("./"))
    providers = yaml.safe_load((MONITORING / "grafana/provisioning/dashboards/tengen.yml").read_text())
    [provider] = providers["providers"]
    assert mounts["./grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./grafana/provisioning"] == "/etc/grafana/provisioning"
    datasources = yaml.safe_load((MONITORING / "grafana/provisioning/datasources/prometheus.yml").read_text())
    [source] = datasources["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "${TENGEN_PROMETHEUS_URL}"
    assert compose["services"]["grafana"]["environment"]["TENGEN_PROMETHEUS_URL"] == "http://prometheus:9090"
    home = compose["services"]["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert Path(home).name in DASHBOARD_UIDS and home.startswith(provider["options"]["path"] + "/")


# -- tests: dashboards ---------------------------------------------------------------------
def test_dashboards_have_stable_uids_and_a_datasource_variable():
    boards = _load_dashboards()
    assert {name: board["uid"] for name, board in boards.items()} == DASHBOARD_UIDS
    for name, board in boards.items():
        variables = {v["name"]: v for v in board["templating"]["list"]}
        source = variables["datasource"]
        assert (source["type"], source["query"]) == ("datasource", "prometheus"), name
        run = variables["run"]
        assert run["datasource"] == DATASOURCE, name
        assert re.fullmatch(r"label_values\(ray_tengen_\w+, run\)", run["query"]["query"]), name
        for panel in _panels(board):
            where = f"{name}: {panel['title']}"
            assert panel.get("datasource") == DATASOURCE, where
            assert panel.get("targets") and all(t.get("expr", "").strip() for t in panel["targets"]), where
            assert all(t.get("datasource", DATASOURCE) == DATASOURCE for t in panel["targets"]), where
            # Every tengen series is filtered by the run variable: two runs on one
            # cluster never mix on a panel.
            for target in panel["targets"]:
                for selector in re.findall(r"ray_tengen_\w+(\{[^}]*\})?", target["expr"]):
                    assert 'run=~"$run"' in selector, f"{where}: {target['expr']}"
        ids = [p["id"] for p in board["panels"]] + [p["id"] for row in board["panels"] for p in row.get("panels", [])]
        assert len(ids) == len(set(ids)), f"{name}: panel ids repeat"


def test_dashboards_use_exported_names_and_show_every_metric():
    known = _known_metrics()
    used: set[str] = set()
    for name, title, expr, _ in _queries():
        assert not re.search(r"\btengen_", expr), f"{name}: {title}: Ray exports tengen_* as ray_tengen_*: {expr}"
        names = _metric_names(expr)
        assert names, f"{name}: {title}: no metric in {expr}"
        assert names <= known, f"{name}: {title}: unknown metrics {sorted(names - known)}"
        used |= names
    for name in METRICS:
        assert any(u == f"ray_{name}" or u.startswith(f"ray_{name}_") for u in used), f"{name} is on no dashboard"


def test_exactly_the_panels_on_gpu_metrics_are_marked_gpu_only():
    for name, board in _load_dashboards().items():
        for panel in _panels(board):
            on_gpu = any(_metric_names(t["expr"]) & GPU_ONLY_METRICS for t in panel["targets"])
            marked = GPU_MARK in panel.get("description", "")
            assert on_gpu == marked, f"{name}: {panel['title']}: GPU metrics {on_gpu}, marked {marked}"


# -- tests: the real run -------------------------------------------------------------------
@pytest.mark.timeout(1200)  # scraped_run's setup counts: Ray, up to 300 s for data, 180 s to stop
@pytest.mark.slow
def test_every_dashboard_query_has_data_from_a_real_run(scraped_run):
    prometheus, run_id = scraped_run["prometheus"], scraped_run["run_id"]
    missing, gpu_queries = [], []
    for name, title, expr, gpu in _queries():
        result = prometheus.query_range(_concrete(expr, run_id), scraped_run["start"], scraped_run["end"])
        if gpu:
            gpu_queries.append((title, _has_data(result)))
        elif not _has_data(result):
            missing.append(f"{name}: {title}: {expr}")
    assert not missing, "no data for:\n" + "\n".join(missing) + "\nrun log:\n" + "\n".join(scraped_run["lines"])
    # The exemption is only for what needs a GPU: where Ray sees one, those have data too.
    assert gpu_queries and all(has == bool(scraped_run["gpus"]) for _, has in gpu_queries), gpu_queries


@pytest.mark.timeout(1200)  # scraped_run's setup counts: Ray, up to 300 s for data, 180 s to stop
@pytest.mark.slow
def test_the_run_variable_lists_the_run(scraped_run):
    prometheus = scraped_run["prometheus"]
    for board in _load_dashboards().values():
        run = next(v for v in board["templating"]["list"] if v["name"] == "run")
        metric = re.fullmatch(r"label_values\((\w+), run\)", run["query"]["query"]).group(1)
        params = urllib.parse.urlencode({"match[]": metric, "start": scraped_run["start"], "end": scraped_run["end"]})
        reply = _get(f"{prometheus.url}/api/v1/label/run/values?{params}")
        assert scraped_run["run_id"] in reply["data"], reply
