"""Search speed: simulations per second, ours next to two OpenSpiel peers, in the
same run, each on one core.

- With a uniform evaluator (priors 1/A, value 0), against OpenSpiel's Python
  MCTSBot (PUCT, the same evaluator). Ours searches 64 games at once, 8 leaves per
  game per round, the evaluator called once per round; first-play urgency is set to
  the parent's value (reduction 0), which is what OpenSpiel's PUCT does for
  unvisited children.
- Pure MCTS, one random rollout per leaf, against OpenSpiel's C++ ``pyspiel.MCTSBot``
  with ``pyspiel.RandomRolloutEvaluator(1, seed)``: UCT with c = 2 on both sides, no
  solver. Ours searches 32 games at once, one leaf per game per round (so each
  game's search is the same sequential UCT as the bot's), the rollouts of a round in
  one compiled call (``RolloutEvaluator``).

- Gumbel AlphaZero's search (``search="gumbel"``, m = 16, noise drawn for every
  search) against our PUCT of the first item, the same games, leaves per round and
  evaluator: the cost of a simulation under each rule (target: the same).

Every search starts from the initial position. The sides take short turns in
alternation and each keeps its best turn (see ``interleaved_best``).

``--baseline DIR`` adds our two searches as another checkout of tengen runs them
(e.g. ``git worktree add /tmp/mcts-old main``), each in a subprocess that imports
``tengen`` from DIR and takes its turns in the same alternation: a change to the
search is measured against the code before it in the same run.

    python bench/mcts.py [--simulations 800] [--baseline DIR] [--only-gumbel]

Ends with one ``RATIO`` line per game and peer (the form of README.md's Benchmarks),
and ``RATIO gumbel_vs_puct_sims_per_s`` for the slower of the games.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyspiel
from open_spiel.python.algorithms import mcts as spiel_mcts

import tengen
from tengen.engine.games import make_game
from tengen.engine.mcts import RolloutEvaluator, Search, SearchSettings, uniform_evaluator

#: minimum ratios: (game, kind) -> target
TARGETS = {("connect4", "uniform"): 50.0, ("go9", "uniform"): 30.0,
           ("connect4", "rollout"): 5.0, ("go9", "rollout"): 5.0}
#: the baseline's speed over ours that counts as no loss: the noise of best-of-six turns here
BASELINE_TARGET = 0.95
#: Gumbel's speed over PUCT's: the same cost per simulation
GUMBEL_TARGET = 1.0
#: UCT's exploration constant on both sides of the rollout comparison
UCT_C = 2.0
#: games (label) -> (make_game arguments, OpenSpiel name, OpenSpiel parameters)
CASES = {
    "connect4": ({"name": "connect4"}, "connect_four", {}),
    "go9": ({"name": "go", "size": 9}, "go", {"board_size": 9, "komi": 7.5}),
}


class UniformSpielEvaluator(spiel_mcts.Evaluator):
    def evaluate(self, state):
        return np.zeros(2)

    def prior(self, state):
        legal = state.legal_actions()
        return [(a, 1.0 / len(legal)) for a in legal]


class _Side:
    simulations: int

    def search_once(self) -> int:
        """One search per game from the initial position; returns the simulations."""
        raise NotImplementedError

    def sims_per_s(self, seconds: float) -> float:
        sims, start = 0, time.perf_counter()
        while True:
            sims += self.search_once()
            if time.perf_counter() - start >= seconds:
                return sims / (time.perf_counter() - start)


class OpenSpielPythonSide(_Side):
    """OpenSpiel's Python MCTSBot, PUCT with the uniform evaluator."""

    def __init__(self, name: str, params: dict, simulations: int):
        self.game = pyspiel.load_game(name, params)
        self.simulations = simulations
        self.bot = spiel_mcts.MCTSBot(self.game, uct_c=1.25, max_simulations=simulations,
                                      evaluator=UniformSpielEvaluator(), solve=False,
                                      child_selection_fn=spiel_mcts.SearchNode.puct_value,
                                      random_state=np.random.RandomState(0))

    def search_once(self) -> int:
        self.bot.mcts_search(self.game.new_initial_state())
        return self.simulations


class OpenSpielCppSide(_Side):
    """OpenSpiel's C++ MCTSBot: UCT, one random rollout per leaf."""

    def __init__(self, name: str, params: dict, simulations: int, seed: int = 0):
        self.game = pyspiel.load_game(name, params)
        self.simulations = simulations
        self.bot = pyspiel.MCTSBot(self.game, pyspiel.RandomRolloutEvaluator(1, seed), UCT_C, simulations,
                                   1000, False, seed, False)

    def search_once(self) -> int:
        self.bot.mcts_search(self.game.new_initial_state())
        return self.simulations


def _search(game, games: int, **settings) -> Search:
    """A ``Search`` of these settings, made as the tengen this runs on takes them: one
    ``SearchSettings`` value, or (a ``--baseline`` checkout from before it) keywords."""
    if "simulations" in SearchSettings.__dataclass_fields__:
        return Search(game, games=games, settings=SearchSettings(**settings))
    return Search(game, games=games, **settings)


class OurSide(_Side):
    """Our search of many games at once: ``kind`` "uniform" (PUCT, uniform evaluator,
    64 games, 8 leaves per round), "gumbel" (the same with Gumbel's search, each
    game's noise drawn before each search) or "rollout" (UCT, one random rollout per
    leaf, 32 games, 1 leaf per round)."""

    def __init__(self, game, simulations: int, kind: str):
        self.simulations = simulations
        self._noise: np.random.Generator | None = None
        if kind == "gumbel":
            self.search = _search(game, 64, simulations=simulations, leaves_per_round=8, search="gumbel",
                                  gumbel_considered=16)
            self._noise = np.random.default_rng(0)
            evaluate = uniform_evaluator(game.num_actions)
            self._run = lambda: self.search.run(evaluate)
        elif kind == "uniform":
            self.search = _search(game, 64, simulations=simulations, leaves_per_round=8, c_puct=1.25,
                                  fpu_reduction=0.0)
            evaluate = uniform_evaluator(game.num_actions)
            self._run = lambda: self.search.run(evaluate)
        else:
            self.search = _search(game, 32, simulations=simulations, leaves_per_round=1, c_puct=UCT_C,
                                  formula="uct", keep_leaf_states=True)
            rollouts = RolloutEvaluator(game, rollouts=1, seed=0)
            self._run = lambda: rollouts.run(self.search)
        self.sims_per_s(0.0)  # compile outside the clock

    def search_once(self) -> int:
        search = self.search
        for g in range(search.games):
            search.reset(g)
            if self._noise is not None:
                search.sample_gumbel(g, self._noise)
        self._run()
        return search.games * self.simulations


class BaselineSide:
    """``OurSide`` as another checkout of tengen runs it: this script in a subprocess
    with ``tengen`` imported from ``root``, one turn per request on its stdin."""

    def __init__(self, root: Path, label: str, simulations: int, kind: str):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", kind, "--game", label, "--simulations", str(simulations)],
            cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = self._reply()
        if not Path(ready).resolve().is_relative_to(root.resolve()):
            raise RuntimeError(f"the baseline imported tengen from {ready}, not from {root}")

    def _reply(self) -> str:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the baseline's subprocess ended (exit code {self.process.wait()})")
        return line.strip()

    def sims_per_s(self, seconds: float) -> float:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{seconds}\n")
        self.process.stdin.flush()
        return float(self._reply())

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=30)


def serve(kind: str, label: str, simulations: int) -> None:
    """The baseline's subprocess: say where tengen came from, then one turn per line."""
    make_args, _, _ = CASES[label]
    side = OurSide(make_game(**make_args), simulations, kind)
    print(Path(tengen.__file__).resolve().parent.parent, flush=True)
    for line in sys.stdin:
        print(side.sims_per_s(float(line)), flush=True)


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
    parser.add_argument("--baseline", type=Path, help="another tengen checkout to measure our search against")
    parser.add_argument("--games", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--only-gumbel", action="store_true", help="only our PUCT against our Gumbel search")
    parser.add_argument("--serve", choices=["uniform", "gumbel", "rollout"], help=argparse.SUPPRESS)
    parser.add_argument("--game", choices=sorted(CASES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.game, args.simulations)
        return
    print(f"ours: tengen from {Path(tengen.__file__).resolve().parent.parent}", flush=True)
    ratios = []
    gumbel_ratios = []
    for label in args.games:
        make_args, spiel_name, spiel_params = CASES[label]
        game = make_game(**make_args)
        sides: dict[str, object] = {"ours": OurSide(game, args.simulations, "uniform"),
                                    "ours, gumbel": OurSide(game, args.simulations, "gumbel")}
        if not args.only_gumbel:
            sides.update({
                "OpenSpiel MCTSBot (Python)": OpenSpielPythonSide(spiel_name, spiel_params, args.simulations),
                "ours, rollouts": OurSide(game, args.simulations, "rollout"),
                "OpenSpiel MCTSBot (C++), rollouts": OpenSpielCppSide(spiel_name, spiel_params, args.simulations),
            })
        if args.baseline:
            sides["baseline"] = BaselineSide(args.baseline, label, args.simulations, "uniform")
            if not args.only_gumbel:
                sides["baseline, rollouts"] = BaselineSide(args.baseline, label, args.simulations, "rollout")
        rates = dict(zip(sides, interleaved_best(list(sides.values()), args.seconds, args.slices),
                         strict=True))
        for name, rate in rates.items():
            print(f"{label:9s} {name:34s} {rate:12,.0f} sims/s", flush=True)
        for side in sides.values():
            if isinstance(side, BaselineSide):
                side.close()
        gumbel_ratios.append(rates["ours, gumbel"] / rates["ours"])
        print(f"{label:9s} gumbel / puct: {gumbel_ratios[-1]:.2f}", flush=True)
        if args.baseline:
            ratios.append((f"{label}_sims_per_s", rates["ours"] / rates["baseline"], "baseline", BASELINE_TARGET))
        if args.only_gumbel:
            continue
        ratios.append((f"{label}_sims_per_s", rates["ours"] / rates["OpenSpiel MCTSBot (Python)"],
                       "openspiel_mctsbot", TARGETS[label, "uniform"]))
        ratios.append((f"{label}_rollout_sims_per_s", rates["ours, rollouts"]
                       / rates["OpenSpiel MCTSBot (C++), rollouts"], "pyspiel_cpp", TARGETS[label, "rollout"]))
        if args.baseline:
            ratios.append((f"{label}_rollout_sims_per_s", rates["ours, rollouts"] / rates["baseline, rollouts"],
                           "baseline", BASELINE_TARGET))
    for metric, ratio, peer, target in ratios:
        print(f"RATIO {metric} {ratio:.{2 if peer == 'baseline' else 1}f} vs {peer} target {target:g}")
    print(f"RATIO gumbel_vs_puct_sims_per_s {min(gumbel_ratios):.2f} vs puct {GUMBEL_TARGET:.1f}")


if __name__ == "__main__":
    main()
