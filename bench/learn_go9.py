"""Go 9x9 from scratch on this machine's CPUs: how strong after N minutes?

Trains with configs/go9.yaml by running ``tengen train`` itself (``--mode cluster``,
the README's main job, by default; ``--mode single`` for ``--single-process``) for
``--minutes`` (60), taking the best model at every ``--eval-every`` minutes (15) and
at the end as a mark from the run directory (testing/training_run.py). After training,
so that evaluation takes none of training's CPU, every mark plays with a fixed search
(``--simulations``, 200), colours alternated, 9x9, komi 7.5, area scoring:

- a random player that never fills its own eyes (``--random-games``, 100);
- pure MCTS with 1,000 random-rollout simulations per move (``--mcts-games``, 20:
  each of its moves costs 1,000 playouts, so these games are the slow ones);
- GNU Go 3.8 at each of ``--gnugo-levels`` (1 and 5) over GTP with ``--chinese-rules``
  (``--gnugo-games`` each, 40), through ``tengen match``'s code (tengen/match_command.py: a KGS-style cleanup phase when
  GNU Go sees dead stones, then Tromp-Taylor on the board). GNU Go is ``--gnugo``,
  else the one on PATH or in /usr/games, else Debian's package unpacked into .cache/ as the tests do;
  tengen does not depend on it.

With ``--versus RUN_DIR`` every mark also plays the mark of the same name in another
run (the previous configuration's model, ``--versus-games``, 40). ``--eval-set KEY=VALUE``
(repeatable) evaluates the marks with their config so changed, in copies beside them
(``marks-KEY=VALUE/``): a technique of play alone (lcb) measured on the same models.

KataGo's techniques (issue 44) are measured one at a time: ``--techniques on`` trains
with every one of ``TECHNIQUES`` on (``tengen train --set``), and ``--ablate NAME`` with
all on but NAME. Without either the config trains as it is.

It prints a table of score rates (wins plus half the draws, per game) with the games
played and their standard errors, and for the last mark ``RATIO
go9_winrate_vs_random`` (target 0.99 at 60 minutes), ``RATIO go9_winrate_vs_mcts1000``
(target 0.8) and ``RATIO go9_winrate_vs_gnugo1`` (target 0.5; on a CPU the figure is
the point). Run it alone.

    python bench/learn_go9.py [--minutes 60] [--mark-minutes 15] [--mode cluster|single]
    python bench/learn_go9.py --minutes 30 --techniques on --ablate lcb --versus runs/learn_go9/cluster
    python bench/learn_go9.py --eval-only runs/learn_go9/cluster   # evaluate saved marks again
    python bench/learn_go9.py --eval-only runs/learn_go9/cluster --eval-set mcts.lcb_z=0 --versus runs/learn_go9/cluster
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import numpy as np

from tengen.cli import set_pairs
from tengen.engine.network import CompiledModel
from tengen.match_command import parse_side, run_match
from tengen.play.grading import MatchScore
from tengen.play.match import play_match
from tengen.play.players import MctsPlayer, RandomPlayer, RolloutMctsPlayer
from tengen.run.checkpoint import load_model
from tengen.run.config import load_config
from tengen.run.run_dir import CONFIG_FILE
from tengen.testing.training_run import MARKS, marks_in, train
from tengen.workers import strength
from tengen.workers.strength import gnugo_command

ROOT = Path(__file__).resolve().parent.parent
TARGETS = {"random": 0.99, "mcts1000": 0.8, "gnugo1": 0.5}
#: KataGo's techniques as config settings: (on, off) for each, each a list of ``--set`` values
TECHNIQUES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "features": (("game.features=true",), ("game.features=false",)),
    "ownership": (("network.ownership=true",), ("network.ownership=false",)),
    "playout_cap": (("selfplay.full_search_fraction=0.25",), ("selfplay.full_search_fraction=1.0",)),
    "global_pooling": (("network.global_pooling_every=2",), ("network.global_pooling_every=0",)),
    "forced_playouts": (("selfplay.forced_playouts_k=2.0",), ("selfplay.forced_playouts_k=0",)),
    "lcb": (("mcts.lcb_z=5.0",), ("mcts.lcb_z=0",)),
    "opponent_policy": (("network.opponent_policy=true",), ("network.opponent_policy=false",)),
    # the score head and KataGo's static score utility in self-play and play (0.1, KataGo's factor)
    "score": (("network.score=true", "mcts.score_utility=0.1"), ("mcts.score_utility=0", "network.score=false")),
}


def technique_settings(techniques: str | None, ablate: str | None) -> list[str]:
    """The ``--set`` values of a run: every technique on (``techniques == "on"``) but
    ``ablate``, or the config as it is."""
    if ablate is not None and ablate not in TECHNIQUES:
        raise SystemExit(f"--ablate {ablate}: not one of {', '.join(TECHNIQUES)}")
    if techniques != "on":
        return [] if ablate is None else list(TECHNIQUES[ablate][1])
    return [value for name, (on, off) in TECHNIQUES.items() for value in (off if name == ablate else on)]


def find_gnugo(given: str | None) -> str:
    if given:
        return given
    installed = strength.find_gnugo()
    if installed:
        return installed
    from tengen.testing import debian  # the tests' Debian fetch: apt-get download, dpkg-deb -x, no root

    try:
        return str(debian.fetch_gnugo())
    except debian.ToolUnavailable as e:
        raise SystemExit(f"no GNU Go: pass --gnugo PATH, or install Debian's gnugo ({e})") from None


def marks_with_settings(marks: list[Path], settings: list[str]) -> list[Path]:
    """Copies of ``marks`` whose config.yaml has each ``KEY=VALUE`` of ``settings`` set, in
    ``marks-<settings>/`` beside the run's ``marks/`` (the same model files)."""
    if not settings:
        return marks
    try:
        changes = set_pairs(settings)  # as tengen train --set reads them
    except ValueError as e:
        raise SystemExit(str(e).replace("--set", "--eval-set")) from None
    copies = []
    for mark in marks:
        copy = mark.parent.parent / f"{MARKS}-{','.join(settings)}" / mark.name
        shutil.copytree(mark, copy, dirs_exist_ok=True, ignore=shutil.ignore_patterns("vs-*"))
        (copy / CONFIG_FILE).write_text(load_config(mark / CONFIG_FILE).with_settings(changes, "--eval-set").to_yaml())
        copies.append(copy)
    return copies


def evaluate(mark: Path, args: argparse.Namespace, gnugo: str | None) -> dict[str, MatchScore]:
    config, game, model = load_model(mark)
    rng = np.random.default_rng(args.seed)
    slots = 20
    # The run's gating player (its search and opening temperature) by Go's own rules, as
    # tengen match plays it, at --simulations.
    settings = config.match_player().with_simulations(args.simulations)

    def model_player() -> MctsPlayer:
        return settings.build(game, CompiledModel(model), slots=slots, name="model")

    scores: dict[str, MatchScore] = {}
    if args.random_games:
        result = play_match(game, model_player(), RandomPlayer(game, avoid_own_eyes=True), games=args.random_games,
                            slots=slots, rng=rng)
        scores["random"] = MatchScore(result.wins, result.draws, result.losses)
        print(f"  vs random: {result.wins}-{result.draws}-{result.losses}", flush=True)
    if args.mcts_games:
        mcts1000 = RolloutMctsPlayer(game, slots=min(slots, args.mcts_games), simulations=1000, seed=args.seed)
        result = play_match(game, model_player(), mcts1000, games=args.mcts_games,
                            slots=min(slots, args.mcts_games), rng=rng)
        scores["mcts1000"] = MatchScore(result.wins, result.draws, result.losses)
        print(f"  vs mcts1000: {result.wins}-{result.draws}-{result.losses}", flush=True)
    for level in (args.gnugo_levels if gnugo and args.gnugo_games else []):
        name = f"gnugo{level}"
        summary = run_match(parse_side(str(mark)), parse_side("gtp:" + gnugo_command(gnugo, level)),
                            games=args.gnugo_games, simulations=args.simulations, seed=args.seed,
                            out=mark / f"vs-{name}", progress=lambda line: None)
        scores[name] = MatchScore(summary["wins"], summary["draws"], summary["losses"])
        print(f"  vs {name}: {summary['wins']}-{summary['draws']}-{summary['losses']} "
              f"(SGF in {mark / f'vs-{name}'})", flush=True)
    if args.versus and (Path(args.versus) / MARKS / mark.name).exists():
        other = Path(args.versus) / MARKS / mark.name
        summary = run_match(parse_side(str(mark)), parse_side(str(other)), games=args.versus_games,
                            simulations=args.simulations, seed=args.seed, out=mark / "vs-previous",
                            progress=lambda line: None)
        scores["previous"] = MatchScore(summary["wins"], summary["draws"], summary["losses"])
        print(f"  vs {other}: {summary['wins']}-{summary['draws']}-{summary['losses']}", flush=True)
    return scores


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="go9", help="a packaged config's name or a file")
    parser.add_argument("--mode", choices=("cluster", "single"), default="cluster",
                        help="the main job (Ray + embedded Redis) or --single-process")
    parser.add_argument("--minutes", type=float, default=60.0, help="training time")
    parser.add_argument("--mark-minutes", "--eval-every", dest="eval_every", type=float, default=15.0,
                        help="minutes of training between marks (the models evaluated)")
    parser.add_argument("--simulations", type=int, default=200, help="the model's search in the evaluation")
    parser.add_argument("--random-games", type=int, default=100)
    parser.add_argument("--mcts-games", type=int, default=20)
    parser.add_argument("--gnugo-games", type=int, default=40, help="games against GNU Go at each level")
    parser.add_argument("--gnugo-levels", type=lambda text: [int(x) for x in text.split(",")], default=[1, 5],
                        help="GNU Go's levels, comma-separated")
    parser.add_argument("--techniques", choices=("on", "config"), default="config",
                        help="on: every technique of TECHNIQUES on (--set); config: the config as it is")
    parser.add_argument("--ablate", choices=sorted(TECHNIQUES), default=None, help="one technique off")
    parser.add_argument("--versus", metavar="RUN_DIR", default=None,
                        help="another run (the previous configuration): each mark plays its mark of the same name")
    parser.add_argument("--versus-games", type=int, default=40)
    parser.add_argument("--gnugo", default=None,
                        help="the gnugo binary (default: PATH or /usr/games, else Debian's package)")
    parser.add_argument("--eval-only", metavar="RUN_DIR", help="evaluate a run directory's saved marks; no training")
    parser.add_argument("--eval-set", action="append", default=[], metavar="KEY=VALUE",
                        help="evaluate the marks with this config key changed (repeatable), e.g. mcts.lcb_z=0")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run-dir", default="runs/learn_go9", help="the run goes into <run-dir>/<mode>")
    args = parser.parse_args()

    gnugo = find_gnugo(args.gnugo) if args.gnugo_games else None
    if args.eval_only:
        run_dir = Path(args.eval_only)
    else:
        run_dir = Path(args.run_dir) / (args.mode + (f"-no-{args.ablate}" if args.ablate else ""))
        train(args.mode, config=args.config, run_dir=run_dir, minutes=args.minutes, every=args.eval_every,
              settings=technique_settings(args.techniques, args.ablate))
    rows = []
    for mark in marks_with_settings(marks_in(run_dir), args.eval_set):
        print(f"{mark}:", flush=True)
        rows.append((mark.name, evaluate(mark, args, gnugo)))
    columns = ["random", "mcts1000", *(f"gnugo{level}" for level in args.gnugo_levels), "previous"]
    print(f"{'mark':>12s} " + " ".join(f"{name:>22s}" for name in columns))
    for name, scores in rows:
        cells = []
        for opponent in columns:
            score = scores.get(opponent)
            cells.append(f"{score.value:6.3f} +- {score.se:.3f} ({score.games:3d})" if score else f"{'-':>22s}")
        print(f"{name:>12s} " + " ".join(f"{cell:>22s}" for cell in cells))
    last = rows[-1][1]
    for opponent, target in TARGETS.items():
        if opponent in last:
            print(f"RATIO go9_winrate_vs_{opponent} {last[opponent].value:.3f} vs {opponent} target {target}")


if __name__ == "__main__":
    main()
