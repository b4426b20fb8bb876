"""``tengen play``'s JSON API over real HTTP: the command started as a person starts
it, called with urllib. A tiny untrained model plays; the person's moves come from
the exact tic-tac-toe solver, so the person never loses, whatever the model does."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading

import pytest
from play_server import ROOT, PlayServer, write_checkpoint

from tengen.engine.games.go import GoGame
from tengen.engine.games.mnk import tictactoe
from tengen.play.sgf import read_sgf
from tengen.play.solvers import tictactoe_optimal_actions
from tengen.testing.waiting import wait_for
from tengen.web.play import MAX_VISITS

TTT = tictactoe()
#: how long the server may take to do what a test waits for (a shared, slow machine)
PATIENCE_S = 60


@pytest.fixture(scope="module")
def ttt_server(tmp_path_factory):
    server = PlayServer(write_checkpoint(tmp_path_factory.mktemp("ttt") / "best", {"name": "tictactoe"}))
    yield server
    assert server.close() == 0, server.stderr()


def test_the_url_is_the_first_line_and_on_this_machine_only(ttt_server):
    assert ttt_server.url.startswith("http://127.0.0.1:") and ttt_server.url.endswith("/")
    status, page, headers = ttt_server.get_text("/")
    assert status == 200 and "<svg id=\"board\"" in page and headers["Content-Type"].startswith("text/html")
    status, info = ttt_server.call("GET", "/api/info")
    assert status == 200 and (info["game"], info["rows"], info["cols"], info["kind"]) == ("tictactoe", 3, 3, "cells")
    assert info["simulations"] == 32  # the checkpoint's config: mcts.simulations
    assert info["moves"] == [str(n) for n in range(1, 10)]


def _replayed(moves: list[dict]):
    state = TTT.initial_state()
    for move in moves:
        TTT.play(state, move["action"])
    return state


def test_a_whole_game_against_the_perfect_player_ends_with_the_right_result(ttt_server):
    status, view = ttt_server.call("POST", "/api/games", {"person": 1})  # the model plays X, first
    assert status == 200 and view["to_play"] == 0 and view["moves"] == []
    game = view["id"]
    while not view["over"]:
        if view["to_play"] != view["person"]:
            status, view = ttt_server.call("POST", f"/api/games/{game}/reply", {"simulations": 64})
            assert status == 200, view
            thought = view["thought"]
            assert thought["visits"] >= 64 and abs(sum(thought["share"]) - 1) < 1e-6
            assert 0 <= thought["expected_score"] <= 1 and thought["pv"][0] == view["moves"][-1]["text"]
            assert thought["lead"] is None  # no score head
            continue
        state = _replayed(view["moves"])
        assert view["legal"] == [a for a in range(9) if TTT.legal_mask(state)[a]]
        status, view = ttt_server.call("POST", f"/api/games/{game}/play",
                                       {"action": min(tictactoe_optimal_actions(state))})
        assert status == 200, view
    state = _replayed(view["moves"])
    outcome = TTT.outcome(state)  # +1: X (the model) won
    assert outcome <= 0, "the perfect player lost"
    expected = ("Draw", None) if outcome == 0 else ("O wins", 1)
    assert (view["result"]["text"], view["result"]["winner"]) == expected
    status, error = ttt_server.call("POST", f"/api/games/{game}/play", {"action": 0})
    assert status == 422 and "over" in error["error"]


def test_an_illegal_move_changes_nothing_and_says_why(ttt_server):
    _, view = ttt_server.call("POST", "/api/games", {"person": 0})
    game = view["id"]
    _, view = ttt_server.call("POST", f"/api/games/{game}/play", {"action": 4})
    status, error = ttt_server.call("POST", f"/api/games/{game}/play", {"action": 0})
    assert status == 422 and error == {"error": "it is the model's move"}
    _, view = ttt_server.call("POST", f"/api/games/{game}/reply", {"seconds": 0.2})
    assert view["thought"]["seconds"] >= 0.2 or view["thought"]["visits"] >= MAX_VISITS, view["thought"]
    status, error = ttt_server.call("POST", f"/api/games/{game}/play", {"action": 4})
    assert status == 422 and error == {"error": "5 is not legal here"}
    assert ttt_server.call("GET", f"/api/games/{game}")[1] == {**view, "thinking": False}
    status, view = ttt_server.call("POST", f"/api/games/{game}/undo")
    assert status == 200 and view["moves"] == [] and view["to_play"] == 0


def test_bad_requests_get_clear_errors(ttt_server):
    _, view = ttt_server.call("POST", "/api/games", {})  # the person plays first by default
    game = view["id"]
    assert view["person"] == 0
    for path, body, status, words in [
        ("/api/games", {"person": 2}, 400, "person must be 0"),
        (f"/api/games/{game}/play", {"action": "5"}, 400, "action must be an integer"),
        (f"/api/games/{game}/play", {"action": 9}, 422, "outside 0..8"),
        (f"/api/games/{game}/reply", {}, 422, "it is your move"),
        ("/api/games/nope/play", {"action": 0}, 404, "no such game"),
        (f"/api/games/{game}/undo", None, 422, "no move of yours"),
        (f"/api/games/{game}/resign", None, 422, "tictactoe has no resignation"),
    ]:
        answer = ttt_server.call("POST", path, body)
        assert answer[0] == status and words in answer[1]["error"], (path, body, answer)
    ttt_server.call("POST", f"/api/games/{game}/play", {"action": 0})
    for limits, words in [({"simulations": 0}, "simulations must be an integer in 1..10000"),
                          ({"seconds": 120}, "seconds must be a number in (0, 60]")]:
        answer = ttt_server.call("POST", f"/api/games/{game}/reply", limits)
        assert answer[0] == 400 and words in answer[1]["error"], answer


def test_a_reply_of_one_visit_is_the_networks_own_choice(ttt_server):
    _, view = ttt_server.call("POST", "/api/games", {"person": 1})
    status, view = ttt_server.call("POST", f"/api/games/{view['id']}/reply", {"simulations": 1})
    assert status == 200 and len(view["moves"]) == 1, view


def test_the_server_answers_while_the_model_thinks(ttt_server):
    _, view = ttt_server.call("POST", "/api/games", {"person": 1})
    game = view["id"]
    replies: list = []
    thinking = threading.Thread(target=lambda: replies.append(
        ttt_server.call("POST", f"/api/games/{game}/reply", {"seconds": 3})))
    thinking.start()
    # An answer that says the model is thinking came during its search: a server that
    # stopped answering while it searched would answer only once the model had moved.
    views: list = []

    def answered_or_moved() -> bool:
        views.append(ttt_server.call("GET", f"/api/games/{game}"))
        return views[-1][1]["thinking"] or not thinking.is_alive()

    wait_for(answered_or_moved, timeout_s=PATIENCE_S, every_s=0.01, what="an answer while the model thinks")
    status, now = views[-1]
    other = ttt_server.call("POST", "/api/games", {"person": 0})  # another game meanwhile
    refused = ttt_server.call("POST", f"/api/games/{game}/undo")
    status_after, after = ttt_server.call("GET", f"/api/games/{game}")
    thinking.join()
    assert status == 200 and now["thinking"] and now["moves"] == [], views
    assert other[0] == 200 and status_after == 200 and after["thinking"], "the other game came after the search"
    assert refused == (409, {"error": "wait: the model is thinking"})
    status, view = replies[0]
    # Three seconds, unless the search reached its most visits first (tic-tac-toe is small).
    assert status == 200 and len(view["moves"]) == 1
    assert view["thought"]["seconds"] >= 3 or view["thought"]["visits"] >= MAX_VISITS, view["thought"]


def test_go_pass_resign_sgf_and_open(tmp_path):
    """A 9x9 model that reads Go's feature planes and has a score head; ``--open`` hands
    the URL to the browser that $BROWSER names."""
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n')
    browser.chmod(browser.stat().st_mode | stat.S_IXUSR)
    checkpoint = write_checkpoint(tmp_path / "best", {"name": "go", "size": 9, "komi": 7.5, "features": True},
                                  simulations=16, network={"score": True})
    server = PlayServer(checkpoint, "--open", env={**os.environ, "BROWSER": str(browser)})
    try:
        wait_for(lambda: opened.exists() and opened.read_text().strip(), timeout_s=PATIENCE_S,  # in the background
                 every_s=0.1, what="$BROWSER given the URL")
        assert opened.read_text().strip() == server.url
        go = GoGame(size=9, komi=7.5)
        _, info = server.call("GET", "/api/info")
        assert (info["kind"], info["pass_action"], info["komi"]) == ("go", 81, 7.5)
        assert info["column_labels"] == list("ABCDEFGHJ") and info["row_labels"][0] == "9"
        _, view = server.call("POST", "/api/games", {"person": 0})
        game = view["id"]
        _, view = server.call("POST", f"/api/games/{game}/play", {"action": go.text_to_action("E5")})
        _, view = server.call("POST", f"/api/games/{game}/reply", {"simulations": 16})
        assert len(view["moves"]) == 2 and len(view["thought"]["share"]) == 82
        # the score head's belief about the position it moved in, from its side
        assert isinstance(view["thought"]["lead"], float) and view["thought"]["lead_stdev"] >= 0.5
        _, view = server.call("POST", f"/api/games/{game}/play", {"action": 81})  # pass
        assert view["moves"][-1]["text"] == "pass" and not view["over"] and view["to_play"] == 1
        _, view = server.call("POST", f"/api/games/{game}/undo")  # (the model might pass too and end it)
        assert len(view["moves"]) == 2
        _, view = server.call("POST", f"/api/games/{game}/resign")
        assert view["over"] and view["result"]["text"] == "W+R" and view["result"]["winner"] == 1
        status, text, headers = server.get_text(f"/api/games/{game}/sgf")
        assert status == 200 and headers["Content-Type"].startswith("application/x-go-sgf")
        assert headers["Content-Disposition"].endswith(f'filename="tengen-go9-{game}.sgf"')
        record = read_sgf(text)
        assert (record.size, record.komi, record.result, record.players) == (9, 7.5, "W+R", ("person", "tengen"))
        assert [m.action for m in record.moves] == [m["action"] for m in view["moves"]]
    finally:
        assert server.close() == 0, server.stderr()


def test_bad_arguments_and_a_missing_checkpoint_are_named(tmp_path):
    def play(*args: str):
        return subprocess.run([sys.executable, "-m", "tengen.cli", "play", *args], capture_output=True,
                              text=True, timeout=300, cwd=ROOT)

    done = play("--checkpoint", str(tmp_path), "--sims", "0")
    assert done.returncode == 2 and "tengen play: --sims must be in 1..10000" in done.stderr
    done = play("--checkpoint", str(tmp_path))  # no model there
    assert done.returncode == 2 and "no config.yaml beside" in done.stderr and done.stdout == ""
