"""``tengen match A B``: two players, checkpoints or GTP engines, over many games.

A side is a checkpoint (a run's ``best/`` directory or a ``.safetensors`` file, with
its run config beside it or given) played by ``engine.arena.MctsPlayer``, all its
games searched in one batch, or ``gtp:<command>``, a GTP engine with one process per
game slot (``engine.gtp_player``). The games themselves, their scoring (Tromp-Taylor
after a KGS-style cleanup when a GTP engine takes part) and the forfeit rule for an
engine that fails inside a game are ``engine.match``'s.

The summary is from A's side: wins, draws, losses, the score, and the Elo difference
with its 95% interval (``engine.gating.estimate_elo``). ``out`` gets every game
(``record_file``: SGF for Go, one line of text for the other games) and
``summary.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tengen.engine.arena import MctsPlayer
from tengen.engine.game_records import FinishedGame, utc_date, write_game
from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.engine.gating import estimate_elo
from tengen.engine.gtp_player import GtpPlayer
from tengen.engine.interfaces import Player
from tengen.engine.match import PlayedGame, play_games, result_text
from tengen.engine.sgf import GoRecord, Move, write_sgf

if TYPE_CHECKING:  # the config module loads the engine's kernels: not at import
    from tengen.cluster.config import TengenConfig

__all__ = ["GTP_PREFIX", "MatchError", "Side", "parse_side", "record_file", "run_match", "summary_lines"]

GTP_PREFIX = "gtp:"
RULES = "Tromp-Taylor"  # SGF's RU: area scoring of the final board, see engine/match.py
CONFIDENCE = 0.95
_INTERPRETERS = ("python", "node", "sh", "bash", "perl", "ruby", "java")


class MatchError(ValueError):
    """A match that cannot be set up: a bad side, games that differ, no such file."""


@dataclass(frozen=True)
class Side:
    """One player as given: a GTP engine's command, or a checkpoint and its config."""

    spec: str
    command: str | None = None  # a GTP engine
    checkpoint: str | None = None
    config: str | None = None

    @property
    def name(self) -> str:
        if self.command is not None:
            words = [w.rsplit("/", 1)[-1] for w in shlex.split(self.command)]
            # `python3 my_engine.py`: the script is the engine's name
            if words[0].startswith(_INTERPRETERS) and len(words) > 1 and not words[1].startswith("-"):
                return words[1]
            return words[0]
        return self.spec


def parse_side(spec: str, *, config: str | None = None) -> Side:
    """``gtp:<command>`` or a checkpoint path (``config``: its run config)."""
    if spec.startswith(GTP_PREFIX):
        command = spec[len(GTP_PREFIX):].strip()
        try:
            words = shlex.split(command)
        except ValueError as e:
            raise MatchError(f"cannot read the engine command {command!r}: {e}") from None
        if not words:
            raise MatchError(f"{spec!r} names no engine command (gtp:<command>)")
        if config is not None:
            raise MatchError(f"a config goes with a checkpoint, not with the GTP engine {command!r}")
        return Side(spec=spec, command=command)
    if not Path(spec).exists():
        raise MatchError(f"no checkpoint at {spec} (give a run's best/ directory, a .safetensors file, "
                         f"or {GTP_PREFIX}<command> for a GTP engine)")
    return Side(spec=spec, checkpoint=spec, config=config)


def _load(side: Side, *, komi: float | None) -> tuple[TengenConfig, Game, object]:
    """(config, game, Keras model) of a checkpoint side; ``komi`` overrides the game's."""
    from tengen.cluster.checkpoint import load_model
    from tengen.cluster.config import ConfigError, load_config
    from tengen.engine.network import WeightsError

    assert side.checkpoint is not None
    try:
        config = load_config(side.config) if side.config else None
        config, game, model = load_model(side.checkpoint, config)
        if komi is not None:
            if config.game.name != "go":
                raise MatchError(f"--komi is for Go; {side.spec} plays {game.name}")
            game = config.with_changes({"game.komi": komi}).game.make()
    except (ConfigError, WeightsError, FileNotFoundError) as e:
        raise MatchError(f"{side.spec}: {e}") from None
    return config, game, model


def _mcts_player(config: TengenConfig, game: Game, model: object, *, slots: int, simulations: int | None,
                 name: str) -> MctsPlayer:
    """The model with its run's gating search, by the game's own rules
    (``TengenConfig.match_player``; ``simulations`` overrides its visits)."""
    from tengen.engine.network import CompiledModel

    player = config.match_player()
    player = dataclasses.replace(player, simulations=simulations or player.simulations)
    return player.build(game, CompiledModel(model), slots=slots, name=name)


def _same_rules(a: Game, b: Game) -> bool:
    if a.name != b.name:
        return False
    if isinstance(a, GoGame) and isinstance(b, GoGame):
        return (a.komi, a.superko, a.max_moves) == (b.komi, b.superko, b.max_moves)
    return True


def record_file(game: Game, played: PlayedGame, labels: dict[str, str] | None = None) -> tuple[str, str]:
    """(file name, text) of one finished game: an SGF file for Go (engine/sgf.py:
    a match's game may go on after two passes for a cleanup phase, which a replay
    by the rules would refuse, so its record is built from the moves as played),
    else the plain line of engine/game_records.py, one game a line of ``games.txt``.
    The one place a match's game becomes a record. ``labels``: what the record calls
    a player (a model by its version id and checkpoint) instead of its name."""
    black, white = ((labels or {}).get(name, name) for name in (played.black, played.white))
    now = time.time()  # the game has just finished: its date, as the plain line's
    if isinstance(game, GoGame):
        record = GoRecord(size=game.size, komi=game.komi,
                          events=tuple(Move(i % 2, a) for i, a in enumerate(played.moves)),
                          result=result_text(played), rules=RULES, players=(black, white),
                          application=("tengen", _version()), date=utc_date(now))
        return f"game-{played.index + 1:04d}.sgf", write_sgf(record)
    loser = None if played.outcome == 0 else (1 if played.outcome > 0 else 0)
    finished = FinishedGame(moves=played.moves, players=(_plain_name(black), _plain_name(white)),
                            when=now, resigned_by=loser if played.end == "resignation" else None,
                            forfeit_by=loser if played.end == "forfeit" else None)
    return "games.txt", write_game(game, finished)


def _plain_name(name: str) -> str:
    """A player's name as a plain line holds it: no spaces (a path may have some)."""
    return re.sub(r"[\s=]+", "_", name)


def _plain_result(played: PlayedGame) -> str:
    """The first mover's result as chess writes it (the games that are not Go)."""
    return {1.0: "1-0", -1.0: "0-1"}.get(played.outcome, "1/2-1/2")


def _version() -> str:
    from tengen import __version__

    return __version__


def run_match(a: Side, b: Side, *, games: int, simulations: int | None = None, parallel: int | None = None,
              go_size: int | None = None, komi: float | None = None, timeout: float = 60.0, seed: int = 0,
              out: Path | None = None, progress: Callable[[str], None] = print) -> dict:
    """Play the match and return its summary (what ``--json`` prints). GTP-only
    matches play Go on ``go_size`` (default 9) with ``komi`` (default 7.5); with a checkpoint the
    game is the model's (``komi`` overrides its komi). Raises MatchError for a bad
    set-up and engine.gtp_player.GtpEngineError for an engine that cannot start."""
    if games < 1:
        raise MatchError("--games must be at least 1")
    if parallel is not None and parallel < 1:
        raise MatchError("--parallel must be at least 1")
    if simulations is not None and simulations < 1:
        raise MatchError("--sims must be at least 1")
    if timeout <= 0:
        raise MatchError("--timeout must be positive")
    names = _names(a, b)
    labels = {name: _record_name(side, name) for side, name in zip((a, b), names, strict=True)}
    any_gtp = a.command is not None or b.command is not None
    slots = parallel or min(games, os.cpu_count() or 1)
    players: list[Player] = []
    loaded = {i: _load(side, komi=komi) for i, side in enumerate((a, b)) if side.checkpoint is not None}
    own_games = [game for _, game, _ in loaded.values()]
    try:
        if not any_gtp and parallel is None:
            # A model batches its games: as many at once as its gating plays.
            slots = min(games, max(config.gating.games_in_flight for config, _, _ in loaded.values()))
        if len(own_games) == 2 and not _same_rules(*own_games):
            raise MatchError(f"{a.spec} plays {own_games[0].name} and {b.spec} plays {own_games[1].name} "
                             "(or the same game under other rules)")
        if own_games:
            game = own_games[0]
            if go_size is not None and (not isinstance(game, GoGame) or game.size != go_size):
                raise MatchError(f"the checkpoints play {game.name}, not Go on {go_size}x{go_size}")
        else:
            game = GoGame(size=go_size or 9, komi=7.5 if komi is None else komi)
        if any_gtp and not isinstance(game, GoGame):
            raise MatchError(f"a GTP engine plays Go, and the checkpoint plays {game.name}")
        for i, (side, name) in enumerate(zip((a, b), names, strict=True)):
            if side.command is not None:
                assert isinstance(game, GoGame)
                players.append(GtpPlayer(game, side.command, slots=slots, name=name, timeout=timeout))
            else:
                config, own_game, model = loaded[i]
                players.append(_mcts_player(config, own_game, model, slots=slots, simulations=simulations,
                                            name=name))
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
            (out / "games.txt").unlink(missing_ok=True)
        where: dict[int, str] = {}

        def on_game(played: PlayedGame) -> None:
            if out is not None:
                name, text = record_file(game, played, labels)
                with open(out / name, "a", encoding="utf-8") as f:
                    f.write(text)
                where[played.index] = str(out / name)
            progress(_game_line(played, names[0]))

        played = play_games(game, players[0], players[1], games=games, slots=slots,
                            rng=np.random.default_rng(seed), on_game=on_game)
    finally:
        for player in players:
            if isinstance(player, GtpPlayer):
                player.close()
    visits = {p.name: p.simulations for p in players if isinstance(p, MctsPlayer)}
    summary = _summary(game, names, played, where, simulations=visits, slots=slots)
    if out is not None:
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _record_name(side: Side, name: str) -> str:
    """A player as its game records name it: a model by the version id it was
    published as, with its checkpoint (``000042 (runs/c4/best)``); an engine by its name."""
    if side.checkpoint is None:
        return name
    from tengen.cluster.checkpoint import checkpoint_version

    version = checkpoint_version(side.checkpoint)
    return name if version is None else f"{version} ({name})"


def _names(a: Side, b: Side) -> tuple[str, str]:
    first, second = a.name, b.name
    if first == second:
        first, second = f"{first} (A)", f"{second} (B)"
    return first, second


def _game_line(played: PlayedGame, first: str) -> str:
    line = (f"game {played.index + 1}: {played.black} (black) vs {played.white} (white): "
            f"{result_text(played) if played.end != 'finished' else _plain_result(played)} after "
            f"{len(played.moves)} moves ({played.end}")
    if played.cleanup_start is not None:
        line += f", {len(played.moves) - played.cleanup_start} in the cleanup"
    line += ")"
    for engine, score in played.engine_scores:
        line += f"; {engine} counts {score}"
    if played.reason:
        line += f"; {played.reason}"
    return line


def _summary(game: Game, names: tuple[str, str], played: list[PlayedGame], where: dict[int, str], *,
             simulations: dict[str, int], slots: int) -> dict:
    wins = sum(g.first_result > 0 for g in played)
    draws = sum(g.first_result == 0 for g in played)
    losses = sum(g.first_result < 0 for g in played)
    elo = estimate_elo(wins, draws, losses, confidence=CONFIDENCE)
    per_game = []
    for g in played:
        engine_scores = dict(g.engine_scores)
        ours = result_text(g)
        per_game.append({
            "index": g.index, "black": g.black, "white": g.white, "result": ours,
            "winner": g.black if g.outcome > 0 else g.white if g.outcome < 0 else None,
            "end": g.end, "moves": len(g.moves),
            "cleanup_moves": None if g.cleanup_start is None else len(g.moves) - g.cleanup_start,
            "score": g.score, "engine_scores": engine_scores,
            "scores_disagree": any(s != ours for s in engine_scores.values()),
            "forfeit_reason": g.reason, "file": where.get(g.index),
        })
    return {
        "a": names[0], "b": names[1], "game": game.name,
        "komi": game.komi if isinstance(game, GoGame) else None,
        "rules": RULES if isinstance(game, GoGame) else None,
        "simulations": simulations, "parallel": slots,
        "games": len(played), "wins": wins, "draws": draws, "losses": losses, "score": elo.score,
        "elo": elo.elo, "elo_low": elo.low, "elo_high": elo.high, "confidence": CONFIDENCE,
        "forfeits": sum(g.end == "forfeit" for g in played),
        "game_results": per_game,
    }


def summary_lines(summary: dict) -> list[str]:
    """The summary as people read it."""
    lines = [f"{summary['a']} vs {summary['b']}: {summary['games']} games of {summary['game']}: "
             f"W-D-L {summary['wins']}-{summary['draws']}-{summary['losses']} for {summary['a']}, "
             f"score {summary['score']:.3f}",
             # + 0.0: no "-0" for an even match
             f"Elo difference {summary['elo'] + 0.0:+.0f} ({summary['confidence']:.0%} interval "
             f"{summary['elo_low'] + 0.0:+.0f} .. {summary['elo_high'] + 0.0:+.0f})"]
    if summary["forfeits"]:
        lines.append(f"{summary['forfeits']} game(s) lost by forfeit (an engine failed; reasons above)")
    disagreements = sum(g["scores_disagree"] for g in summary["game_results"])
    if disagreements:
        lines.append(f"{disagreements} game(s) where a GTP engine's final_score differs from the Tromp-Taylor count")
    return lines
