"""Configs load into one frozen schema; a bad one names the field that is wrong."""

from pathlib import Path

import pytest

from cluster.config import ConfigError, load_config, parse_config
from engine.games import GoGame

CONFIGS = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_shipped_config_loads_and_builds_its_game(path):
    config = load_config(path)
    game = config.game.make()
    assert game.num_actions > 0


def test_go_config_sets_the_rules():
    game = parse_config({"game": {"name": "go", "size": 13, "komi": 6.5, "superko": True}}).game.make()
    assert isinstance(game, GoGame) and (game.size, game.komi, game.superko) == (13, 6.5, True)


@pytest.mark.parametrize(
    "data, message",
    [
        ({"game": {"name": "chess"}}, "game.name"),
        ({"game": {"name": "go", "size": 25}}, "game.size"),
        ({"game": {"name": "go", "size": 9, "komi": 7.3}}, "multiple of 0.5"),
        ({"game": {"name": "connect4", "komi": 7.5}}, "applies to go only"),
        ({"game": {"name": "connect4"}, "gmae": {}}, "gmae: unknown key"),
        ({"game": {"name": "go", "sise": 9}}, "game.sise: unknown key"),
        ({}, "game: Field required"),
        ([1, 2], "mapping"),
    ],
)
def test_bad_configs_name_the_field(data, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(data, "test.yaml")


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("game: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)


def test_selfplay_demo_runs_from_a_config(capsys):
    from cluster.cli import main

    assert main(["selfplay-demo", "--config", str(CONFIGS[0]), "--games", "20"]) == 0
    out = capsys.readouterr().out
    assert "20 random games" in out
