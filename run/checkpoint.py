"""A trained model from disk, ready to play: the one loader behind ``tengen bestmove``,
``tengen gtp`` and ``tengen play``.

A checkpoint is a run's ``best/`` directory (``model.safetensors`` and the
``config.yaml`` it was trained with) or a ``.safetensors`` file, with its config
beside it or named apart; or ``packaged:GAME``, the model tengen ships for a packaged
config (run/packaged_models.py), to play before anything is trained.
``load_model`` gives the Keras model; ``load_player`` wraps it in a
``play.search_player.SearchPlayer`` with the config's search as play uses it.
Both start the network's backend (the config's ``network.backend`` where Keras has not
started yet: weights load on any), quietly unless ``--verbose``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tengen.engine.backend_start import start_backend
from tengen.engine.games.base import Game
from tengen.play.search_player import SearchPlayer
from tengen.run.config import TengenConfig, load_config
from tengen.run.packaged_models import checkpoint_path
from tengen.run.run_dir import CONFIG_FILE, MODEL_FILE, version_id

__all__ = ["build_model", "checkpoint_version", "load_model", "load_player", "weights_file"]



def build_model(config: TengenConfig):
    """A fresh (untrained) network of ``config``'s shape."""
    return config.network_spec().build()


def weights_file(checkpoint: str | Path) -> Path:
    """The weights of a checkpoint: a ``best`` directory's model.safetensors, or the file."""
    path = checkpoint_path(checkpoint)
    return path / MODEL_FILE if path.is_dir() else path


def checkpoint_version(checkpoint: str | Path) -> str | None:
    """The model version id a checkpoint's weights were published as (``000042``), or
    None when its metadata does not say."""
    from tengen.engine.network import weights_metadata

    version = weights_metadata(weights_file(checkpoint).read_bytes()).get("version")
    if isinstance(version, int) or (isinstance(version, str) and version.isdigit()):
        return version_id(int(version))
    return None


def load_model(checkpoint: str | Path, config: TengenConfig | None = None):
    """(config, game, model) from a ``best`` directory or a ``.safetensors`` file; the
    config defaults to the one saved beside the weights.

    The weights decide whether the network has the ownership head: weights from
    before it (or trained without it) load under a config that asks for it, as a
    network without one, and the config returned says so (GTP then estimates dead
    stones by playouts). The opponent-policy head likewise (nothing that plays reads it),
    the score head (analysis then estimates the score from ownership), global pooling,
    and Go's feature planes (the planes the first layer reads): a model from before
    KataGo's techniques plays under today's Go configs."""
    weights = weights_file(checkpoint)
    if config is None:
        saved = weights.parent / CONFIG_FILE
        if not saved.exists():
            raise FileNotFoundError(f"no {CONFIG_FILE} beside {weights}: pass --config")
        config = load_config(saved)
    game = config.game.make()
    if not weights.exists():
        raise FileNotFoundError(f"no weights at {weights}")
    start_backend(config.network.backend, strict=False)
    from tengen.engine.network import (
        weights_from_bytes,
        weights_global_pooling_every,
        weights_have_opponent_policy,
        weights_have_ownership,
        weights_have_score,
        weights_input_planes,
    )

    blob = weights.read_bytes()
    planes = weights_input_planes(blob)
    if config.game.name == "go" and planes != game.planes_shape[2]:
        other = config.with_changes({"game.features": not config.game.features}, source=str(weights))
        other_game = other.game.make()
        if planes == other_game.planes_shape[2]:
            config, game = other, other_game
    pooling = weights_global_pooling_every(blob, config.network.blocks)
    if pooling is not None and pooling != config.network.global_pooling_every:
        config = config.with_changes({"network.global_pooling_every": pooling}, source=str(weights))
    if config.network.ownership != weights_have_ownership(blob):
        config = config.with_changes({"network.ownership": not config.network.ownership}, source=str(weights))
    if config.network.opponent_policy != weights_have_opponent_policy(blob):
        config = config.with_changes({"network.opponent_policy": not config.network.opponent_policy},
                                     source=str(weights))
    if config.network.score != weights_have_score(blob):
        # without the head there is no score to search by: the utility goes with it
        changes: dict = {"network.score": not config.network.score}
        if config.network.score:
            changes["mcts.score_utility"] = 0.0
        config = config.with_changes(changes, source=str(weights))
    model = build_model(config)
    weights_from_bytes(model, blob)
    return config, game, model


def load_player(checkpoint: str | Path, config_path: str | Path | None, simulations: int, *,
                warm_up: bool = False) -> tuple[TengenConfig, Game, SearchPlayer]:
    """(config, game, player): ``player(game, state, history) -> action`` plays the
    checkpoint's model with ``simulations`` of MCTS; ``player.search`` gives the
    statistics (GTP's timed search and analysis, the play page's heat map).
    ``warm_up``: trace the network's call for the batch sizes a search uses now, not
    in the first move a person waits for."""
    config = load_config(config_path) if config_path else None
    config, game, model = load_model(checkpoint, config)
    search = config.play_search()
    go = config.game.name == "go"
    from tengen.engine.network import CompiledModel

    evaluate = CompiledModel(model)
    if warm_up:
        for batch in sorted({1, search.leaves_per_round}):
            evaluate(np.zeros((batch, *game.planes_shape), np.float32))
    player = SearchPlayer(evaluate, search=search, simulations=simulations, seed=config.seed,
                          size=game.board_shape[0] if go else None,
                          history_length=game.history_length if go else None,
                          komi=getattr(game, "komi", None) if go else None,
                          features=getattr(game, "features", False) if go else None)
    return config, game, player
