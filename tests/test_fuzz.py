"""Every parser that takes outside input, fed what hypothesis makes up (bounded in
examples and time): GTP lines, ``bestmove``'s position lines, SGF files, the play
page's JSON bodies, config files and the stream's game records. Each answers with its
own clear refusal or a result, never another exception, a traceback or a hang, and
the engine answers afterwards as before."""

from __future__ import annotations

import asyncio
import json
import math

import msgpack
import numpy as np
import pytest
import zstandard
from aiohttp.test_utils import TestClient, TestServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tengen.engine.games import make_game
from tengen.engine.games.go import GoGame
from tengen.engine.mcts import SearchSettings
from tengen.engine.selfplay import GameRecord
from tengen.play.gtp import GtpEngine
from tengen.play.search_player import SearchPlayer
from tengen.play.sgf import GoRecord, SgfError, read_sgf, write_sgf
from tengen.run.codec import SampleFormatError, encode_game, game_decoder
from tengen.run.config import ConfigError, load_config
from tengen.web.play import PlayServer

#: a bound on each property's examples and each example's time
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])

#: what a number in a GTP argument may be: ordinary, huge, tiny, not finite, not a number
NUMBERS = st.one_of(st.integers(-10**25, 10**25).map(str), st.floats(allow_nan=True, allow_infinity=True).map(repr),
                    st.sampled_from(["1e308", "-1e308", "1e400", "nan", "inf", "-0", "0x10", "1_000", "٣", "½"]))
VERTICES = st.one_of(st.sampled_from(["A1", "J9", "T19", "pass", "PASS", "resign", "Z99", "I5", "a0", "A", "1"]),
                     st.from_regex(r"[A-Za-z][0-9]{1,3}", fullmatch=True))
WORDS = st.one_of(NUMBERS, VERTICES, st.sampled_from(["b", "w", "black", "white", "x", "#", "\t", ""]),
                  st.text(max_size=12))
#: commands that stream or touch files are fuzzed apart (files) or not here (analysis runs until stopped)
NOT_HERE = {"quit", "loadsgf", "printsgf", "lz-analyze", "kata-analyze", "analyze", "genmove_analyze",
            "lz-genmove_analyze", "kata-genmove_analyze"}


@pytest.fixture(scope="module")
def engine() -> GtpEngine:
    return GtpEngine(size=9, seed=1, search=SearchSettings(simulations=8))


def well_formed(reply: str | None) -> bool:
    return reply is None or (reply[:1] in "=?" and reply.endswith("\n\n") and "\n\n" not in reply[:-2])


def gtp_lines(commands: list[str]) -> st.SearchStrategy[str]:
    named = st.tuples(st.one_of(st.none(), st.integers(0, 10**6)), st.sampled_from(commands),
                      st.lists(WORDS, max_size=5)).map(
        lambda t: " ".join(([str(t[0])] if t[0] is not None else []) + [t[1], *t[2]]))
    return st.one_of(named, st.text(max_size=60))


@pytest.fixture(scope="module")
def gtp_commands(engine) -> list[str]:
    return [name for name in engine.commands if name not in NOT_HERE]


def test_gtp_answers_every_line_and_goes_on(engine, gtp_commands):
    @FUZZ
    @given(st.lists(gtp_lines(gtp_commands), min_size=1, max_size=8))
    def answers(lines: list[str]) -> None:
        for line in lines:
            reply = engine.handle(line)
            assert well_formed(reply), (line, reply)
            assert reply is None or "internal error" not in reply, (line, reply)
        assert engine.handle("name") == "= tengen\n\n"
        engine.handle("boardsize 9")  # back to a board the next lines can play on

    answers()


@pytest.mark.parametrize(("name", "rules"), [("tictactoe", {}), ("connect4", {}), ("go", {"size": 9})])
def test_bestmove_positions_parse_or_are_refused_by_name(name, rules):
    game = make_game(name, **rules)

    @FUZZ
    @given(st.one_of(st.text(max_size=40), st.lists(VERTICES, max_size=10).map(" ".join),
                     st.text(alphabet="0123456789 ,", max_size=30)))
    def parses(line: str) -> None:
        try:
            moves = game.moves_from_text(line)
            state, history = game.state_from_moves(moves)  # IllegalMove is a ValueError
        except ValueError:
            return
        assert len(history) == len(moves)

    parses()


SGF_SEED = write_sgf(GoRecord(size=9, komi=7.5, handicap=2, result="B+R", rules="Chinese",
                              players=("a", "b"), events=()))


@FUZZ
@given(st.one_of(
    st.binary(max_size=300),
    st.text(max_size=300).map(str.encode),
    # a valid record with a property changed to what a careless or hostile file holds
    st.tuples(st.sampled_from(["SZ", "KM", "HA", "AB", "AW", "B", "W", "PL", "GM", "C", "RE"]),
              st.one_of(NUMBERS, VERTICES, st.text(max_size=20), st.from_regex(r"[a-z]{2}", fullmatch=True))).map(
        lambda kv: (SGF_SEED[:-2] + f";{kv[0]}[{kv[1]}])").encode()),
))
def test_sgf_files_read_or_are_refused_by_name(data: bytes):
    try:
        record = read_sgf(data)
    except SgfError:
        return
    assert 5 <= record.size <= 19 and math.isfinite(record.komi) and 0 <= record.handicap < record.size ** 2


def test_loadsgf_of_any_file_answers_and_the_engine_goes_on(tmp_path):
    engine = GtpEngine(size=9)
    path = tmp_path / "fuzz.sgf"

    @settings(FUZZ, max_examples=80)
    @given(st.one_of(st.binary(max_size=200), st.tuples(
        st.sampled_from(["SZ", "KM", "HA", "AB", "AW", "AE", "B", "W", "PL"]),
        st.one_of(NUMBERS, st.from_regex(r"[a-t]{2}", fullmatch=True), st.text(max_size=8))).map(
        lambda kv: (SGF_SEED[:-2] + f";B[ee];{kv[0]}[{kv[1]}];W[cc])").encode())))
    def loads(data: bytes) -> None:
        path.write_bytes(data)
        reply = engine.handle(f"loadsgf {path}")
        assert well_formed(reply) and "internal error" not in reply, reply
        assert engine.handle("showboard").startswith("=")

    loads()


@FUZZ
@given(st.one_of(st.binary(max_size=400), st.text(max_size=400).map(str.encode)))
def test_config_files_load_or_are_refused_by_name(tmp_path_factory, data: bytes):
    path = tmp_path_factory.mktemp("config") / "fuzz.yaml"
    path.write_bytes(data)
    try:
        load_config(path)
    except ConfigError:
        pass


def _record(game, moves: list[int]) -> GameRecord:
    state, history = game.state_from_moves(moves)
    length = len(moves)
    policy = np.zeros((length, game.num_actions), np.float32)
    policy[np.arange(length), moves] = 1.0
    return GameRecord(game=game.name, planes=np.zeros((length, *game.planes_shape), np.uint8), policy=policy,
                      value=np.zeros(length, np.float32), moves=np.array(moves, np.int32), outcome=1.0,
                      model_version=1, game_id="w000.aa:0")


def _mutations(blob: bytes) -> st.SearchStrategy[bytes]:
    """``blob`` with bytes flipped, cut short or grown; and its inner msgpack changed."""
    inner = msgpack.unpackb(zstandard.ZstdDecompressor().decompress(blob), raw=False)
    flipped = st.tuples(st.integers(0, len(blob) - 1), st.integers(1, 255)).map(
        lambda t: blob[:t[0]] + bytes([blob[t[0]] ^ t[1]]) + blob[t[0] + 1:])
    cut = st.integers(0, len(blob) - 1).map(lambda n: blob[:n])
    field = st.tuples(st.sampled_from(sorted(inner)), st.one_of(
        st.none(), st.integers(-2**63, 2**63 - 1), st.floats(), st.text(max_size=10), st.binary(max_size=40),
        st.lists(st.integers(-10, 10), max_size=5))).map(
        lambda kv: zstandard.ZstdCompressor().compress(msgpack.packb({**inner, kv[0]: kv[1]}, use_bin_type=True)))
    return st.one_of(flipped, cut, field, st.binary(max_size=200))


def test_stream_records_decode_or_are_refused_by_name():
    game = make_game("tictactoe")
    decode = game_decoder(game)
    blob = encode_game(_record(game, [4, 0, 8, 2, 6]), worker_id="w000")
    assert decode(blob).moves.tolist() == [4, 0, 8, 2, 6]

    @FUZZ
    @given(_mutations(blob))
    def decodes(data: bytes) -> None:
        try:
            record = decode(data)
        except SampleFormatError:
            return
        assert record.policy.shape == (len(record.moves), game.num_actions)

    decodes()


# -- the play page's JSON bodies ----------------------------------------------------------------
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-10**20, 10**20), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children,
                                                                                  max_size=3)),
    max_leaves=8)
BODIES = st.one_of(
    st.dictionaries(st.sampled_from(["person", "action", "simulations", "seconds", "x"]), JSON_VALUES, max_size=3),
    JSON_VALUES.map(lambda v: v if not isinstance(v, dict) else [v]),
)


@pytest.fixture(scope="module")
def play_client():
    """The real play page's app on a real socket, its model a rollout search."""
    game = GoGame(size=9)
    server = PlayServer(game, SearchPlayer(None, search=SearchSettings(simulations=16)), simulations=16,
                        checkpoint="(rollouts)", application=("tengen", "test"))
    loop = asyncio.new_event_loop()
    client = TestClient(TestServer(server.app(), loop=loop), loop=loop)
    loop.run_until_complete(client.start_server())
    yield loop, client
    loop.run_until_complete(client.close())
    loop.close()


def test_the_play_pages_bodies_get_an_answer_never_a_500(play_client):
    loop, client = play_client

    async def post(path: str, body: object) -> tuple[int, object]:
        response = await client.post(path, data=json.dumps(body), headers={"Content-Type": "application/json"})
        return response.status, await response.json()

    game_id = loop.run_until_complete(post("/api/games", {"person": 0}))[1]["id"]

    @FUZZ
    @given(st.sampled_from(["/api/games", "/api/games/{id}/play", "/api/games/{id}/reply", "/api/games/{id}/undo",
                            "/api/games/{id}/resign", "/api/games/nope/play"]), BODIES)
    def answered(path: str, body: object) -> None:
        status, answer = loop.run_until_complete(post(path.format(id=game_id), body))
        assert status in (200, 400, 404, 409, 422, 429), (path, body, status, answer)
        assert status == 200 or "error" in answer

    answered()
    assert loop.run_until_complete(client.get("/api/info")).status == 200
