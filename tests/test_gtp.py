"""The GTP engine: golden transcripts (tests/golden/gtp_*.txt), random games of
genmove, the move-chooser hook, and the real console script over stdin/stdout.

Transcript format: a line ``> COMMAND`` is one input line; the lines after it up to
a blank line are the expected reply without the blank line that ends every GTP
reply (no lines: no reply expected). Lines starting with '#' between blocks are
notes. ``python tests/test_gtp.py --regen`` rewrites the replies from the engine;
review the diff before committing it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import deque
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from cluster.cli import build_parser, main
from engine.games.go import GoGame
from engine.gtp import GtpEngine, preprocess

GOLDEN = Path(__file__).parent / "golden"
REPO = Path(__file__).resolve().parent.parent
GOLDEN_FILES = sorted(GOLDEN.glob("gtp_*.txt"))


# -- transcripts ---------------------------------------------------------------------
@dataclass
class Exchange:
    command: str
    reply: str | None  # the full reply, trailing blank line included; None: no reply
    line: int  # where the command is in its file


def load_transcript(path: Path) -> tuple[list[str | Exchange], list[Exchange]]:
    """Returns (items, exchanges): items keeps the notes for rewriting the file."""
    items: list[str | Exchange] = []
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("> "):
            body = []
            j = i + 1
            while j < len(lines) and lines[j] != "":
                body.append(lines[j])
                j += 1
            reply = "\n".join(body) + "\n\n" if body else None
            items.append(Exchange(line[2:], reply, i + 1))
            i = j
        elif line == "" or line.startswith("#"):
            items.append(line)
            i += 1
        else:
            raise ValueError(f"{path.name}:{i + 1}: expected '> command', a note or a blank line: {line!r}")
    return items, [it for it in items if isinstance(it, Exchange)]


def write_transcript(path: Path, items: list[str | Exchange]) -> None:
    out = []
    for it in items:
        if isinstance(it, Exchange):
            out.append(f"> {it.command}")
            if it.reply is not None:
                out.extend(it.reply[:-2].split("\n"))
            out.append("")
        elif not (it == "" and out and out[-1] == ""):
            out.append(it)
    path.write_text("\n".join(out).rstrip("\n") + "\n", encoding="utf-8")


def golden_engine() -> GtpEngine:
    return GtpEngine(seed=0)


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=[p.stem for p in GOLDEN_FILES])
def test_golden_transcript(path: Path) -> None:
    _, exchanges = load_transcript(path)
    assert exchanges, f"{path.name} holds no commands"
    engine = golden_engine()
    expected = [(f"{path.name}:{ex.line} {ex.command}", ex.reply) for ex in exchanges]
    actual = [(f"{path.name}:{ex.line} {ex.command}", engine.handle(ex.command)) for ex in exchanges]
    assert actual == expected
    assert not engine.quit


def test_golden_files_exist() -> None:
    names = {p.name for p in GOLDEN_FILES}
    assert {"gtp_protocol.txt", "gtp_play.txt", "gtp_ko.txt", "gtp_score.txt"} <= names


# -- protocol details ----------------------------------------------------------------
def test_preprocess_drops_control_characters_and_comments() -> None:
    assert preprocess("na\x01me\r\n") == "name"
    assert preprocess("play\tb\tE5  # comment") == "play b E5"
    assert preprocess("   # only a comment") == ""
    assert preprocess("\x7f") == ""


def test_empty_and_comment_lines_get_no_reply() -> None:
    engine = GtpEngine(size=9)
    for line in ("", "\n", "   \t ", "# comment", "\r\n", "\x00\x01"):
        assert engine.handle(line) is None
    assert engine.handle("1\tname\r\n") == "=1 tengen\n\n"


def test_version_is_the_package_version() -> None:
    assert GtpEngine().handle("version") == f"= {metadata.version('tengen')}\n\n"


def test_quit_replies_and_sets_the_flag() -> None:
    engine = GtpEngine(size=9)
    assert not engine.quit
    assert engine.handle("5 quit") == "=5\n\n"
    assert engine.quit


def test_every_listed_command_is_known() -> None:
    engine = GtpEngine(size=9)
    listed = engine.handle("list_commands")[2:-2].split("\n")
    assert listed == engine.commands
    for name in listed:
        assert engine.handle(f"known_command {name}") == "= true\n\n"


def test_garbage_never_ends_the_engine() -> None:
    engine = GtpEngine(size=9, seed=3)
    junk = [
        "\xff\xfe",
        "play",
        "play b",
        "genmove",
        "undo undo",
        "komi",
        "boardsize -1",
        "final_status_list x",
        "play b E5 extra",
        "99999999999999999999 name",
        "é",
        "play w 😀",
        "boardsize 1e3",
        "komi 1e400",
    ]
    for line in junk:
        reply = engine.handle(line)
        assert reply is not None and reply.endswith("\n\n") and reply[0] in "=?", (line, reply)
        assert not engine.quit
    assert engine.handle("name") == "= tengen\n\n"


def test_boardsize_resets_the_board_and_keeps_komi() -> None:
    engine = GtpEngine(size=9, komi=0.5)
    engine.handle("play b E5")
    assert engine.handle("boardsize 13") == "=\n\n"
    assert engine.game.size == 13
    assert engine.handle("final_score") == "= W+0.5\n\n"
    assert engine.handle("undo") == "? cannot undo\n\n"
    assert "13 . . ." in engine.handle("showboard")


def test_komi_keeps_the_position_and_its_undo() -> None:
    engine = GtpEngine(size=9)
    engine.handle("play b E5")
    assert engine.handle("komi 0.5") == "=\n\n"
    # One black stone on an otherwise empty board owns all 81 points.
    assert engine.handle("final_score") == "= B+80.5\n\n"
    assert engine.handle("undo") == "=\n\n"
    assert engine.handle("final_score") == "= W+0.5\n\n"


# -- genmove -------------------------------------------------------------------------
def stone_vertices(game: GoGame, state: np.ndarray) -> set[str]:
    return {game.action_to_text(int(a)) for a in np.flatnonzero(game.board(state).reshape(-1))}


def tromp_taylor_area(board: np.ndarray) -> int:
    """Black area minus white area by flood fill (independent of the kernels)."""
    size = board.shape[0]
    score = int((board == 1).sum()) - int((board == 2).sum())
    seen = np.zeros_like(board, dtype=bool)
    for r0 in range(size):
        for c0 in range(size):
            if board[r0, c0] or seen[r0, c0]:
                continue
            region, borders = 0, set()
            queue = deque([(r0, c0)])
            seen[r0, c0] = True
            while queue:
                r, c = queue.popleft()
                region += 1
                for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
                    if 0 <= rr < size and 0 <= cc < size:
                        if board[rr, cc]:
                            borders.add(int(board[rr, cc]))
                        elif not seen[rr, cc]:
                            seen[rr, cc] = True
                            queue.append((rr, cc))
            if borders == {1}:
                score += region
            elif borders == {2}:
                score -= region
    return score


def board_from_showboard(reply: str, size: int) -> np.ndarray:
    rows = reply.split("\n")[2 : 2 + size]
    return np.array([[".XO".index(ch) for ch in row[3 : 3 + 2 * size : 2]] for row in rows], dtype=np.int8)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_genmove_plays_a_whole_game_legally_without_filling_own_eyes(seed: int) -> None:
    engine = GtpEngine(size=9, komi=7.5, seed=seed)
    game = engine.game
    colors = "bw"
    for n in range(1000):
        before = engine.board.state.copy()
        color = n % 2
        reply = engine.handle(f"{n} genmove {colors[color]}")
        assert reply.startswith(f"={n} ") and reply.endswith("\n\n"), reply
        vertex = reply[len(f"={n} ") : -2]
        action = game.text_to_action(vertex)
        legal = game.legal_mask(before)
        assert legal[action], vertex
        candidates = [a for a in np.flatnonzero(legal[:-1]) if not game.is_own_eye(before, int(a), color)]
        if vertex == "pass":
            assert candidates == [], "passed while a move that fills no own eye was left"
        else:
            assert not game.is_own_eye(before, action, color), f"{vertex} fills {colors[color]}'s own eye"
        if game.is_terminal(engine.board.state):
            break
    else:
        pytest.fail("the game did not end")
    assert game.end_reason(engine.board.state) == "two passes"
    assert engine.handle("genmove b") == "= pass\n\n"
    assert engine.handle("genmove w") == "= pass\n\n"
    # final_score agrees with an independent count of the shown board, and the
    # alive list is every stone on the board.
    shown = board_from_showboard(engine.handle("showboard"), 9)
    assert np.array_equal(shown, game.board(engine.board.state))
    score = tromp_taylor_area(shown) - 7.5
    expected = "0" if score == 0 else f"{'B' if score > 0 else 'W'}+{abs(score):g}"
    assert engine.handle("final_score") == f"= {expected}\n\n"
    alive = engine.handle("final_status_list alive")[2:-2].split()
    assert set(alive) == stone_vertices(game, engine.board.state)
    assert len(alive) == len(set(alive))
    assert engine.handle("final_status_list dead") == "=\n\n"


def test_genmove_is_deterministic_for_a_seed() -> None:
    def moves(seed: int) -> list[str]:
        engine = GtpEngine(size=9, seed=seed)
        return [engine.handle(f"genmove {'bw'[n % 2]}") for n in range(30)]

    assert moves(7) == moves(7)
    assert moves(7) != moves(8)


def test_genmove_out_of_turn_plays_the_colour_asked() -> None:
    engine = GtpEngine(size=9, seed=0)
    vertex = engine.handle("genmove white")[2:-2]
    group = engine.board.group(vertex)
    assert group is not None and group.color == 1
    assert engine.game.to_play(engine.board.state) == 0


def test_move_chooser_hook() -> None:
    seen = []

    def chooser(game: GoGame, state: np.ndarray, history: list[np.ndarray]) -> int:
        seen.append((game.to_play(state), len(history)))
        return game.text_to_action("C3")

    engine = GtpEngine(size=9, move_chooser=chooser)
    assert engine.handle("play b E5") == "=\n\n"
    assert engine.handle("genmove b") == "= C3\n\n"  # out of turn: the chooser sees black to move
    assert seen == [(0, 1)]
    reply = engine.handle("genmove w")  # C3 is occupied now
    assert reply.startswith("? move chooser returned an illegal move"), reply
    assert engine.handle("name") == "= tengen\n\n"


def test_rendb_dump_parses_as_json() -> None:
    engine = GtpEngine(size=9, seed=5)
    for n in range(20):
        engine.handle(f"genmove {'bw'[n % 2]}")
    reply = engine.handle("rendb_dump")
    assert reply.startswith("= {") and reply.endswith("}\n\n")
    doc = json.loads(reply[2:])
    assert doc["header"] == {"boardWidth": 9, "boardHeight": 9}
    stones = {v for ren in doc["rens"].values() for v in ren["locate"].split()}
    assert stones == stone_vertices(engine.game, engine.board.state)
    rebuilt = engine.game.state_from_rens(reply[2:])
    assert np.array_equal(engine.game.board(rebuilt), engine.game.board(engine.board.state))


def test_superko_engine_plays() -> None:
    engine = GtpEngine(size=5, superko=True, seed=1)
    for n in range(300):
        engine.handle(f"genmove {'bw'[n % 2]}")
        if engine.game.is_terminal(engine.board.state):
            break
    assert engine.game.is_terminal(engine.board.state)


# -- the console script --------------------------------------------------------------
def test_cli_help_lists_gtp(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    assert "gtp" in capsys.readouterr().out
    assert main([]) == 2


def test_cli_parses_gtp_options() -> None:
    args = build_parser().parse_args(["gtp", "--game", "go13", "--komi", "6.5", "--superko", "--seed", "4"])
    assert (args.command, args.game, args.komi, args.superko, args.seed) == ("gtp", "go13", 6.5, True, 4)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["gtp", "--game", "go7"])


def test_console_script_speaks_gtp_over_stdin_stdout() -> None:
    transcript = "1 name\nboardsize 9\n# comment\n\nplay b E5\nplay w Z1\nfrob\n2 final_score\n3 quit\nname\n"
    proc = subprocess.run(
        [sys.executable, "-m", "cluster.cli", "gtp", "--game", "go9", "--komi", "5.5", "--seed", "1"],
        input=transcript,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    # Nothing after quit is answered.
    assert proc.stdout == "=1 tengen\n\n=\n\n=\n\n? syntax error\n\n? unknown command\n\n=2 B+75.5\n\n=3\n\n"


def test_console_script_ends_cleanly_at_end_of_input() -> None:
    tengen = Path(sys.executable).parent / "tengen"
    command = [str(tengen)] if tengen.exists() else [sys.executable, "-m", "cluster.cli"]
    proc = subprocess.run(
        [*command, "gtp", "--game", "go9"],
        input="protocol_version\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "= 2\n\n"


def _regen() -> None:
    for path in GOLDEN_FILES:
        items, _ = load_transcript(path)
        engine = golden_engine()
        for it in items:
            if isinstance(it, Exchange):
                it.reply = engine.handle(it.command)
        write_transcript(path, items)
        print(f"rewrote {path.relative_to(REPO)}")


if __name__ == "__main__":
    if sys.argv[1:] != ["--regen"]:
        raise SystemExit("usage: python tests/test_gtp.py --regen")
    _regen()
