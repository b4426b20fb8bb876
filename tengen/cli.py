"""The ``tengen`` console script.

Each subcommand is one ``_add_<name>(subparsers)`` function that builds its parser
and sets ``handler`` (a function of the parsed arguments returning the exit code);
adding a subcommand means writing one such function and listing it in
``SUBCOMMANDS``.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tengen import QUIET_ENV
from tengen.run.wording import counted

if TYPE_CHECKING:  # the config module loads the engine (numba): not for --version
    from tengen.run.config import TengenConfig

__all__ = ["main", "build_parser", "set_pairs", "SUBCOMMANDS", "GO_GAMES", "gtp_ownership"]


def _quiet_ray_logs() -> None:
    """Keep the driver's terminal for the run's own lines: Ray logs its start-up
    ("Started a local Ray instance", "Connecting to existing Ray cluster") at INFO
    under ``ray._private`` and the state of its token authentication as a WARNING.
    ``ray.init`` resets the level of the ``ray`` logger, not of these. Only this
    process's loggers change (nothing is imported): actors log to Ray's files."""
    logging.getLogger("ray._private").setLevel(logging.WARNING)
    logging.getLogger("ray._private.authentication").setLevel(logging.ERROR)


def _fail(command: str, message: object) -> int:
    """Report a usage or input error of ``tengen COMMAND`` and give its exit status."""
    print(f"tengen {command}: {message}", file=sys.stderr)
    return 2


#: ``--game`` names for Go and their board sizes
GO_GAMES = {"go9": 9, "go13": 13, "go19": 19}


def _add_gtp(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "gtp",
        help="play Go over the Go Text Protocol on stdin/stdout",
        description="A GTP version 2 engine on stdin/stdout (for GoGui, Sabaki, Lizzie, gogui-twogtp, kgsGtp, "
        "gtp2ogs, ...). Without --checkpoint it plays random moves that fill no own eye and analyses with "
        "rollout MCTS.",
    )
    p.add_argument("--game", choices=sorted(GO_GAMES), default=None,
                   help="board without a model (default: go19; with --checkpoint: the model's)")
    p.add_argument("--komi", type=float, default=None,
                   help="komi (default: 7.5, or the model's; the controller's komi command overrides it)")
    p.add_argument("--superko", action="store_true", help="positional superko instead of simple ko")
    p.add_argument("--seed", type=int, default=None, help="seed for the engine's move choice")
    p.add_argument("--checkpoint", "--model", default=None,
                   help="a trained model (a run's best/ directory, a .safetensors file, or packaged: the one that "
                   "ships with tengen for --game): play with it and MCTS; the board size and ko rule then come from "
                   "its config (--model is KataGo's name for it)")
    p.add_argument("--config", default=None,
                   help="the run config of --checkpoint (default: the config.yaml saved beside it)")
    p.add_argument("--sims", type=int, default=400,
                   help="simulations per move (mcts.simulations): with --checkpoint the most a move searches "
                   "(0: the raw policy), without it "
                   "the rollout search of the genmove_analyze commands (default: 400)")
    p.add_argument("--analysis-sims", "--analysis-visits", type=int, default=10_000, dest="analysis_sims",
                   help="the most simulations an lz-analyze/kata-analyze search makes (default: 10000; "
                   "--analysis-visits is its old name)")
    p.add_argument("--scoring", choices=["area", "tromp-taylor"], default="area",
                   help="final_score: area with the dead stones off (default), or Tromp-Taylor on the board as it is")
    p.add_argument("--resign-threshold", type=float, default=0.05,
                   help="resign when the search's winrate stays below this (default: 0.05); after the "
                   "opponent's pass it resigns at once when the count is lost, and passes when it is won")
    p.add_argument("--resign-moves", type=int, default=3,
                   help="... for this many of its moves in a row (default: 3)")
    p.add_argument("--no-resign", action="store_true",
                   help="never resign (after the opponent's pass in a lost count it plays on)")
    p.add_argument("--lag", type=float, default=0.5,
                   help="seconds of each timed move kept back for the controller and the network (default: 0.5)")
    p.add_argument("--verbose", action="store_true",
                   help="let TensorFlow's start-up messages through to stderr (hidden by default)")
    p.set_defaults(handler=_run_gtp)


def _run_gtp(args: argparse.Namespace) -> int:
    from tengen.engine.mcts import SearchSettings
    from tengen.play.gtp import GtpEngine

    if args.sims < 0 or args.analysis_sims < 1:
        return _fail("gtp", "--sims must be >= 0 and --analysis-sims >= 1")
    if args.resign_moves < 1 or not 0 <= args.resign_threshold <= 1 or args.lag < 0:
        return _fail("gtp", "--resign-moves must be >= 1, --resign-threshold in 0..1 and --lag >= 0")
    if args.config and not args.checkpoint:
        return _fail("gtp", "--config goes with --checkpoint")
    size, komi, superko = GO_GAMES[args.game or "go19"], args.komi, args.superko
    player = None
    rules: dict[str, Any] = {}  # GtpEngine's keywords that the checkpoint sets
    try:
        if args.checkpoint:
            from tengen.run.packaged_models import PACKAGED

            # the model that ships for the board asked for (go9 unless said)
            checkpoint = f"{PACKAGED}:{args.game or 'go9'}" if args.checkpoint == PACKAGED else args.checkpoint

            def load():
                from tengen.engine.network import WeightsError
                from tengen.run.checkpoint import load_player  # starts the backend
                from tengen.run.config import ConfigError

                try:
                    return load_player(checkpoint, args.config, args.sims, warm_up=True), None
                except (ConfigError, WeightsError) as e:
                    return None, e

            from tengen.engine.backend_start import held_native_stderr

            # A GUI shows the backend's C++ start-up on stderr as engine errors.
            with contextlib.nullcontext() if args.verbose else held_native_stderr():
                loaded, error = load()
            if loaded is None:
                return _fail("gtp", error)
            config, game, player = loaded
            if config.game.name != "go":
                raise ValueError(f"the checkpoint plays {config.game.name}, not go")
            if (ownership := gtp_ownership(config, player)) is not None:
                rules["ownership"] = ownership
            if config.network.score:
                from tengen.play.score import NetworkScore

                head = player.evaluate.score
                rules["score"] = lambda game: NetworkScore(game, head)
            if args.game and GO_GAMES[args.game] != game.size:
                raise ValueError(f"the model plays {game.name}, not {args.game}")
            size, superko = game.size, game.superko or args.superko
            komi = game.komi if komi is None else komi
            rules |= {"history_length": game.history_length, "max_moves": game.max_moves, "features": game.features}
        engine = GtpEngine(size=size, komi=7.5 if komi is None else komi, superko=superko, seed=args.seed,
                           player=player, scoring=args.scoring,
                           resign_threshold=None if args.no_resign else args.resign_threshold,
                           resign_moves=args.resign_moves, lag=args.lag,
                           search=SearchSettings(simulations=max(args.sims, 1)),
                           analysis_visits=args.analysis_sims, **rules)
    except (ValueError, OSError) as e:
        return _fail("gtp", e)
    engine.run(sys.stdin.buffer, sys.stdout)  # bytes: a bad one is answered, not a traceback
    return 0


def _add_analysis(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "analysis",
        help="KataGo's JSON analysis engine on stdin/stdout (KaTrain's engine protocol)",
        description="Reads one JSON query a line and writes JSON results, as `katago analysis` does "
        "(KataGo's docs/Analysis_Engine.md): queries with moves, initialStones, rules, komi, board size, "
        "analyzeTurns, maxVisits, includeOwnership, includeMovesOwnership, includePolicy, includePVVisits, "
        "reportDuringSearchEvery, priority, overrideSettings (reportAnalysisWinratesAs, maxTime); actions "
        "query_version, query_models, clear_cache, terminate, terminate_all. Scores come from the model's "
        "score head, else its ownership head (or playouts). For KaTrain, set its KataGo command to: "
        "tengen analysis --checkpoint DIR.",
    )
    p.add_argument("--checkpoint", "--model", default=None,
                   help="a trained Go model (a run's best/ directory or a .safetensors file; --model is KataGo's "
                   "name for it); without it, rollout MCTS on a --game board")
    p.add_argument("--config", default=None, help="the run config of --checkpoint (default: the one beside it)")
    p.add_argument("--game", choices=sorted(GO_GAMES), default="go9", help="the board without a model (go9)")
    p.add_argument("--visits", type=int, default=500,
                   help="simulations of a query that names no maxVisits (default: 500)")
    p.add_argument("--threads", type=int, default=2, help="positions searched at once (default: 2)")
    p.set_defaults(handler=_run_analysis)


def _run_analysis(args: argparse.Namespace) -> int:
    from tengen.analysis_command import serve_analysis

    if args.visits < 1 or args.threads < 1:
        return _fail("analysis", "--visits and --threads must be at least 1")
    if args.config and not args.checkpoint:
        return _fail("analysis", "--config goes with --checkpoint")
    from tengen.engine.backend_start import held_native_stderr

    try:
        with contextlib.nullcontext() if args.verbose else held_native_stderr():
            from tengen.engine.network import WeightsError
            from tengen.run.config import ConfigError
        return serve_analysis(checkpoint=args.checkpoint, config=args.config, size=GO_GAMES[args.game],
                              visits=args.visits, threads=args.threads, stdin=sys.stdin.buffer, stdout=sys.stdout)
    except (ConfigError, WeightsError, ValueError, OSError) as e:
        return _fail("analysis", e)


def gtp_ownership(config, player):
    """GtpEngine's ``ownership`` factory for a checkpoint's player: its network's
    ownership head (final_status_list, final_score and kata-analyze's ownership read
    it), or None for a network without the head (the engine's playouts then)."""
    from tengen.play.ownership import NetworkOwnership

    head = getattr(player.evaluate, "ownership", None) if config.network.ownership else None
    return None if head is None else (lambda game: NetworkOwnership(game, head))


def _add_match(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "match",
        help="play two checkpoints or GTP engines against each other: W-D-L, Elo with its interval, SGF",
        description="Games between A and B, colours alternated, many at once (a model searches its games in "
        "one batch; a GTP engine runs one process per game). A side is a checkpoint (a run's best/ directory "
        "or a .safetensors file) or gtp:COMMAND; --gtp-engine COMMAND is B. Go games are scored Tromp-Taylor "
        "on the final board, after a KGS-style cleanup phase when a GTP engine sees dead stones. "
        "Example: tengen match runs/go9/best --gtp-engine \"gnugo --mode gtp --chinese-rules --level 1\" "
        "--games 20",
    )
    p.add_argument("a", metavar="A", help="a checkpoint, or gtp:COMMAND")
    p.add_argument("b", metavar="B", nargs="?", default=None, help="a checkpoint, or gtp:COMMAND")
    p.add_argument("--gtp-engine", default=None, metavar="COMMAND",
                   help="B as a GTP engine's command line (the same as B = gtp:COMMAND)")
    p.add_argument("--games", type=int, required=True, help="games to play")
    p.add_argument("--sims", type=int, default=None,
                   help="simulations per move of the checkpoints' search (default: each run's gating "
                   "simulations)")
    p.add_argument("--config", default=None, help="run config of A (default: the config.yaml beside it)")
    p.add_argument("--config-b", default=None, help="run config of B (default: the config.yaml beside it)")
    p.add_argument("--parallel", type=int, default=None,
                   help="games at once (default: with a GTP engine min(games, CPUs), else the run's "
                   "gating.games_in_flight)")
    p.add_argument("--game", choices=sorted(GO_GAMES), default=None,
                   help="the board when both sides are GTP engines (default: go9; else the model's)")
    p.add_argument("--komi", type=float, default=None, help="komi (default: the model's, or 7.5)")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds a GTP engine may take to answer one command (default: 60)")
    p.add_argument("--seed", type=int, default=0, help="seed of the models' opening moves")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="write every game there (SGF for Go, games.txt for the others) and summary.json")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (games go to stderr)")
    p.set_defaults(handler=_run_match)


def _run_match(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from tengen.match_command import GTP_PREFIX, MatchError, parse_side, run_match
    from tengen.play.gtp_player import GtpEngineError
    from tengen.play.match_summary import summary_lines

    if (args.b is None) == (args.gtp_engine is None):
        return _fail("match", "give B, or --gtp-engine COMMAND as B, not both" if args.b else
                     "give B (a checkpoint or gtp:COMMAND) or --gtp-engine COMMAND")
    try:
        a = parse_side(args.a, config=args.config)
        b = parse_side(args.b if args.b is not None else GTP_PREFIX + args.gtp_engine, config=args.config_b)

        def progress(line: str) -> None:
            print(line, file=sys.stderr if args.json else sys.stdout, flush=True)

        summary = run_match(a, b, games=args.games, simulations=args.sims, parallel=args.parallel,
                            go_size=GO_GAMES[args.game] if args.game else None, komi=args.komi,
                            timeout=args.timeout, seed=args.seed,
                            out=Path(args.out) if args.out else None, progress=progress)
    except (MatchError, GtpEngineError, OSError) as e:
        return _fail("match", e)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        for line in summary_lines(summary):
            print(line)
    return 0


def _add_train(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "train",
        help="train a network by self-play from a config",
        description="Self-play, training, gating and promotion. By default on Ray (a local Ray unless "
        "--address or ray.address) with Redis (an embedded server unless --redis or redis.url; the password "
        "of an external Redis comes from TENGEN_REDIS_PASSWORD). --single-process runs the same loop in this "
        "process, without Ray or Redis. --resume continues the run in --run-dir with the config saved there.",
    )
    p.add_argument("config", nargs="?", default=None,
                   help="run config: a packaged one by name (tictactoe, connect4, go9, ...; see `tengen config list`) "
                   "or a YAML file (with --resume: default the run's own)")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --run-dir: its stream, registry and ladder, the learner's checkpoint")
    p.add_argument("--resume-if-exists", action="store_true",
                   help="continue the run in --run-dir if it holds one, else start it there (what a job that "
                   "is restarted after a lost head node runs)")
    p.add_argument("--single-process", action="store_true", help="run the loop in this process")
    p.add_argument("--run-dir", default=None, help="run directory (default: runs/<game>-<time>)")
    p.add_argument("--minutes", type=float, default=None, help="stop after this many minutes")
    p.add_argument("--address", default=None, help="Ray address: auto or ray://HOST:PORT (default: local Ray)")
    p.add_argument("--redis", default=None, help="redis://HOST:PORT/DB (default: an embedded server)")
    p.add_argument("--workers", type=int, default=None, help="self-play workers (default: from the config)")
    p.add_argument("--metrics-port", type=int, default=None,
                   help="the local Ray's metrics port (ray.metrics_export_port; deploy/monitoring uses 8080)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="settings",
                   help="set any config key, e.g. --set mcts.simulations=200 (repeatable; the value is YAML, "
                   "null lifts a limit: --resume --set stop.minutes=null); written into the run's config.yaml")
    p.set_defaults(handler=_run_train)


def set_pairs(pairs: list[str]) -> dict[str, object]:
    """``--set KEY=VALUE`` pairs as dotted keys and YAML values; ValueError names a bad one."""
    import yaml

    settings: dict[str, object] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--set {pair!r}: give KEY=VALUE, e.g. --set stop.minutes=30")
        try:
            settings[key.strip()] = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError as e:
            raise ValueError(f"--set {pair!r}: the value is not YAML: {e}") from None
    return settings


def _run_train(args: argparse.Namespace) -> int:
    import time

    from tengen.run.config import ConfigError, load_config
    from tengen.run.run_dir import RunDir, RunDirError

    if args.resume_if_exists:
        if not args.run_dir:
            return _fail("train", "--resume-if-exists needs a --run-dir")
        if args.resume:
            return _fail("train", "give --resume or --resume-if-exists, not both")
        args.resume = RunDir(args.run_dir).config.exists()
    if args.resume and not args.run_dir:
        return _fail("train", "--resume needs the --run-dir of the run to continue")
    if not args.config and not args.resume:
        return _fail("train", "give a config, e.g. connect4 or my-run.yaml (or --resume --run-dir DIR)")
    try:
        if args.run_dir:
            RunDir(args.run_dir).check(resume=args.resume)
        config = load_config(args.config or RunDir(args.run_dir).config)
        saved = load_config(RunDir(args.run_dir).config) if args.resume else config
        if args.minutes is not None and args.minutes <= 0:
            return _fail("train", "--minutes must be positive")
        if args.workers is not None and args.workers < 1:
            return _fail("train", "--workers must be at least 1")
        if args.redis and "@" in args.redis.split("//", 1)[-1]:
            return _fail("train", "put the Redis password in TENGEN_REDIS_PASSWORD, not in --redis")
        if args.single_process:
            ignored = [flag for flag, value in (("--workers", args.workers), ("--address", args.address),
                                                ("--redis", args.redis), ("--metrics-port", args.metrics_port))
                       if value is not None]
            if ignored:
                return _fail("train", f"{', '.join(ignored)} mean nothing to --single-process (one process, no Ray "
                             "or Redis): leave them out, or leave out --single-process")
        # The flags are the config's keys: through the schema, so they meet its checks,
        # and into the run directory's config.yaml, so --resume runs on the same.
        changes: dict[str, object] = {"stop.minutes": args.minutes, "ray.metrics_export_port": args.metrics_port}
        if not args.single_process:
            changes.update({"ray.address": args.address, "redis.url": args.redis, "cluster.workers": args.workers})
        config = config.with_changes(changes).with_settings(set_pairs(args.settings))
    except (ConfigError, RunDirError, ValueError) as e:
        return _fail("train", e)
    if args.resume:
        # Stop, cluster and search settings may change between sessions; what the
        # checkpoints were made for may not.
        if (saved.game, saved.network.model_copy(update={"backend": None})) != (
                config.game, config.network.model_copy(update={"backend": None})):
            return _fail("train", f"{args.config} has another game or network than the run in {args.run_dir}; "
                         "resume with the run's own config (leave the config out)")
        if saved.network.backend != config.network.backend:
            return _fail("train", f"the run's learner checkpoints are {saved.network.backend or 'tensorflow'}'s: "
                         f"tengen checkpoint-convert {args.run_dir} --backend {config.network.backend or 'tensorflow'}"
                         ", then resume")
    run_dir = args.run_dir or f"runs/{config.game.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    # Said before anything slow (TensorFlow, Ray, the kernels' compilation) starts.
    print(_train_headline(config, args, run_dir), flush=True)
    from tengen.engine.backend import BackendUnavailable
    from tengen.engine.backend_start import start_backend

    try:
        # the run's actors and children inherit it (KERAS_BACKEND)
        start_backend(config.network.backend, quiet=not args.verbose)
    except BackendUnavailable as e:
        return _fail("train", e)
    if args.single_process:
        from tengen.run.single_process import SingleProcessRun

        try:
            run = SingleProcessRun(config, run_dir, resume=args.resume)
        except (FileNotFoundError, RunDirError) as e:
            return _fail("train", e)
        run.run()  # Ctrl-C and SIGTERM stop it cleanly, with a checkpoint
        return 0
    from tengen.cluster.driver import ClusterRun, RunStartError

    try:
        summary = ClusterRun(config, run_dir, resume=args.resume).run()
    except (RunDirError, RunStartError) as e:  # a Redis taken, unreachable, or that cannot start
        return _fail("train", e)
    if summary.get("error"):
        print(f"tengen train: the run stopped early: {summary['error']}; continue it with "
              f"tengen train --resume --run-dir {run_dir}", file=sys.stderr)
        return 1
    return 0


def _local_gpus() -> int:
    """NVIDIA GPUs this machine shows (``/dev/nvidiaN``), or as many as
    CUDA_VISIBLE_DEVICES names: a guess that needs neither TensorFlow nor Ray."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        count = 0
        for device in visible.split(","):
            if device.strip() in ("", "-1"):  # CUDA stops at the first invalid entry
                break
            count += 1
        return count
    try:
        return sum(1 for name in os.listdir("/dev") if name.removeprefix("nvidia").isdigit())
    except OSError:
        return 0


def _train_headline(config: TengenConfig, args: argparse.Namespace, run_dir: str) -> str:
    """The first line of ``tengen train``: the game, where it runs, on what, into
    which directory, for how long."""
    name = config.game.make().name  # go9, connect4, ...: the packaged configs' names
    if args.single_process:
        where = "in this process (no Ray, no Redis)"
    else:
        address, redis_url = config.ray.address, config.redis.url
        where = (f"on the Ray cluster at {address}" if address else "on a local Ray") + (
            f" with the Redis at {redis_url}" if redis_url else " with an embedded Redis")
    gpus = _local_gpus()
    if not args.single_process and config.ray.address:
        devices = "the cluster's CPUs and GPUs"
    else:
        devices = f"{gpus} GPU{'s' if gpus > 1 else ''}" if gpus else "CPU"
    minutes = config.stop.minutes
    limits = [f"{minutes:g} minutes" if minutes is not None else "",
              f"{config.stop.steps} steps" if config.stop.steps else "",
              f"{config.stop.promotions} promotions" if config.stop.promotions else ""]
    until = " or ".join(limit for limit in limits if limit) or "until Ctrl-C"
    into = "continuing" if args.resume else "into"
    return (f"tengen train: {name} {where}, {devices}, {into} {run_dir} ({until}); "
            "the first games wait for the search kernels to compile")


def _add_status(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "status", help="show a running or finished run",
        description="A short summary: whether the run is running, stopped or stopped on an error (and why), "
        "games, positions, the learner's step and losses, the best model and the last gating, workers and "
        "servers with their restarts and last errors, Redis's memory; from Redis while the run lives, else from "
        "its run directory. Exit status: 0 running, 3 stopped cleanly, 4 stopped on an error or lost (no final "
        "report: killed, or its machine lost), 2 a bad argument or run directory.")
    p.add_argument("--run-dir", required=True, help="the run's directory")
    p.add_argument("--json", action="store_true", help="everything read, as JSON (for scripts)")
    p.add_argument("--watch", type=float, nargs="?", const=5.0, default=None, metavar="SECONDS",
                   help="print it again every SECONDS (default 5) until Ctrl-C")
    p.set_defaults(handler=_run_status)


def _run_status(args: argparse.Namespace) -> int:
    import json
    import time
    from pathlib import Path

    from tengen.run.run_dir import RunDirError
    from tengen.run_control import read_status
    from tengen.status_text import EXIT_STATUS, describe_status, run_state

    if args.watch is not None and args.watch <= 0:
        return _fail("status", "--watch must be a positive number of seconds")
    try:
        while True:
            try:
                status = read_status(Path(args.run_dir))
            except (FileNotFoundError, RunDirError) as e:  # RunDirError: a record it does not read, named
                return _fail("status", e)
            status["state"] = run_state(status)
            if args.json:
                print(json.dumps(status, indent=2, default=str), flush=True)
            else:
                if args.watch is not None and sys.stdout.isatty():
                    print("\033[H\033[J", end="")  # a fresh screen each time
                print("\n".join(describe_status(status)), flush=True)
            if args.watch is None:
                return EXIT_STATUS[status["state"]]
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return EXIT_STATUS[status["state"]]


def _add_repair_aof(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "repair-aof", help="repair the append-only file of a run's embedded Redis that will not load",
        description="When a run's Redis stops at start on a damaged append-only file (a disk that lost a write), "
        "this keeps a copy of it beside it and cuts it where it is damaged with Redis's own checker (what "
        "follows the damage is lost); then resume the run. The run must not be running.")
    p.add_argument("--run-dir", required=True, help="the run's directory")
    p.set_defaults(handler=_run_repair_aof)


def _run_repair_aof(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tengen.cluster.redis_binary import EmbeddedRedisError, repair_aof
    from tengen.run.run_dir import RunDir, RunDirError

    try:
        files = RunDir(args.run_dir)
        if not files.redis.is_dir():
            raise RunDirError(f"{args.run_dir} has no embedded Redis (redis/): nothing to repair")
        lock = files.redis / "redis.lock"
        if lock.exists() and _locked(lock):
            raise RunDirError(f"the run in {args.run_dir} is running: stop it first")
        backup, said = repair_aof(Path(files.redis))
    except (RunDirError, EmbeddedRedisError, OSError) as e:
        return _fail("repair-aof", e)
    print(f"kept the damaged file as {backup}\n{said}\nnow resume: tengen train --resume --run-dir {args.run_dir}")
    return 0


def _locked(path) -> bool:
    """Whether another process holds the flock on ``path`` (a live run's Redis)."""
    import fcntl
    import os

    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _add_scale(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("scale", help="change the number of self-play workers of a running run")
    p.add_argument("--run-dir", required=True, help="the running run's directory")
    p.add_argument("--workers", type=int, required=True, help="how many self-play workers the run should have")
    p.set_defaults(handler=_run_scale)


def _run_scale(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tengen.run_control import request_workers

    try:
        request_workers(Path(args.run_dir), args.workers)
    except (FileNotFoundError, ValueError, ConnectionError) as e:
        return _fail("scale", e)
    print(f"asked the run for {counted(args.workers, 'self-play worker')}")
    return 0


def _add_games(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "games", help="list a run's newest finished games, or write them as SGF / plain files",
        description="Reads the newest self-play games from the run's Redis stream while it runs, else from "
        "the sample it keeps in games/, and lists them or (--export DIR) writes each as SGF (Go) or a "
        "plain line (the other games).")
    p.add_argument("--run-dir", required=True, help="the run's directory")
    p.add_argument("--last", type=int, default=10, help="how many of the newest games (default: 10)")
    p.add_argument("--export", default=None, metavar="DIR", help="write the games into DIR")
    p.set_defaults(handler=_run_games)


def _run_games(args: argparse.Namespace) -> int:
    from pathlib import Path

    from tengen.run.config import ConfigError
    from tengen.run_control import export_games

    try:
        export_games(Path(args.run_dir), last=args.last, export=Path(args.export) if args.export else None)
    except (FileNotFoundError, ValueError, ConfigError, OSError) as e:
        return _fail("games", e)
    return 0


def _add_bestmove(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bestmove",
        help="read positions on stdin, print the model's move for each",
        description="One position per line, as the moves from the start: Connect Four columns 1-7 "
        "('4453'), tic-tac-toe cells 1-9, Go vertices separated by spaces ('D4 Q16'); an empty line is "
        "the empty board. Prints one move per line, or 'error' (with the reason on stderr).",
    )
    p.add_argument("--config", default=None, help="run config (default: the one saved with the checkpoint)")
    p.add_argument("--checkpoint", required=True, help="a run's best/ directory or a .safetensors file")
    p.add_argument("--sims", type=int, default=400, help="simulations per move (0: the raw policy)")
    p.set_defaults(handler=_run_bestmove)


def _run_bestmove(args: argparse.Namespace) -> int:
    from tengen.engine.network import WeightsError
    from tengen.play.gtp import decode_line
    from tengen.run.checkpoint import load_player
    from tengen.run.config import ConfigError

    if args.sims < 0:
        return _fail("bestmove", "--sims must be >= 0")
    try:
        _, game, choose = load_player(args.checkpoint, args.config, args.sims)
    except (ConfigError, WeightsError, OSError) as e:
        return _fail("bestmove", e)
    for raw in sys.stdin.buffer:  # bytes: one that is not UTF-8 is an error line, not a traceback
        line = decode_line(raw)
        if line is None:
            print(f"tengen bestmove: {raw.strip()!r}: invalid UTF-8", file=sys.stderr, flush=True)
            print("error", flush=True)
            continue
        try:
            state, history = game.state_from_moves(game.moves_from_text(line))
            answer = game.action_to_text(choose(game, state, history))
        except ValueError as e:  # bad move text, illegal move (IllegalMove), finished game
            print(f"tengen bestmove: {line.strip()!r}: {e}", file=sys.stderr, flush=True)
            answer = "error"
        print(answer, flush=True)
    return 0


def _add_play(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "play",
        help="play the trained model on a local web page",
        description="Serves a page on 127.0.0.1 where you play the checkpoint's model (tic-tac-toe, Connect Four, "
        "Go): pick a side, set its search by simulations or seconds, see its expected score and where its "
        "simulations went. "
        "Prints the page's URL as its first line.",
    )
    p.add_argument("game", nargs="?", default=None,
                   help="a game whose trained model ships with tengen (tictactoe, connect4): play it before "
                   "training one (the same as --checkpoint packaged:GAME)")
    p.add_argument("--checkpoint", default=None,
                   help="a run's best/ directory, a .safetensors file, or packaged:GAME")
    p.add_argument("--config", default=None, help="run config (default: the one saved with the checkpoint)")
    p.add_argument("--sims", type=int, default=None,
                   help="the page's default simulations per move (default: the config's mcts.simulations)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1, this machine only; any other needs a token)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: 0, a free one)")
    p.add_argument("--token", default=None,
                   help="the token the page asks for (default: none on loopback, else one generated: printed on a "
                   "terminal, otherwise written to ~/.config/tengen/play-token)")
    p.add_argument("--open", action="store_true", help="open the page in a browser")
    p.set_defaults(handler=_run_play)


def _run_play(args: argparse.Namespace) -> int:
    from tengen.engine.network import WeightsError
    from tengen.run.config import ConfigError
    from tengen.run.packaged_models import PACKAGED
    from tengen.web.play import MAX_VISITS, run_play

    if (args.game is None) == (args.checkpoint is None):
        return _fail("play", "give a game whose model ships with tengen (tengen play connect4) or --checkpoint, "
                     "not both" if args.game else "give a game whose model ships with tengen (tengen play connect4)"
                     " or --checkpoint DIR")
    checkpoint = args.checkpoint or f"{PACKAGED}:{args.game}"
    if args.sims is not None and not 1 <= args.sims <= MAX_VISITS:
        return _fail("play", f"--sims must be in 1..{MAX_VISITS}")
    if not 0 <= args.port <= 65535:
        return _fail("play", "--port must be in 0..65535")
    try:
        return run_play(checkpoint, args.config, simulations=args.sims, host=args.host, port=args.port,
                        token=args.token, open_browser=args.open)
    except (ConfigError, WeightsError, OSError, ValueError) as e:
        return _fail("play", e)


def _add_serve(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="a read-only web page of a running or finished run",
        description="Serves a page on 127.0.0.1 with the run's best model and Elo ladder, its losses and rates "
        "over time, workers and inference servers, the last gating results and its newest games, replayable move "
        "by move; it follows a live run without reloading. Prints the page's URL as its first line. Listening "
        "anywhere but loopback needs --host, and the page then asks for a token (--token, or one generated: the second "
        "line prints it on a terminal, or names the file it went to).",
    )
    p.add_argument("--run-dir", required=True, help="the run's directory")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default: 127.0.0.1, this machine only; any other needs a token)")
    p.add_argument("--port", type=int, default=0, help="port to listen on (default: 0, a free one)")
    p.add_argument("--token", default=None,
                   help="the token the page asks for (default: none on loopback, else one generated: printed on a "
                   "terminal, otherwise written to the run directory's serve-token)")
    p.add_argument("--open", action="store_true", help="open the page in a browser")
    p.set_defaults(handler=_run_serve)


def _run_serve(args: argparse.Namespace) -> int:
    from tengen.run.config import ConfigError
    from tengen.run.run_dir import RunDirError
    from tengen.web.run_page import run_serve

    if not 0 <= args.port <= 65535:
        return _fail("serve", "--port must be in 0..65535")
    try:
        return run_serve(args.run_dir, host=args.host, port=args.port, token=args.token, open_browser=args.open)
    except (FileNotFoundError, ConfigError, RunDirError, ValueError) as e:
        return _fail("serve", e)


def _add_checkpoint_convert(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "checkpoint-convert",
        help="move a run's learner checkpoints to another network backend",
        description="A learner resumes only from a checkpoint of its own backend (the optimizer's state is the "
        "backend's). This loads the run's learner checkpoints on the new backend, writes them back from there, and "
        "sets network.backend in the run's config.yaml, so that tengen train --resume runs on it. Weights (a best "
        "model) need no conversion: they load on any backend.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="the run's directory")
    p.add_argument("--backend", required=True, choices=["tensorflow", "jax", "torch"], help="the backend to move to")
    p.set_defaults(handler=_run_checkpoint_convert)


def _run_checkpoint_convert(args: argparse.Namespace) -> int:
    from tengen.checkpoint_command import convert_checkpoints
    from tengen.engine.backend import BackendUnavailable
    from tengen.run.config import ConfigError
    from tengen.run.run_dir import RunDirError

    try:
        names = convert_checkpoints(args.run_dir, args.backend)
    # ValueError: a checkpoint that does not fit (WeightsError, imported only with the backend)
    except (BackendUnavailable, ValueError, ConfigError, RunDirError, OSError) as e:
        return _fail("checkpoint-convert", e)
    print(f"{', '.join(names)} converted to {args.backend}; config.yaml says network.backend: {args.backend}")
    return 0


def _add_selfplay_demo(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "selfplay-demo",
        help="play seeded random games of a config's game and show one",
        description="Plays random games with the compiled rules and prints a tally, "
        "the speed and the last game's board.",
    )
    p.add_argument("--config", default="connect4", help="run config, a name or a file (default: connect4)")
    p.add_argument("--games", type=int, default=1000, help="games to play (default: 1000)")
    p.add_argument("--seed", type=int, default=0, help="seed of the first game")
    p.set_defaults(handler=_run_selfplay_demo)


def _run_selfplay_demo(args: argparse.Namespace) -> int:
    import time

    from tengen.run.config import ConfigError, load_config

    try:
        game = load_config(args.config).game.make()
    except ConfigError as e:
        return _fail("selfplay-demo", e)
    if args.games < 1:
        return _fail("selfplay-demo", "--games must be at least 1")
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


def _add_config(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "config",
        help="list the packaged run configs, or show one with every default spelled out",
        description="`tengen config list` names the configs that ship with tengen; `tengen config show NAME` "
        "prints one (or any config file) with every default spelled out and each key's meaning above it, a start "
        "for your own: tengen config show go9 > my-go9.yaml; `tengen config schema` prints the JSON Schema, "
        "`tengen config reference` the reference of docs/config.md.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True,
                               help="list, show, schema or reference")
    actions.add_parser("list", help="the packaged configs")
    show = actions.add_parser("show", help="a config with every default spelled out, each key's meaning above it")
    show.add_argument("name", help="a packaged config's name, or a YAML file")
    show.add_argument("--plain", action="store_true", help="the YAML alone, without the notes")
    actions.add_parser("schema", help="the config's JSON Schema (for an editor's completion and checks)")
    actions.add_parser("reference", help="every key, its default and meaning, as Markdown (docs/config.md)")
    p.set_defaults(handler=_run_config)


def _run_config(args: argparse.Namespace) -> int:
    from tengen.run.config import ConfigError, load_config, packaged_configs

    if args.action == "list":
        for name, path in packaged_configs().items():
            print(f"{name:12s} {_first_sentence(path.read_text())}")
        return 0
    from tengen.run.config_reference import annotated_yaml, json_schema, reference_markdown

    if args.action == "schema":
        print(json_schema(), end="")
        return 0
    if args.action == "reference":
        print(reference_markdown(), end="")
        return 0
    try:
        config = load_config(args.name)
    except ConfigError as e:
        return _fail("config", e)
    print(config.to_yaml() if args.plain else annotated_yaml(config), end="")
    return 0


def _first_sentence(text: str) -> str:
    """The first sentence of a config's opening comment, however many lines it takes."""
    import re

    comment = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        comment.append(line.lstrip("#").strip())
    joined = " ".join(comment)
    match = re.match(r"(.+?\.)(\s|$)", joined)
    return match.group(1) if match else joined


#: the subcommands, in the order ``--help`` lists them
SUBCOMMANDS: list[Callable[[argparse._SubParsersAction], None]] = [
    _add_train,
    _add_status,
    _add_scale,
    _add_repair_aof,
    _add_games,
    _add_bestmove,
    _add_gtp,
    _add_analysis,
    _add_match,
    _add_play,
    _add_serve,
    _add_selfplay_demo,
    _add_checkpoint_convert,
    _add_config,
]


def _version() -> str:
    from tengen import __version__

    return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tengen",
        description="tengen: AlphaZero-style self-play training (Ray, Redis, Keras).",
    )
    parser.add_argument("--version", action="version", version=f"tengen {_version()}")
    # Its own dest: a subcommand's default (gtp has a --verbose of its own) would
    # overwrite the global flag's value in the namespace.
    parser.add_argument("--verbose", action="store_true", dest="verbose_all",
                        help="let TensorFlow's and Ray's start-up messages through to stderr (hidden by default)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(subparsers)
    for sub in _commands(parser):  # `tengen train --verbose ...` as well as `tengen --verbose train`
        if not any("--verbose" in action.option_strings for action in sub._actions):
            sub.add_argument("--verbose", action="store_true", dest="verbose_here",
                             help="the same as tengen --verbose: start-up messages through to stderr")
    return parser


def _commands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of the commands that take options, nested ones (``config show``) too.
    Not the parsers of command groups: a subcommand's defaults would overwrite their flags."""
    groups = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not groups:
        return [parser]
    return [command for group in groups for sub in group.choices.values() for command in _commands(sub)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    args.verbose = args.verbose_all or getattr(args, "verbose_here", False) or getattr(args, "verbose", False)
    os.environ[QUIET_ENV] = "0" if args.verbose else "1"  # for the processes this one starts
    if not args.verbose:
        # Before TensorFlow is imported: its C++ logs after start-up, errors only
        # (what start-up writes past this is held, see held_native_stderr).
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        _quiet_ray_logs()
    try:
        return int(args.handler(args))
    except BrokenPipeError:
        # `tengen config show go9 | head`: the reader left, which is not an error of ours.
        # SIGPIPE stays ignored (Python's default), so a lost Redis or Ray socket is an
        # exception to handle, not a silent death; stdout goes to /dev/null so the flush
        # at exit does not raise again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13  # what a shell reports for a command ended by SIGPIPE


if __name__ == "__main__":
    raise SystemExit(main())
