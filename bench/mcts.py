"""Search speed: simulations per second with a uniform evaluator (priors 1/A, value 0),
ours next to OpenSpiel's Python MCTSBot (PUCT, the same evaluator), in the same run,
both on one core.

Ours searches 64 games at once, 8 leaves per game per round, the evaluator called
once per round; first-play urgency is set to the parent's value (reduction 0), which
is what OpenSpiel's PUCT does for unvisited children.

    python bench/mcts.py [--simulations 800]

Ends with one ``RATIO`` line per game (see DESIGN.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyspiel
from open_spiel.python.algorithms import mcts as spiel_mcts

from tengen.engine.games import make_game
from tengen.engine.mcts import Search, uniform_evaluator

TARGETS = {"connect4": 50.0, "go9": 30.0}


class UniformSpielEvaluator(spiel_mcts.Evaluator):
    def evaluate(self, state):
        return np.zeros(2)

    def prior(self, state):
        legal = state.legal_actions()
        return [(a, 1.0 / len(legal)) for a in legal]


class OpenSpielSide:
    def __init__(self, name: str, params: dict, simulations: int):
        self.game = pyspiel.load_game(name, params)
        self.simulations = simulations
        self.bot = spiel_mcts.MCTSBot(self.game, uct_c=1.25, max_simulations=simulations,
                                      evaluator=UniformSpielEvaluator(), solve=False,
                                      child_selection_fn=spiel_mcts.SearchNode.puct_value,
                                      random_state=np.random.RandomState(0))

    def sims_per_s(self, seconds: float) -> float:
        sims, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            self.bot.mcts_search(self.game.new_initial_state())
            sims += self.simulations
        return sims / (time.perf_counter() - start)


class OurSide:
    def __init__(self, game, simulations: int):
        self.search = Search(game, games=64, simulations=simulations, leaves_per_round=8, c_puct=1.25,
                             fpu_reduction=0.0)
        self.evaluate = uniform_evaluator(game.num_actions)
        self.simulations = simulations
        self.sims_per_s(0.0)  # compile outside the clock

    def sims_per_s(self, seconds: float) -> float:
        search = self.search
        sims, start = 0, time.perf_counter()
        while True:
            for g in range(search.games):
                search.reset(g)
            search.run(self.evaluate)
            sims += search.games * self.simulations
            if time.perf_counter() - start >= seconds:
                return sims / (time.perf_counter() - start)


def interleaved_best(sides: list, seconds: float, slices: int) -> list[float]:
    """Each side's best rate over ``slices`` short turns taken in alternation: a slow
    spell of a shared machine then costs both sides alike, and the best turn is the
    one least disturbed."""
    best = [0.0] * len(sides)
    for _ in range(slices):
        for i, side in enumerate(sides):
            best[i] = max(best[i], side.sims_per_s(seconds / slices))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulations", type=int, default=800, help="simulations per move")
    parser.add_argument("--seconds", type=float, default=6.0, help="time per side and game")
    parser.add_argument("--slices", type=int, default=6, help="alternating turns per side and game")
    args = parser.parse_args()
    cases = [
        ("connect4", make_game("connect4"), "connect_four", {}),
        ("go9", make_game("go", size=9), "go", {"board_size": 9, "komi": 7.5}),
    ]
    ratios = []
    for label, game, spiel_name, spiel_params in cases:
        sides = [OurSide(game, args.simulations), OpenSpielSide(spiel_name, spiel_params, args.simulations)]
        ours, theirs = interleaved_best(sides, args.seconds, args.slices)
        print(f"{label:9s} ours {ours:12,.0f} sims/s  OpenSpiel MCTSBot {theirs:10,.0f} sims/s", flush=True)
        ratios.append((label, ours / theirs))
    for label, ratio in ratios:
        print(f"RATIO {label}_sims_per_s {ratio:.1f} vs openspiel_mctsbot target {TARGETS[label]:g}")


if __name__ == "__main__":
    main()
