"""The soak's checker (bench/soak_checker.py): independent of tengen, it must still read
what tengen writes, see every acknowledged write through its proxy in front of a real
Redis, and know tic-tac-toe's value."""

from __future__ import annotations

import ast
import hashlib
import sys

import numpy as np
import pytest
import redis
from bench_scripts import BENCH, load
from redis.backoff import NoBackoff
from redis.retry import Retry

from tengen.cluster.redis_server import EmbeddedRedis
from tengen.engine.games import make_game
from tengen.engine.selfplay import GameRecord
from tengen.run.codec import encode_game
from tengen.testing.waiting import wait_for

checker = load("soak_checker")

#: what the checker may import: the standard library and these
ALLOWED = {"msgpack", "redis", "zstandard", "numpy"}
KEY = "tengen:{soak-test-1234}:samples"


def test_the_checker_imports_nothing_of_tengen():
    tree = ast.parse((BENCH / "soak_checker.py").read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
    assert not any(isinstance(node, ast.ImportFrom) and node.level > 0 for node in ast.walk(tree))
    outside = {name for name in imported if name not in sys.stdlib_module_names and name != "__future__"}
    assert outside <= ALLOWED, outside
    assert "tengen" not in imported


def ttt_game(game_id: str, *, moves=(4, 0, 8, 2, 6)) -> bytes:
    """A tic-tac-toe game as tengen's own codec writes it (every move recorded)."""
    game = make_game("tictactoe")
    length = len(moves)
    policy = np.zeros((length, game.num_actions), np.float32)
    policy[np.arange(length), list(moves)] = 1.0
    record = GameRecord(game="tictactoe", planes=np.zeros((length, *game.planes_shape), np.uint8), policy=policy,
                        value=np.zeros(length, np.float32), moves=np.array(moves, np.int32), outcome=1.0,
                        model_version=3, game_id=game_id)
    return encode_game(record, worker_id="w001")


def test_the_decoder_reads_what_tengens_codec_wrote():
    header = checker.decode_game_header(ttt_game("w001.ab12:7"))
    assert (header.format, header.version, header.game) == ("tengen-game", 3, "tictactoe")
    assert (header.game_id, header.length, header.outcome) == ("w001.ab12:7", 5, 1.0)


def test_the_decoder_refuses_what_is_not_a_documented_entry():
    import msgpack
    import zstandard
    with pytest.raises(checker.EntryFormatError, match="zstd"):
        checker.decode_game_header(b"not a frame")
    future = zstandard.ZstdCompressor().compress(msgpack.packb({"format": "tengen-game", "version": 9}))
    with pytest.raises(checker.EntryFormatError, match="version 9"):
        checker.decode_game_header(future)


@pytest.fixture
def server(tmp_path):
    redis_server = EmbeddedRedis(data_dir=tmp_path / "redis").start()
    yield redis_server
    redis_server.stop()


@pytest.fixture
def proxy(server):
    ack_proxy = checker.AckProxy(server.host, server.port).start()
    yield ack_proxy
    ack_proxy.stop()


def through(proxy, server) -> redis.Redis:
    """A client of the proxy that does not retry on its own (so a dropped reply shows)."""
    return redis.Redis(host=proxy.listen_host, port=proxy.listen_port, password=server.password,
                       retry=Retry(NoBackoff(), 0), socket_timeout=10)


def test_the_proxy_records_acknowledged_xadds_pipelined_and_in_transactions(proxy, server):
    client = through(proxy, server)
    pipe = client.pipeline(transaction=False)  # as the workers write their games
    pipe.xadd(KEY, {"g": ttt_game("w001.a:0")}, maxlen=1000, approximate=True)
    pipe.xadd(KEY, {"g": ttt_game("w001.a:1")}, maxlen=1000, approximate=True)
    pipe.hincrby(KEY + ":counts", "added", 2)
    first, second, _ = pipe.execute()
    multi = client.pipeline(transaction=True)  # MULTI/EXEC: the replies come in EXEC's array
    multi.set("other", "x")
    multi.xadd(KEY, {"g": ttt_game("w002.b:0")})
    multi.execute()
    client.xadd("not-the-samples", {"g": ttt_game("w009.z:0")})
    assert client.xlen(KEY) == 3
    assert set(proxy.acked) == {"w001.a:0", "w001.a:1", "w002.b:0"}
    assert proxy.ack_count == 3 and proxy.dropped == [] and proxy.undecodable == []
    assert proxy.acked["w001.a:0"] <= proxy.acked["w002.b:0"]
    assert first != second
    client.close()


def test_a_dropped_reply_is_an_error_for_the_client_while_redis_has_the_entry(proxy, server):
    client = through(proxy, server)
    client.xadd(KEY, {"g": ttt_game("w001.a:0")})
    proxy.drop_next(1)
    with pytest.raises(redis.ConnectionError):
        client.xadd(KEY, {"g": ttt_game("w001.a:1")})
    direct = server.client()
    stored = [checker.decode_game_header(fields[b"g"]).game_id for _, fields in direct.xrange(KEY)]
    assert stored == ["w001.a:0", "w001.a:1"]  # applied, but not acknowledged
    assert [ack.game_id for ack in proxy.dropped] == ["w001.a:1"] and set(proxy.acked) == {"w001.a:0"}
    # the client's retry is a new connection: acknowledged, and the stream holds the game twice
    client.xadd(KEY, {"g": ttt_game("w001.a:1")})
    assert set(proxy.acked) == {"w001.a:0", "w001.a:1"} and proxy.acked_again == []
    client.xadd(KEY, {"g": ttt_game("w001.a:1")})  # and again: a second acknowledgement
    assert [game_id for game_id, _, _ in proxy.acked_again] == ["w001.a:1"] and proxy.ack_count == 3
    ids = [checker.decode_game_header(fields[b"g"]).game_id for _, fields in direct.xrange(KEY)]
    check = checker.check_stream(proxy.acked, ids, redis_kills=[])
    assert (check.lost, check.entries, check.distinct_games, check.repeated_entries) == ([], 4, 2, 2)
    direct.close()
    client.close()


def test_a_blocked_read_and_a_closed_redis_pass_through(proxy, server):
    client = through(proxy, server)
    client.xgroup_create(KEY, "learner", id="0", mkstream=True)
    assert client.xreadgroup("learner", "c", {KEY: ">"}, count=10, block=100) == []
    client.xadd(KEY, {"g": ttt_game("w001.a:0")})
    ((_, entries),) = client.xreadgroup("learner", "c", {KEY: ">"}, count=10, block=100)
    assert len(entries) == 1
    server._kill()
    with pytest.raises(redis.ConnectionError):
        client.ping()
    server.restart()
    wait_for(lambda: _pings(proxy, server), timeout_s=30, what="the proxy passing commands again")
    assert set(proxy.acked) == {"w001.a:0"}


def _pings(proxy, server) -> bool:
    try:
        return bool(through(proxy, server).ping())
    except redis.ConnectionError:
        return False


def test_the_stream_check_counts_a_missing_game_lost_unless_redis_was_killed_within_the_second():
    acked = {"a:0": 100.0, "a:1": 200.0, "a:2": 300.0}
    check = checker.check_stream(acked, ["a:0", "a:0", None], redis_kills=[200.6])
    assert check.lost == ["a:2"] and check.lost_in_fsync_window == ["a:1"]
    assert (check.acknowledged, check.entries, check.distinct_games, check.repeated_entries) == (3, 3, 1, 1)
    # a kill 1.5 s after the acknowledgement does not excuse it
    assert checker.check_stream(acked, ["a:0"], redis_kills=[201.5]).lost == ["a:1", "a:2"]


def test_the_window_check_counts_positions_of_distinct_games():
    headers = [checker.GameHeader("tengen-game", 3, "tictactoe", game_id, length, 0.0)
               for game_id, length in (("a:0", 5), ("a:1", 7), ("a:0", 5))]
    right = checker.check_window({"window": 12, "window_capacity": 1000, "duplicate_games": 1}, headers)
    assert (right.expected, right.counted_twice, right.missing, right.valid) == (12, 0, 0, True)
    twice = checker.check_window({"window": 17, "window_capacity": 1000}, headers)
    assert (twice.counted_twice, twice.missing) == (5, 0)
    assert not checker.check_window({"window": 12, "window_capacity": 12}, headers).valid


def test_a_version_whose_bytes_change_is_seen_on_disk_and_in_the_registry(tmp_path, server):
    run_dir = tmp_path / "run"
    (run_dir / "models").mkdir(parents=True)
    (run_dir / "models" / "000001.safetensors").write_bytes(b"weights one")
    prefix = "tengen:{soak-test-1234}"
    client = server.client()
    client.hset(f"{prefix}:model:000002", mapping={"blob": b"two", "sha256": hashlib.sha256(b"two").hexdigest()})
    ledger = checker.VersionLedger()
    assert checker.sample_versions(ledger, run_dir, client, prefix) == 2
    assert ledger.changed() == {}
    (run_dir / "models" / "000001.safetensors").write_bytes(b"weights one, rewritten")
    client.hset(f"{prefix}:model:000002", "blob", b"TWO")  # its stored sha256 no longer matches
    checker.sample_versions(ledger, run_dir, client, prefix)
    assert sorted(ledger.changed()) == [1, 2]
    client.close()


def test_minimax_knows_tic_tac_toe_is_a_draw_and_an_edge_answer_to_the_centre_loses():
    assert checker.minimax_value(checker.board_of([])) == 0
    assert set(checker.move_values(checker.board_of([])).values()) == {0}  # every first move draws
    after_centre = checker.move_values(checker.board_of([4]))
    assert {after_centre[c] for c in (0, 2, 6, 8)} == {0} and {after_centre[e] for e in (1, 3, 5, 7)} == {-1}
    assert checker.winner(checker.board_of([0, 3, 1, 4, 2])) == 1


def perfect_player(positions: list[str]) -> list[str]:
    out = []
    for text in positions:
        values = checker.move_values(checker.board_of([int(c) - 1 for c in text]))
        out.append(str(max(values, key=values.get) + 1))
    return out


def first_empty_player(positions: list[str]) -> list[str]:
    return [str(min(set(range(9)) - {int(c) - 1 for c in text}) + 1) for text in positions]


def test_the_perfect_play_check_passes_a_perfect_player_and_flags_a_naive_one():
    perfect = checker.check_perfect_play(perfect_player)
    assert perfect.perfect and perfect.positions > 100
    naive = checker.check_perfect_play(first_empty_player)
    assert not naive.perfect and all(value < best for _, _, value, best in naive.imperfect)
    # as the first player it opens in cell 1, a draw; after 1, 2 it plays 3, a draw, where
    # 5 wins (5 threatens 9; after 9, 4 or 7 makes two threats)
    assert ("", "1", 0, 0) not in naive.imperfect
    assert ("12", "3", 0, 1) in naive.imperfect
