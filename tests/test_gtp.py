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
import os
import subprocess
import sys
from collections import deque
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest

from tengen.cli import build_parser, main
from tengen.engine.games.go import GoGame
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.play.gtp import GtpEngine, preprocess
from tengen.play.search_player import SearchPlayer

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
    # Small searches keep the analysis transcripts short; everything is seeded.
    return GtpEngine(seed=0, search=SearchSettings(simulations=16), analysis_visits=16)


@pytest.mark.parametrize("path", GOLDEN_FILES, ids=[p.stem for p in GOLDEN_FILES])
def test_golden_transcript(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)  # transcripts name files relative to the repository root
    _, exchanges = load_transcript(path)
    assert exchanges, f"{path.name} holds no commands"
    engine = golden_engine()
    expected = [(f"{path.name}:{ex.line} {ex.command}", ex.reply) for ex in exchanges]
    actual = [(f"{path.name}:{ex.line} {ex.command}", engine.handle(ex.command)) for ex in exchanges]
    assert actual == expected
    assert not engine.quit


def test_golden_files_exist() -> None:
    names = {p.name for p in GOLDEN_FILES}
    assert {"gtp_protocol.txt", "gtp_play.txt", "gtp_ko.txt", "gtp_score.txt", "gtp_setup.txt"} <= names
    clients = {"sabaki", "lizzie", "gogui", "kgs", "gtp2ogs"}
    assert {f"gtp_client_{c}.txt" for c in clients} <= names


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
    assert GtpEngine().handle("version") == f"= {metadata.version('tengen-zero')}\n\n"


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


def engine_with_board(diagram: str, **kwargs) -> GtpEngine:
    """An engine whose board holds the diagram's stones ('X' black, 'O' white),
    placed with ``play`` moves out of turn, black to play."""
    rows = [row.split() for row in diagram.strip().splitlines()]
    size = len(rows)
    engine = GtpEngine(size=size, komi=kwargs.pop("komi", 0.5), seed=kwargs.pop("seed", 0), **kwargs)
    game = engine.game
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            if cell in "XO":
                vertex = game.action_to_text(r * size + c)
                assert engine.handle(f"play {'b' if cell == 'X' else 'w'} {vertex}") == "=\n\n", vertex
    engine.handle("play w pass")  # black to play next
    return engine


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_genmove_plays_a_whole_game_legally_without_filling_own_eyes(seed: int) -> None:
    engine = GtpEngine(size=9, komi=7.5, seed=seed, resign_threshold=None)  # played out to two passes
    game = engine.game
    colors = "bw"
    for n in range(1000):
        before = engine.state.copy()
        color = n % 2
        reply = engine.handle(f"{n} genmove {colors[color]}")
        assert reply.startswith(f"={n} ") and reply.endswith("\n\n"), reply
        vertex = reply[len(f"={n} ") : -2]
        action = game.text_to_action(vertex)
        assert game.legal_mask(before)[action], vertex
        if vertex != "pass":
            assert not game.is_own_eye(before, action, color), f"{vertex} fills {colors[color]}'s own eye"
        if game.is_terminal(engine.state):
            break
    else:
        pytest.fail("the game did not end")
    assert game.end_reason(engine.state) == "two passes"
    assert n < 300, "random play should end well before the move cap"
    # Every stone has one status; final_score is Tromp-Taylor, counted independently
    # on the shown board, once the stones called dead are taken off.
    statuses = {s: engine.handle(f"final_status_list {s}")[2:-2].split() for s in ("alive", "dead", "seki")}
    listed = [v for vs in statuses.values() for v in vs]
    assert sorted(listed) == sorted(stone_vertices(game, engine.state))
    shown = board_from_showboard(engine.handle("showboard"), 9)
    assert np.array_equal(shown, game.board(engine.state))
    for v in statuses["dead"]:
        shown.flat[game.text_to_action(v)] = 0
    score = tromp_taylor_area(shown) - 7.5
    expected = "0" if score == 0 else f"{'B' if score > 0 else 'W'}+{abs(score):g}"
    assert engine.handle("final_score") == f"= {expected}\n\n"


def test_random_genmove_passes_when_only_settled_points_are_left() -> None:
    # Black owns the left, white the right; every point is settled, so both pass.
    # (Resigning off: black, behind, would otherwise resign after white's pass that
    # engine_with_board makes; the tests below check that.)
    engine = engine_with_board(
        """
        . X . X O . O . .
        X X X X O O O O O
        . X . X O . O . O
        X X X X O O O O O
        . X . X O . O . O
        X X X X O O O O O
        . X . X O . O . O
        X X X X O O O O O
        . X . X O . O . O
        """,
        resign_threshold=None,
    )
    assert engine.handle("genmove b") == "= pass\n\n"
    assert engine.handle("genmove w") == "= pass\n\n"
    assert engine.game.end_reason(engine.state) == "two passes"


#: every point settled: black's single-point eyes on the left, white's on the right,
#: and a dead black stone in white's two-point eye at the top right (J9: its one
#: liberty H9 is suicide for black, a capture for white). By hand, with J9 off: black
#: has columns A-D (36), white E-J (45); komi 0.5, so W+9.5. (J9 left on, Tromp-Taylor
#: would give black 37, white 43, H9 nobody's: W+6.5.)
SETTLED_WHITE_WINS = """
    . X . X O . O . X
    X X X X O O O O O
    . X . X O . O . O
    X X X X O O O O O
    . X . X O . O . O
    X X X X O O O O O
    . X . X O . O . O
    X X X X O O O O O
    . X . X O . O . O
    """


def test_the_count_of_the_settled_position_is_the_hand_count() -> None:
    engine = engine_with_board(SETTLED_WHITE_WINS)
    assert engine.handle("final_status_list dead") == "= J9\n\n"
    assert engine.handle("final_score") == "= W+9.5\n\n"


def test_genmove_passes_after_the_opponents_pass_when_the_count_is_won() -> None:
    # What online-go.com needs of a bot: once both pass it scores the game itself
    # (no dead-stone phase for the bot), so white's pass must end the game here.
    engine = engine_with_board(SETTLED_WHITE_WINS)
    assert engine.handle("play b pass") == "=\n\n"
    assert engine.handle("genmove w") == "= pass\n\n"
    assert engine.game.end_reason(engine.state) == "two passes"
    assert engine.handle("final_score") == "= W+9.5\n\n"  # the count it passed into


def test_genmove_resigns_after_the_opponents_pass_when_the_count_is_lost() -> None:
    engine = engine_with_board(SETTLED_WHITE_WINS)  # white passed; black is 9.5 behind
    played = engine.record.moves_played
    assert engine.handle("genmove b") == "= resign\n\n"
    assert engine.record.moves_played == played  # resigning plays nothing


def test_without_resigning_genmove_plays_on_after_the_opponents_pass_in_a_lost_count() -> None:
    engine = engine_with_board(SETTLED_WHITE_WINS, resign_threshold=None)
    # Black's only legal points are its own eyes and H9 (suicide): pass is its move.
    assert engine.handle("genmove b") == "= pass\n\n"
    assert engine.handle("final_score") == "= W+9.5\n\n"


def test_without_the_opponents_pass_genmove_does_not_answer_from_the_count() -> None:
    # The same board with white's last stone as the last move: nobody passed, so
    # black (no model: no winrate to resign by) chooses as always, and passes.
    engine = GtpEngine(size=9, komi=0.5, seed=0)
    rows = [row.split() for row in SETTLED_WHITE_WINS.strip().splitlines()]
    for stone, color in (("X", "b"), ("O", "w")):
        for r, row in enumerate(rows):
            for c, cell in enumerate(row):
                if cell == stone:
                    assert engine.handle(f"play {color} {engine.game.action_to_text(r * 9 + c)}") == "=\n\n"
    assert engine.handle("genmove b") == "= pass\n\n"
    assert engine.handle("genmove w") == "= pass\n\n"  # now black passed: white's count is won


def test_with_a_search_the_opponents_pass_is_answered_from_the_count_before_searching() -> None:
    # A uniform evaluator's winrate is 1/2: never low enough to resign by, and its
    # search would play on; the count answers first.
    player = SearchPlayer(uniform_evaluator(82), search=SearchSettings(simulations=8))
    losing = engine_with_board(SETTLED_WHITE_WINS, player=player)
    assert losing.handle("genmove b") == "= resign\n\n"  # at once, not after resign_moves low winrates
    winning = engine_with_board(SETTLED_WHITE_WINS, player=player)
    assert winning.handle("play b pass") == "=\n\n"
    assert winning.handle("genmove w") == "= pass\n\n"
    searching = engine_with_board(SETTLED_WHITE_WINS, player=player)
    assert searching.handle("genmove w") not in ("= pass\n\n", "= resign\n\n")  # its own pass last: it searches


#: a seki at the top (one eye each and the shared liberty C9) between living groups
SEKI = """
    . O . X . X O . O
    O O O X X X O O .
    X X X O O O O . O
    X . X X O O . O O
    X X X X O . O O .
    X . X X O O O . O
    X X X X O . O O O
    X . X X O O . O .
    X X X X O O O O O
    """

#: black's wall on column E, white's on F, and two dead white stones in black's area
DEAD_STONES = """
    . . . . X O . . .
    . . . . X O . . .
    . . . . X O . . .
    . . . . X O . . .
    . O O . X O . . .
    . . . . X O . . .
    . . . . X O . . .
    . . . . X O . . .
    . . . . X O . . .
    """


def test_final_status_list_finds_seki_and_final_score_agrees() -> None:
    engine = engine_with_board(SEKI)
    assert engine.handle("final_status_list seki") == "= B9 A8 B8 C8\nD9 F9 D8 E8 F8\n\n"  # as GNU Go says
    assert engine.handle("final_status_list dead") == "=\n\n"
    # Nothing dead: Tromp-Taylor on the board as it is (C9 is shared, so nobody's).
    expected = tromp_taylor_area(engine.game.board(engine.state)) - 0.5
    assert engine.handle("final_score") == f"= {'B' if expected > 0 else 'W'}+{abs(expected):g}\n\n"


def test_dead_stones_come_off_in_final_score_unless_scoring_is_tromp_taylor() -> None:
    engine = engine_with_board(DEAD_STONES)
    assert engine.handle("final_status_list dead") == "= B5 C5\n\n"
    alive = engine.handle("final_status_list alive")[2:-2].split("\n")
    assert alive == ["E9 E8 E7 E6 E5 E4 E3 E2 E1", "F9 F8 F7 F6 F5 F4 F3 F2 F1"]
    # Area by hand: black columns A-E (45), white F-J (36); komi 0.5.
    assert engine.handle("final_score") == "= B+8.5\n\n"
    tromp_taylor = engine_with_board(DEAD_STONES, scoring="tromp-taylor")
    assert tromp_taylor.handle("final_status_list dead") == "=\n\n"
    # The board as it is: the region A-D reaches white's B5 and C5, so it is nobody's:
    # black 9 stones, white 9 + 2 stones + 27 points of G-J.
    assert tromp_taylor.handle("final_score") == "= W+29.5\n\n"


def test_kgs_genmove_cleanup_captures_dead_stones_before_it_passes() -> None:
    engine = engine_with_board(DEAD_STONES, seed=3)
    for n in range(60):
        reply = engine.handle("kgs-genmove_cleanup b")
        dead_left = engine.game.group(engine.state, engine.game.text_to_action("B5")) is not None
        if not dead_left:
            break
        assert reply != "= pass\n\n", f"passed at move {n} with dead stones on the board"
        assert engine.handle("play w pass") == "=\n\n"
    else:
        pytest.fail("the dead stones are still on the board")
    assert engine.handle("final_status_list dead") == "=\n\n"


def test_play_goes_on_after_two_passes_and_past_the_move_cap() -> None:
    engine = GtpEngine(size=5, max_moves=4)
    for move in ("b C3", "w pass", "b pass"):
        assert engine.handle(f"play {move}") == "=\n\n"
    assert engine.game.end_reason(engine.state) == "two passes"
    assert engine.handle("play w B2") == "=\n\n"  # accepted: the game goes on
    assert engine.game.end_reason(engine.state) == "move cap"
    assert engine.handle("play b C2") == "=\n\n"  # and past the cap too
    assert engine.handle("play w C2") == "? illegal move\n\n"  # still the rules of the board
    assert stone_vertices(engine.game, engine.state) == {"C3", "B2", "C2"}
    for _ in range(5):
        assert engine.handle("undo") == "=\n\n"
    assert engine.handle("undo") == "? cannot undo\n\n"


def black_loses_evaluator(num_actions: int):
    """Uniform priors; the value says white wins from every position (the last
    input plane is 1 when black is to move)."""

    def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(planes)
        black_to_move = planes[:, 0, 0, -1] == 1
        return np.full((n, num_actions), 1.0 / num_actions, np.float32), np.where(black_to_move, -1.0, 1.0)

    return evaluate


def test_genmove_resigns_when_the_value_stays_below_the_threshold() -> None:
    player = SearchPlayer(black_loses_evaluator(82), search=SearchSettings(simulations=4))
    engine = GtpEngine(size=9, player=player, resign_threshold=0.1, resign_moves=2)
    assert engine.handle("genmove b") != "= resign\n\n"  # once is not enough
    assert engine.handle("genmove w") != "= resign\n\n"  # white is winning
    assert engine.handle("genmove b") == "= resign\n\n"
    assert engine.record.moves_played == 2  # resigning plays nothing
    never = GtpEngine(size=9, player=player, resign_threshold=None)
    assert all(never.handle(f"genmove {c}") != "= resign\n\n" for c in "bwbwbw")
    # In cleanup the game is decided already: no resigning.
    cleanup = GtpEngine(size=9, player=player, resign_threshold=0.1, resign_moves=1)
    assert cleanup.handle("kgs-genmove_cleanup b") != "= resign\n\n"


@pytest.mark.parametrize(("komi", "winrate"), [(7.5, 1.0), (30.5, 0.0)])
def test_komi_is_honoured_in_the_search_terminal_values(komi: float, winrate: float) -> None:
    # One black stone owns all 25 points of 5x5. White passed: black's pass ends the
    # game, won with komi 7.5, lost with komi 30.5. (Rollout search: UCT tries every
    # move once, so the pass is surely visited; its value is the exact terminal one.)
    player = SearchPlayer(None, search=SearchSettings(simulations=64))
    engine = GtpEngine(size=5, komi=7.5, player=player)
    for command in (f"komi {komi}", "play b C3", "play w pass"):
        assert engine.handle(command) == "=\n\n"
    analysis = player.search(engine.game, engine.record.probe(0), engine.record.history())
    [passing] = [m for m in analysis.moves if m.action == engine.game.pass_action]
    assert passing.winrate == winrate


def test_genmove_is_deterministic_for_a_seed() -> None:
    def moves(seed: int) -> list[str]:
        engine = GtpEngine(size=9, seed=seed)
        return [engine.handle(f"genmove {'bw'[n % 2]}") for n in range(30)]

    assert moves(7) == moves(7)
    assert moves(7) != moves(8)


def test_genmove_out_of_turn_plays_the_colour_asked() -> None:
    engine = GtpEngine(size=9, seed=0)
    vertex = engine.handle("genmove white")[2:-2]
    group = engine.game.group(engine.state, engine.game.text_to_action(vertex))
    assert group is not None and group.color == 1
    assert engine.game.to_play(engine.state) == 0


def test_a_player_searches_for_genmove_and_sees_the_colour_asked() -> None:
    class Recording(SearchPlayer):
        def search(self, game, state, history=(), **kwargs):
            self.seen.append((game.to_play(state), len(history)))
            return super().search(game, state, history, **kwargs)

    player = Recording(uniform_evaluator(82), search=SearchSettings(simulations=8))
    player.seen = []
    engine = GtpEngine(size=9, player=player, resign_threshold=None)
    assert engine.handle("play b E5") == "=\n\n"
    vertex = engine.handle("genmove b")[2:-2]  # out of turn: the search sees black to move
    assert player.seen == [(0, 1)]
    assert engine.game.group(engine.state, engine.game.text_to_action(vertex)).color == 0


def test_rendb_dump_parses_as_json() -> None:
    engine = GtpEngine(size=9, seed=5)
    for n in range(20):
        engine.handle(f"genmove {'bw'[n % 2]}")
    reply = engine.handle("rendb_dump")
    assert reply.startswith("= {") and reply.endswith("}\n\n")
    doc = json.loads(reply[2:])
    assert doc["header"] == {"boardWidth": 9, "boardHeight": 9}
    stones = {v for ren in doc["rens"].values() for v in ren["locate"].split()}
    assert stones == stone_vertices(engine.game, engine.state)
    rebuilt = engine.game.state_from_rens(reply[2:])
    assert np.array_equal(engine.game.board(rebuilt), engine.game.board(engine.state))


def test_superko_engine_plays() -> None:
    engine = GtpEngine(size=5, superko=True, seed=1, resign_threshold=None)
    for n in range(300):
        engine.handle(f"genmove {'bw'[n % 2]}")
        if engine.game.is_terminal(engine.state):
            break
    assert engine.game.is_terminal(engine.state)


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
        [sys.executable, "-m", "tengen.cli", "gtp", "--game", "go9", "--komi", "5.5", "--seed", "1"],
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
    command = [str(tengen)] if tengen.exists() else [sys.executable, "-m", "tengen.cli"]
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
    os.chdir(REPO)
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


def test_a_model_that_reads_go_s_feature_planes_gets_them_from_its_board_through_every_command():
    # what the network of a run with game.features was trained on: 20 planes beside the stones
    with_features = GoGame(size=9, features=True)
    seen: list[int] = []

    def evaluate(planes):
        seen.append(planes.shape[-1])
        return uniform_evaluator(82)(planes)

    player = SearchPlayer(evaluate, search=SearchSettings(simulations=8), size=9, history_length=8, features=True)
    assert "feature planes" in str(pytest.raises(ValueError, GtpEngine, size=9, player=player).value)
    engine = GtpEngine(size=9, player=player, features=True)
    for command in ("genmove b", "komi 6.5", "genmove w", "boardsize 9", "genmove b"):
        assert engine.handle(command).startswith("="), command
    assert set(seen) == {with_features.planes_shape[-1]}
