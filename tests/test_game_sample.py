"""The games a run keeps and shows: every K-th self-play game in the run directory
(run/game_sample.py), the gating matches' games, and `tengen games`
(tengen/run_control.py) on a finished run and on a live run's Redis stream."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_cli import tengen_loading

from tengen.cluster.stream import SampleStream
from tengen.engine.games import make_game
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.engine.selfplay import SelfPlay, SelfPlaySettings
from tengen.play.game_records import parse_move_comment, read_plain, utc_date
from tengen.play.sgf import load_sgf
from tengen.run.codec import decode_game, encode_game, game_decoder
from tengen.run.config import parse_config
from tengen.run.game_sample import GameSample, game_number
from tengen.run.records import read_ladder, read_status
from tengen.run.run_dir import RunDir
from tengen.run.sample_stream import LocalSampleStream
from tengen.run.single_process import SingleProcessRun

ROOT = Path(__file__).resolve().parent.parent
TTT = make_game("tictactoe")
GO5 = {
    "game": {"name": "go", "size": 5, "komi": 0.5, "history_length": 2},
    "network": {"blocks": 1, "filters": 8},
    "mcts": {"simulations": 8, "leaves_per_round": 4},
    "selfplay": {"games_in_flight": 16, "temperature_moves": 4, "full_search_fraction": 0.5,
                 "cheap_simulations": 4},
    "train": {"batch_size": 32, "min_positions": 64, "candidate_every": 10, "replay_window": 5000},
    "gating": {"rule": "threshold", "threshold": 0.5, "games": 4, "games_in_flight": 4},
    "run": {"keep_game_every": 3, "keep_games_max": 500},
    "stop": {"promotions": 1, "steps": 30, "minutes": 3},
    "seed": 3,
}


def tengen(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "tengen.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def ttt_blobs() -> list[bytes]:
    """Ten real tic-tac-toe games numbered 0..9 by worker incarnation w000.ab."""
    settings = SelfPlaySettings(search=SearchSettings(simulations=8))
    records = SelfPlay(TTT, games=4, seed=1, settings=settings).play(uniform_evaluator(9), games=10)
    return [encode_game(dataclasses.replace(r, game_id=f"w000.ab:{i}"), worker_id="w000")
            for i, r in enumerate(records[:10])]


def test_game_numbers_come_from_the_id():
    assert game_number("w003.1f2e:17") == 17
    assert [game_number(x) for x in (None, "", "3f2a9c", "w0:x")] == [None, None, None, None]


def test_every_kth_game_is_kept_once_and_the_oldest_go_past_the_cap(tmp_path, ttt_blobs):
    files = RunDir(tmp_path)
    stream = LocalSampleStream(maxlen=100)
    stream.add_many(ttt_blobs[:5])
    sample = GameSample(files, TTT, every=3, keep=3, matches=1, log=lambda line: None)
    assert [p.name for p in sample.scan(stream)] == ["w000.ab-0.game", "w000.ab-0.txt",
                                                      "w000.ab-3.game", "w000.ab-3.txt"]
    assert sample.scan(stream) == []  # nothing new
    stream.add_many(ttt_blobs[5:])
    assert [p.name for p in sample.scan(stream)] == ["w000.ab-6.game", "w000.ab-6.txt",
                                                      "w000.ab-9.game", "w000.ab-9.txt"]
    # a resumed run scans the stream afresh and writes nothing twice; the cap kept 3
    assert GameSample(files, TTT, every=3, keep=3, matches=1, log=lambda line: None).scan(stream) == []
    assert sorted(p.name for p in files.games.iterdir()) == ["scanned.json",
        "w000.ab-3.game", "w000.ab-3.txt", "w000.ab-6.game", "w000.ab-6.txt", "w000.ab-9.game", "w000.ab-9.txt"]
    kept = decode_game((files.games / "w000.ab-9.game").read_bytes(), planes_shape=TTT.planes_shape,
                       num_actions=TTT.num_actions, game_name=TTT.name)
    assert kept.game_id == "w000.ab:9" and kept.search_value is not None
    line = (files.games / "w000.ab-9.txt").read_text()
    back, _ = read_plain(line, TTT)
    assert back.moves == tuple(kept.moves.tolist()) and back.search_visits == tuple(kept.search_visits.tolist())


def test_keep_every_zero_keeps_nothing(tmp_path, ttt_blobs):
    stream = LocalSampleStream(maxlen=100)
    stream.add_many(ttt_blobs)
    assert GameSample(RunDir(tmp_path), TTT, every=0, keep=3, matches=1).scan(stream) == []
    assert not (tmp_path / "games").exists()


@pytest.fixture(scope="module")
def go_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("go5") / "run"
    summary = SingleProcessRun(parse_config(GO5), run_dir, log=lambda line: None).run()
    assert summary["error"] is None and summary["games"] >= 3
    return run_dir


@pytest.mark.slow
def test_a_short_run_keeps_every_third_game_as_entry_and_sgf(go_run):
    config = parse_config(GO5)
    game = config.game.make()
    decode = game_decoder(game)
    entries = sorted((go_run / "games").glob("*.game"))
    assert entries
    total = read_status(RunDir(go_run)).games
    # each incarnation numbers its games from 0; every third is kept, the newest may
    # come after the last scan only if the run stopped between two
    assert len(entries) == pytest.approx(total / 3, abs=2)
    for entry in entries:
        record = decode(entry.read_bytes())
        assert int(record.game_id.rsplit(":", 1)[1]) % 3 == 0
        sgf = load_sgf(entry.with_suffix(".sgf"))
        assert (sgf.size, sgf.komi) == (5, 0.5)
        assert [m.action for m in sgf.moves] == record.moves.tolist()
        assert sgf.players == (f"{record.model_version:06d}",) * 2 and sgf.result
        marks = [parse_move_comment(m.comment or "") for m in sgf.moves]
        assert [m[1] for m in marks if m] == record.search_visits.tolist()
        assert [m[2] for m in marks if m] == record.full_search.tolist()


@pytest.mark.slow
def test_gating_matches_keep_their_games_with_both_players(go_run):
    ladder = read_ladder(RunDir(go_run)).entries
    matches = sorted((go_run / "games" / "gating").iterdir())
    assert matches, "a match was played"
    for folder in matches:
        candidate, best = folder.name.split("-")
        games = sorted(folder.glob("*.sgf"))
        assert games
        for path in games:
            sgf = load_sgf(path)
            assert set(sgf.players) == {candidate, best} and sgf.result and sgf.moves
            assert sgf.date in {utc_date(time.time()), utc_date(time.time() - 3600)}  # DT: the match's day (UTC)
    assert len(ladder) >= 1


@pytest.mark.slow
def test_tengen_games_exports_a_finished_runs_sample(go_run, tmp_path):
    done = tengen("games", "--run-dir", str(go_run), "--last", "2", "--export", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    written = sorted((tmp_path / "out").glob("*.sgf"))
    assert len(written) == 2
    assert done.stdout.splitlines()[0] == f"2 game(s) from {go_run / 'games'}"
    newest = sorted((go_run / "games").glob("*.game"), key=lambda p: p.stat().st_mtime)[-2:]
    assert sorted(p.stem for p in written) == sorted(p.stem for p in newest)
    for path in written:
        assert f"wrote {path}" in done.stdout
        assert load_sgf(path).moves == load_sgf(go_run / "games" / path.name).moves
    listed = tengen("games", "--run-dir", str(go_run), "--last", "1")
    assert listed.returncode == 0 and "moves" in listed.stdout.splitlines()[1]


def test_tengen_games_reads_a_live_runs_stream(redis_server, redis_client, tmp_path, ttt_blobs):
    # A run directory whose Redis is up (connection.json, as the embedded server writes
    # it) and whose stream holds games: they come from the stream, not from games/.
    files = RunDir(tmp_path / "live")
    run_id = files.create_identity()
    files.config.write_text(parse_config({"game": {"name": "tictactoe"}}).to_yaml())
    files.write_private(files.connection, json.dumps({"url": redis_server.url,
                                                      "password": redis_server.password}).encode())
    SampleStream(redis_client, run_id, maxlen=100).add_many(ttt_blobs[:4])
    done = tengen("games", "--run-dir", str(files.path), "--last", "3", "--export", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "3 game(s) from the live run's stream"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["w000.ab-1.txt", "w000.ab-2.txt", "w000.ab-3.txt"]
    line = (tmp_path / "out" / "w000.ab-3.txt").read_text()
    assert read_plain(line, TTT)[0].players == ("000000", "000000")


@pytest.mark.slow
def test_tengen_games_loads_neither_tensorflow_nor_ray(go_run, tmp_path):
    done, modules = tengen_loading(tmp_path, "games", "--run-dir", str(go_run), "--last", "1")
    assert done.returncode == 0, done.stderr
    assert "tensorflow" not in modules and "ray" not in modules


def test_tengen_games_says_what_is_wrong():
    done = tengen("games", "--run-dir", "/nonexistent/run")
    assert done.returncode == 2 and "not a run directory" in done.stderr
