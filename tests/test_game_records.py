"""Finished games as files (play/game_records.py): Go as SGF with the search's
comments, the other games as one plain line, each read back; and every SGF file
tengen writes (self-play and gating games, `tengen match`'s games, GTP's printsgf)
read back by Sabaki's SGF parser as sgfmill reads it."""

from __future__ import annotations

import calendar
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import npm
import numpy as np
import pytest
from debian import fetch_gnugo
from sgfmill import sgf, sgf_grammar

from tengen.engine.games import make_game
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.engine.selfplay import SelfPlay, SelfPlaySettings
from tengen.play.game_records import (
    FinishedGame,
    GameTextError,
    parse_move_comment,
    read_plain,
    result_text,
    utc_date,
    write_game,
    write_plain,
)
from tengen.play.gtp import GtpEngine
from tengen.play.sgf import GoRecord, Move, Setup, load_sgf, read_sgf

ROOT = Path(__file__).resolve().parent.parent
GO5 = make_game("go", size=5, komi=7.5)
C4 = make_game("connect4")
TTT = make_game("tictactoe")
#: 2024-05-01 13:20 UTC
MAY_DAY = calendar.timegm((2024, 5, 1, 13, 20, 0, 0, 0, 0))


def test_a_go_self_play_game_as_sgf_keeps_moves_result_players_date_and_search():
    selfplay = SelfPlay(GO5, games=2, seed=4, model_version=12,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=16, leaves_per_round=4),
                                                  full_search_fraction=0.5, cheap_simulations=4))
    record = selfplay.play(uniform_evaluator(GO5.num_actions), games=1)[0]
    finished = FinishedGame.from_record(record, players=("000012", "000012"), when=MAY_DAY)
    back = read_sgf(write_game(GO5, finished))
    assert (back.size, back.komi, back.players, back.date) == (5, 7.5, ("000012", "000012"), "2024-05-01")
    assert back.rules == "Tromp-Taylor (area scoring, simple ko)"
    assert [m.action for m in back.moves] == record.moves.tolist()
    assert [m.color for m in back.moves] == [i % 2 for i in range(record.length)]  # no handicap: B, W, B...
    state, _ = GO5.state_from_moves(record.moves.tolist())
    assert back.result == GO5.score_text(state) != ""
    comments = [parse_move_comment(m.comment or "") for m in back.moves]
    assert all(c is not None for c in comments)
    values, visits, full, colors = (list(x) for x in zip(*comments, strict=True))
    assert np.allclose(values, record.search_value, atol=5e-4)
    assert visits == record.search_visits.tolist() and full == record.full_search.tolist()
    assert colors == [m.color for m in back.moves]
    assert not all(full) and any(full), "playout caps should give both kinds of move"


@pytest.mark.parametrize(("komi", "moves", "resigned_by", "result"), [
    (7.5, [25, 25], None, "W+7.5"),  # two passes on an empty board: komi decides
    (0.0, [25, 25], None, "0"),  # and without komi it is a draw
    (7.5, [12, 25, 25], None, "B+17.5"),  # one black stone owns the whole 5x5 board: 25 - 7.5
    (7.5, [12], 1, "B+R"),  # white resigned
    (7.5, [], 0, "W+R"),
])
def test_go_results_are_the_rules_area_score_or_a_resignation(komi, moves, resigned_by, result):
    game = make_game("go", size=5, komi=komi)
    finished = FinishedGame(moves=tuple(moves), resigned_by=resigned_by)
    assert result_text(game, finished) == result
    assert read_sgf(write_game(game, finished)).result == result


def test_a_connect_four_game_is_one_plain_line_and_reads_back():
    # X (first) stacks column 1 four times; O answers in column 2
    finished = FinishedGame(moves=(0, 1, 0, 1, 0, 1, 0), players=("000003", "000002"), when=MAY_DAY,
                            search_value=(0.1, -0.25, 0.5, -0.75, 0.9, -1.0, 1.0),
                            search_visits=(48, 52, 60, 8, 70, 80, 90),
                            full_search=(True, True, True, False, True, True, True))
    line = write_plain(C4, finished)
    assert line == ("format=1 game=connect4 first=000003 second=000002 date=2024-05-01 result=1-0 end=rules "
                    "moves=1,2,1,2,1,2,1 values=+0.100,-0.250,+0.500,-0.750,+0.900,-1.000,+1.000 "
                    "visits=48,52,60,8,70,80,90 full=1,1,1,0,1,1,1")
    back, result = read_plain(line, C4)
    assert result == "1-0"
    assert back.moves == finished.moves and back.players == finished.players
    assert back.search_value == finished.search_value and back.search_visits == finished.search_visits
    assert back.full_search == finished.full_search
    assert write_plain(C4, back) == line  # the date comes back as the same day


def test_tic_tac_toe_draws_resignations_and_unknown_players():
    draw = FinishedGame(moves=(0, 4, 8, 1, 7, 6, 2, 5, 3))  # X O X / X O O / O X X: no line
    assert write_plain(TTT, draw) == "format=1 game=tictactoe first=- second=- result=1/2-1/2 end=rules " \
                                     "moves=1,5,9,2,8,7,3,6,4"
    resigned = FinishedGame(moves=(4,), resigned_by=1)
    line = write_plain(TTT, resigned)
    assert "result=1-0 end=resignation" in line
    assert read_plain(line, TTT)[0] == resigned
    # A match's engine that died in the game lost it by forfeit (the second player here).
    forfeit = FinishedGame(moves=(4, 0), forfeit_by=1)
    line = write_plain(TTT, forfeit)
    assert "result=1-0 end=forfeit moves=5,1" in line
    assert read_plain(line, TTT)[0] == forfeit and forfeit.lost_by == 1
    with pytest.raises(GameTextError, match="resignation or by forfeit, not both"):
        FinishedGame(moves=(4,), resigned_by=0, forfeit_by=1)


def test_self_play_records_of_the_small_games_read_back():
    for game in (C4, TTT):
        settings = SelfPlaySettings(search=SearchSettings(simulations=8))
        for record in SelfPlay(game, games=3, seed=2, settings=settings).play(uniform_evaluator(game.num_actions), 3):
            finished = FinishedGame.from_record(record, players=("000000", "000000"))
            back, result = read_plain(write_game(game, finished), game)
            assert back.moves == tuple(record.moves.tolist())
            assert result == {1.0: "1-0", -1.0: "0-1", 0.0: "1/2-1/2"}[record.outcome]


@pytest.mark.parametrize(("line", "why"), [
    ("format=2 game=connect4 first=a second=b result=1-0 end=rules moves=1", "format '2' is not"),
    ("format=1 game=connect4 first=a second=b result=1-0 moves=1", "missing fields: end"),
    ("format=1 game=tictactoe first=a second=b result=1-0 end=rules moves=1", "a 'tictactoe' game"),
    ("format=1 game=connect4 first=a second=b result=1-0 end=rules moves=1,8", "expected a column 1..7"),
    ("format=1 game=connect4 first=a second=b result=1-0 end=rules moves=1,2,1", "not finished"),
    ("format=1 game=connect4 first=a second=b result=0-1 end=rules moves=1,2,1,2,1,2,1", "says 0-1 but"),
    ("format=1 game=connect4 first=a second=b result=1-0 end=rules moves=1 colour=red", "'colour=red' is not"),
    ("format=1 game=connect4 first=a second=b result=1-0 end=resignation moves=1 values=+0.1", "all three"),
])
def test_a_bad_plain_line_is_refused_with_the_reason(line, why):
    with pytest.raises(GameTextError, match=why):
        read_plain(line, C4)


def test_what_cannot_be_written_is_refused():
    with pytest.raises(GameTextError, match="not finished"):
        write_game(GO5, FinishedGame(moves=(12,)))
    with pytest.raises(GameTextError, match="move 2"):
        write_game(GO5, FinishedGame(moves=(12, 12), resigned_by=0))
    with pytest.raises(GameTextError, match="no spaces"):
        write_plain(TTT, FinishedGame(moves=(4,), resigned_by=1, players=("a b", "c")))
    with pytest.raises(GameTextError, match="one entry per move"):
        FinishedGame(moves=(1, 2), search_value=(0.0,), search_visits=(1,), full_search=(True,))


# -- read back by Sabaki's SGF parser --------------------------------------------------------

SGF_PACKAGE = "@sabaki/sgf@3"  # tested with 3.4.7


@pytest.fixture(scope="module")
def sabaki_sgf() -> Path:
    return npm.installed(SGF_PACKAGE, "@sabaki/sgf")


def sabaki_read(modules: Path, *paths: Path) -> list[dict]:
    script = Path(__file__).resolve().parent / "sabaki_sgf.js"
    done = subprocess.run(["node", str(script), *map(str, paths)], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "NODE_PATH": str(modules)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.slow
def test_sgf_that_tengen_writes_loads_in_sabaki_without_loss(sabaki_sgf, tmp_path):
    game = make_game("go", size=9, komi=7.5)
    selfplay = SelfPlay(game, games=2, seed=8, model_version=42,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=16, leaves_per_round=4),
                                                  full_search_fraction=0.5, cheap_simulations=4))
    records = selfplay.play(uniform_evaluator(game.num_actions), games=2)
    games = [FinishedGame.from_record(r, players=("000042", "000042"), when=MAY_DAY) for r in records]
    games.append(FinishedGame(moves=(40, 81, 30), resigned_by=0, players=("000041", "000042")))  # W+R, a pass
    paths = []
    for i, finished in enumerate(games):
        path = tmp_path / f"{i}.sgf"
        path.write_text(write_game(game, finished), encoding="utf-8")
        paths.append(path)
    for finished, path, seen in zip(games, paths, sabaki_read(sabaki_sgf, *paths), strict=True):
        ours = load_sgf(path)  # sgfmill's reading, through play/sgf.py
        root = seen["root"]
        assert root["SZ"] == ["9"] and float(root["KM"][0]) == ours.komi == 7.5
        assert root["RE"] == [ours.result] == [result_text(game, finished)]
        assert root["RU"] == [ours.rules] and root["PB"][0] == finished.players[0] == ours.players[0]
        assert root["PW"][0] == finished.players[1]
        # the moves, as Sabaki's vertices [x, y] from the top left; sgfmill writes a pass
        # as FF[3]'s B[tt], off a 9x9 board, which Sabaki plays as a pass (as it does B[])
        expected = [None if a == game.pass_action else [a % 9, a // 9] for a in finished.moves]
        assert [None if v is None or max(v) >= 9 else v for v in (m["vertex"] for m in seen["moves"])] == expected
        assert {m["point"] for m, a in zip(seen["moves"], finished.moves, strict=True) if a == game.pass_action} <= {
            "tt", ""}
        assert [m["color"] for m in seen["moves"]] == ["BW"[i % 2] for i in range(len(finished.moves))]
        assert [m["comment"] for m in seen["moves"]] == [m.comment for m in ours.moves]
        if finished.has_search:
            assert seen["dates"] == [[2024, 5, 1]] and ours.date == "2024-05-01"
            parsed = [parse_move_comment(m["comment"]) for m in seen["moves"]]
            assert [p[1] for p in parsed] == list(finished.search_visits)
            assert [p[2] for p in parsed] == list(finished.full_search)
            assert np.allclose([p[0] for p in parsed], finished.search_value, atol=5e-4)
        else:
            assert all(m["comment"] is None for m in seen["moves"])
    assert load_sgf(paths[-1]).result == "W+R"


def sabaki_record(seen: dict) -> GoRecord:
    """What Sabaki read (``sabaki_sgf.js``'s output for one file) as play/sgf.py's
    ``read_sgf`` gives a file. Sabaki's vertices are [x, y] from the top left; a move
    off the board (FF[3]'s ``tt``, which sgfmill writes) or empty is a pass."""
    root = seen["root"]
    size = int(root["SZ"][0])

    def action(vertex: list[int] | None) -> int:
        if vertex is None or not (0 <= vertex[0] < size and 0 <= vertex[1] < size):
            return size * size
        return vertex[1] * size + vertex[0]

    def text(key: str) -> str | None:
        return root[key][0] if key in root else None

    events: list[Setup | Move] = []
    for node in seen["nodes"]:
        if node["setup"]:
            events.append(Setup(*(tuple(sorted(action(v) for v in node["setup"].get(key, [])))
                                  for key in ("AB", "AW", "AE"))))
        if (move := node["move"]) is not None:
            events.append(Move("BW".index(move["color"]), action(move["vertex"]), move["comment"]))
    to_play = text("PL")
    return GoRecord(size=size, komi=float(text("KM") or 0), events=tuple(events),
                    to_play=None if to_play is None else "BW".index(to_play), handicap=int(text("HA") or 0),
                    result=text("RE"), rules=text("RU"), players=(text("PB"), text("PW")), date=text("DT"))


def read_in_sabaki_and_sgfmill(modules: Path, *paths: Path) -> list[GoRecord]:
    """Each file as Sabaki reads it, checked to be what sgfmill reads: every property of
    every node of the main line, as text (so what no record field holds, such as AP
    and CA, too), and the record both make of it. The callers check the records
    against what was played."""
    records = []
    for path, seen in zip(paths, sabaki_read(modules, *paths), strict=True):
        game = sgf.Sgf_game.from_bytes(path.read_bytes())
        charset = game.get_charset()
        in_sgfmill = [{key: [sgf_grammar.text_value(value).decode(charset) for value in values]
                       for key, values in node.get_raw_property_map().items()} for node in game.get_main_sequence()]
        assert [node["data"] for node in seen["nodes"]] == in_sgfmill, path
        record = sabaki_record(seen)
        assert record == load_sgf(path), path
        records.append(record)
    return records


@pytest.fixture(scope="module")
def gnugo() -> Path:
    return fetch_gnugo()


@pytest.mark.slow
def test_a_tengen_match_record_loads_in_sabaki_without_loss(sabaki_sgf, gnugo, tmp_path):
    # A player is named by its engine's file name, which may hold SGF's closing bracket
    # and letters beyond ASCII: Sabaki must unescape the one and decode the other as
    # sgfmill does.
    renamed = tmp_path / "gnugo [3.8] é"
    renamed.symlink_to(gnugo)
    # A seed makes GNU Go's games the same on every run: with this one it passes with
    # dead stones left, and the match plays a cleanup phase after the two passes.
    flags = ["--mode", "gtp", "--chinese-rules", "--level", "1", "--seed", "2"]
    a, b = shlex.join([str(renamed), *flags]), shlex.join([str(gnugo), *flags])
    days = {utc_date(time.time())}
    done = subprocess.run([sys.executable, "-m", "tengen.cli", "match", f"gtp:{a}", "--gtp-engine", b,
                           "--games", "2", "--out", str(tmp_path / "games"), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    days.add(utc_date(time.time()))
    played = json.loads(done.stdout)["game_results"]
    records = read_in_sabaki_and_sgfmill(sabaki_sgf, *(Path(g["file"]) for g in played))
    for game, record in zip(played, records, strict=True):
        assert (record.size, record.komi, record.rules, record.handicap) == (9, 7.5, "Tromp-Taylor", 0)
        assert record.players == (game["black"], game["white"]) and record.result == game["result"]
        assert record.date in days
        assert [m.color for m in record.moves] == [i % 2 for i in range(game["moves"])]
        assert all(isinstance(e, Move) and e.comment is None for e in record.events)
        # Sabaki's moves, replayed by an engine that plays on after two passes as the
        # cleanup phase did, score what the match reported.
        engine = GtpEngine(size=9, komi=7.5, scoring="tromp-taylor")
        for move in record.moves:
            assert engine.handle(f"play {'bw'[move.color]} {engine.game.action_to_text(move.action)}") == "=\n\n"
        assert engine.handle("final_score") == f"= {game['result']}\n\n"
    assert "gnugo [3.8] é" in records[0].players
    assert all(g["cleanup_moves"] for g in played)


@pytest.mark.slow
def test_a_gating_match_record_loads_in_sabaki_without_loss(sabaki_sgf, tmp_path):
    # The models and the match load TensorFlow: only this test does.
    from tengen.engine.network import weights_to_bytes
    from tengen.run.config import parse_config
    from tengen.run.loop import TrainingLoop
    from tengen.run.model_registry import LocalModelRegistry
    from tengen.run.run_dir import RunDir
    from tengen.workers.gatekeeper import Gatekeeper

    config = parse_config({
        "game": {"name": "go", "size": 9, "komi": 7.5, "history_length": 2},
        "network": {"blocks": 1, "filters": 8},
        "mcts": {"simulations": 4, "leaves_per_round": 4},
        "gating": {"rule": "threshold", "threshold": 0.5, "games": 2, "games_in_flight": 2},
        "seed": 5,
    })
    game = config.game.make()
    files, registry = RunDir(tmp_path / "run"), LocalModelRegistry("sgf")
    loop = TrainingLoop(config, files, registry, log=lambda line: None)
    best = loop.begin(resume=False)  # the initial network, 000000
    # The learner's first candidate: another fresh network of the run's shape.
    registry.publish(1, weights_to_bytes(config.network_spec().build(), metadata={"version": 1}),
                     {"step": 1, "game": game.name})
    gatekeeper = Gatekeeper(game=game, network=config.network_spec(), registry=registry,
                            options=config.gating_options(), seed=6)
    days = {utc_date(time.time())}
    result = gatekeeper.gate(1, best)
    loop.gated(result)  # as a run keeps the match: its games in games/gating/000001-000000/
    days.add(utc_date(time.time()))
    paths = sorted(files.gating_games(1, best).glob("*.sgf"))
    assert len(paths) == len(result["games"]) >= 1  # the rule may stop the match at its verdict
    for played, record in zip(result["games"], read_in_sabaki_and_sgfmill(sabaki_sgf, *paths), strict=True):
        final, _ = game.state_from_moves(played["moves"])
        players = ("000001", "000000") if played["candidate_black"] else ("000000", "000001")
        assert record.date in days
        assert record == GoRecord(size=9, komi=7.5, events=tuple(Move(i % 2, a) for i, a in enumerate(played["moves"])),
                                  result=game.score_text(final), rules="Tromp-Taylor (area scoring, simple ko)",
                                  players=players, date=record.date)


@pytest.mark.parametrize(("setup", "commands"), [
    # a game to its end: two passes, so the record has a result
    ("fixed_handicap 4", ["play w E5", "play b D5", "genmove w", "play b pass", "play w pass"]),
    ("set_free_handicap C3 G7 E5 A1", ["play w D4", "genmove b", "play w C4"]),
    # no move yet: only PL says that white is to play
    ("fixed_handicap 2", []),
])
@pytest.mark.slow
def test_printsgf_after_a_handicap_loads_in_sabaki_without_loss(sabaki_sgf, tmp_path, setup, commands):
    engine = GtpEngine(size=9, komi=0.5, seed=2)
    game = engine.game

    def answer(command: str) -> str:
        reply = engine.handle(command)
        assert reply.startswith("="), (command, reply)
        return reply[1:].strip()

    stones = answer(setup).split() or setup.split()[1:]  # fixed_handicap names the points it chose
    moves = []
    for command in commands:
        verb, color, *vertex = command.split()
        chosen = answer(command)  # genmove's move; play answers nothing
        moves.append(Move("bw".index(color), game.text_to_action(chosen if verb == "genmove" else vertex[0])))
    result = answer("final_score") if commands[-2:] == ["play b pass", "play w pass"] else None
    path = tmp_path / "game.sgf"
    answer(f"printsgf {path}")
    [record] = read_in_sabaki_and_sgfmill(sabaki_sgf, path)
    handicap = Setup(black=tuple(sorted(game.text_to_action(v) for v in stones)))
    assert record == GoRecord(size=9, komi=0.5, events=(handicap, *moves), to_play=None if moves else 1,
                              handicap=len(stones), result=result, rules="Chinese")
    # and tengen's own loadsgf restores the board, the captures and whose turn it is
    other = GtpEngine(size=19)
    assert other.handle(f"loadsgf {path}") == "=\n\n"
    assert other.handle("showboard") == engine.handle("showboard")
