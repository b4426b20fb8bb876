"""The Redis transport against a real Redis server: the embedded server's setup, the
game codec, the sample stream and the model registry (and their in-process twins)."""

from __future__ import annotations

import dataclasses
import os
import pickle
import re
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest
import redis
import zstandard
from redis.backoff import NoBackoff
from redis.retry import Retry

from tengen.cluster.keys import RunKeys
from tengen.cluster.redis_binary import aof_files
from tengen.cluster.redis_server import (
    AOF_FILE,
    CONFIG_FILE,
    PID_FILE,
    EmbeddedRedis,
    EmbeddedRedisError,
    connect,
    redis_executable,
)
from tengen.cluster.registry import ModelRegistry
from tengen.cluster.status_board import StatusBoard
from tengen.cluster.stream import SampleStream
from tengen.engine.games import make_game
from tengen.engine.interfaces import match_id
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.engine.selfplay import GameRecord, SelfPlay, SelfPlaySettings
from tengen.run import codec
from tengen.run.codec import SampleFormatError, decode_game, decode_game_meta, encode_game, game_decoder
from tengen.run.model_registry import LocalModelRegistry, RegistryError, parse_promotion
from tengen.run.sample_stream import LocalSampleStream
from tengen.run.status_board import LocalStatusBoard

GAMES = {"tictactoe": make_game("tictactoe"), "connect4": make_game("connect4"), "go9": make_game("go", size=9)}
C4 = GAMES["connect4"]
DECODE_C4 = game_decoder(C4)


@pytest.fixture(scope="module")
def records() -> dict[str, list[GameRecord]]:
    """A few real self-play games per game (uniform evaluator, tiny searches: fast)."""
    out = {}
    for name, game in GAMES.items():
        selfplay = SelfPlay(game, games=3, seed=1, model_version=3,
                            settings=SelfPlaySettings(search=SearchSettings(simulations=8, leaves_per_round=4)))
        out[name] = selfplay.play(uniform_evaluator(game.num_actions), games=3)
    return out


def _blobs(records, n: int) -> list[bytes]:
    games = records["connect4"]
    return [encode_game(games[i % len(games)], worker_id=f"w{i}") for i in range(n)]


# -- the embedded server ---------------------------------------------------------------------


def test_server_wants_the_password(redis_server):
    no_retry = {"retry": Retry(NoBackoff(), 0)}  # an auth failure is final; don't wait on backoff
    anonymous = redis.Redis(host="127.0.0.1", port=redis_server.port, **no_retry)
    with pytest.raises(redis.AuthenticationError):
        anonymous.ping()
    wrong = redis.Redis(host="127.0.0.1", port=redis_server.port, password="not-it", **no_retry)
    with pytest.raises(redis.AuthenticationError):
        wrong.ping()
    assert redis_server.client().ping()


def test_server_is_loopback_only_with_aof_and_a_private_config(redis_server, redis_client):
    config = redis_client.config_get("*")
    assert config["bind"] == "127.0.0.1"
    assert config["protected-mode"] == "yes"
    assert config["appendonly"] == "yes" and config["appendfsync"] == "everysec"
    assert config["save"] == "" and config["maxmemory-policy"] == "noeviction"
    assert config["dir"] == str(redis_server.data_dir)
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    assert redis_server.password not in redis_server.url
    conf = redis_server.data_dir / CONFIG_FILE
    assert stat.S_IMODE(conf.stat().st_mode) == 0o600
    with open(f"/proc/{redis_server.pid}/cmdline", "rb") as f:
        assert redis_server.password.encode() not in f.read()
    redis_client.set("k", "v")
    assert (redis_server.data_dir / AOF_FILE).exists()


@pytest.mark.usefixtures("each_redis_kind")
def test_restart_on_the_same_directory_recovers_the_stream(tmp_path, records):
    blobs = _blobs(records, 5)
    with EmbeddedRedis(data_dir=tmp_path) as server:
        stream = SampleStream(server.client(), "run1", maxlen=1000)
        stream.ensure_group("learner")
        ids = stream.add_many(blobs)
        first_pid = server.pid
    assert not server.running
    server.stop()  # idempotent
    assert sum(path.stat().st_size for path in aof_files(tmp_path)) > sum(map(len, blobs))
    with EmbeddedRedis(data_dir=tmp_path) as again:
        assert again.pid != first_pid
        stream = SampleStream(again.client(), "run1", maxlen=1000)
        assert stream.length() == 5
        rebuilt = stream.replay(DECODE_C4)
        assert [r.moves.tolist() for r in rebuilt] == [DECODE_C4(b).moves.tolist() for b in blobs]
        got = stream.read("learner", "c", count=10, block_ms=0, decode=DECODE_C4)  # the group survived too
        assert [i for i, _ in got] == ids


@pytest.mark.usefixtures("each_redis_kind")
def test_a_driver_that_dies_does_not_leave_the_server_running(tmp_path):
    script = (
        "import sys\n"
        "from cluster.redis_server import EmbeddedRedis\n"
        f"server = EmbeddedRedis(data_dir={str(tmp_path)!r}).start()\n"
        "print(server.pid, flush=True)\n"
        "raise SystemExit('the driver crashed')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parent.parent)
    assert "the driver crashed" in done.stderr
    pid = int(done.stdout.split()[0])
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)


@pytest.mark.usefixtures("each_redis_kind")
def test_a_driver_killed_with_sigkill_takes_its_server_along(tmp_path):
    script = (
        "import time\n"
        "from cluster.redis_server import EmbeddedRedis\n"
        f"server = EmbeddedRedis(data_dir={str(tmp_path)!r}).start()\n"
        "print(server.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    driver = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=Path(__file__).resolve().parent.parent)
    pid = int(driver.stdout.readline())
    assert _alive(pid)
    driver.kill()  # no atexit hook runs
    driver.wait()
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid)
    # ... and the next owner of the directory starts cleanly on the same AOF.
    with EmbeddedRedis(data_dir=tmp_path) as again:
        assert again.client().ping() and again.stopped_orphan is None


def test_the_server_runs_in_its_own_session(tmp_path):
    # A Ctrl-C at the terminal goes to the driver's process group, not to Redis: the
    # driver's final checkpoint and save still need it.
    with EmbeddedRedis(data_dir=tmp_path) as server:
        assert os.getsid(server.pid) == server.pid != os.getsid(0)
        assert os.getpgid(server.pid) != os.getpgid(0)


@pytest.mark.usefixtures("each_redis_kind")
def test_one_server_per_directory(tmp_path):
    with EmbeddedRedis(data_dir=tmp_path) as server:
        with pytest.raises(EmbeddedRedisError, match=f"another tengen process holds .* pid {server.pid}"):
            EmbeddedRedis(data_dir=tmp_path).start()
        assert server.client().ping()  # untouched


@pytest.mark.usefixtures("each_redis_kind")
def test_a_server_left_behind_is_stopped_before_a_new_one_starts(tmp_path, records):
    # As if a driver died where no parent-death signal exists: its server lives on,
    # holding the AOF, and the directory lock is free.
    with EmbeddedRedis(data_dir=tmp_path) as first:
        config = tmp_path / CONFIG_FILE
        password, port = first.password, first.port
        SampleStream(first.client(), "run1", maxlen=100).add_many(_blobs(records, 3))
    orphan = subprocess.Popen([redis_executable(), str(config)], stdout=subprocess.DEVNULL, start_new_session=True)
    (tmp_path / PID_FILE).write_text(f"{orphan.pid}\n")
    probe = redis.Redis(port=port, password=password, retry=Retry(NoBackoff(), 0))
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            probe.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    with EmbeddedRedis(data_dir=tmp_path, password=password) as server:
        assert server.stopped_orphan == orphan.pid
        assert orphan.wait(timeout=10) == 0  # a clean shutdown: SIGTERM, AOF flushed
        assert SampleStream(server.client(), "run1", maxlen=100).length() == 3


@pytest.mark.usefixtures("each_redis_kind")
def test_the_data_directory_and_its_files_are_the_owners_alone(tmp_path):
    with EmbeddedRedis(data_dir=tmp_path / "redis", maxmemory_bytes=64 << 20) as server:
        client = server.client()
        client.set("k", "v")
        assert client.config_get("maxmemory")["maxmemory"] == str(64 << 20)
        time.sleep(1.1)  # the AOF exists once its first write is flushed
        assert stat.S_IMODE(server.data_dir.stat().st_mode) == 0o700
        aof = aof_files(server.data_dir)  # 6.2's one file, or 7's directory of them
        assert aof
        for path in (*aof, server.data_dir / CONFIG_FILE, server.data_dir / "redis.log"):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        for directory in {path.parent for path in aof}:
            assert stat.S_IMODE(directory.stat().st_mode) == 0o700, directory


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


def test_a_taken_port_fails_with_the_server_log(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(EmbeddedRedisError, match="Address already in use"):
            EmbeddedRedis(data_dir=tmp_path, port=port, start_timeout_s=5).start()


def test_connect_takes_the_password_from_the_environment(redis_server, monkeypatch):
    with pytest.raises(ValueError, match="TENGEN_REDIS_PASSWORD"):
        connect(f"redis://:secret@127.0.0.1:{redis_server.port}/0")
    monkeypatch.setenv("TENGEN_REDIS_PASSWORD", redis_server.password)
    assert connect(redis_server.url).ping()
    monkeypatch.delenv("TENGEN_REDIS_PASSWORD")
    with pytest.raises(redis.AuthenticationError):
        connect(redis_server.url, retry=Retry(NoBackoff(), 0)).ping()
    assert connect(redis_server.url, password=redis_server.password).ping()


def test_connect_reads_the_password_from_a_mounted_file(redis_server, monkeypatch, tmp_path):
    # A Kubernetes Secret mounted on the pod: the value ends with a newline.
    secret = tmp_path / "password"
    secret.write_text(redis_server.password + "\n")
    secret.chmod(0o400)
    monkeypatch.delenv("TENGEN_REDIS_PASSWORD", raising=False)
    monkeypatch.setenv("TENGEN_REDIS_PASSWORD_FILE", str(secret))
    assert connect(redis_server.url).ping()
    secret.chmod(0o644)
    with pytest.raises(ValueError, match="everyone may read"):
        connect(redis_server.url)
    monkeypatch.setenv("TENGEN_REDIS_PASSWORD_FILE", str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="TENGEN_REDIS_PASSWORD_FILE names .*missing"):
        connect(redis_server.url)


# -- the codec ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(GAMES))
def test_codec_round_trips_real_games(records, name):
    game = GAMES[name]
    for record in records[name]:
        blob = encode_game(record, worker_id="worker-7", created=1234.5)
        back, meta = decode_game_meta(blob, planes_shape=game.planes_shape, num_actions=game.num_actions,
                                      game_name=game.name)
        assert meta.worker_id == "worker-7" and meta.created == 1234.5 and meta.version == codec.FORMAT_VERSION
        assert back.game == record.game == game.name
        assert back.planes.dtype == np.uint8 and np.array_equal(back.planes, record.planes)
        assert back.policy.dtype == np.float32 and np.array_equal(back.policy, record.policy)  # float32: exact
        assert np.array_equal(back.value, record.value) and np.array_equal(back.moves, record.moves)
        # what the search saw at each move, exactly
        assert back.search_value.dtype == np.float32 and np.array_equal(back.search_value, record.search_value)
        assert back.search_visits.dtype == np.int32 and np.array_equal(back.search_visits, record.search_visits)
        assert back.full_search.dtype == np.bool_ and np.array_equal(back.full_search, record.full_search)
        assert (back.outcome, back.model_version, back.resigned, back.would_resign) == (
            record.outcome, 3, record.resigned, record.would_resign)
        assert back.planes.flags.writeable and back.policy.flags.writeable
        # packbits: the planes cost an eighth of a byte per cell before zstd
        assert len(blob) < record.planes.size / 8 + record.policy.nbytes + 1024


def test_a_game_keeps_its_id_and_gets_one_when_it_has_none(records):
    record = records["connect4"][0]
    named = dataclasses.replace(record, game_id="w003.1f2e:17")
    assert DECODE_C4(encode_game(named, worker_id="w003")).game_id == "w003.1f2e:17"
    first, second = (DECODE_C4(encode_game(record, worker_id="w")).game_id for _ in range(2))
    assert first and second and first != second


def test_version_1_entries_still_read(records):
    record = records["connect4"][0]
    header = _header(record)
    header["version"] = 1
    del header["game_id"]
    for name in ("search_value", "search_visits", "full_search"):
        del header["arrays"][name]
    back, meta = decode_game_meta(_pack(header), planes_shape=C4.planes_shape, num_actions=C4.num_actions,
                                  game_name=C4.name)
    assert meta.version == 1 and meta.game_id is None and back.game_id is None
    assert np.array_equal(back.moves, record.moves)
    assert back.search_value is None and back.search_visits is None and back.full_search is None


def test_version_2_entries_still_read_without_search_arrays(records):
    record = records["connect4"][0]
    header = _header(record)
    header["version"] = 2
    for name in ("search_value", "search_visits", "full_search"):
        del header["arrays"][name]
    back, meta = decode_game_meta(_pack(header), planes_shape=C4.planes_shape, num_actions=C4.num_actions,
                                  game_name=C4.name)
    assert meta.version == 2 and back.game_id == header["game_id"] and np.array_equal(back.moves, record.moves)
    assert back.search_value is None and back.search_visits is None and back.full_search is None


def test_a_record_without_search_arrays_still_encodes(records):
    bare = dataclasses.replace(records["connect4"][0], search_value=None, search_visits=None, full_search=None)
    back = DECODE_C4(encode_game(bare, worker_id="w"))
    assert back.search_value is None and np.array_equal(back.moves, bare.moves)
    with pytest.raises(SampleFormatError, match="all three or none"):
        encode_game(dataclasses.replace(bare, search_value=np.zeros(bare.length, np.float32)), worker_id="w")
    with pytest.raises(SampleFormatError, match="search_visits is \\[2\\], the game has"):
        encode_game(dataclasses.replace(records["connect4"][0], search_visits=np.zeros(2, np.int32)), worker_id="w")


def test_a_flipped_byte_is_caught_by_the_frame_checksum(records):
    record = max(records["connect4"], key=lambda r: len(r.value))
    blob = bytearray(encode_game(record, worker_id="w"))
    original = zstandard.decompress(bytes(blob))
    caught = 0
    for offset in range(12, len(blob) - 4, max(1, len(blob) // 50)):  # past the frame header
        flipped = bytearray(blob)
        flipped[offset] ^= 0x10
        try:
            back = DECODE_C4(bytes(flipped))
        except SampleFormatError:
            caught += 1
            continue
        # A flip that decodes (e.g. a match offset onto equal bytes) restored the same
        # content: the checksum is over the content, and it matched.
        assert zstandard.decompress(bytes(flipped)) == original and np.array_equal(back.moves, record.moves)
    assert caught >= 40


def test_codec_round_trips_a_game_with_no_recorded_positions():
    # a game that resigned at once, or whose moves were all cheap searches
    empty = GameRecord(game="connect4", planes=np.zeros((0, 6, 7, 3), np.uint8), policy=np.zeros((0, 7), np.float32),
                       value=np.zeros(0, np.float32), moves=np.array([3], np.int32), outcome=-1.0, model_version=0,
                       resigned=True, would_resign=None)
    back = DECODE_C4(encode_game(empty, worker_id="w"))
    assert back.planes.shape == (0, 6, 7, 3) and back.policy.shape == (0, 7) and back.resigned


def _header(record: GameRecord) -> dict:
    return msgpack.unpackb(zstandard.decompress(encode_game(record, worker_id="w")), raw=False)


def _pack(header) -> bytes:
    return zstandard.ZstdCompressor().compress(msgpack.packb(header, use_bin_type=True))


def _set_array(header: dict, name: str, array: np.ndarray) -> dict:
    header["arrays"][name]["data"] = array.tobytes()
    header["arrays"][name]["shape"] = list(array.shape)
    return header


def _corrupt(record: GameRecord, case: str) -> bytes:
    """``record``'s entry with one thing wrong (see CORRUPTIONS)."""
    h = _header(record)
    policy, value = record.policy.astype("<f4"), record.value.astype("<f4")
    if case == "not zstd":
        return b"plain bytes, not a zstd frame at all"
    if case == "not msgpack":
        return zstandard.compress(b"\xc1\xc1\xc1 never valid msgpack")
    if case == "not a map":
        return _pack([1, 2, 3])
    if case == "pickle":
        return pickle.dumps(record)
    if case == "zstd pickle":
        return zstandard.compress(pickle.dumps(record))
    if case == "format tag":
        h["format"] = "leela-chunk"
    elif case == "version":
        h["version"] = 4
    elif case == "version 1 with a game id":
        h["version"] = 1
    elif case == "version type":
        h["version"] = 1.0
    elif case == "extra field":
        h["surprise"] = 1
    elif case == "game":
        h["game"] = "go9"
    elif case == "planes shape":
        h["arrays"]["planes"]["shape"] = [len(value), 7, 6, 3]
    elif case == "policy shape":
        _set_array(h, "policy", np.full((len(value), 9), 1 / 9, "<f4"))
    elif case == "length":
        h["length"] = len(value) + 1
    elif case == "moves fewer than positions":
        _set_array(h, "moves", record.moves[:2].astype("<i4"))
    elif case == "data size":
        h["arrays"]["value"]["data"] = value.tobytes()[:-4]
    elif case == "dtype":
        _set_array(h, "policy", policy.astype("<f2"))
        h["arrays"]["policy"]["dtype"] = "<f2"
    elif case == "nan policy":
        policy[0, 0] = np.nan
        _set_array(h, "policy", policy)
    elif case == "negative policy":
        policy[0] = 0.5
        policy[0, 0], policy[0, 1] = -0.5, 1.0
        policy[0, 2:] = 0.0
        _set_array(h, "policy", policy)
    elif case == "policy sum":
        policy[1] *= 1.01
        _set_array(h, "policy", policy)
    elif case == "value range":
        value[0] = 1.5
        _set_array(h, "value", value)
    elif case == "move range":
        _set_array(h, "moves", np.full(len(record.moves), 7, "<i4"))
    elif case == "planes encoding":
        h["arrays"]["planes"]["encoding"] = "raw"
    elif case == "planes padding":
        data = bytearray(h["arrays"]["planes"]["data"])
        data[-1] |= 1  # connect4: L * 126 bits, so the last byte has unused bits
        h["arrays"]["planes"]["data"] = bytes(data)
    elif case == "outcome":
        h["outcome"] = 3.0
    elif case == "version 2 with search arrays":
        h["version"] = 2
    elif case == "half the search arrays":
        del h["arrays"]["search_visits"]
    elif case == "search value range":
        _set_array(h, "search_value", np.full(len(record.moves), -1.5, "<f4"))
    elif case == "search visits negative":
        _set_array(h, "search_visits", np.full(len(record.moves), -1, "<i4"))
    elif case == "full search not 0/1":
        _set_array(h, "full_search", np.full(len(record.moves), 2, "|u1"))
    elif case == "full searches not the positions":
        full = record.full_search.astype("|u1")
        full[0] ^= 1
        _set_array(h, "full_search", full)
    elif case == "search value length":
        _set_array(h, "search_value", np.zeros(len(record.moves) + 1, "<f4"))
    elif case == "bomb":
        return zstandard.ZstdCompressor().compress(bytes(50_000_000))
    elif case == "bomb without size":
        return zstandard.ZstdCompressor(write_content_size=False).compress(bytes(50_000_000))
    elif case == "oversize":
        return bytes(codec.MAX_BLOB_BYTES + 1)
    else:
        raise AssertionError(case)
    return _pack(h)


CORRUPTIONS = {
    "not zstd": "not a zstd frame",
    "not msgpack": "not msgpack",
    "not a map": "must be a map",
    "pickle": "not a zstd frame",
    "zstd pickle": "not msgpack",
    "format tag": "format tag is 'leela-chunk'",
    "version": "unknown format version 4; this reader knows version(s) 1, 2, 3",
    "version 2 with search arrays": "arrays must be exactly ['moves', 'planes', 'policy', 'value']",
    "half the search arrays": "arrays must be exactly",
    "search value range": "search_value holds numbers outside [-1, 1]",
    "search visits negative": "search_visits holds negative counts",
    "full search not 0/1": "full_search must hold only 0/1 values",
    "full searches not the positions": "recorded positions",
    "search value length": "search_value: shape",
    "version 1 with a game id": "unexpected ['game_id']",
    "version type": "unknown format version 1.0",
    "extra field": "unexpected ['surprise']",
    "game": "this run plays 'connect4'",
    "planes shape": "planes: shape",
    "policy shape": "policy: shape",
    "length": "planes: shape",
    "moves fewer than positions": "lengths disagree",
    "data size": "value: ",
    "dtype": "policy: dtype '<f2'",
    "nan policy": "non-finite",
    "negative policy": "negative",
    "policy sum": "policy row 1 sums to",
    "value range": "outside [-1, 1]",
    "move range": "moves outside 0..6",
    "planes encoding": "encoding 'raw'",
    "planes padding": "padding bits",
    "outcome": "outcome must be",
    "bomb": "more than the",
    "bomb without size": "larger than",
    "oversize": "larger than the",
}


@pytest.mark.parametrize("case", sorted(CORRUPTIONS))
def test_codec_refuses_each_corruption_with_a_reason(records, case):
    # the longest record whose packed planes (L * 126 bits) leave unused bits in the
    # last byte, for the padding case
    record = max((r for r in records["connect4"] if len(r.value) * 126 % 8), key=lambda r: len(r.value))
    blob = _corrupt(record, case)
    with pytest.raises(SampleFormatError, match=re.escape(CORRUPTIONS[case])):
        DECODE_C4(blob)


def test_encoder_refuses_what_a_reader_would(records):
    record = records["connect4"][0]
    bad_planes = record.planes.copy()
    bad_planes[0, 0, 0, 0] = 2
    with pytest.raises(SampleFormatError, match="0/1"):
        encode_game(GameRecord(**{**record.__dict__, "planes": bad_planes}), worker_id="w")
    bad_policy = record.policy.copy()
    bad_policy[0] = 0
    with pytest.raises(SampleFormatError, match="sums to"):
        encode_game(GameRecord(**{**record.__dict__, "policy": bad_policy}), worker_id="w")
    float_planes = record.planes.astype(np.float32)  # 0/1 floats are fine
    blob = encode_game(GameRecord(**{**record.__dict__, "planes": float_planes}), worker_id="w")
    assert np.array_equal(DECODE_C4(blob).planes, record.planes)


def test_decode_game_checks_the_game_it_is_told(records):
    blob = encode_game(records["go9"][0], worker_id="w")
    go9 = GAMES["go9"]
    assert decode_game(blob, planes_shape=go9.planes_shape, num_actions=go9.num_actions, game_name="go9")
    with pytest.raises(SampleFormatError, match="'go9' game"):
        DECODE_C4(blob)


# -- the sample stream (Redis and in-process) ------------------------------------------------------


@pytest.fixture(params=["redis", "local"])
def make_stream(request):
    if request.param == "redis":
        client = request.getfixturevalue("redis_client")
        return lambda maxlen=10_000: SampleStream(client, "test", maxlen=maxlen)
    return lambda maxlen=10_000: LocalSampleStream("test", maxlen=maxlen)


def _forged(records) -> list[tuple[str, bytes]]:
    wrong_shape = _header(records["connect4"][0])
    wrong_shape["arrays"]["planes"]["shape"] = [len(records["connect4"][0].value), 3, 3, 3]
    return [
        ("random", np.random.default_rng(0).bytes(300)),
        ("pickle", pickle.dumps({"planes": np.zeros(3)})),
        ("wrong shape", _pack(wrong_shape)),
    ]


def _trim_exactly(stream, maxlen: int) -> None:
    """What MAXLEN does to a stream whose reader is away (Redis's ``~`` trims in whole
    nodes of 100 entries: this trims to the entry)."""
    if isinstance(stream, SampleStream):
        stream.client.xtrim(stream.keys.samples, maxlen=maxlen, approximate=False)


def test_games_trimmed_before_the_learner_read_them_are_counted_once(make_stream, records):
    stream = make_stream(maxlen=10)
    stream.ensure_group("learner")
    blobs = _blobs(records, 4)
    stream.add_many(blobs[i % 4] for i in range(30))  # the learner is down: 30 games, room for 10
    _trim_exactly(stream, 10)
    assert stream.trimmed_unread("learner") == 0  # known once it reads past the gap
    assert len(stream.read("learner", "c0", count=100, block_ms=0, decode=DECODE_C4)) == 10
    assert stream.trimmed_unread("learner") == 20
    stream.add_many(blobs)
    assert len(stream.read("learner", "c0", count=100, block_ms=0, decode=DECODE_C4)) == 4
    assert stream.trimmed_unread("learner") == 20  # counted once
    # a learner that restarts after a long absence moves its group to the end: the
    # games trimmed meanwhile are counted then
    stream.add_many(blobs[i % 4] for i in range(15))
    _trim_exactly(stream, 10)
    stream.move_group_to_end("learner")
    assert stream.trimmed_unread("learner") == 25


def test_forged_entries_are_counted_and_skipped(make_stream, records):
    stream = make_stream()
    stream.ensure_group("learner")
    good = _blobs(records, 2)
    stream.add(good[0])
    for _, blob in _forged(records):
        stream.add(blob)
    stream.add(good[1])
    got = stream.read("learner", "c0", count=100, block_ms=0, decode=DECODE_C4)
    assert [r.moves.tolist() for _, r in got] == [DECODE_C4(b).moves.tolist() for b in good]
    assert stream.bad_entries == 3
    reasons = "\n".join(stream.last_errors)
    assert "not a zstd frame" in reasons and "planes: shape" in reasons
    assert stream.pending("learner") == 2  # the bad ones were acknowledged, the good wait for us
    assert stream.ack("learner", [i for i, _ in got]) == 2
    assert stream.pending("learner") == 0 and stream.lag("learner") == 0
    assert len(stream.replay(DECODE_C4)) == 2 and stream.bad_entries == 6


def test_redis_entry_without_the_game_field_is_skipped(redis_client, records):
    stream = SampleStream(redis_client, "test", maxlen=100)
    stream.ensure_group("g")
    redis_client.xadd(stream.keys.samples, {b"x": b"1"})
    stream.add(_blobs(records, 1)[0])
    assert len(stream.read("g", "c", count=10, block_ms=0, decode=DECODE_C4)) == 1
    assert stream.bad_entries == 1 and "no 'g' field" in stream.last_errors[0]


def test_a_group_delivers_each_entry_once_across_consumers(make_stream, records):
    stream = make_stream()
    stream.ensure_group("learner")
    stream.ensure_group("learner")  # idempotent
    ids = stream.add_many(_blobs(records, 20))
    assert stream.lag("learner") == 20
    seen: dict[str, list[bytes]] = {"a": [], "b": []}
    while True:
        batches = [(c, stream.read("learner", c, count=3, block_ms=0, decode=DECODE_C4)) for c in ("a", "b")]
        if not any(batch for _, batch in batches):
            break
        for consumer, batch in batches:
            seen[consumer].extend(i for i, _ in batch)
            stream.ack("learner", [i for i, _ in batch])
    assert seen["a"] and seen["b"]
    assert sorted(seen["a"] + seen["b"]) == sorted(ids) and len(set(seen["a"]) & set(seen["b"])) == 0
    assert stream.lag("learner") == 0


def test_blocking_read_returns_empty_after_the_wait(make_stream):
    stream = make_stream()
    stream.ensure_group("g")
    start = time.monotonic()
    assert stream.read("g", "c", count=5, block_ms=50, decode=DECODE_C4) == []
    assert time.monotonic() - start >= 0.04


def test_a_dead_consumers_entries_are_claimed(make_stream, records):
    stream = make_stream()
    stream.ensure_group("learner")
    ids = stream.add_many(_blobs(records, 6))
    taken = stream.read("learner", "dead", count=4, block_ms=0, decode=DECODE_C4)  # never acked
    assert stream.claim_stale("learner", "alive", min_idle_ms=60_000, decode=DECODE_C4) == []
    time.sleep(0.03)
    claimed = stream.claim_stale("learner", "alive", min_idle_ms=20, decode=DECODE_C4)
    assert [i for i, _ in claimed] == [i for i, _ in taken] == ids[:4]
    stream.ack("learner", [i for i, _ in claimed])
    rest = stream.read("learner", "alive", count=10, block_ms=0, decode=DECODE_C4)
    assert [i for i, _ in rest] == ids[4:]
    stream.ack("learner", [i for i, _ in rest])
    assert stream.pending("learner") == 0


def test_claiming_an_entry_trimmed_while_pending_acks_it(redis_client, records):
    stream = SampleStream(redis_client, "test", maxlen=100)
    stream.ensure_group("g")
    stream.add_many(_blobs(records, 3))
    stream.read("g", "dead", count=3, block_ms=0, decode=DECODE_C4)
    redis_client.xtrim(stream.keys.samples, maxlen=1, approximate=False)
    claimed = stream.claim_stale("g", "alive", min_idle_ms=0, decode=DECODE_C4)
    assert len(claimed) == 1 and stream.trimmed_entries == 2
    stream.ack("g", [i for i, _ in claimed])
    assert stream.pending("g") == 0


def test_maxlen_trims_approximately(redis_client):
    stream = SampleStream(redis_client, "test", maxlen=100)
    for _ in range(10):
        stream.add_many([b"x"] * 100)
    # MAXLEN ~ trims whole radix-tree nodes (100 entries each by default)
    assert 100 <= stream.length() <= 250
    local = LocalSampleStream("test", maxlen=100)
    local.add_many([b"x"] * 1000)
    assert local.length() == 100


def test_replay_rebuilds_the_window(make_stream, records):
    stream = make_stream()
    blobs = _blobs(records, 700)  # more than one page of XRANGE
    ids = stream.add_many(blobs[:400])
    stream.add(b"forged")
    stream.add_many(blobs[400:])
    moves = [DECODE_C4(b).moves.tolist() for b in blobs]
    assert [r.moves.tolist() for r in stream.replay(DECODE_C4)] == moves
    assert stream.bad_entries == 1
    assert [r.moves.tolist() for r in stream.replay(DECODE_C4, count=5)] == moves[-5:]
    assert [r.moves.tolist() for r in stream.replay(DECODE_C4, end=ids[9])] == moves[:10]
    assert [r.moves.tolist() for r in stream.replay(DECODE_C4, count=3, end=ids[9])] == moves[7:10]
    # the newest games past a bad entry: it is skipped and counted, and the count is of games
    stream.add(b"forged")
    stream.add(blobs[0])
    assert [r.moves.tolist() for r in stream.replay(DECODE_C4, count=3)] == moves[-2:] + moves[:1]
    assert stream.bad_entries == 2  # the full replay's, and this one's
    assert stream.replay(DECODE_C4, count=0) == []
    moves.append(moves[0])
    newest = stream.replay(DECODE_C4, max_positions=100)
    lengths = [len(r.value) for r in newest]
    assert sum(lengths) >= 100 and sum(lengths) - lengths[0] < 100
    assert [r.moves.tolist() for r in newest] == moves[-len(newest):]


def test_move_group_to_end_skips_what_a_replay_covers(make_stream, records):
    stream = make_stream()
    stream.ensure_group("learner")
    stream.add_many(_blobs(records, 4))
    stream.read("learner", "crashed", count=2, block_ms=0, decode=DECODE_C4)  # left pending
    last = stream.move_group_to_end("learner")
    assert len(stream.replay(DECODE_C4, end=last)) == 4
    assert stream.pending("learner") == 0 and stream.lag("learner") == 0
    new = stream.add(_blobs(records, 1)[0])
    assert [i for i, _ in stream.read("learner", "next", count=10, block_ms=0, decode=DECODE_C4)] == [new]


def test_the_registry_hash_is_the_network_modules():
    from tengen.engine.network import blob_sha256 as network_sha256
    from tengen.run.model_registry import blob_sha256

    assert blob_sha256(b"weights") == network_sha256(b"weights")


def test_run_keys_are_namespaced():
    keys = RunKeys("c4-run.1")
    assert keys.samples == "tengen:{c4-run.1}:samples" and keys.model(42) == "tengen:{c4-run.1}:model:000042"
    with pytest.raises(ValueError, match="run_id"):
        RunKeys("has space")


# -- the model registry -------------------------------------------------------------------------


def verdict(candidate: int, best: int, decision: str, wins: int = 30) -> dict:
    return {"candidate": candidate, "best": best, "decision": decision, "wins": wins, "draws": 0, "losses": 10,
            "elo": 35.0, "elo_low": 10.0, "elo_high": 60.0, "llr": None, "by": "threshold"}


@pytest.fixture(params=["redis", "local"])
def registry(request):
    if request.param == "redis":
        return ModelRegistry(request.getfixturevalue("redis_client"), "test")
    return LocalModelRegistry("test")


def test_registry_publish_fetch_and_candidates(registry):
    assert registry.best_version() is None and registry.latest_candidate() is None and registry.ladder() == []
    sha = registry.publish(1, b"weights-1", {"step": 100})
    assert sha == registry.publish(1, b"weights-1", {"step": 100})  # same bytes again: fine
    with pytest.raises(RegistryError, match="000001"):
        registry.publish(1, b"other bytes", {})
    registry.publish(12, b"weights-12", {"step": 1200, "loss": np.float32(0.5)})
    assert registry.fetch(12) == (b"weights-12", {"step": 1200, "loss": 0.5})
    assert registry.candidates() == [1, 12] and registry.latest_candidate() == 12
    with pytest.raises(RegistryError, match="000007 is not in the registry"):
        registry.fetch(7)
    with pytest.raises(RegistryError, match="000007"):
        registry.promote(7, elo=0.0, result={"initial": True})


def test_promotion_sets_best_extends_the_ladder_and_notifies(registry):
    sha = registry.publish(3, b"weights-3", {})
    subscription = registry.subscribe()
    if isinstance(registry, ModelRegistry):
        assert subscription.get_message(timeout=1.0) is None  # consume the subscribe confirmation
    registry.promote(3, elo=35.5, result={**verdict(3, 2, "promote"), "elo": np.float64(35.5)})
    message = None
    deadline = time.monotonic() + 5
    while message is None and time.monotonic() < deadline:
        message = parse_promotion(subscription.get_message(timeout=0.5))
    assert message == {"version": 3, "id": "000003", "sha256": sha}
    subscription.close()
    assert registry.best_version() == 3
    registry.publish(4, b"weights-4", {})
    registry.promote(4, elo=None, result={"initial": True})
    ladder = registry.ladder()
    assert [(e["version"], e["id"], e["elo"]) for e in ladder] == [(3, "000003", 35.5), (4, "000004", None)]
    assert ladder[0]["result"]["wins"] == 30 and ladder[0]["sha256"] == sha


def test_registry_writes_can_be_repeated(registry):
    # A write retried after a lost reply lands once.
    registry.publish(5, b"weights-5", {})
    registry.promote(5, elo=10.0, result={"initial": True})
    registry.promote(5, elo=10.0, result={"initial": True})
    assert [e["version"] for e in registry.ladder()] == [5] and registry.best_version() == 5


def test_a_matchs_verdict_is_recorded_once_with_the_promotion_it_makes(registry):
    for version in (0, 1):
        registry.publish(version, f"weights-{version}".encode(), {})
    registry.promote(0, elo=0.0, result={"initial": True})
    match = match_id(1, 0)
    assert match == "000001-000000" and registry.decision(match) is None
    promoted = verdict(1, 0, "promote")
    assert registry.decide(match, promoted, elo=35.0) == promoted
    assert registry.best_version() == 1 and registry.decision(match) == promoted
    # The match played again (its gatekeeper killed before it replied) and lost this
    # time: the verdict recorded first stands, and the ladder has one promotion.
    assert registry.decide(match, verdict(1, 0, "reject", wins=5), elo=None) == promoted
    assert [e["version"] for e in registry.ladder()] == [0, 1]


def test_a_promotion_against_a_best_that_changed_is_refused(registry):
    for version in (0, 1, 2):
        registry.publish(version, f"weights-{version}".encode(), {})
    registry.promote(0, elo=0.0, result={"initial": True})
    registry.decide(match_id(1, 0), verdict(1, 0, "promote"), elo=35.0)
    # A second driver's gatekeeper played 2 against 0 meanwhile: its win is against a
    # best that is no longer the best.
    with pytest.raises(RegistryError, match="played 000000, but the best is 000001 now"):
        registry.decide(match_id(2, 0), verdict(2, 0, "promote"), elo=70.0)
    assert registry.best_version() == 1 and registry.decision(match_id(2, 0)) is None
    # a rejection needs no particular best
    assert registry.decide(match_id(2, 0), verdict(2, 0, "reject"), elo=None)["decision"] == "reject"


def test_pruning_a_long_runs_registry_costs_what_it_keeps_not_what_it_published(redis_client):
    registry = ModelRegistry(redis_client, "long-run")
    registry.publish(0, b"weights-0", {})
    registry.promote(0, elo=0.0, result={"initial": True})
    for version in range(1, 401):  # days of candidates, each pruned as the run goes
        registry.publish(version, f"weights-{version}".encode(), {})
        if version % 50 == 0:
            registry.prune(keep_candidates=2)
    commands = redis_client.info("stats")["total_commands_processed"]
    registry.publish(401, b"weights-401", {})
    assert registry.prune(keep_candidates=2) == [399]
    assert redis_client.info("stats")["total_commands_processed"] - commands < 20  # 400 before, one per version
    assert registry.fetch(0)[0] == b"weights-0" and registry.fetch(401)[0] == b"weights-401"


def test_pruning_keeps_the_best_the_newest_and_what_is_in_use(registry):
    for version in range(1, 8):
        registry.publish(version, f"weights-{version}".encode(), {"step": version})
    registry.promote(2, elo=0.0, result={"initial": True})
    assert registry.prune(keep_candidates=2, keep=[4]) == [1, 3, 5]
    assert registry.prune(keep_candidates=2, keep=[4]) == []
    for version in (2, 4, 6, 7):
        assert registry.fetch(version)[0] == f"weights-{version}".encode()
    with pytest.raises(RegistryError, match="000003 was pruned"):
        registry.fetch(3)
    assert registry.candidates() == list(range(1, 8)) and registry.latest_candidate() == 7  # history stays
    assert registry.sha256(3)
    assert registry.discard(6) and not registry.discard(6)
    assert not registry.discard(2)  # never the best
    assert registry.fetch(2)[0] == b"weights-2"


def test_a_tampered_blob_is_caught(registry):
    registry.publish(5, b"good weights", {})
    if isinstance(registry, ModelRegistry):
        registry.client.hset(registry.keys.model(5), "blob", b"evil weights")
    else:
        registry._models[5]["blob"] = b"evil weights"
    with pytest.raises(RegistryError, match="model 000005.*does not match"):
        registry.fetch(5)


@pytest.mark.parametrize("kind", ["redis", "local"])
def test_status_board_ages_out_dead_components(kind, request):
    if kind == "redis":
        board = StatusBoard(request.getfixturevalue("redis_client"), "test", ttl_s=0.3)
        other = StatusBoard(board.client, "other-run", ttl_s=10)
        other.set_status("learner", {"step": 1})
    else:
        board = LocalStatusBoard("test", ttl_s=0.3)
    board.set_status("worker-1", {"games": 12, "rate": 1.5, "version": "000003"})
    board.set_status("learner", {"step": np.int64(7)})
    status = board.get_status()
    assert set(status) == {"worker-1", "learner"}
    assert status["worker-1"]["games"] == 12 and status["learner"]["step"] == 7
    assert "_updated" in status["learner"]
    time.sleep(0.4)
    board.set_status("learner", {"step": 8})
    assert set(board.get_status()) == {"learner"}



def test_both_boards_give_back_a_status_alike(redis_client):
    # One encoding of a status (a JSON value per field) for both twins: what a
    # component reports reads back the same from Redis and in this process.
    status = {"games": np.int64(3), "rates": np.array([0.5, 1.5]), "nested": {"7": [1, None]}, 1: "x"}
    redis_board, local_board = StatusBoard(redis_client, "alike"), LocalStatusBoard("alike")
    for board in (redis_board, local_board):
        board.set_status("worker-1", status)
    got = [board.get_status()["worker-1"] for board in (redis_board, local_board)]
    for board_status in got:
        assert isinstance(board_status.pop("_updated"), float)
    assert got[0] == got[1] == {"games": 3, "rates": [0.5, 1.5], "nested": {"7": [1, None]}, "1": "x"}
