"""``tengen match A B``: two players, checkpoints or GTP engines, over many games.

A side is a checkpoint (a run's ``best/`` directory or a ``.safetensors`` file, with
its run config beside it or given) played by ``play.players.MctsPlayer``, all its
games searched in one batch, or ``gtp:<command>``, a GTP engine with one process per
game slot (``play.gtp_player``). The games themselves, their scoring (Tromp-Taylor
after a KGS-style cleanup when a GTP engine takes part) and the forfeit rule for an
engine that fails inside a game are ``play.match``'s; the summary and the record
files ``play.match_summary``'s. ``out`` gets every game and ``summary.json``.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from tengen.engine.games.base import Game
from tengen.engine.games.go import GoGame
from tengen.play.gtp_player import GtpPlayer
from tengen.play.match import PlayedGame, Player, play_games
from tengen.play.match_summary import game_line, match_summary, record_file
from tengen.play.players import MctsPlayer

if TYPE_CHECKING:  # the config module loads the engine's kernels: not at import
    from tengen.run.config import TengenConfig

__all__ = ["GTP_PREFIX", "MatchError", "Side", "parse_side", "run_match"]

GTP_PREFIX = "gtp:"
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
    from tengen.run.packaged_models import checkpoint_path

    try:
        where = checkpoint_path(spec)
    except FileNotFoundError as e:
        raise MatchError(str(e)) from None
    if not where.exists():
        raise MatchError(f"no checkpoint at {spec} (give a run's best/ directory, a .safetensors file, "
                         f"packaged:GAME, or {GTP_PREFIX}<command> for a GTP engine)")
    return Side(spec=spec, checkpoint=spec, config=config)


def _load(side: Side, *, komi: float | None) -> tuple[TengenConfig, Game, object]:
    """(config, game, Keras model) of a checkpoint side; ``komi`` overrides the game's."""
    from tengen.engine.network import WeightsError
    from tengen.run.checkpoint import load_model
    from tengen.run.config import ConfigError, load_config

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
    player = player.with_simulations(simulations) if simulations else player
    return player.build(game, CompiledModel(model), slots=slots, name=name)


def _same_rules(a: Game, b: Game) -> bool:
    if a.name != b.name:
        return False
    if isinstance(a, GoGame) and isinstance(b, GoGame):
        return (a.komi, a.superko, a.max_moves) == (b.komi, b.superko, b.max_moves)
    return True


def run_match(a: Side, b: Side, *, games: int, simulations: int | None = None, parallel: int | None = None,
              go_size: int | None = None, komi: float | None = None, timeout: float = 60.0, seed: int = 0,
              out: Path | None = None, progress: Callable[[str], None] = print) -> dict:
    """Play the match and return its summary (what ``--json`` prints). GTP-only
    matches play Go on ``go_size`` (default 9) with ``komi`` (default 7.5); with a checkpoint the
    game is the model's (``komi`` overrides its komi). Raises MatchError for a bad
    set-up and play.gtp_player.GtpEngineError for an engine that cannot start."""
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
        score = [0, 0, 0]  # the first player's wins, draws and losses so far

        def on_game(played: PlayedGame) -> None:
            if out is not None:
                name, text = record_file(game, played, labels)
                with open(out / name, "a", encoding="utf-8") as f:
                    f.write(text)
                where[played.index] = str(out / name)
            score[0 if played.first_result > 0 else 1 if played.first_result == 0 else 2] += 1
            progress(game_line(played, done=(sum(score), games),
                               tally=(names[0], (score[0], score[1], score[2]), names[1])))

        played = play_games(game, players[0], players[1], games=games, slots=slots,
                            rng=np.random.default_rng(seed), on_game=on_game)
    finally:
        for player in players:
            if isinstance(player, GtpPlayer):
                player.close()
    visits = {p.name: p.simulations for p in players if isinstance(p, MctsPlayer)}
    summary = match_summary(game, names, played, where, simulations=visits, slots=slots)
    if out is not None:
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


def _record_name(side: Side, name: str) -> str:
    """A player as its game records name it: a model by the version id it was
    published as, with its checkpoint (``000042 (runs/c4/best)``); an engine by its name."""
    if side.checkpoint is None:
        return name
    from tengen.run.checkpoint import checkpoint_version

    version = checkpoint_version(side.checkpoint)
    return name if version is None else f"{version} ({name})"


def _names(a: Side, b: Side) -> tuple[str, str]:
    first, second = a.name, b.name
    if first == second:
        first, second = f"{first} (A)", f"{second} (B)"
    return first, second


