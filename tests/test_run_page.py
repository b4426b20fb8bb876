"""The run page in a real headless chromium (tests/browser.py), on the directory of
a short real run (tests/short_run.py): the ladder plot has a point per promotion,
the loss curve one per status line with a loss, a self-play game steps move by move
with the board and the recorded value changing, a status line the run appends
shows up without a reload, and off loopback the page asks for its token. What the
page shows is checked against the run's files. Screenshots are kept under the
pytest basetemp, in ``screenshots/`` (the path is printed)."""

from __future__ import annotations

import dataclasses
import shutil
import time
from pathlib import Path

import pytest
from browser import chrome, screenshot_folder
from page_server import PageServer
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tengen.engine.games import make_game
from tengen.run.codec import decode_game
from tengen.run.records import (
    EvaluationLine,
    append_evaluation,
    read_gating_history,
    read_ladder,
    read_status,
    read_status_history,
    write_status,
)
from tengen.run.run_dir import RunDir

pytestmark = pytest.mark.slow  # chromium fetched, a real run shown

TTT = make_game("tictactoe")
#: seconds for the page to load and draw its first poll
LOAD_TIMEOUT = 60


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return screenshot_folder(tmp_path_factory, "run page")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    driver = chrome(tmp_path_factory.mktemp("chromium"), height=1600)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def page(short_run_dir):
    server = PageServer("serve", "--run-dir", str(short_run_dir), "--port", "0")
    yield server
    assert server.close() == 0, server.stderr()


def polls(driver) -> int:
    return int(driver.execute_script("return +(document.body.dataset.polls || 0)"))


def open_page(driver, url: str) -> None:
    driver.get(url)
    WebDriverWait(driver, LOAD_TIMEOUT).until(lambda d: polls(d) >= 1)


def plotted(driver, plot: str, series: str) -> int:
    """How many points the plot ``plot`` draws of ``series`` (0: none drawn)."""
    return int(driver.execute_script(
        "const p = document.querySelector(`#${arguments[0]} path[data-series='${arguments[1]}']`);"
        "return p ? +p.dataset.points : 0", plot, series))


def texts(driver, selector: str) -> list[str]:
    return driver.execute_script("return [...document.querySelectorAll(arguments[0])].map(t => t.textContent)",
                                 selector)


def stones(driver) -> dict[tuple[int, int], int]:
    drawn = driver.execute_script("return [...document.querySelectorAll('#board .stone')]"
                                  ".map(s => [+s.dataset.row, +s.dataset.col, +s.dataset.player])")
    return {(row, col): player for row, col, player in drawn}


def test_the_ladder_plot_has_a_point_per_promotion_and_says_what_it_is(browser, page, short_run_dir, shots):
    open_page(browser, page.url)
    ladder = read_ladder(RunDir(short_run_dir)).entries
    assert len(ladder) >= 2
    assert plotted(browser, "ladder-plot", "ladder") == len(ladder)
    assert len(browser.find_elements(By.CSS_SELECTOR, "#ladder-plot .marker")) == len(ladder)
    assert "chained candidate-vs-best" in texts(browser, "#ladder-plot .plot-title")[0]
    assert len(texts(browser, "#ladder-plot .axis-label")) == 2
    caption = browser.find_element(By.ID, "ladder-caption").text
    assert "drifts upward" in caption and "not a rating against a reference" in caption
    assert browser.find_element(By.ID, "best").text == ladder[-1]["id"]
    rows = browser.find_elements(By.CSS_SELECTOR, "#ladder-table tbody tr")
    assert [int(r.get_attribute("data-version")) for r in rows] == [e["version"] for e in reversed(ladder)]
    browser.save_screenshot(str(shots / "run-page.png"))


def test_the_strength_curve_has_a_point_and_an_error_bar_per_evaluation(browser, short_run_dir, tmp_path, shots):
    files = RunDir(tmp_path / "run")
    shutil.copytree(short_run_dir, files.path)
    files.evaluations.unlink(missing_ok=True)  # the run's own, if it finished one: these are known
    at = read_status_history(files)[0].time
    for k, (version, optimal) in enumerate([(0, 0.41), (1, 0.62), (2, 0.8)]):
        append_evaluation(files, EvaluationLine(
            time=at + 2 * k, version=version, elapsed_s=5.0, cpu_s=3.0, learner_step=100 * k, games=10 * k,
            scores=[{"reference": "optimal_moves", "measure": "share", "value": optimal, "se": 0.03, "n": 256,
                     "skipped": None},
                    {"reference": "vs_perfect", "measure": "score", "value": 0.1 * k, "se": 0.05, "n": 40,
                     "skipped": None}]))
    server = PageServer("serve", "--run-dir", str(files.path), "--port", "0")
    try:
        open_page(browser, server.url)
        assert plotted(browser, "strength-plot", "optimal_moves") == 3
        assert plotted(browser, "strength-plot", "vs_perfect") == 3
        assert len(browser.find_elements(By.CSS_SELECTOR, "#strength-plot .error-bar")) == 6
        # each bar is drawn in its series' colour (a path with no stroke is invisible)
        strokes = browser.execute_script(
            "const stroke = (e) => getComputedStyle(e).stroke;"
            "return [...document.querySelectorAll('#strength-plot .error-bar')].map((bar) => [stroke(bar),"
            " stroke(document.querySelector(`#strength-plot path.series[data-series='${bar.dataset.series}']`))])")
        assert all(bar == line and bar not in ("none", "") for bar, line in strokes), strokes
        assert "fixed references" in texts(browser, "#strength-plot .plot-title")[0]
        tips = texts(browser, "#strength-plot .marker title")
        assert "000002 at step 200: optimal_moves 0.800 ± 0.030 (256 positions)" in tips
        browser.save_screenshot(str(shots / "strength.png"))
    finally:
        assert server.close() == 0, server.stderr()


def test_the_loss_curve_and_the_rates_follow_the_status_lines(browser, page, short_run_dir):
    open_page(browser, page.url)
    lines = read_status_history(RunDir(short_run_dir))
    with_loss = [line for line in lines if line.losses]
    assert len(with_loss) >= 2, "the short run reported fewer than two losses"
    assert plotted(browser, "loss-plot", "total") == len(with_loss)
    assert plotted(browser, "loss-plot", "policy") == len(with_loss)
    assert plotted(browser, "loss-plot", "value") == len(with_loss)
    assert plotted(browser, "steps-plot", "steps") == len(lines)
    assert plotted(browser, "games-plot", "games/s") == len(lines)
    assert plotted(browser, "window-plot", "fill") == len(lines)
    # a single-process run's self-play calls its model itself, and reports that model's batch
    assert plotted(browser, "batch-plot", "mean batch") == len(lines)
    for plot in ("loss-plot", "steps-plot", "evaluations-plot"):
        assert texts(browser, f"#{plot} .plot-title") and len(texts(browser, f"#{plot} .axis-label")) == 2
    assert browser.find_element(By.ID, "now-learner-step").text == str(lines[-1].learner_step)
    assert browser.find_element(By.ID, "now-self-play-workers").text == "1"
    gating = lines[-1].last_gating
    assert gating is not None and browser.find_element(By.ID, "last-gating").text.startswith(
        f"{gating['candidate']:06d} vs {gating['best']:06d}: {gating['wins']}-{gating['draws']}-{gating['losses']}")
    matches = read_gating_history(RunDir(short_run_dir))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#gating-list li")) == min(len(matches), 10)
    # the run ended: its last status line says so
    assert browser.find_element(By.ID, "liveness").get_attribute("data-state") == "finished"
    assert browser.find_element(By.ID, "settings").text.endswith("no Redis (single-process)")


def test_a_self_play_game_replays_move_by_move_with_its_value(browser, page, short_run_dir, shots):
    open_page(browser, page.url)
    link = browser.find_element(By.CSS_SELECTOR, "#selfplay-games .game-link")
    stem = link.get_attribute("data-key").split("/", 1)[1]
    record = decode_game((short_run_dir / "games" / f"{stem}.game").read_bytes(), planes_shape=TTT.planes_shape,
                         num_actions=TTT.num_actions, game_name=TTT.name)
    moves = record.moves.tolist()
    link.click()
    info = browser.find_element(By.ID, "move-info")
    WebDriverWait(browser, 10).until(lambda d: info.get_attribute("data-ply") == str(len(moves)))
    state, _ = TTT.state_from_moves(moves)
    board = TTT.board(state)
    assert stones(browser) == {(r, c): int(board[r, c]) - 1 for r in range(3) for c in range(3) if board[r, c]}
    browser.find_element(By.ID, "first").click()
    assert stones(browser) == {} and info.get_attribute("data-ply") == "0"
    for ply in range(1, len(moves) + 1):
        browser.find_element(By.ID, "next").click()
        row, col = divmod(moves[ply - 1], 3)
        drawn = stones(browser)
        assert len(drawn) == ply and drawn[(row, col)] == (ply - 1) % 2  # X then O
        assert float(info.get_attribute("data-value")) == pytest.approx(float(record.search_value[ply - 1]), abs=1e-3)
        assert info.get_attribute("data-visits") == str(int(record.search_visits[ply - 1]))
        assert f"Move {ply} of {len(moves)}: {'XO'[(ply - 1) % 2]} {moves[ply - 1] + 1}." in info.text
        assert "Search value" in info.text
        if ply == 2:
            browser.save_screenshot(str(shots / "run-page-replay.png"))
    browser.find_element(By.ID, "prev").click()
    assert len(stones(browser)) == len(moves) - 1
    browser.execute_script("const s = document.getElementById('ply'); s.value = 1;"
                           "s.dispatchEvent(new Event('input'))")  # the slider
    assert len(stones(browser)) == 1 and info.get_attribute("data-ply") == "1"
    assert plotted(browser, "value-plot", "value") == len(moves)


def test_a_line_the_run_appends_shows_without_a_reload(browser, short_run_dir, tmp_path, shots):
    files = RunDir(tmp_path / "run")
    shutil.copytree(short_run_dir, files.path)
    server = PageServer("serve", "--run-dir", str(files.path), "--port", "0")
    try:
        open_page(browser, server.url)
        before = plotted(browser, "loss-plot", "total")
        browser.execute_script("window.notReloaded = true")
        last = read_status(files)
        new = dataclasses.replace(last, time=round(time.time(), 1), final=False, learner_step=last.learner_step + 50,
                                  losses={**last.losses, "loss": last.losses["loss"] - 0.1})
        write_status(files, new)  # as TrainingLoop.report writes it
        WebDriverWait(browser, 20).until(lambda d: plotted(d, "loss-plot", "total") == before + 1)
        assert browser.execute_script("return window.notReloaded") is True
        assert browser.find_element(By.ID, "now-learner-step").text == str(new.learner_step)
        assert browser.find_element(By.ID, "liveness").get_attribute("data-state") == "live"
    finally:
        assert server.close() == 0, server.stderr()


def test_off_loopback_the_page_asks_for_its_token(browser, short_run_dir, shots):
    server = PageServer("serve", "--run-dir", str(short_run_dir), "--port", "0", "--host", "0.0.0.0")
    try:
        assert server.read_line().startswith("token: in ")  # stdout is no terminal: the token is in a file
        token = (short_run_dir / "serve-token").read_text().strip()
        browser.get(server.url)
        form = browser.find_element(By.ID, "token-form")
        WebDriverWait(browser, LOAD_TIMEOUT).until(lambda d: form.is_displayed())
        assert not browser.find_element(By.ID, "run").is_displayed()
        browser.find_element(By.ID, "token").send_keys("not-the-token")
        browser.find_element(By.ID, "token-submit").click()
        message = browser.find_element(By.ID, "token-message")
        WebDriverWait(browser, 10).until(lambda d: "refused" in message.text)
        assert not browser.find_element(By.ID, "run").is_displayed()
        browser.save_screenshot(str(shots / "run-page-token.png"))
        field = browser.find_element(By.ID, "token")
        field.clear()
        field.send_keys(token)
        browser.find_element(By.ID, "token-submit").click()
        WebDriverWait(browser, LOAD_TIMEOUT).until(lambda d: polls(d) >= 1)
        assert browser.find_element(By.ID, "run").is_displayed() and not form.is_displayed()
        assert plotted(browser, "ladder-plot", "ladder") >= 2
    finally:
        browser.execute_script("sessionStorage.clear()")
        assert server.close() == 0, server.stderr()
