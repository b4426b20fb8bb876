"""Label Connect Four positions from every phase of the game with the exact solver, once.

    nice -n 19 taskset -c 1 python bench/label_connect4.py        # ~25 minutes on one core
    python bench/label_connect4.py --stones 14-30 --per-stones 1500 --seed 12 \
        --exclude play/data/connect4_positions.txt --out runs/labels/seed12.txt   # ~10 minutes
    python bench/label_connect4.py --from-games runs/connect4/games --per-stones 30 \
        --out runs/own_positions.txt      # a run's own self-play positions (~2 minutes)

writes ``play/data/connect4_positions.txt``, the positions ``play/grading.py``
grades players on; the second, 25,500 training positions for bench/supervised_ceiling.py,
none of them a graded one; the third, positions from the games a run kept, to grade its
model on its own self-play's positions (``bench/learn_connect4.py --grade-only MODEL
--positions FILE``). The bench's file has ``--per-stones`` (44) positions for each
stone count of ``--stones`` (8-30), about 1,000 in all, so that a share near 0.9 has a
standard error near 0.01.

How a position is made (``--seed`` fixes all of it; each stone count has its own
random stream, so one count can be relabelled alone): a game from the empty board
up to the stone count, each move either uniformly random (half the time) or a
sensible one (the other half): a move that wins at once if there is one, else one
after which the opponent cannot win at once (which blocks their threats and never
plays under their winning spot), drawn with centre-heavy weights 1-2-3-4-3-2-1;
uniformly random when every move loses at once. So the positions are neither pure
noise nor one engine's openings. A position is dropped when the game ended on the
way, when it or its mirror image is already in the set, when the mover can win at
once (decided already), or when every legal move has the same score (any move is
optimal and keeps the outcome: it grades nothing); positions the solver cannot
score within ``--max-nodes`` are dropped and counted in the file's header.

The file's format is play/grading.py's (``read_positions`` reads it).
"""

from __future__ import annotations

import argparse
import itertools
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tengen.engine.games.mnk import NO_WINNER, TO_PLAY, WINNER, connect4, play_in_place, play_sequence
from tengen.play.game_records import GameTextError, read_plain
from tengen.play.grading import (
    DEFAULT_PATH,
    FORMAT_LINE,
    canonical_moves,
    format_line,
    position_keys,
    read_positions,
)
from tengen.play.solvers import NO_SCORE, SolveBudgetExceeded, TranspositionTable, connect4_move_scores

#: the sensible mover's column weights: centre columns join more lines
CENTRE_WEIGHTS = np.array([1, 2, 3, 4, 3, 2, 1], dtype=np.float64)

_GAME = connect4()


# -- making positions ---------------------------------------------------------------------


def _wins_at_once(state: np.ndarray, col: int) -> bool:
    child = state.copy()
    play_in_place(_GAME.params, child, col)
    return bool(child[WINNER] == state[TO_PLAY])


def _can_win_at_once(state: np.ndarray) -> bool:
    """Whether the player to move has a move that makes four."""
    return any(_wins_at_once(state, int(col)) for col in np.flatnonzero(_GAME.legal_mask(state)))


def sensible_move(state: np.ndarray, rng: np.random.Generator) -> int:
    """A win at once; else a move after which the opponent cannot win at once, centre-weighted."""
    legal = [int(col) for col in np.flatnonzero(_GAME.legal_mask(state))]
    for col in legal:
        if _wins_at_once(state, col):
            return col
    safe = [col for col in legal if not _can_win_at_once(_GAME.next_state(state, col))]
    if not safe:
        return int(rng.choice(legal))
    weights = CENTRE_WEIGHTS[safe]
    return int(rng.choice(safe, p=weights / weights.sum()))


def playout(stones: int, rng: np.random.Generator, *, random_share: float = 0.5) -> str | None:
    """The moves (text, 1-7) of a game played to ``stones`` stones; None if it ended sooner."""
    state = _GAME.initial_state()
    moves = []
    for _ in range(stones):
        if rng.random() < random_share:
            col = int(rng.choice(np.flatnonzero(_GAME.legal_mask(state))))
        else:
            col = sensible_move(state, rng)
        play_in_place(_GAME.params, state, col)
        moves.append(str(col + 1))
        if state[WINNER] != NO_WINNER:
            return None
    return "".join(moves)


@dataclass
class Tally:
    kept: int = 0
    ended: int = 0
    repeated: int = 0
    win_at_once: int = 0
    all_equal: int = 0
    over_budget: int = 0
    seconds: float = 0.0


def read_game_moves(games_dir: str | Path) -> list[str]:
    """The moves (text, 1-7) of every Connect Four game a run kept in ``games_dir`` (its
    ``games/`` folder: one plain game line a ``.txt`` file; gating's games, in folders
    below it, are left out)."""
    files = sorted(Path(games_dir).glob("*.txt"))
    if not files:
        raise ValueError(f"{games_dir}: no kept games (*.txt) to take positions from (a run keeps them in "
                         "its games/ folder)")
    games = []
    for path in files:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if line.strip():
                try:
                    finished, _ = read_plain(line, _GAME)
                except GameTextError as e:
                    raise ValueError(f"{path}:{number}: not a Connect Four game line: {e}") from None
                games.append("".join(_GAME.action_to_text(a) for a in finished.moves))
    return games


def label_stone_count(
    stones: int, count: int, *, seed: int, table: TranspositionTable, max_nodes: int, seen: set[bytes],
    games: Sequence[str] | None = None,
) -> tuple[list[str], Tally]:
    """``count`` lines for positions with ``stones`` stones, and what was dropped on the way.

    The positions are the generator's playouts, or with ``games`` (move texts) those games'
    first ``stones`` moves, in a seeded order, until ``count`` are kept or none are left."""
    rng = np.random.default_rng([seed, stones])
    if games is None:
        candidates: Iterator[str | None] = (playout(stones, rng) for _ in itertools.count())
    else:
        candidates = (games[i][:stones] for i in rng.permutation(len(games)) if len(games[i]) > stones)
    tally = Tally()
    lines: list[str] = []
    start = time.monotonic()
    for moves in candidates:
        if tally.kept >= count:
            break
        if moves is None:
            tally.ended += 1
            continue
        key = canonical_moves(moves)
        if key in seen:
            tally.repeated += 1
            continue
        seen.add(key)
        state = play_sequence(_GAME, list(moves))
        if _can_win_at_once(state):
            tally.win_at_once += 1
            continue
        try:
            scores = connect4_move_scores(state, table=table, max_nodes=max_nodes)
        except SolveBudgetExceeded:
            tally.over_budget += 1
            continue
        legal_scores = scores[scores != NO_SCORE]
        if legal_scores.min() == legal_scores.max():
            tally.all_equal += 1
            continue
        lines.append(format_line(moves, scores))
        tally.kept += 1
    tally.seconds = time.monotonic() - start
    return lines, tally


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stones", default="8-30", help="stone counts, FIRST-LAST")
    parser.add_argument("--per-stones", type=int, default=44, help="positions per stone count")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-nodes", type=int, default=5_000_000_000, help="search budget per position")
    parser.add_argument("--table-slots", type=int, default=16_777_213, help="transposition table (8 bytes each)")
    parser.add_argument("--out", default=str(DEFAULT_PATH))
    parser.add_argument("--exclude", action="append", default=[], metavar="PATH",
                        help="a positions file none of whose positions (nor their mirrors) is labelled again; "
                             "repeatable (training labels: --exclude the bench's file)")
    parser.add_argument("--from-games", metavar="DIR",
                        help="take the positions from a run's kept games (its games/ folder) instead of the "
                             "generator: a model graded on its own self-play's positions")
    args = parser.parse_args()

    first, last = (int(part) for part in args.stones.split("-"))
    table = TranspositionTable(args.table_slots)
    seen = position_keys(p for path in args.exclude for p in read_positions(path))
    games = read_game_moves(args.from_games) if args.from_games else None
    body: list[str] = []
    notes: list[str] = []
    total = time.monotonic()
    for stones in range(first, last + 1):
        lines, tally = label_stone_count(stones, args.per_stones, seed=args.seed, table=table,
                                         max_nodes=args.max_nodes, seen=seen, games=games)
        body.extend(lines)
        note = (f"# {stones:2d} stones: {tally.kept} kept in {tally.seconds:.0f} s; dropped {tally.ended} ended, "
                f"{tally.repeated} repeated, {tally.win_at_once} win at once, {tally.all_equal} all moves equal, "
                f"{tally.over_budget} over the budget")
        notes.append(note)
        print(note[2:], flush=True)
    minutes = (time.monotonic() - total) / 60
    header = [
        FORMAT_LINE,
        f"# Written by bench/label_connect4.py --stones {args.stones} --per-stones {args.per_stones} "
        f"--seed {args.seed} --max-nodes {args.max_nodes}"
        + "".join(f" --exclude {path}" for path in args.exclude)
        + (f" --from-games {args.from_games} ({len(games or ())} games)" if args.from_games else "")
        + f"; {len(body)} positions, {minutes:.0f} min on one core.",
        "# MOVES S1..S7 BEST: columns played (1-7); each column's score for the player to move (Pascal Pons'",
        "# score: 22 minus the winner's stones at the four, negative for a loss, 0 a draw; x: full); the best.",
        *notes,
    ]
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(header + body) + "\n")
    print(f"wrote {len(body)} positions to {args.out} in {minutes:.1f} min")


if __name__ == "__main__":
    main()
