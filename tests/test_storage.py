"""Checkpoint storage (learner/storage.py) on real filesystems: a local directory,
``file://``, and ``sftp://`` to a real OpenSSH server on loopback
(testing/sftp_server.py: Debian's sshd, run unprivileged).

A writer killed with SIGKILL in the middle of its writes leaves the previous
checkpoint readable, and a Learner killed after it published a candidate resumes on
the same ``sftp://`` URL from its checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from importlib.util import find_spec
from pathlib import Path

import fsspec.config
import numpy as np
import pytest
from unavailable import unavailable

from tengen.cluster.registry import ModelRegistry
from tengen.cluster.stream import SampleStream
from tengen.engine.games import make_game
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.engine.network import weights_from_bytes
from tengen.engine.selfplay import SelfPlay, SelfPlaySettings
from tengen.learner.learner import CHECKPOINT_FILE, Learner
from tengen.learner.storage import FsspecStorage, LocalStorage, open_storage
from tengen.run.codec import encode_game, game_decoder
from tengen.run.config import ConfigError, parse_config
from tengen.testing.debian import ToolUnavailable
from tengen.testing.sftp_server import SftpServer, fetch_openssh

ROOT = Path(__file__).resolve().parent.parent
MIB = 1 << 20


@pytest.fixture(scope="session")
def sftp_server() -> Iterator[SftpServer]:
    try:
        tree = fetch_openssh()
    except ToolUnavailable as e:
        unavailable(str(e))
    work = Path(tempfile.mkdtemp(prefix="tengen-sshd-"))
    server = SftpServer(tree, work)
    yield server
    server.stop()
    shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def sftp_key(sftp_server, monkeypatch) -> str:
    """The client key, given to fsspec in this process as a user gives it: through
    fsspec's configuration (``FSSPEC_SFTP_KEY_FILENAME`` in a child's environment)."""
    monkeypatch.setitem(fsspec.config.conf, "sftp", {"key_filename": str(sftp_server.key_file)})
    return str(sftp_server.key_file)


@pytest.fixture(params=["path", "file", "memory", pytest.param("sftp", marks=pytest.mark.slow)])  # sshd fetched
def storage_url(request, tmp_path) -> str:
    """A fresh checkpoint store: a local path, a file:// URL, fsspec's in-process
    memory:// (one put per write: no rename), an sftp:// URL."""
    if request.param == "path":
        return str(tmp_path / "run" / "learner")
    if request.param == "file":
        return f"file://{tmp_path}/run/learner"
    if request.param == "memory":
        return f"memory://{uuid.uuid4().hex}/learner"
    request.getfixturevalue("sftp_key")
    return request.getfixturevalue("sftp_server").url(f"{uuid.uuid4().hex}/learner")


def _child_env(extra: dict[str, str]) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def _sftp_env(url: str) -> dict[str, str]:
    key = fsspec.config.conf.get("sftp", {}).get("key_filename")
    return {"FSSPEC_SFTP_KEY_FILENAME": key} if url.startswith("sftp://") and key else {}


# -- what any store does ------------------------------------------------------------------
def test_a_store_round_trips_and_replaces(storage_url):
    storage = open_storage(storage_url)
    assert storage.url == storage_url
    assert storage.read_bytes(CHECKPOINT_FILE) is None and not storage.exists(CHECKPOINT_FILE)

    storage.write_bytes(CHECKPOINT_FILE, b"step 10")
    assert storage.read_bytes(CHECKPOINT_FILE) == b"step 10" and storage.exists(CHECKPOINT_FILE)
    storage.write_bytes(CHECKPOINT_FILE, b"step 20")  # over the previous one
    # Another opener (a restarted learner) sees the last one.
    assert open_storage(storage_url).read_bytes(CHECKPOINT_FILE) == b"step 20"


def test_local_paths_and_file_urls_are_the_same_directory(tmp_path):
    open_storage(f"file://{tmp_path}/a").write_bytes(CHECKPOINT_FILE, b"written via file://")
    assert isinstance(open_storage(tmp_path / "a"), LocalStorage)
    assert (tmp_path / "a" / CHECKPOINT_FILE).read_bytes() == b"written via file://"
    assert open_storage(str(tmp_path / "a")).read_bytes(CHECKPOINT_FILE) == b"written via file://"


def test_a_name_is_a_plain_file_name(tmp_path):
    storage = open_storage(tmp_path)
    for name in ("sub/learner.ckpt", ".learner.ckpt.0.tmp", ""):
        with pytest.raises(ValueError, match="plain file name"):
            storage.write_bytes(name, b"x")


def test_a_temporary_file_left_behind_is_not_a_checkpoint(storage_url):
    storage = open_storage(storage_url)
    # What a writer killed before its rename leaves: half a checkpoint under a
    # temporary name beside the final one.
    half = b"\x01" * 1000
    if isinstance(storage, LocalStorage):
        (storage.directory / f".{CHECKPOINT_FILE}.k1ll3d.tmp").write_bytes(half)
    else:
        assert isinstance(storage, FsspecStorage)
        storage.fs.pipe_file(f"{storage.root}/.{CHECKPOINT_FILE}.k1ll3d.tmp", half)
    assert storage.read_bytes(CHECKPOINT_FILE) is None and not storage.exists(CHECKPOINT_FILE)
    storage.write_bytes(CHECKPOINT_FILE, b"complete")
    assert open_storage(storage_url).read_bytes(CHECKPOINT_FILE) == b"complete"


WRITER = """
import sys
from tengen.learner.storage import open_storage

storage = open_storage(sys.argv[1])
size = int(sys.argv[2])
for i in range(10_000):
    storage.write_bytes("learner.ckpt", bytes([i % 251]) * size)  # every byte says which write
    print(i, flush=True)
"""


@pytest.mark.parametrize("storage_url", ["path", pytest.param("sftp", marks=pytest.mark.slow)], indirect=True)
def test_a_killed_writer_leaves_a_whole_checkpoint(storage_url):
    """A reader sees a whole checkpoint while another process writes new ones, and
    after that process is killed mid-write (SIGKILL: no cleanup runs)."""
    size = MIB

    def assert_whole(data: bytes | None) -> None:
        length = None if data is None else len(data)
        assert length == size, f"a checkpoint of {length} bytes, not {size}"
        assert data is not None and data.count(data[:1]) == size, "bytes of two writes in one checkpoint"

    writer = subprocess.Popen([sys.executable, "-c", WRITER, storage_url, str(size)], stdout=subprocess.PIPE,
                              text=True, env=_child_env(_sftp_env(storage_url)), cwd=ROOT)
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "0", "the writer did not write"
        reader = open_storage(storage_url)
        for _ in range(10):
            assert_whole(reader.read_bytes(CHECKPOINT_FILE))
        assert writer.poll() is None, "the writer finished before it was killed"
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    finally:
        writer.kill()
    assert_whole(open_storage(storage_url).read_bytes(CHECKPOINT_FILE))


@pytest.mark.slow
def test_sftp_reconnects_once_after_the_connection_drops(sftp_server, sftp_key):
    storage = open_storage(sftp_server.url("reconnect"))
    storage.write_bytes(CHECKPOINT_FILE, b"before")
    connection = storage.fs
    sftp_server.stop()  # the server goes away with every connection it served
    sftp_server.start()
    with pytest.raises(OSError):
        connection.cat_file(f"{storage.root}/{CHECKPOINT_FILE}")
    storage.write_bytes(CHECKPOINT_FILE, b"after")  # on a new connection
    assert storage.fs is not connection
    assert storage.read_bytes(CHECKPOINT_FILE) == b"after"


# -- the config checks the URL at start ---------------------------------------------------
def _storage_error(url: str) -> str:
    with pytest.raises(ConfigError) as error:
        parse_config({"game": {"name": "tictactoe"}, "storage": url}, "run.yaml")
    return str(error.value)


def test_an_unknown_scheme_stops_the_run_at_start():
    assert _storage_error("nosuch://bucket/run") == (
        "run.yaml: storage: nosuch://bucket/run: fsspec knows no 'nosuch://' filesystem")


@pytest.mark.parametrize(("url", "package", "extra"), [("s3://bucket/run", "s3fs", "s3"),
                                                       ("gs://bucket/run", "gcsfs", "gcs")])
def test_a_missing_backend_names_what_to_install(url, package, extra):
    if find_spec(package) is not None:
        pytest.skip(f"{package} is installed here")
    # the distribution's name: "tengen" on PyPI is another project
    assert _storage_error(url) == (f"run.yaml: storage: {url} needs the {package} package: "
                                   f"pip install 'tengen-zero[{extra}]'")


def test_a_password_in_the_url_is_refused():
    assert "storage: no password in the URL" in _storage_error("sftp://tengen:secret@host/run")


def test_urls_that_open_here_pass_without_connecting():
    # 192.0.2.1 is TEST-NET-1: nothing answers there, so a connection attempt would hang.
    for url in ("runs/x/learner", "/abs/learner", "file:///tmp/learner", "sftp://tengen@192.0.2.1/srv/run",
                "memory://run"):
        assert parse_config({"game": {"name": "tictactoe"}, "storage": url}).storage == url


# -- a learner killed and resumed on sftp -------------------------------------------------
GAME = make_game("tictactoe")
CANDIDATE_EVERY = 10
#: the learner's run config, the same in the killed child and in the one that resumes
CONFIG = {"game": {"name": "tictactoe"}, "network": {"blocks": 1, "filters": 8},
          "train": {"batch_size": 16, "min_positions": 32, "max_reuse": 2.0, "candidate_every": CANDIDATE_EVERY}}

LEARNER = """
import json, os, sys, time
from tengen.run.codec import game_decoder
from tengen.run.config import parse_config
from tengen.cluster.redis_server import connect
from tengen.cluster.registry import ModelRegistry
from tengen.cluster.stream import SampleStream
from tengen.engine.games import make_game
from tengen.learner.learner import Learner

redis_url, run_id, storage, config = sys.argv[1:4] + [parse_config(json.loads(sys.argv[4]))]
client = connect(redis_url)  # the password from TENGEN_REDIS_PASSWORD
game = make_game("tictactoe")
learner = Learner(game=game, network=config.network_spec(), options=config.learner_options(),
                  source=SampleStream(client, run_id, maxlen=10_000), registry=ModelRegistry(client, run_id),
                  decode=game_decoder(game), storage=storage, seed=3)
while not (stats := learner.step(seconds=0.5))["published"]:
    pass
print(json.dumps(stats["published"]), flush=True)
time.sleep(600)  # killed here, after its last candidate's checkpoint
"""


@pytest.mark.slow
def test_a_killed_learner_resumes_from_its_sftp_checkpoint(redis_client, redis_server, sftp_server, sftp_key):
    run_id = "sftp-resume"
    stream = SampleStream(redis_client, run_id, maxlen=10_000)
    registry = ModelRegistry(redis_client, run_id)
    settings = SelfPlaySettings(search=SearchSettings(simulations=16))
    games = SelfPlay(GAME, games=16, seed=0, settings=settings).play(uniform_evaluator(9), games=30)
    stream.add_many([encode_game(g, worker_id="w0") for g in games])
    url = sftp_server.url("resume/learner")

    child = subprocess.Popen([sys.executable, "-c", LEARNER, redis_server.url, run_id, url, json.dumps(CONFIG)],
                             stdout=subprocess.PIPE, text=True, cwd=ROOT,
                             env=_child_env({"TENGEN_REDIS_PASSWORD": redis_server.password,
                                             "FSSPEC_SFTP_KEY_FILENAME": sftp_key}))
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, f"the learner exited with {child.wait()} before it published"
        published = json.loads(line)
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
    assert registry.candidates() == published

    config = parse_config(CONFIG)
    again = Learner(game=GAME, network=config.network_spec(), options=config.learner_options(), source=stream,
                    registry=registry, decode=game_decoder(GAME), storage=url, seed=3)
    assert again.resumed and again.next_version == published[-1] + 1
    # Version v was published (and checkpointed) at step v * candidate_every.
    assert again.trainer.step == published[-1] * CANDIDATE_EVERY
    # The weights are the last candidate's.
    last = config.network_spec().build()
    weights_from_bytes(last, registry.fetch(published[-1])[0])
    for restored, candidate in zip(again.model.get_weights(), last.get_weights(), strict=True):
        np.testing.assert_array_equal(restored, candidate)
