"""Random-game throughput of our compiled rules next to OpenSpiel's C++ games driven
from Python, in the same run.

Both sides play uniformly random legal moves (pass included in Go) from the empty
board to the end. Ours plays a whole game in one compiled call; OpenSpiel's is the
usual loop over ``legal_actions()`` and ``apply_action()``. Also times the copy of
a mid-game 19x19 state (target: under 2 microseconds).

    python bench/rules.py [--seconds 3]

Ends with one ``RATIO`` line per game (the form of README.md's Benchmarks).
"""

from __future__ import annotations

import argparse
import random
import time
import timeit

import pyspiel

from tengen.engine.games.go import GoGame
from tengen.engine.games.mnk import connect4

TARGETS = {"go9": 5.0, "go19": 5.0, "connect4": 10.0}


def ours_moves_per_s(game, seconds: float) -> float:
    empty = game.initial_state()
    game.random_games(empty, 1, 0)  # compile outside the clock
    moves, seed, start = 0, 1, time.perf_counter()
    while time.perf_counter() - start < seconds:
        moves += game.random_games(empty, 200, seed)
        seed += 1
    return moves / (time.perf_counter() - start)


def openspiel_moves_per_s(name: str, params: dict, seconds: float) -> float:
    game = pyspiel.load_game(name, params)
    rng = random.Random(0)
    moves, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        state = game.new_initial_state()
        while not state.is_terminal():
            state.apply_action(rng.choice(state.legal_actions()))
            moves += 1
    return moves / (time.perf_counter() - start)


def clone_us(game: GoGame) -> tuple[float, float]:
    """Microseconds per copy of a finished random 19x19 game's state (ours) and per
    ``clone()`` of an OpenSpiel state 150 moves into a random game."""
    state = game.initial_state()
    rng = random.Random(1)
    ref = pyspiel.load_game("go", {"board_size": 19}).new_initial_state()
    for _ in range(150):
        legal = ref.legal_actions()
        ref.apply_action(rng.choice(legal[:-1]))
    game.random_playout(state, 1)  # a finished game: the board is as full as it gets
    n = 200_000
    ours = min(timeit.repeat(state.copy, number=n, repeat=3)) / n * 1e6
    theirs = min(timeit.repeat(ref.clone, number=n // 10, repeat=3)) / (n // 10) * 1e6
    return ours, theirs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per side and game")
    args = parser.parse_args()

    cases = [
        ("go9", GoGame(size=9), "go", {"board_size": 9, "komi": 7.5}),
        ("go19", GoGame(size=19), "go", {"board_size": 19, "komi": 7.5}),
        ("connect4", connect4(), "connect_four", {}),
    ]
    ratios = []
    for label, game, spiel_name, spiel_params in cases:
        ours = ours_moves_per_s(game, args.seconds)
        theirs = openspiel_moves_per_s(spiel_name, spiel_params, args.seconds)
        print(f"{label:9s} ours {ours / 1e6:7.2f}M moves/s  pyspiel {theirs / 1e6:6.3f}M", flush=True)
        ratios.append((label, ours / theirs))
    ours_clone, their_clone = clone_us(GoGame(size=19))
    print(f"go19 state copy: ours {ours_clone:.2f} us, pyspiel clone() {their_clone:.2f} us (target < 2 us)")
    for label, ratio in ratios:
        print(f"RATIO {label}_moves_per_s {ratio:.1f} vs pyspiel target {TARGETS[label]:g}")


if __name__ == "__main__":
    main()
