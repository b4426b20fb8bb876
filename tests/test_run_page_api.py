"""``tengen serve``'s JSON API over real HTTP, on the directory of a short real run
(tests/short_run.py): the command started as a person starts it, called with urllib.
What it answers is checked against the run's own files, read here with the
run's own readers (run/records.py, the codec, the game records); a live run's Redis
stream against the session's real Redis."""

from __future__ import annotations

import dataclasses
import json
import shutil
import socket
import stat
from pathlib import Path

import pytest
from fake_clock import FakeClock
from page_server import PageServer

from tengen.cluster.keys import RunKeys
from tengen.cluster.stream import SampleStream
from tengen.engine.games import make_game
from tengen.play.game_records import read_plain
from tengen.run.codec import decode_game
from tengen.run.records import (
    EvaluationLine,
    append_evaluation,
    read_evaluations,
    read_gating_history,
    read_ladder,
    read_status,
    read_status_history,
    write_status,
)
from tengen.run.run_dir import RunDir, version_id
from tengen.web import run_view

pytestmark = pytest.mark.slow  # a real short run (tests/short_run.py) and the page server on it

TTT = make_game("tictactoe")


def serve(run_dir: Path, *args: str) -> PageServer:
    return PageServer("serve", "--run-dir", str(run_dir), "--port", "0", *args)


@pytest.fixture(scope="module")
def page(short_run_dir):
    server = serve(short_run_dir)
    yield server
    assert server.close() == 0, server.stderr()


def with_ids(result: dict) -> dict:
    """A gating result as the API sends it: its versions' ids beside their numbers, for
    the page to show as they are."""
    return {**result, "candidate_id": version_id(result["candidate"]), "best_id": version_id(result["best"])}


def board_after(moves: list[int]) -> str:
    state, _ = TTT.state_from_moves(moves)
    return "".join(str(int(x)) for x in TTT.board(state).ravel())


def test_the_page_is_on_this_machine_only_and_names_the_run(page, short_run_dir):
    assert page.url.startswith("http://127.0.0.1:") and page.url.endswith("/")
    status, html, headers = page.get_text("/")
    assert status == 200 and headers["Content-Type"].startswith("text/html") and 'id="ladder-plot"' in html
    status, info = page.get("/api/info")
    assert status == 200
    assert info["run_id"] == json.loads((short_run_dir / "run.json").read_text())["run_id"]
    assert (info["game"], info["rows"], info["cols"], info["kind"]) == ("tictactoe", 3, 3, "cells")
    assert info["config"]["gating"] == "threshold" and info["config"]["keep_game_every"] == 5


def test_the_server_loads_neither_tensorflow_nor_ray(page):
    maps = Path(f"/proc/{page.process.pid}/maps")
    if not maps.exists():
        pytest.skip("no /proc here to see what the server loaded")
    loaded = maps.read_text()
    assert "libtensorflow" not in loaded and "_raylet" not in loaded


def test_the_status_history_is_the_runs_status_lines(page, short_run_dir):
    files = RunDir(short_run_dir)
    lines = read_status_history(files)
    status, history = page.get("/api/status")
    assert status == 200 and not history["reset"]
    assert [p["time"] for p in history["points"]] == [line.time for line in lines]
    assert [p.get("losses") for p in history["points"]] == [line.losses for line in lines]
    assert history["latest"]["learner_step"] == read_status(files).learner_step
    assert "reported_games" not in history["latest"]
    assert lines[-1].last_gating is not None and history["latest"]["last_gating"] == with_ids(lines[-1].last_gating)
    assert history["next"] == (short_run_dir / "status.jsonl").stat().st_size
    status, later = page.get(f"/api/status?after={history['next']}")
    assert status == 200 and later["points"] == [] and later["latest"] is None


def test_a_live_run_sends_only_its_new_status_lines(short_run_dir, tmp_path):
    files = RunDir(tmp_path / "run")
    shutil.copytree(short_run_dir, files.path)
    server = serve(files.path)
    try:
        _, first = server.get("/api/status")
        last = read_status(files)
        new = dataclasses.replace(last, time=last.time + 10, learner_step=last.learner_step + 7)
        write_status(files, new)  # as TrainingLoop.report writes it
        _, later = server.get(f"/api/status?after={first['next']}")
        assert [p["learner_step"] for p in later["points"]] == [new.learner_step]
        assert later["latest"]["time"] == new.time
    finally:
        assert server.close() == 0, server.stderr()


def test_the_ladder_is_ladder_json_sent_from_what_the_page_knows(page, short_run_dir):
    ladder = read_ladder(RunDir(short_run_dir)).entries
    assert len(ladder) >= 2, "the short run promoted nothing"
    # the initial network's entry has no gating result; each promotion's has its ids
    sent = [*ladder[:1], *({**e, "result": with_ids(e["result"])} for e in ladder[1:])]
    _, answer = page.get("/api/ladder")
    assert answer["entries"] == sent and answer["count"] == len(ladder)
    assert answer["entries"][1]["result"]["best_id"] == "000000"  # the first promotion beat the initial network
    _, answer = page.get(f"/api/ladder?known={len(ladder) - 1}")
    assert answer["entries"] == sent[-1:] and answer["start"] == len(ladder) - 1
    _, answer = page.get(f"/api/ladder?known={len(ladder) + 5}")  # a page that saw another run
    assert answer["reset"] and answer["entries"] == sent


def test_strength_is_evaluations_jsonl_sent_from_what_the_page_knows(short_run_dir, tmp_path):
    files = RunDir(tmp_path / "run")
    shutil.copytree(short_run_dir, files.path)
    files.evaluations.unlink(missing_ok=True)
    server = serve(files.path)
    try:
        _, answer = server.get("/api/strength")
        assert answer == {"evaluations": [], "start": 0, "count": 0, "reset": False}  # none yet
        for version in (0, 2):
            append_evaluation(files, EvaluationLine(
                time=1_800_000_000.0 + version, version=version, elapsed_s=5.0, cpu_s=3.0, learner_step=10 * version,
                games=version, scores=[{"reference": "optimal_moves", "measure": "share", "value": 0.5, "se": 0.03,
                                        "n": 256, "skipped": None}]))
        sent = [line.to_json() for line in read_evaluations(files)]
        _, answer = server.get("/api/strength")
        assert answer["evaluations"] == sent and answer["count"] == 2
        assert answer["evaluations"][1]["id"] == "000002" and answer["evaluations"][1]["scores"][0]["se"] == 0.03
        _, answer = server.get("/api/strength?known=1")
        assert answer["evaluations"] == sent[1:] and answer["start"] == 1
        _, answer = server.get("/api/strength?known=9")  # a page that saw another run
        assert answer["reset"] and answer["evaluations"] == sent
        assert server.get("/api/strength?known=x")[0] == 400
    finally:
        assert server.close() == 0, server.stderr()


def test_gating_lists_every_match_newest_first_rejections_too(page, short_run_dir, tmp_path):
    matches = [line.to_json() for line in read_gating_history(RunDir(short_run_dir))]
    ladder = read_ladder(RunDir(short_run_dir)).entries
    # every promotion on the ladder was a match that passed
    assert sum(m["decision"] == "promote" for m in matches) == len(ladder) - 1
    _, answer = page.get("/api/gating")
    assert answer["matches"] == [with_ids(m) for m in matches[::-1][:10]]
    # a line still being written is skipped, the rest still listed
    run_dir = tmp_path / "run"
    shutil.copytree(short_run_dir, run_dir)
    with open(run_dir / "gating.jsonl", "a", encoding="utf-8") as f:
        f.write('{"candidate": 99, "wi')
    server = serve(run_dir)
    try:
        _, answer = server.get("/api/gating")
        assert answer["matches"] == [with_ids(m) for m in matches[::-1][:10]]
    finally:
        assert server.close() == 0, server.stderr()


def test_a_record_this_tengen_does_not_read_is_refused_by_its_files_name(short_run_dir, tmp_path):
    files = RunDir(tmp_path / "run")
    shutil.copytree(short_run_dir, files.path)
    files.ladder.write_text(json.dumps({"format": 2, "entries": []}))  # as a newer tengen might write it
    server = serve(files.path)
    try:
        status, answer = server.get("/api/ladder")
        assert status == 500 and answer["error"].startswith(f"{files.ladder}: a ladder of format 2, newer than")
        assert server.get("/api/status")[0] == 200  # the rest of the page still reads
    finally:
        assert server.close() == 0, server.stderr()


def test_self_play_games_replay_move_by_move_with_their_search(page, short_run_dir):
    _, games = page.get("/api/games")
    assert games["source"] == "directory" and "single-process" in games["note"]
    kept = sorted((short_run_dir / "games").glob("*.game"), key=lambda p: -p.stat().st_mtime)
    assert [g["key"] for g in games["selfplay"]] == [f"selfplay/{p.stem}" for p in kept[:20]]
    for listed in games["selfplay"][:3]:
        status, game = page.get(f"/api/game?key={listed['key']}")
        assert status == 200
        stem = listed["key"].split("/", 1)[1]
        record = decode_game((short_run_dir / "games" / f"{stem}.game").read_bytes(),
                             planes_shape=TTT.planes_shape, num_actions=TTT.num_actions, game_name=TTT.name)
        _, result = read_plain((short_run_dir / "games" / f"{stem}.txt").read_text(), TTT)
        moves = record.moves.tolist()
        assert [m["action"] for m in game["move_list"]] == moves
        assert game["boards"] == [board_after(moves[:i]) for i in range(len(moves) + 1)]
        assert [m["value"] for m in game["move_list"]] == pytest.approx(record.search_value.tolist(), abs=1e-4)
        assert [m["visits"] for m in game["move_list"]] == record.search_visits.tolist()
        assert game["result"] == listed["result"] == result and game["has_search"]


def test_gating_games_replay_without_search(page, short_run_dir):
    _, games = page.get("/api/games")
    assert games["gating"], "the short run kept no gating game"
    listed = games["gating"][0]
    match, number = listed["key"].split("/")[1:]
    line = (short_run_dir / "games" / "gating" / match / f"{number}.txt").read_text()
    finished, result = read_plain(line, TTT)
    _, game = page.get(f"/api/game?key={listed['key']}")
    assert [m["action"] for m in game["move_list"]] == list(finished.moves) and game["result"] == result
    assert not game["has_search"] and all("value" not in m for m in game["move_list"])
    assert listed["candidate"] == match.split("-")[0] and game["players"][0] in match.split("-")


def test_bad_requests_say_why(page):
    assert page.get("/api/game?key=selfplay/no-such-game") == (
        404, {"error": "no game 'selfplay/no-such-game' in this run (the run directory keeps only its newest games)"})
    status, error = page.get("/api/game?key=../../etc/passwd")
    assert status == 404 and "not a game key" in error["error"]
    status, error = page.get("/api/status?after=-3")
    assert status == 400 and "after must be an integer" in error["error"]


def _live_copy(short_run_dir: Path, tmp_path: Path, url: str, password: str | None) -> RunDir:
    files = RunDir(tmp_path / "live")
    shutil.copytree(short_run_dir, files.path)
    files.write_private(files.connection, json.dumps({"url": url, "password": password}).encode())
    return files


def test_a_live_runs_newest_games_come_from_its_redis_stream(short_run_dir, tmp_path, redis_server, redis_client):
    files = _live_copy(short_run_dir, tmp_path, redis_server.url, redis_server.password)
    blobs = [p.read_bytes() for p in sorted(files.games.glob("*.game"))[:3]]
    SampleStream(redis_client, files.run_id(), maxlen=100).add_many(blobs)
    server = serve(files.path)
    try:
        _, games = server.get("/api/games")
        assert games["source"] == "stream" and "live run" in games["note"]
        decoded = [decode_game(b, planes_shape=TTT.planes_shape, num_actions=TTT.num_actions, game_name=TTT.name)
                   for b in blobs]
        assert [g["id"] for g in games["selfplay"]] == [r.game_id for r in reversed(decoded)]  # newest first
        redis_client.delete(RunKeys(files.run_id()).samples)  # the stream moves on
        _, game = server.get(f"/api/game?key={games['selfplay'][0]['key']}")
        assert [m["action"] for m in game["move_list"]] == decoded[-1].moves.tolist()  # still replayable
    finally:
        assert server.close() == 0, server.stderr()


def test_a_redis_that_does_not_answer_falls_back_to_the_directory(short_run_dir, tmp_path):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    files = _live_copy(short_run_dir, tmp_path, f"redis://127.0.0.1:{port}/0", "x")
    server = serve(files.path)
    try:
        for _ in range(2):  # answered, within the request's timeout (a run's client would wait minutes)
            status, games = server.get("/api/games", timeout=60)
            assert status == 200 and games["source"] == "directory" and "does not answer" in games["note"]
            assert games["selfplay"]
    finally:
        assert server.close() == 0, server.stderr()


def test_a_redis_that_did_not_answer_is_asked_again_only_after_redis_retry_s(short_run_dir, tmp_path, monkeypatch):
    files = _live_copy(short_run_dir, tmp_path, "redis://127.0.0.1:9/0", "x")
    tries: list[float] = []

    def no_answer(files: RunDir, *, wait_s: float) -> None:
        tries.append(wait_s)  # how long it was willing to wait

    monkeypatch.setattr(run_view, "live_client", no_answer)
    clock = FakeClock()
    view = run_view.RunView(files.path, clock=clock)
    for _ in range(3):  # the page polls: only the first poll waits for Redis
        games = view.games()
        assert games["source"] == "directory" and "does not answer" in games["note"] and games["selfplay"]
    assert tries == [run_view.REDIS_WAIT_S]
    clock.advance(run_view.REDIS_RETRY_S - 0.5)
    view.games()
    assert len(tries) == 1
    clock.advance(0.5)
    view.games()
    assert tries == [run_view.REDIS_WAIT_S] * 2


# -- who may read it ------------------------------------------------------------------------------
def test_any_other_address_needs_the_token_it_keeps_in_the_run_directory(short_run_dir):
    server = serve(short_run_dir, "--host", "0.0.0.0")
    try:
        assert server.printed_url.startswith("http://0.0.0.0:")
        # stdout is a pipe, kept by whatever runs the service: the token goes to a private file
        token_file = short_run_dir / "serve-token"
        assert server.read_line() == f"token: in {token_file} (readable by you alone)"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 16
        status, error = server.get("/api/info")
        assert status == 401 and "token" in error["error"]
        assert server.get("/api/games", headers={"Authorization": "Bearer not-the-token"})[0] == 401
        status, info = server.get("/api/info", headers={"Authorization": f"Bearer {token}"})
        assert status == 200 and info["game"] == "tictactoe"
        assert server.get_text("/")[0] == 200  # the page itself loads, to ask for the token
        assert "anyone who can reach this machine and has the token can read the run" in server.stderr()
    finally:
        assert server.close() == 0


def test_a_token_given_on_loopback_is_asked_for_too(short_run_dir):
    token = "a-token-of-our-own-choosing"
    server = serve(short_run_dir, "--token", token)
    try:
        assert server.read_line(timeout=1) == ""  # a given token is not printed
        assert server.get("/api/ladder")[0] == 401
        assert server.get("/api/ladder", headers={"Authorization": f"Bearer {token}"})[0] == 200
    finally:
        assert server.close() == 0


def test_bad_arguments_are_refused(short_run_dir, tmp_path):
    import subprocess
    import sys

    from page_server import ROOT

    def tengen(*args):
        return subprocess.run([sys.executable, "-m", "tengen.cli", "serve", *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)

    done = tengen("--run-dir", str(tmp_path / "nothing"))
    assert done.returncode == 2 and "not a run directory" in done.stderr
    done = tengen("--run-dir", str(short_run_dir), "--host", "0.0.0.0", "--token", "short")
    assert done.returncode == 2 and "--token must be at least 16 characters" in done.stderr
