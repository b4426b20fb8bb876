"""The one run-config schema: frozen, validated, loaded once from ``configs/*.yaml``.

An unknown key or a bad value stops the run at start with a message that names the
field (``ConfigError``). Library code never reads this module's objects directly:
the driver passes the values on as keyword arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from engine.games import Game, make_game
from learner.storage import check_storage_url

__all__ = [
    "ConfigError",
    "GameConfig",
    "NetworkConfig",
    "MctsConfig",
    "SelfPlayConfig",
    "TrainConfig",
    "GatingConfig",
    "StopConfig",
    "RayConfig",
    "RedisConfig",
    "ClusterConfig",
    "TengenConfig",
    "load_config",
    "parse_config",
]


class ConfigError(ValueError):
    """A config that cannot be used; the message names the file and the field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GameConfig(_Strict):
    """Which game and its rules. Go: ``size`` 5..19, ``komi``, ``superko``,
    ``max_moves`` (default 2 * size * size), ``history_length`` (T, default 8).
    Gomoku: ``size``. Tic-tac-toe and Connect Four take no options."""

    name: Literal["tictactoe", "connect4", "gomoku", "go"]
    size: int | None = Field(default=None, ge=5, le=19)
    komi: float | None = None
    superko: bool | None = None
    max_moves: int | None = Field(default=None, ge=1)
    history_length: int | None = Field(default=None, ge=1, le=16)

    @model_validator(mode="after")
    def _options_fit_the_game(self) -> GameConfig:
        go_only = ("komi", "superko", "max_moves", "history_length")
        if self.name != "go":
            for option in go_only:
                if getattr(self, option) is not None:
                    raise ValueError(f"'{option}' applies to go only, not {self.name}")
        if self.name in ("tictactoe", "connect4") and self.size is not None:
            raise ValueError(f"'size' does not apply to {self.name}")
        if self.name == "go" and self.komi is not None and self.komi * 2 != int(self.komi * 2):
            raise ValueError("komi must be a multiple of 0.5")
        return self

    def make(self) -> Game:
        rules = {k: v for k, v in self.model_dump(exclude={"name"}).items() if v is not None}
        return make_game(self.name, **rules)


class NetworkConfig(_Strict):
    """The dual residual tower (engine/network.py)."""

    blocks: int = Field(default=5, ge=1, le=40)
    filters: int = Field(default=64, ge=4, le=512)
    value_hidden: int = Field(default=64, ge=1)
    l2: float = Field(default=1e-4, ge=0)


class MctsConfig(_Strict):
    """PUCT search (engine/mcts.py); AlphaZero's noise, KataGo-like FPU."""

    simulations: int = Field(default=200, ge=1)
    c_puct: float = Field(default=1.25, gt=0)
    fpu_reduction: float = Field(default=0.25, ge=0)
    leaves_per_round: int = Field(default=8, ge=1)
    virtual_loss: float = Field(default=1.0, ge=0)
    dirichlet_alpha: float = Field(default=0.3, gt=0)
    dirichlet_fraction: float = Field(default=0.25, ge=0, le=1)


class SelfPlayConfig(_Strict):
    """How self-play games are played and recorded (engine/selfplay.py)."""

    games_in_flight: int = Field(default=64, ge=1)
    temperature_schedule: Literal["alphazero", "constant"] = "alphazero"
    temperature_moves: int = Field(default=30, ge=0)
    temperature: float = Field(default=1.0, gt=0)
    full_search_fraction: float = Field(default=1.0, gt=0, le=1)
    cheap_simulations: int = Field(default=0, ge=0)
    resign_threshold: float | None = Field(default=None, ge=-1, le=1)
    no_resign_fraction: float = Field(default=0.1, ge=0, le=1)

    @model_validator(mode="after")
    def _cheap_searches_need_simulations(self) -> SelfPlayConfig:
        if self.full_search_fraction < 1 and self.cheap_simulations < 1:
            raise ValueError("cheap_simulations must be at least 1 when full_search_fraction < 1")
        return self


class TrainConfig(_Strict):
    """The learner: replay window, sample reuse, optimiser, candidates."""

    batch_size: int = Field(default=256, ge=1)
    optimizer: Literal["sgd", "adam"] = "sgd"
    #: a constant, or ``[[step, rate], ...]`` from step 0 on (AlphaGo Zero: 1e-2, 1e-3, 1e-4)
    learning_rate: float | list[tuple[int, float]] = 0.02
    momentum: float = Field(default=0.9, ge=0, lt=1)
    replay_window: int = Field(default=100_000, ge=1)
    min_positions: int = Field(default=2_000, ge=1)
    max_reuse: float = Field(default=4.0, gt=0)
    candidate_every: int = Field(default=1_000, ge=1)

    @model_validator(mode="after")
    def _schedule_starts_at_zero(self) -> TrainConfig:
        if isinstance(self.learning_rate, list):
            steps = [s for s, _ in self.learning_rate]
            if not steps or steps[0] != 0 or steps != sorted(set(steps)):
                raise ValueError("learning_rate schedule must start at step 0 with increasing steps")
        return self


class GatingConfig(_Strict):
    """Candidate against best (engine/gating.py): SPRT, a fixed threshold, or none."""

    rule: Literal["sprt", "threshold", "none"] = "sprt"
    elo0: float = 0.0
    elo1: float = 35.0
    alpha: float = Field(default=0.05, gt=0, lt=0.5)
    beta: float = Field(default=0.05, gt=0, lt=0.5)
    max_games: int = Field(default=400, ge=1)
    threshold: float = Field(default=0.55, gt=0, lt=1)
    games: int = Field(default=400, ge=1)
    simulations: int | None = Field(default=None, ge=1)
    games_in_flight: int = Field(default=32, ge=1)
    #: opening moves sampled from the visits, so that match games differ
    temperature_moves: int = Field(default=4, ge=0)


class StopConfig(_Strict):
    """The run stops at the first limit reached (none: until interrupted)."""

    minutes: float | None = Field(default=None, gt=0)
    steps: int | None = Field(default=None, ge=1)
    promotions: int | None = Field(default=None, ge=1)


class RayConfig(_Strict):
    """Where the actors run: a Ray address (``auto``, ``ray://HOST:PORT``) or, when
    absent, a local Ray started for the run."""

    address: str | None = None
    #: the local Ray's metrics port, so that a Prometheus config can name it
    #: (deploy/monitoring uses 8080); default: a free port Ray picks. On a cluster,
    #: ``ray start --metrics-export-port`` sets each node's instead.
    metrics_export_port: int | None = Field(default=None, ge=1024, le=65535)

    @model_validator(mode="after")
    def _metrics_port_is_local(self) -> RayConfig:
        if self.address and self.metrics_export_port is not None:
            raise ValueError("metrics_export_port applies to a local Ray only; on a cluster pass "
                             "--metrics-export-port to `ray start`")
        return self


class RedisConfig(_Strict):
    """The sample stream and model registry: a Redis URL (password from the
    ``TENGEN_REDIS_PASSWORD`` environment variable, never in the URL) or, when absent,
    an embedded Redis server started for the run."""

    url: str | None = None

    @model_validator(mode="after")
    def _no_password_in_url(self) -> RedisConfig:
        if self.url and "@" in self.url.split("//", 1)[-1]:
            raise ValueError("put the Redis password in TENGEN_REDIS_PASSWORD, not in the URL")
        return self


class ClusterConfig(_Strict):
    """How many actors and how they batch (the distributed run)."""

    #: self-play workers (1 CPU each); default: the CPUs left after the others
    workers: int | None = Field(default=None, ge=1)
    #: self-play workers started per GPU node (KataGo-style: many CPU workers feed one GPU)
    workers_per_gpu: int = Field(default=14, ge=1)
    #: games each worker plays at once (two halves of this)
    games_per_worker: int = Field(default=64, ge=2)
    max_batch: int = Field(default=1024, ge=1)
    batch_timeout_ms: float = Field(default=5.0, gt=0)
    #: seconds a worker plays between two check-ins with the driver
    worker_chunk_seconds: float = Field(default=2.0, gt=0)


class TengenConfig(_Strict):
    game: GameConfig
    network: NetworkConfig = NetworkConfig()
    mcts: MctsConfig = MctsConfig()
    selfplay: SelfPlayConfig = SelfPlayConfig()
    train: TrainConfig = TrainConfig()
    gating: GatingConfig = GatingConfig()
    stop: StopConfig = StopConfig()
    ray: RayConfig = RayConfig()
    redis: RedisConfig = RedisConfig()
    cluster: ClusterConfig = ClusterConfig()
    #: where checkpoints go: a local path or any fsspec URL (``s3://``, ``gs://``,
    #: ``sftp://``; learner/storage.py); default: inside the run directory
    storage: str | None = None
    seed: int = Field(default=0, ge=0)

    @field_validator("storage")
    @classmethod
    def _storage_opens_here(cls, storage: str | None) -> str | None:
        # Here, before any actor starts: otherwise a missing s3fs shows only as the
        # learner actor failing on its node, again and again.
        if storage is not None:
            check_storage_url(storage)
        return storage

    # -- the config as keyword arguments of the library (one mapping for both drivers)
    def network_kwargs(self) -> dict:
        game = self.game.make()
        return {"input_shape": game.planes_shape, "num_actions": game.num_actions, "blocks": self.network.blocks,
                "filters": self.network.filters, "l2": self.network.l2, "value_hidden": self.network.value_hidden}

    def selfplay_kwargs(self) -> dict:
        mcts, sp = self.mcts, self.selfplay
        return {
            "simulations": mcts.simulations, "c_puct": mcts.c_puct, "fpu_reduction": mcts.fpu_reduction,
            "leaves_per_round": mcts.leaves_per_round, "virtual_loss": mcts.virtual_loss,
            "dirichlet_alpha": mcts.dirichlet_alpha, "dirichlet_fraction": mcts.dirichlet_fraction,
            "temperature_schedule": sp.temperature_schedule, "temperature_moves": sp.temperature_moves,
            "temperature": sp.temperature, "full_search_fraction": sp.full_search_fraction,
            "cheap_simulations": sp.cheap_simulations, "resign_threshold": sp.resign_threshold,
            "no_resign_fraction": sp.no_resign_fraction,
        }

    def learning_rate(self) -> float | list[list[float]]:
        rate = self.train.learning_rate
        return [list(x) for x in rate] if isinstance(rate, list) else rate

    def gating_rule_kwargs(self) -> dict:
        g = self.gating
        return {"kind": g.rule, "elo0": g.elo0, "elo1": g.elo1, "alpha": g.alpha, "beta": g.beta,
                "max_games": g.max_games, "threshold": g.threshold, "games": g.games}

    def to_yaml(self) -> str:
        """The config as written into a run directory (every default spelled out)."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False)


def parse_config(data: object, source: str = "config") -> TengenConfig:
    """Validate a parsed YAML/JSON document; ConfigError names each bad field."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: the top level must be a mapping of sections")
    try:
        return TengenConfig.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            field = ".".join(str(p) for p in err["loc"]) or "(top level)"
            message = err["msg"].removeprefix("Value error, ")
            if err["type"] == "extra_forbidden":
                message = "unknown key"
            problems.append(f"{field}: {message}")
        raise ConfigError(f"{source}: " + "; ".join(problems)) from None


def load_config(path: str | Path) -> TengenConfig:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    return parse_config(data, str(path))
