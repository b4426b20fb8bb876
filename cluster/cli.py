"""The ``tengen`` console script.

Each subcommand is one ``_add_<name>(subparsers)`` function that builds its parser
and sets ``handler`` (a function of the parsed arguments returning the exit code);
adding a subcommand means writing one such function and listing it in
``SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

__all__ = ["main", "build_parser", "SUBCOMMANDS", "GO_GAMES"]

#: ``--game`` names for Go and their board sizes
GO_GAMES = {"go9": 9, "go13": 13, "go19": 19}


def _add_gtp(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "gtp",
        help="play Go over the Go Text Protocol on stdin/stdout",
        description="A GTP version 2 engine on stdin/stdout (for GoGui, Sabaki, gogui-twogtp, ...).",
    )
    p.add_argument("--game", choices=sorted(GO_GAMES), default="go19", help="board (default: go19)")
    p.add_argument("--komi", type=float, default=7.5, help="komi (default: 7.5)")
    p.add_argument("--superko", action="store_true", help="positional superko instead of simple ko")
    p.add_argument("--seed", type=int, default=None, help="seed for the engine's move choice")
    p.set_defaults(handler=_run_gtp)


def _run_gtp(args: argparse.Namespace) -> int:
    from engine.gtp import GtpEngine

    try:
        engine = GtpEngine(size=GO_GAMES[args.game], komi=args.komi, superko=args.superko, seed=args.seed)
    except ValueError as e:
        print(f"tengen gtp: {e}", file=sys.stderr)
        return 2
    engine.run(sys.stdin, sys.stdout)
    return 0


def _add_selfplay_demo(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "selfplay-demo",
        help="play seeded random games of a config's game and show one",
        description="Plays random games with the compiled rules and prints a tally, "
        "the speed and the last game's board.",
    )
    p.add_argument("--config", default="configs/connect4.yaml", help="run config (default: connect4)")
    p.add_argument("--games", type=int, default=1000, help="games to play (default: 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first game")
    p.set_defaults(handler=_run_selfplay_demo)


def _run_selfplay_demo(args: argparse.Namespace) -> int:
    import time

    from cluster.config import ConfigError, load_config

    try:
        game = load_config(args.config).game.make()
    except ConfigError as e:
        print(f"tengen selfplay-demo: {e}", file=sys.stderr)
        return 2
    if args.games < 1:
        print("tengen selfplay-demo: --games must be at least 1", file=sys.stderr)
        return 2
    tally = {1.0: 0, 0.0: 0, -1.0: 0}
    moves = 0
    start = time.perf_counter()
    for i in range(args.games):
        state = game.initial_state()
        moves += game.random_playout(state, args.seed + i)
        tally[game.outcome(state)] += 1
    seconds = time.perf_counter() - start
    print(game.render(state))
    print(f"{game.name}: {args.games} random games, {moves} moves in {seconds:.2f} s "
          f"({moves / seconds:,.0f} moves/s, compile time included)")
    print(f"first player won {tally[1.0]}, second won {tally[-1.0]}, drawn {tally[0.0]}")
    return 0


#: the subcommands, in the order ``--help`` lists them
SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [_add_gtp, _add_selfplay_demo]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tengen",
        description="tengen: AlphaZero-style self-play training (Ray, Redis, Keras).",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.handler(args))


if __name__ == "__main__":
    raise SystemExit(main())
