"""The play page in a real headless chromium (tests/browser.py): a whole tic-tac-toe
game played by clicking, an illegal click, a Connect Four column and the model's
reply, a Go move, pass and resignation. The server is the real ``tengen play`` on a
tiny untrained model; the person's tic-tac-toe moves come from the exact solver,
so the page must report a draw or the person's win, and which one follows from
the moves it shows. Screenshots are kept under the pytest basetemp, in
``screenshots/`` (the path is printed)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from browser import chrome, screenshot_folder
from play_server import PlayServer, write_checkpoint
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tengen.engine.games.go import GoGame
from tengen.engine.games.mnk import tictactoe
from tengen.play.sgf import read_sgf
from tengen.play.solvers import tictactoe_optimal_actions

pytestmark = pytest.mark.slow  # chromium fetched, pages played

#: seconds the page may take for one of the model's replies (a 2-core machine)
REPLY_TIMEOUT = 120


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return screenshot_folder(tmp_path_factory, "play page")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chrome(tmp_path_factory.mktemp("chromium"))
    yield driver
    driver.quit()


def _server(tmp_path_factory, name: str, game: dict, **kwargs):
    server = PlayServer(write_checkpoint(tmp_path_factory.mktemp(name) / "best", game, **kwargs))
    yield server
    assert server.close() == 0, server.stderr()


@pytest.fixture(scope="module")
def ttt_page(tmp_path_factory):
    yield from _server(tmp_path_factory, "ttt", {"name": "tictactoe"})


@pytest.fixture(scope="module")
def connect4_page(tmp_path_factory):
    yield from _server(tmp_path_factory, "c4", {"name": "connect4"})


@pytest.fixture(scope="module")
def go9_page(tmp_path_factory):
    # as go9 ships: the feature planes, the ownership and score heads
    yield from _server(tmp_path_factory, "go9", {"name": "go", "size": 9, "komi": 7.5, "features": True},
                       simulations=16, network={"ownership": True, "score": True})


# -- what a person sees -----------------------------------------------------------------------
# Read in one script each: the page redraws while the model answers, and a
# WebElement found before a redraw is stale after it.
def moves(driver) -> list[int]:
    """The move list as the page shows it, as actions."""
    return driver.execute_script("return [...document.querySelectorAll('#moves li')].map(li => +li.dataset.action)")


def stones(driver) -> dict[tuple[int, int], int]:
    """(row, col) -> player of every stone drawn on the board."""
    drawn = driver.execute_script("return [...document.querySelectorAll('#board .stone')]"
                                  ".map(s => [+s.dataset.row, +s.dataset.col, +s.dataset.player])")
    return {(row, col): player for row, col, player in drawn}


def heat_map(driver) -> dict[int, float]:
    """action -> the visit share drawn on the board."""
    drawn = driver.execute_script("return [...document.querySelectorAll('#board .heat')]"
                                  ".map(h => [+h.dataset.action, +h.dataset.share])")
    return {action: share for action, share in drawn}


def status(driver) -> str:
    """"your-move", "thinking" or "over"."""
    return driver.execute_script("return document.getElementById('status').dataset.state || ''")


def wait_for_my_move(driver) -> None:
    """Until it is the person's move or the game is over."""
    WebDriverWait(driver, REPLY_TIMEOUT).until(lambda d: status(d) in ("your-move", "over"))


def click(driver, action: int) -> None:
    driver.find_element(By.CSS_SELECTOR, f"#board .target[data-action='{action}']").click()


def open_page(driver, server, *, side: int = 0) -> None:
    driver.get(server.url)
    wait_for_my_move(driver)  # the page starts a game on its own, the person first
    if side:
        driver.find_element(By.CSS_SELECTOR, f"input[name=side][value='{side}']").click()
        driver.find_element(By.ID, "new-game").click()
        WebDriverWait(driver, REPLY_TIMEOUT).until(lambda d: len(moves(d)) == 1 and status(d) == "your-move")


# -- the tests ------------------------------------------------------------------------------------
def test_a_whole_tictactoe_game_through_the_page(browser, ttt_page, shots):
    game = tictactoe()
    open_page(browser, ttt_page)
    while status(browser) != "over":
        state, _ = game.state_from_moves(moves(browser))
        played = len(moves(browser))
        click(browser, min(tictactoe_optimal_actions(state)))
        WebDriverWait(browser, REPLY_TIMEOUT).until(
            lambda d, n=played: status(d) == "over" or (len(moves(d)) == n + 2 and status(d) == "your-move"))
    state, _ = game.state_from_moves(moves(browser))
    assert game.is_terminal(state)
    board = game.board(state)
    assert stones(browser) == {(r, c): int(board[r, c]) - 1 for r in range(3) for c in range(3) if board[r, c]}
    result = browser.find_element(By.ID, "result")
    outcome = game.outcome(state)  # the person is X, player 0
    assert outcome >= 0, "the perfect player lost"
    expected = ("Draw", "draw") if outcome == 0 else ("You win: X wins", "0")
    assert result.is_displayed()
    assert (result.text.splitlines()[0], result.get_attribute("data-winner")) == expected
    browser.save_screenshot(str(shots / "tictactoe-game-over.png"))


def test_an_illegal_click_changes_nothing_but_a_short_message(browser, ttt_page, shots):
    open_page(browser, ttt_page, side=1)  # the model plays X, first
    (model_cell,) = moves(browser)
    before = stones(browser)
    click(browser, model_cell)
    message = browser.find_element(By.ID, "message")
    WebDriverWait(browser, 10).until(lambda d: message.text)
    assert message.text == f"{model_cell + 1} is not legal here"
    assert stones(browser) == before and moves(browser) == [model_cell] and status(browser) == "your-move"
    browser.save_screenshot(str(shots / "tictactoe-illegal-click.png"))
    free = next(cell for cell in range(9) if cell != model_cell)
    click(browser, free)  # a legal click still plays, and clears the message
    WebDriverWait(browser, REPLY_TIMEOUT).until(lambda d: len(moves(d)) == 3 and status(d) == "your-move")
    assert message.text == "" and moves(browser)[1] == free
    browser.find_element(By.ID, "undo").click()
    WebDriverWait(browser, 10).until(lambda d: moves(d) == [model_cell])


def test_a_connect_four_column_click_gets_the_models_reply(browser, connect4_page, shots):
    open_page(browser, connect4_page)
    assert browser.find_element(By.ID, "game-name").text == "connect4"
    assert not browser.find_element(By.ID, "pass").is_displayed()  # Go's buttons only
    click(browser, 3)  # column 4
    WebDriverWait(browser, REPLY_TIMEOUT).until(lambda d: len(moves(d)) == 2 and status(d) == "your-move")
    person, reply = moves(browser)
    assert person == 3 and 0 <= reply < 7
    drawn = stones(browser)
    assert drawn[(5, 3)] == 0  # the person's stone fell to the bottom of column 4
    assert drawn[(4 if reply == 3 else 5, reply)] == 1 and len(drawn) == 2
    heat = heat_map(browser)
    assert heat and sum(heat.values()) == pytest.approx(1, abs=0.01) and reply in heat
    expected_score = float(browser.find_element(By.ID, "expected-score").text)
    yours = float(browser.find_element(By.ID, "your-score").text)
    assert 0 <= expected_score <= 1 and expected_score + yours == pytest.approx(1, abs=0.011)
    assert "not a coin flip" in browser.find_element(By.ID, "thought").text
    assert browser.find_element(By.ID, "pv").text.startswith(f"PV: {reply + 1}")
    browser.save_screenshot(str(shots / "connect4-reply.png"))


def test_go_shows_coordinates_passes_and_resigns(browser, go9_page, shots, tmp_path):
    go = GoGame(size=9, komi=7.5)
    open_page(browser, go9_page)
    labels = [t.text for t in browser.find_elements(By.CSS_SELECTOR, "#board .coordinate")]
    assert {"A", "J", "1", "9"} <= set(labels) and "I" not in labels
    click(browser, go.text_to_action("C3"))
    WebDriverWait(browser, REPLY_TIMEOUT).until(lambda d: len(moves(d)) == 2 and status(d) == "your-move")
    assert stones(browser)[(6, 2)] == 0  # C3: row 7 from the top
    assert heat_map(browser)  # where the model's visits went
    # the score head's estimate of the lead, as kata-analyze's scoreLead gives it
    assert re.search(r"its score head: it (leads|trails) by \d+\.\d ± \d+\.\d points",
                     browser.find_element(By.ID, "search-stats").text)
    browser.save_screenshot(str(shots / "go9-reply.png"))
    browser.find_element(By.ID, "pass").click()
    WebDriverWait(browser, REPLY_TIMEOUT).until(lambda d: len(moves(d)) >= 3 and status(d) != "thinking")
    if status(browser) != "over":  # the model played on after the pass: the person resigns
        browser.find_element(By.ID, "resign").click()
        WebDriverWait(browser, 10).until(lambda d: status(d) == "over")
        assert browser.find_element(By.ID, "result").text.splitlines()[0] == "The model wins: W+R"
    else:  # the model passed too: two passes, scored
        assert "area score after taking off" in browser.find_element(By.ID, "result").text
    browser.save_screenshot(str(shots / "go9-over.png"))
    # Save SGF fetches the record (with the token, when the page has one) and saves it
    downloads = tmp_path / "downloads"
    browser.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": str(downloads)})
    browser.find_element(By.ID, "sgf").click()
    WebDriverWait(browser, 30).until(lambda d: list(downloads.glob("tengen-go9-*.sgf")))
    (saved,) = downloads.glob("tengen-go9-*.sgf")
    record = read_sgf(saved.read_bytes())
    assert (record.size, record.komi) == (9, 7.5) and [m.action for m in record.moves][:2] == moves(browser)[:2]


def test_off_loopback_the_page_asks_for_its_token_then_plays(browser, tmp_path_factory, tmp_path, shots):
    config_home = tmp_path / "config"
    server = PlayServer(write_checkpoint(tmp_path_factory.mktemp("ttt-token") / "best", {"name": "tictactoe"}),
                        "--host", "0.0.0.0", env={**os.environ, "XDG_CONFIG_HOME": str(config_home)})
    try:
        token = (config_home / "tengen" / "play-token").read_text().strip()
        browser.get(server.url)
        form = browser.find_element(By.ID, "token-form")
        WebDriverWait(browser, 30).until(lambda d: form.is_displayed())
        browser.save_screenshot(str(shots / "play-page-token.png"))
        browser.find_element(By.ID, "token").send_keys(token)
        browser.find_element(By.ID, "token-submit").click()
        wait_for_my_move(browser)
        click(browser, 4)
        WebDriverWait(browser, REPLY_TIMEOUT).until(lambda d: len(moves(d)) == 2 and status(d) == "your-move")
    finally:
        assert server.close() == 0, server.stderr()
