"""What guards the pages (web/guard.py), tried against the real ``tengen play`` as
another web site, another host and a greedy client would: DNS rebinding, cross-site
requests, the token off loopback and where it is kept, the searches one client and
all clients may queue, and the headers every answer carries."""

from __future__ import annotations

import http.client
import json
import os
import stat
import threading
from typing import Any
from urllib.parse import urlsplit

import pytest
from play_server import PlayServer, write_checkpoint

from tengen.testing.waiting import wait_for
from tengen.web.guard import CONTENT_SECURITY_POLICY
from tengen.web.play import MAX_SEARCHES, MAX_SEARCHES_PER_CLIENT, MAX_VISITS

PATIENCE_S = 60


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return write_checkpoint(tmp_path_factory.mktemp("ttt") / "best", {"name": "tictactoe"})


@pytest.fixture(scope="module")
def loopback_page(checkpoint):
    server = PlayServer(checkpoint)
    yield server
    assert server.close() == 0, server.stderr()


@pytest.fixture(scope="module")
def exposed_page(tmp_path_factory):
    """``tengen play --host 0.0.0.0``, its stdout a pipe (as in a service's log), and its
    token. One leaf per round: a search of MAX_VISITS takes seconds (8 s on 2 cores)."""
    config_home = tmp_path_factory.mktemp("config")
    checkpoint = write_checkpoint(tmp_path_factory.mktemp("ttt-slow") / "best", {"name": "tictactoe"},
                                  leaves_per_round=1)
    server = PlayServer(checkpoint, "--host", "0.0.0.0", env={**os.environ, "XDG_CONFIG_HOME": str(config_home)})
    token_file = config_home / "tengen" / "play-token"
    server.token_line = server.read_line()
    server.token_file = token_file
    server.token = token_file.read_text().strip()
    yield server
    assert server.close() == 0, server.stderr()


def request(server, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
            source: str = "127.0.0.1") -> tuple[int, dict[str, str], Any]:
    """(status, headers, decoded JSON or text) of one raw request from the address ``source``."""
    port = urlsplit(server.url).port
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120, source_address=(source, 0))
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    try:
        connection.request(method, path, body=data, headers=headers or {})
        response = connection.getresponse()
        raw = response.read()
        answer_headers = {k.lower(): v for k, v in response.getheaders()}
    finally:
        connection.close()
    text = raw.decode()
    is_json = "json" in answer_headers.get("content-type", "")
    return response.status, answer_headers, json.loads(text) if is_json else text


JSON = {"Content-Type": "application/json"}


def test_a_loopback_page_answers_only_to_loopback_names(loopback_page):
    # DNS rebinding: attacker.example comes to resolve to 127.0.0.1, and the user's
    # browser sends its name in Host
    port = urlsplit(loopback_page.url).port
    status, _, answer = request(loopback_page, "GET", "/api/info", headers={"Host": f"attacker.example:{port}"})
    assert status == 421 and "answers to 127.0.0.1 and localhost only" in answer["error"]
    for name in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}"):
        assert request(loopback_page, "GET", "/api/info", headers={"Host": name})[0] == 200, name


def test_another_site_cannot_change_state(loopback_page):
    port = urlsplit(loopback_page.url).port
    new_game = {"person": 0}
    status, _, answer = request(loopback_page, "POST", "/api/games", new_game,
                                headers={**JSON, "Origin": "http://attacker.example"})
    assert status == 403 and "http://attacker.example may not change" in answer["error"]
    status, _, answer = request(loopback_page, "POST", "/api/games", new_game,
                                headers={**JSON, "Sec-Fetch-Site": "cross-site"})
    assert status == 403
    # a form on another site can post text/plain or form data without asking first
    status, _, answer = request(loopback_page, "POST", "/api/games", b"person=0",
                                headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 415 and "takes application/json" in answer["error"]
    assert request(loopback_page, "POST", "/api/games", new_game)[0] == 415  # no Content-Type at all
    status, _, view = request(loopback_page, "POST", "/api/games", new_game,
                              headers={**JSON, "Origin": f"http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"})
    assert status == 200 and view["person"] == 0


def test_every_answer_carries_the_security_headers(loopback_page):
    for path in ("/", "/static/play.js", "/api/info", "/no-such-page", "/api/games/nope"):
        status, headers, _ = request(loopback_page, "GET", path)
        assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY, path
        assert headers["x-content-type-options"] == "nosniff" and headers["referrer-policy"] == "no-referrer", path
        assert (headers.get("cache-control") == "no-store") == path.startswith("/api/"), (path, headers)
    assert "frame-ancestors 'none'" in CONTENT_SECURITY_POLICY and "unsafe-inline" not in CONTENT_SECURITY_POLICY


def test_off_loopback_play_needs_its_token_which_goes_to_a_private_file(exposed_page):
    # stdout is a pipe here, kept by whatever runs the service: the token is not in it
    assert exposed_page.token_line == f"token: in {exposed_page.token_file} (readable by you alone)"
    assert stat.S_IMODE(exposed_page.token_file.stat().st_mode) == 0o600 and len(exposed_page.token) >= 16
    assert "anyone who can reach this machine and has the token can play the model" in exposed_page.stderr()
    status, _, answer = request(exposed_page, "GET", "/api/info")
    assert status == 401 and "token" in answer["error"]
    assert request(exposed_page, "GET", "/api/info", headers={"Authorization": "Bearer not-the-token"})[0] == 401
    # off loopback any name may reach it (the token guards it, not the Host)
    status, _, info = request(exposed_page, "GET", "/api/info",
                              headers={"Authorization": f"Bearer {exposed_page.token}", "Host": "gpu-box.lan"})
    assert status == 200 and info["game"] == "tictactoe"
    assert request(exposed_page, "GET", "/")[0] == 200  # the page itself loads, to ask for the token


def test_searches_are_bounded_per_client_and_in_all(exposed_page):
    auth = {"Authorization": f"Bearer {exposed_page.token}", **JSON}

    def new_game(source: str) -> str:
        status, _, view = request(exposed_page, "POST", "/api/games", {"person": 1}, headers=auth, source=source)
        assert status == 200, view
        return view["id"]

    def thinking(game: str) -> bool:
        return request(exposed_page, "GET", f"/api/games/{game}", headers=auth)[2]["thinking"]

    answers: list[tuple[str, int]] = []

    def search(source: str, game: str, visits: int) -> None:
        status, _, _ = request(exposed_page, "POST", f"/api/games/{game}/reply", {"simulations": visits},
                               headers=auth, source=source)
        answers.append((source, status))

    def refused(source: str) -> dict:
        status, _, answer = request(exposed_page, "POST", f"/api/games/{new_game(source)}/reply",
                                    {"simulations": 1}, headers=auth, source=source)
        assert status == 429, answer
        return answer

    # The first search is long (MAX_VISITS) and the others queue behind it on the one
    # search thread; clients 127.0.0.1.. each queue as many as they may, until all are.
    clients = [f"127.0.0.{n}" for n in range(1, MAX_SEARCHES // MAX_SEARCHES_PER_CLIENT + 1)]
    threads = []
    for source in clients:
        for _ in range(MAX_SEARCHES_PER_CLIENT):
            game = new_game(source)
            threads.append(threading.Thread(target=search, args=(source, game, MAX_VISITS if not threads else 1)))
            threads[-1].start()
            wait_for(lambda g=game: thinking(g), timeout_s=PATIENCE_S, every_s=0.05, what="the search accepted")
        if source == clients[0]:  # one more of the first client's: over its share
            assert "already waiting or running" in refused(source)["error"]
    assert f"the model has {MAX_SEARCHES} searches waiting or running" in refused("127.0.0.99")["error"]
    for thread in threads:
        thread.join()
    assert sorted(answers) == sorted((source, 200) for source in clients for _ in range(MAX_SEARCHES_PER_CLIENT))
    # all answered: a client may search again
    status, _, _ = request(exposed_page, "POST", f"/api/games/{new_game('127.0.0.99')}/reply",
                           {"simulations": 8}, headers=auth, source="127.0.0.99")
    assert status == 200
