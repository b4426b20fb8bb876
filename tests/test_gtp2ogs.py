"""tengen as a bot on online-go.com through gtp2ogs 9.0.1: the recipe of docs/ogs.md
(its config, docs/ogs/tengen-bot.json5) against what gtp2ogs does.

gtp2ogs's own code cannot run here: the npm registry the tests reach serves neither
``gtp2ogs`` nor ``goban-engine``, which it needs (both answer 404), so its bot
manager cannot be driven. What is real and what is recorded:

- Real: tengen's engine, ``tengen gtp`` as a child process started with the config's
  command line (the checkpoint a tiny 9x9 model; for the live game no model, see
  below), answering every command as gtp2ogs writes it (CR LF); json5 2.2.3, the
  parser gtp2ogs's config loader calls, reading the config (``npm ci`` from
  tests/gtp2ogs/ into .cache/gtp2ogs, once); tengen's own argument parser reading
  the bot's command, and its clock commands taking every clock the config admits.
- Recorded by hand from gtp2ogs 9.0.1's source (src/config.ts, src/Bot.ts,
  src/Game.ts, src/pools.ts): the keys and types its loader accepts
  (tests/golden/gtp2ogs_config_schema.json, checked with jsonschema, as gtp2ogs
  checks its own schema), the GTP commands it makes of each clock, and three games
  as it plays them (tests/golden/gtp2ogs_*.txt): online-go.com's events (gamedata,
  moves) and what gtp2ogs sends back (a move, a pass, a resignation) as notes, and
  between them every command it sends the engine, in its order, with the replies
  expected. ``test_the_recorded_games_agree_with_their_server_events`` checks that
  the engine is sent exactly the server's moves, and that what gtp2ogs sends back
  is the engine's answer as its uploadMove encodes it.

The live game runs the config's command without a model (``--game go9 --seed 0``
for ``--checkpoint``): a tiny untrained model's moves are not reproducible, the
random player's are. The two rejoined games run the command as it is: there every
move tengen is asked for answers the opponent's pass, from the count, before any
search. ``python tests/test_gtp2ogs.py --regen`` rewrites the transcripts' replies
from the engines; review the diff before committing it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import pytest
from play_server import write_checkpoint
from test_gtp import Exchange, load_transcript, write_transcript
from unavailable import unavailable

from tengen.cli import GO_GAMES, build_parser
from tengen.play.gtp import GtpEngine
from tengen.testing.debian import CACHE

pytestmark = pytest.mark.timeout(900)

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "docs" / "ogs" / "tengen-bot.json5"
RECIPE = ROOT / "docs" / "ogs.md"
GOLDEN = ROOT / "tests" / "golden"
PACKAGES = ROOT / "tests" / "gtp2ogs"  # package.json and package-lock.json: json5, pinned
LIVE = GOLDEN / "gtp2ogs_live_game.txt"
REJOINED = [GOLDEN / "gtp2ogs_rejoined_lost.txt", GOLDEN / "gtp2ogs_rejoined_won.txt"]
#: online-go.com's coordinates (Game.ts's num2char) and GTP's (Bot.ts's num2gtpchar)
OGS_LETTERS, GTP_LETTERS = "abcdefghijklmnopqrstuvwxyz", "abcdefghjklmnopqrstuvwxyz"


def gtp2ogs_modules() -> Path:
    """.cache/gtp2ogs/node_modules holding tests/gtp2ogs's packages (``npm ci`` from
    its lock file, once; again when the lock file changes)."""
    target = CACHE / "gtp2ogs"
    lock = (PACKAGES / "package-lock.json").read_text()
    installed = target / "package-lock.json"
    if (target / "node_modules" / "json5" / "package.json").exists() and installed.exists() \
            and installed.read_text() == lock:
        return target / "node_modules"
    npm, node = shutil.which("npm"), shutil.which("node")
    if not npm or not node:
        unavailable("cannot install json5 for gtp2ogs's config loader: no node and npm")
    target.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copyfile(PACKAGES / name, target / name)
    done = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=target, capture_output=True, text=True,
                          timeout=300)
    if done.returncode != 0:
        unavailable(f"npm ci in {target} failed:\n{done.stderr[-2000:]}")
    return target / "node_modules"


def read_config() -> dict:
    """The recipe's config as gtp2ogs's loader parses it (json5, in node)."""
    done = subprocess.run(["node", str(ROOT / "tests" / "gtp2ogs_config.mjs"), str(CONFIG)], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "GTP2OGS_MODULES": str(gtp2ogs_modules())})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def engine_argv(command: list[str], checkpoint: Path | None) -> list[str]:
    """The config's bot command as this checkout runs it: ``tengen`` as this Python's
    module, the checkpoint placeholder as ``checkpoint``, or without one (no model)
    ``--game go9 --seed 0``."""
    args = list(command[1:])
    at = args.index("--checkpoint")
    if checkpoint is None:
        del args[at : at + 2]
        args += ["--game", "go9", "--seed", "0"]
    else:
        args[at + 1] = str(checkpoint)
    return [sys.executable, "-m", "tengen.cli", *args]


def converse(argv: list[str], exchanges: list[Exchange]) -> tuple[list[str], str]:
    """Every command sent as gtp2ogs's Bot.command writes it (the line and CR LF) to
    a new engine process; the replies (with the blank line that ends each), and stderr."""
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as err:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                cwd=ROOT)
        assert proc.stdin is not None and proc.stdout is not None
        replies = []
        try:
            for ex in exchanges:
                proc.stdin.write(ex.command + "\r\n")
                proc.stdin.flush()
                lines: list[str] = []
                while True:
                    line = proc.stdout.readline()
                    assert line, f"the engine closed its output after {ex.command!r}"
                    if line == "\n" and lines:
                        break
                    lines.append(line)
                replies.append("".join(lines) + "\n")
            assert proc.wait(timeout=60) == 0  # the last command is quit
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        err.seek(0)
        return replies, err.read()


@pytest.fixture(scope="module")
def config() -> dict:
    return read_config()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # No ownership head: the count's dead stones then come from the playouts, which
    # are seeded; an untrained head's would not be reproducible.
    return write_checkpoint(tmp_path_factory.mktemp("model") / "best", {"name": "go", "size": 9, "komi": 7.5},
                            simulations=16, network={"ownership": False})


# -- the config --------------------------------------------------------------------------
def test_docs_ogs_md_shows_the_config_the_tests_check() -> None:
    text = RECIPE.read_text()
    assert f"```json5\n{CONFIG.read_text()}```" in text


def test_gtp2ogs_accepts_the_config(config: dict) -> None:
    validator = jsonschema.Draft7Validator(json.loads((GOLDEN / "gtp2ogs_config_schema.json").read_text()))
    assert [f"{'/'.join(map(str, e.path))}: {e.message}" for e in validator.iter_errors(config)] == []
    # As gtp2ogs's loader does, a key it does not know and a wrong type are refused.
    assert not validator.is_valid({**config, "allowed_board_size": [9]})
    assert not validator.is_valid({**config, "bot": {**config["bot"], "manager": "per-game"}})


def test_the_bot_command_is_tengen_gtp_with_a_model_and_resignation(config: dict) -> None:
    command = config["bot"]["command"]
    assert command[0] == "tengen"
    args = build_parser().parse_args(command[1:])
    assert args.command == "gtp" and args.checkpoint and not args.no_resign
    assert (args.resign_threshold, args.resign_moves) == (0.05, 3)
    # gtp2ogs keeps one process per game (tengen's clocks and its run of low
    # winrates go on), and no ending bot overrides tengen's own end of the game.
    assert config["bot"]["manager"] == "persistent" and "ending_bot" not in config


def test_the_config_admits_the_board_and_the_komi_the_model_plays(config: dict) -> None:
    assert config["allowed_board_sizes"] == [GO_GAMES["go9"]]
    assert config["allow_ranked_handicap"] is False and config["allow_unranked_handicap"] is False
    # gtp2ogs's main.ts checkKomi compares the challenge's komi as it comes: an
    # automatic komi may come as null, which compares as 0. Its default range is
    # -99..99 (src/config.ts); the model's 7.5 and null must both pass.
    low, high = config.get("allowed_komi_range", [-99, 99])
    assert low <= 0 <= high and low <= 7.5 <= high
    for komi in (-7.5, 0.5, 6.5, 7.5, 99):
        engine = GtpEngine(size=9, warn=lambda text: None)
        assert engine.handle(f"komi {komi}") == "=\n\n"


def clock_commands(system: str, ranges: dict[str, list[float]]) -> list[list[str]]:
    """What gtp2ogs's Bot.loadClock sends tengen for ``system`` at every corner of the
    config's ranges: GTP's time_settings (a fresh process: loadState reads the
    engine's commands before list_commands is answered) and KGS's kgs-time_settings
    (every later move), each with a time_left. Fischer's initial time is any:
    gtp2ogs never checks initial_time_range."""
    out = []
    if system == "byoyomi":
        for main in ranges["main_time_range"]:
            for period in ranges["period_time_range"]:
                for periods in ranges["periods_range"]:
                    out.append([f"time_settings {main + (periods - 1) * period:g} {period:g} 1",
                                f"time_left black {main + periods * period - period:g} 0"])
                    out.append([f"kgs-time_settings byoyomi {main:g} {period:g} {periods:g}",
                                f"time_left black {main:g} 0", f"time_left black {period:g} {periods:g}"])
    elif system == "fischer":
        for initial in [1, *ranges["initial_time_range"]]:
            for increment in ranges["time_increment_range"]:
                for words in (["time_settings"], ["kgs-time_settings", "canadian"]):
                    out.append([" ".join([*words, f"{initial - increment:g}", f"{increment:g}", "1"]),
                                f"time_left black {max(initial - increment, 0):g} 0",
                                f"time_left black {increment:g} 1"])
    else:
        for per_move in ranges["per_move_time_range"]:
            out.append([f"time_settings 0 {per_move:g} 1", f"time_left black {per_move:g} 1"])
    return out


def test_tengen_keeps_every_clock_the_config_admits(config: dict) -> None:
    systems = config["allowed_time_control_systems"]
    assert sorted(systems) == ["byoyomi", "fischer", "simple"]
    assert config["allowed_blitz_settings"] is None
    checked = 0
    for speed in ("rapid", "live", "correspondence"):
        settings = config[f"allowed_{speed}_settings"]
        for system in systems:
            for commands in clock_commands(system, settings[system]):
                engine = GtpEngine(size=9)
                for command in commands:
                    assert engine.handle(command) == "=\n\n", (speed, command)
                assert engine.clock.limited, (speed, commands)
                checked += 1
    assert checked > 50


# -- the games ---------------------------------------------------------------------------
def events(path: Path) -> list[tuple[str, str, dict]]:
    """The transcript's notes of who sent what: ("server" or "gtp2ogs", event, JSON)."""
    found = []
    for item in load_transcript(path)[0]:
        m = re.fullmatch(r"# (server|gtp2ogs): (\S+) (\{.*\})", item) if isinstance(item, str) else None
        if m:
            found.append((m[1], m[2], json.loads(m[3])))
    return found


def ogs_vertex(move: list[int], height: int) -> str:
    """An online-go.com move ([x, y, ms], y from the top) as gtp2ogs names it to the engine."""
    x, y = move[0], move[1]
    return "pass" if x < 0 else f"{GTP_LETTERS[x]}{height - y}"


def uploaded(reply: str, height: int) -> tuple[str, str | None]:
    """What Game.uploadMove sends online-go.com for a genmove reply: the event and the move."""
    move = reply.lower()
    if move == "resign":
        return "game/resign", None
    if move == "pass":
        return "game/move", ".."
    x, y = GTP_LETTERS.index(move[0]), height - int(move[1:])
    return "game/move", OGS_LETTERS[x] + OGS_LETTERS[y]


@pytest.mark.parametrize("path", [LIVE, *REJOINED], ids=lambda p: p.stem)
def test_the_recorded_games_agree_with_their_server_events(path: Path) -> None:
    sent = events(path)
    gamedata = sent[0][2]
    assert sent[0][:2] == ("server", f"game/{gamedata['game_id']}/gamedata")
    height, bot = gamedata["height"], 1
    bot_color = "black" if gamedata["players"]["black"]["id"] == bot else "white"
    server = list(gamedata["moves"]) + [data["move"] for who, event, data in sent[1:]
                                        if who == "server" and event.endswith("/move")]
    colors = [gamedata["initial_player"], "white" if gamedata["initial_player"] == "black" else "black"]
    # The engine's view: the moves gtp2ogs plays on it and the ones it chose.
    board: list[tuple[str, str]] = []
    items = load_transcript(path)[0]
    for n, item in enumerate(items):
        if not isinstance(item, Exchange):
            continue
        words = item.command.split()
        if words[0] == "play":
            board.append((words[1], words[2]))
        elif words[0] == "genmove":
            assert words[1] == bot_color
            reply = item.reply[2:-2]
            upload = next(it for it in items[n + 1:] if isinstance(it, str) and it.startswith("# gtp2ogs: "))
            event, move = uploaded(reply, height)
            assert upload.startswith(f"# gtp2ogs: {event} "), (reply, upload)
            assert json.loads(upload.split(" ", 3)[3]) == {"game_id": gamedata["game_id"],
                                                           **({} if move is None else {"move": move})}
            if move is not None:
                board.append((bot_color, reply.lower()))
    assert board == [(colors[i % 2], ogs_vertex(m, height)) for i, m in enumerate(server)]


def check_game(path: Path, argv: list[str]) -> str:
    """The transcript against a real engine; what the bot sent online-go.com at the end."""
    _, exchanges = load_transcript(path)
    replies, stderr = converse(argv, exchanges)
    assert [(ex.line, ex.command, r) for ex, r in zip(exchanges, replies, strict=True)] == \
        [(ex.line, ex.command, ex.reply) for ex in exchanges]
    assert "Traceback" not in stderr, stderr
    return [who_event for who, who_event, _ in events(path) if who == "gtp2ogs"][-1]


def test_a_live_game_ends_with_tengen_passing_into_a_won_count(config: dict) -> None:
    assert check_game(LIVE, engine_argv(config["bot"]["command"], None)) == "game/move"
    _, exchanges = load_transcript(LIVE)
    genmoves = [ex.reply for ex in exchanges if ex.command.startswith("genmove")]
    assert genmoves[0] in ("= E4\n\n", "= E2\n\n") and genmoves[-1] == "= pass\n\n"


@pytest.mark.slow  # TensorFlow loads the model in each engine
@pytest.mark.parametrize(("path", "end"), [(REJOINED[0], "game/resign"), (REJOINED[1], "game/move")],
                         ids=["lost", "won"])
def test_a_rejoined_game_ends_as_the_count_says(config: dict, checkpoint: Path, path: Path, end: str) -> None:
    assert check_game(path, engine_argv(config["bot"]["command"], checkpoint)) == end


# -- regenerating the replies ------------------------------------------------------------
def _regen() -> None:
    os.chdir(ROOT)
    command = read_config()["bot"]["command"]
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = None
        for path in [LIVE, *REJOINED]:
            if path != LIVE and checkpoint is None:
                checkpoint = write_checkpoint(Path(tmp) / "best", {"name": "go", "size": 9, "komi": 7.5},
                                              simulations=16, network={"ownership": False})
            items, exchanges = load_transcript(path)
            replies, _ = converse(engine_argv(command, checkpoint), exchanges)
            for ex, reply in zip(exchanges, replies, strict=True):
                ex.reply = reply
            write_transcript(path, items)
            print(f"rewrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regen"]:
        raise SystemExit("usage: python tests/test_gtp2ogs.py --regen")
    _regen()
