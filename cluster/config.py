"""The one run-config schema: frozen, validated, loaded once from ``configs/*.yaml``.

An unknown key or a bad value stops the run at start with a message that names the
field (``ConfigError``). Library code never reads this module's objects directly:
the driver passes the values on as keyword arguments.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.games import Game, make_game

__all__ = ["ConfigError", "GameConfig", "TengenConfig", "load_config", "parse_config"]


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


class TengenConfig(_Strict):
    game: GameConfig


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
