"""Configs load into one frozen schema; a bad one names the field that is wrong."""

import dataclasses
import json
import typing
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from tengen.engine.games import GoGame, make_game
from tengen.engine.mcts import Search, SearchSettings, search_bytes
from tengen.learner.replay import ReplayWindow
from tengen.run.config import (
    MEMORY_BUDGET_VARIABLE,
    ConfigError,
    MctsConfig,
    TengenConfig,
    load_config,
    parse_config,
)

CONFIGS = sorted((Path(__file__).resolve().parent.parent / "configs").glob("*.yaml"))
GiB = 2**30


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_every_shipped_config_loads_and_builds_its_game(path, monkeypatch):
    # A laptop's memory, whatever the machine running the tests has: every shipped
    # config must run on one.
    monkeypatch.setenv(MEMORY_BUDGET_VARIABLE, str(4 * GiB))
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


def ttt(**sections):
    """A tic-tac-toe config document with these sections."""
    return {"game": {"name": "tictactoe"}, **sections}


def go(**rules):
    return {"game": {"name": "go", **rules}}


NAN, INF = float("nan"), float("inf")


# Each absurd value and the field its error names (a regex: dots escaped; ".*" stands
# for pydantic's "Input should be").
@pytest.mark.parametrize(
    "data, field",
    [
        # not finite, in every spelling a file can have
        (go(size=9, komi=1e400), r"game\.komi: .*a finite number"),  # 1e400 is inf in Python
        (yaml.safe_load("game: {name: go, komi: 1e400}"), r"game\.komi: .*a finite"),  # a YAML string
        (yaml.safe_load("game: {name: go, komi: .inf}"), r"game\.komi: .*a finite"),
        (yaml.safe_load("game: {name: go, komi: -.inf}"), r"game\.komi: .*a finite"),
        (yaml.safe_load("game: {name: go, komi: .nan}"), r"game\.komi: .*a finite"),
        (json.loads('{"game": {"name": "go", "komi": NaN}}'), r"game\.komi: .*a finite"),
        (json.loads('{"game": {"name": "go", "komi": Infinity}}'), r"game\.komi: .*a finite"),
        (ttt(mcts={"c_puct": INF}), r"mcts\.c_puct: .*a finite"),
        (ttt(mcts={"fpu_reduction": NAN}), r"mcts\.fpu_reduction: .*a finite"),
        (ttt(selfplay={"resign_threshold": NAN}), r"selfplay\.resign_threshold: .*a finite"),
        (ttt(stop={"minutes": INF}), r"stop\.minutes: .*a finite"),
        (ttt(cluster={"batch_timeout_ms": "Infinity"}), r"cluster\.batch_timeout_ms: .*a finite"),
        # komi: half points, and no more than the 81 points of a 9x9 board
        (go(size=9, komi=7.3), r"game\.komi: komi must be a multiple of 0\.5"),
        (go(size=9, komi=81.5), r"game\.komi: komi must be within \+-81 "),
        (go(komi=-361.5), r"game\.komi: komi must be within \+-361 "),  # 19x19 by default
        (go(size=9, komi=1e300), r"game\.komi: komi must be within"),  # finite, and once an int32 overflow
        # max_moves: 10 x 81 on 9x9
        (go(size=9, max_moves=811), r"game\.max_moves: max_moves must be at most 810 "),
        (go(max_moves=10**30), r"game\.max_moves: max_moves must be at most 3610 "),
        # learning rates: positive and finite, a constant or every rate of a schedule
        (ttt(train={"learning_rate": NAN}), r"train\.learning_rate\.rate: .*a finite"),
        (ttt(train={"learning_rate": -0.1}), r"train\.learning_rate\.rate: .*greater than 0"),
        (ttt(train={"learning_rate": 0}), r"train\.learning_rate\.rate: .*greater than 0"),
        (ttt(train={"learning_rate": 50}), r"train\.learning_rate\.rate: .*less than or equal to 10"),
        (ttt(train={"learning_rate": [[0, 0.1], [100, NAN]]}), r"train\.learning_rate\.schedule\.1\.1: .*a finite"),
        (ttt(train={"learning_rate": [[0, 0.1], [100, -1e-3]]}), r"train\.learning_rate\.schedule\.1\.1: .*than 0"),
        (ttt(train={"learning_rate": [[-5, 0.1]]}), r"train\.learning_rate\.schedule\.0\.0: .*or equal to 0"),
        (ttt(train={"learning_rate": [[0.5, 0.1]]}), r"train\.learning_rate\.schedule\.0\.0: .*a valid integer"),
        (ttt(train={"learning_rate": [[0, 0.1], [0, 0.01]]}), r"train: learning_rate schedule must start at step 0"),
        (ttt(train={"learning_rate": []}), r"train: learning_rate schedule must start at step 0"),
        # bounds of the search and of play
        (ttt(mcts={"c_puct": 0}), r"mcts\.c_puct: .*greater than 0"),
        (ttt(mcts={"c_puct": 1e6}), r"mcts\.c_puct: .*less than or equal to 100"),
        (ttt(mcts={"fpu_reduction": -0.1}), r"mcts\.fpu_reduction: .*greater than or equal to 0"),
        (ttt(mcts={"fpu_reduction": 3}), r"mcts\.fpu_reduction: .*less than or equal to 2"),
        (ttt(mcts={"virtual_loss": 1e30}), r"mcts\.virtual_loss: .*less than or equal to 10"),
        (ttt(mcts={"dirichlet_alpha": 0}), r"mcts\.dirichlet_alpha: .*greater than 0"),
        (ttt(mcts={"dirichlet_alpha": 1e9}), r"mcts\.dirichlet_alpha: .*less than or equal to 100"),
        (ttt(mcts={"search": "alphabeta"}), r"mcts\.search: .*'puct' or 'gumbel'"),
        (ttt(mcts={"gumbel_considered": 0}), r"mcts\.gumbel_considered: .*greater than or equal to 1"),
        (ttt(mcts={"gumbel_c_visit": -1}), r"mcts\.gumbel_c_visit: .*greater than or equal to 0"),
        (ttt(mcts={"gumbel_c_scale": 0}), r"mcts\.gumbel_c_scale: .*greater than 0"),
        (ttt(mcts={"avoid_own_eyes": True}), r"mcts\.avoid_own_eyes applies to go only, not tictactoe"),
        (ttt(selfplay={"temperature": 0.001}), r"selfplay\.temperature: .*greater than or equal to 0\.1"),
        (ttt(selfplay={"temperature": 1e6}), r"selfplay\.temperature: .*less than or equal to 10"),
        (ttt(selfplay={"full_search_fraction": 0.5, "cheap_simulations": 65}, mcts={"simulations": 64}),
         r"^test\.yaml: selfplay\.cheap_simulations=65 is more than mcts\.simulations=64$"),
        (ttt(network={"l2": 1}), r"network\.l2: .*less than 1"),
        (ttt(network={"value_hidden": 10**6}), r"network\.value_hidden: .*less than or equal to 4096"),
        # training that could never start, gating that cannot decide
        (ttt(train={"replay_window": 1000, "min_positions": 1001}),
         r"train: min_positions=1001 is more than replay_window=1000"),
        (ttt(gating={"elo0": 35, "elo1": 35}), r"gating: SPRT needs elo0 < elo1, got elo0=35\.0, elo1=35\.0"),
        (ttt(gating={"elo1": 1e5}), r"gating\.elo1: .*less than or equal to 1600"),
        (ttt(gating={"elo0": -1e5}), r"gating\.elo0: .*greater than or equal to -1600"),
        (ttt(gating={"threshold": 1}), r"gating\.threshold: .*less than 1"),
        # timing and seeds
        (ttt(cluster={"batch_timeout_ms": 0}), r"cluster\.batch_timeout_ms: .*greater than 0"),
        (ttt(cluster={"batch_timeout_ms": 5000}), r"cluster\.batch_timeout_ms: .*less than or equal to 1000"),
        (ttt(cluster={"worker_chunk_seconds": 86400}), r"cluster\.worker_chunk_seconds: .*less than or equal to 3600"),
        (ttt(seed=2**32), r"seed: .*less than 4294967296"),
        (ttt(seed=-1), r"seed: .*greater than or equal to 0"),
    ],
)
def test_absurd_values_name_the_field(data, field):
    with pytest.raises(ConfigError, match=field):
        parse_config(data, "test.yaml")


def test_command_line_overrides_go_through_the_schema():
    config = parse_config(ttt())
    changed = config.with_changes({"stop.minutes": 5, "cluster.workers": 3, "redis.url": None})
    assert (changed.stop.minutes, changed.cluster.workers, changed.redis.url) == (5, 3, None)
    assert config.stop.minutes is None  # frozen: a new config, the old one as it was
    with pytest.raises(ConfigError, match="the command line: stop.minutes: Input should be greater than 0"):
        config.with_changes({"stop.minutes": -1})
    with pytest.raises(ConfigError, match="stop.hours is not a config key"):
        config.with_changes({"stop.hours": 1})


def test_set_null_lifts_a_stop_limit_the_run_was_started_with():
    from tengen.cli import set_pairs

    # `tengen train go9 --minutes 10`, then `--resume --set stop.minutes=null`: it trains on until stopped
    started = parse_config(ttt()).with_changes({"stop.minutes": 10})
    resumed = started.with_settings(set_pairs(["stop.minutes=null", "mcts.simulations=12"]))
    assert resumed.stop.minutes is None and resumed.mcts.simulations == 12
    assert yaml.safe_load(resumed.to_yaml())["stop"]["minutes"] is None  # what the run's config.yaml then says
    assert started.with_settings(set_pairs(["stop.minutes="])).stop.minutes is None  # an empty value is null too


def test_the_search_is_puct_unless_a_config_says_gumbel():
    # the schema's defaults are the library's: AlphaZero's PUCT, and for Danihelka et al.
    # 2022's search mctx's constants (m = 16, c_visit = 50, c_scale = 0.1)
    assert parse_config(ttt()).search_settings() == SearchSettings()
    assert SearchSettings().search == "puct" and SearchSettings().gumbel_considered == 16
    gumbel = parse_config(ttt(mcts={"search": "gumbel", "gumbel_considered": 4, "gumbel_c_scale": 0.5}))
    assert gumbel.search_settings() == SearchSettings(search="gumbel", gumbel_considered=4, gumbel_c_scale=0.5)
    # self-play and the gatekeeper's players search by the one value
    assert gumbel.selfplay_settings().search == gumbel.search_settings()
    assert gumbel.gating_options().player.search == gumbel.search_settings()
    # the solver proves positions for PUCT's move choice, which Gumbel search does not use
    solver = parse_config(ttt(mcts={"solver": True}))
    assert solver.selfplay_settings().search.solver and solver.gating_options().player.search.solver
    with pytest.raises(ConfigError, match="solver needs search: puct"):
        parse_config(ttt(mcts={"search": "gumbel", "solver": True}))


def test_every_search_setting_of_the_config_reaches_the_one_value():
    # A field of the mcts section that the settings value lacked would be dropped on
    # the way to some search: every one of them arrives, under its own name.
    changed = {"simulations": 33, "c_puct": 2.5, "fpu_reduction": 0.1, "leaves_per_round": 3, "virtual_loss": 2.0,
               "dirichlet_alpha": 0.03, "dirichlet_fraction": 0.5, "gumbel_considered": 5, "gumbel_c_visit": 20.0,
               "gumbel_c_scale": 0.2, "discount": 0.9, "solver": True, "lcb_z": 3.0,
               "lcb_min_visit_share": 0.3}
    # (score_utility reaches play's searches alone, a Go net's with the score head:
    # tests/test_score_utility.py)
    assert changed.keys() | {"search", "avoid_own_eyes", "score_utility"} == MctsConfig.model_fields.keys()
    settings = parse_config(ttt(mcts=changed)).search_settings()
    assert {name: getattr(settings, name) for name in changed} == changed
    assert load_config("go9").search_settings().avoid_own_eyes


def test_forced_playouts_reach_self_play_and_are_refused_with_gumbel_search():
    assert parse_config(ttt(selfplay={"forced_playouts_k": 2.0})).selfplay_settings().forced_playouts_k == 2.0
    with pytest.raises(ConfigError, match="forced_playouts_k needs mcts.search: puct"):
        parse_config(ttt(selfplay={"forced_playouts_k": 2.0}, mcts={"search": "gumbel"}))


def test_the_eye_rule_and_root_noise_are_for_training_games_and_matches_play_by_the_rules():
    go9 = load_config("go9")
    assert go9.selfplay_settings().search.avoid_own_eyes and go9.gating_options().player.search.avoid_own_eyes
    # tengen match and the benches: the gating search's visits, without the rule and the noise, and with the
    # score utility that self-play gets from its inference servers' values
    player = go9.match_player()
    assert go9.search_settings().score_utility == 0.0 < go9.mcts.score_utility
    assert player.search == dataclasses.replace(
        go9.search_settings(), simulations=go9.gating_options().player.search.simulations, avoid_own_eyes=False,
        dirichlet_fraction=0.0, score_utility=go9.mcts.score_utility)
    assert player.temperature_moves == go9.gating.temperature_moves
    # the settings value itself says what play leaves out, and why
    assert set(SearchSettings.TRAINING_ONLY) == {"dirichlet_alpha", "dirichlet_fraction", "avoid_own_eyes"}
    assert go9.play_search() == dataclasses.replace(player.search, simulations=go9.mcts.simulations)


def test_a_sane_schedule_and_bounds_still_parse():
    config = parse_config(ttt(train={"learning_rate": [[0, 0.2], [1000, 0.02]]}, gating={"elo0": -10, "elo1": 10},
                              selfplay={"full_search_fraction": 0.5, "cheap_simulations": 64},
                              mcts={"simulations": 64}))
    assert config.learner_options().learning_rate == [[0, 0.2], [1000, 0.02]]
    assert parse_config(go(size=9, komi=-81)).game.make().komi == -81.0
    # elo0 < elo1 is the SPRT's: a threshold rule ignores both
    assert parse_config(ttt(gating={"rule": "threshold", "elo0": 35, "elo1": 0})).gating.elo0 == 35


# --- sizes that cannot fit in memory ----------------------------------------------------
def owned_bytes(search: Search) -> int:
    """The bytes of every array a Search holds (its tree and scratch included), each
    buffer once: views such as the flat planes share their base's memory."""
    buffers: dict[int, int] = {}

    def add(value):
        if isinstance(value, np.ndarray):
            while isinstance(value.base, np.ndarray):
                value = value.base
            buffers[id(value)] = value.nbytes
        elif isinstance(value, tuple):  # Tree, _Scratch
            for item in value:
                add(item)

    for value in vars(search).values():
        add(value)
    return sum(buffers.values())


@pytest.mark.parametrize(
    "name, rules, sizes",
    [
        ("tictactoe", {}, {"games": 3, "simulations": 5, "leaves_per_round": 2}),
        ("connect4", {}, {"games": 4, "simulations": 40, "leaves_per_round": 8}),
        ("go", {"size": 9}, {"games": 2, "simulations": 30, "leaves_per_round": 4}),
        # feature planes: the walk's scratch holds the ladder reader's rows
        ("go", {"size": 9, "features": True}, {"games": 2, "simulations": 30, "leaves_per_round": 4}),
        # superko: a longer state (one hash per move); leaf states kept for rollouts
        ("go", {"size": 5, "superko": True}, {"games": 2, "simulations": 20, "leaves_per_round": 1,
                                              "keep_leaf_states": True}),
    ],
)
def test_search_bytes_counts_what_a_search_allocates(name, rules, sizes):
    game = make_game(name, **rules)
    games, settings = sizes.pop("games"), SearchSettings(**sizes)
    assert search_bytes(game, games=games, settings=settings) == pytest.approx(
        owned_bytes(Search(game, games=games, settings=settings)), rel=0.01)


def test_search_bytes_of_a_big_go_search_is_its_edges():
    # 19x19: A = 362 actions; 800 simulations, 8 leaves a round: M = 2 * 800 + 2 * 8 + 2 =
    # 1618 nodes; four [G, M, A] arrays of 4 bytes: 64 * 1618 * 362 * 16 = 599,785,472 bytes.
    edges = 64 * 1618 * 362 * 16
    settings = SearchSettings(simulations=800, leaves_per_round=8)
    estimate = search_bytes(GoGame(size=19), games=64, settings=settings)
    assert edges < estimate < 1.03 * edges
    # and an absurd size is a Python integer, not an overflow
    assert search_bytes(GoGame(size=19), games=10**30, settings=settings) > 10**30 * 1618 * 362 * 16


def test_memory_estimates_count_the_replay_window_as_the_learner_stores_it():
    config = parse_config(ttt(train={"replay_window": 500, "min_positions": 100}))
    game = config.game.make()
    window = ReplayWindow(capacity=500, planes_shape=game.planes_shape, num_actions=game.num_actions)
    assert config.memory_estimates()["replay"] == window.planes.nbytes + window.policy.nbytes + window.value.nbytes


def test_memory_estimates_count_each_search_as_it_is_built():
    config = parse_config({**go(size=9), "mcts": {"simulations": 50, "leaves_per_round": 4},
                           "selfplay": {"games_in_flight": 6, "cache_positions": 1000},
                           "cluster": {"games_per_worker": 7},
                           "gating": {"games_in_flight": 3, "simulations": 20, "cache_positions": 500}})
    game, search = config.game.make(), SearchSettings(simulations=50, leaves_per_round=4)
    # 1,000 cached answers, each two 8-byte hashes, an 8-byte stamp, 82 float32 policy and a float32 value
    cache = 1000 * (16 + 8 + 82 * 4 + 4)
    assert config.memory_estimates() == {
        "selfplay": cache + search_bytes(game, games=6, settings=search),
        # a worker's 7 games are two halves of 3 and 4 (workers/selfplay_worker.py)
        "worker": cache + search_bytes(game, games=3, settings=search) + search_bytes(game, games=4, settings=search),
        # gating: both players search, at gating.simulations, and keep 500 answers each
        "gating": 2 * (cache // 2 + search_bytes(game, games=3, settings=SearchSettings(simulations=20,
                                                                                         leaves_per_round=4))),
        # 9 x 9 x 17 uint8 planes + 82 float32 policy + 1 float32 value = 1709 bytes a position
        "replay": 100_000 * 1709,
    }


def go19(**sections):
    return {"game": {"name": "go", "size": 19}, "mcts": {"simulations": 800}, **sections}


# With a 1 GiB budget, 19x19 Go at 800 simulations: 64 games take 0.56 GiB (above), 128 take twice
# that, and the default evaluation cache 0.36 GiB more (2^18 x 1476 bytes). The replay window:
# 19 * 19 * 17 + 362 * 4 + 4 = 7589 bytes a position.
@pytest.mark.parametrize(
    "sections, message",
    [
        ({"selfplay": {"games_in_flight": 128}},
         r"^test\.yaml: selfplay\.games_in_flight=128 x mcts\.simulations=800 x mcts\.leaves_per_round=8 and "
         r"selfplay\.cache_positions=262144: the go19 self-play search and its evaluation cache would take "
         r"1\.5 GiB, more than the 1\.0 GiB that "
         r"TENGEN_MEMORY_BUDGET_BYTES allows \(set TENGEN_MEMORY_BUDGET_BYTES to another budget\)$"),
        ({"cluster": {"games_per_worker": 128}}, r"cluster\.games_per_worker=128 x mcts\.simulations=800 .* 1\.5 GiB"),
        ({"selfplay": {"cache_positions": 2**20}},
         r"selfplay\.cache_positions=1048576: the go19 self-play .* 2\.0 GiB"),
        ({"gating": {"games_in_flight": 64}}, r"gating\.games_in_flight=64 x mcts\.simulations=800 .*gating searches"),
        ({"gating": {"cache_positions": 2**20}},
         r"gating\.cache_positions=1048576: the two go19 gating searches and caches would take 3\.4 GiB"),
        ({"gating": {"games_in_flight": 64, "simulations": 800}},
         r"gating\.games_in_flight=64 x gating\.simulations=800"),
        # 200,000 x 7589 bytes = 1.4 GiB
        ({"train": {"replay_window": 200_000}},
         r"train\.replay_window=200000: the go19 replay window would take 1\.4 GiB"),
        ({"mcts": {"simulations": 800, "leaves_per_round": 10**6}}, r"mcts\.leaves_per_round=1000000"),
        # too many bytes for a float: counted and printed in integers
        ({"cluster": {"games_per_worker": 10**400}}, r"cluster\.games_per_worker=10{400} x .* [0-9]{300,} EiB"),
    ],
)
def test_sizes_that_cannot_fit_are_refused_at_start(sections, message, monkeypatch):
    monkeypatch.setenv(MEMORY_BUDGET_VARIABLE, str(GiB))
    parse_config(go19(), "test.yaml")  # 64 games of each kind fit
    with pytest.raises(ConfigError, match=message):
        parse_config(go19(**sections), "test.yaml")


def test_the_budget_is_this_machine_unless_the_environment_says(monkeypatch):
    monkeypatch.delenv(MEMORY_BUDGET_VARIABLE, raising=False)
    with pytest.raises(ConfigError, match=r"more than this machine's [0-9.]+ [KMGTPE]?i?B"):
        parse_config(go19(selfplay={"games_in_flight": 10**9}))
    # a big node's worth, named for a run launched from a small head node
    monkeypatch.setenv(MEMORY_BUDGET_VARIABLE, str(2**60))
    assert parse_config(go19(train={"replay_window": 10**12, "min_positions": 1})).train.replay_window == 10**12
    monkeypatch.setenv(MEMORY_BUDGET_VARIABLE, "lots")
    with pytest.raises(ConfigError, match="TENGEN_MEMORY_BUDGET_BYTES must be a positive number of bytes, not 'lots'"):
        parse_config(ttt())


# --- fuzz: any document parses or names its problem ---------------------------------------
def sections() -> dict[str, type[BaseModel]]:
    return {name: field.annotation for name, field in TengenConfig.model_fields.items()
            if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)}


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 1000), st.integers(-(10**400), 10**400),
    st.floats(allow_nan=True, allow_infinity=True), st.floats(-1e3, 1e3),
    st.text(max_size=6), st.sampled_from(["1e400", "-1e400", ".nan", "NaN", "Infinity", "0x10", "1_000", "yes", "go"]),
)
#: the values that break arithmetic: not finite, or past what int32, int64 and float64 hold
EXTREMES = st.sampled_from([float("nan"), float("inf"), float("-inf"), 1e300, -1e300, 2**31, 2**63, 10**30, -(10**30),
                            "1e400", "-Infinity"])
ANYTHING = st.one_of(
    SCALARS,
    st.lists(st.lists(SCALARS, max_size=3), max_size=3),  # schedules, good and bad
    st.dictionaries(st.text(max_size=4), SCALARS, max_size=3),
)


def mostly(good, bad, *, odds: int = 3):
    """``good`` ``odds`` times out of ``odds + 1``. (st.one_of would flatten the
    branches of ``bad`` and draw ``good`` once in a dozen.)"""
    return st.integers(0, odds).flatmap(lambda i: good if i else bad)


def plausible(field):
    """The field's default, a literal it allows, or a number near its default."""
    if typing.get_origin(field.annotation) is typing.Literal:
        return st.sampled_from(typing.get_args(field.annotation))
    default = field.default
    if isinstance(default, bool) or default is None:
        return st.just(default)
    if isinstance(default, int):
        return st.one_of(st.just(default), st.integers(0, 2 * default + 2))
    if isinstance(default, float):
        return st.one_of(st.just(default), st.floats(0, 2 * default + 1))
    return st.just(default)


def section_strategy(model: type[BaseModel]):
    """Some of the section's own fields, mostly plausible, now and then anything at
    all or a key the section does not know."""
    odd = st.one_of(EXTREMES, ANYTHING)
    fields = {name: mostly(plausible(field), odd) for name, field in model.model_fields.items()}
    known = st.fixed_dictionaries({}, optional=fields)
    return mostly(known, st.one_of(known.map(lambda d: {**d, "bogus": 1}), ANYTHING), odds=9)


GAMES = st.fixed_dictionaries(
    {"name": mostly(st.sampled_from(["tictactoe", "connect4", "gomoku", "go"]), ANYTHING, odds=9)},
    optional={"size": mostly(st.integers(5, 19), ANYTHING),
              "komi": mostly(st.integers(-200, 200).map(lambda k: k / 2), st.one_of(EXTREMES, ANYTHING)),
              "superko": st.booleans(), "max_moves": mostly(st.integers(1, 5000), st.one_of(EXTREMES, ANYTHING)),
              "history_length": mostly(st.integers(1, 16), ANYTHING)},
)
DOCUMENTS = st.fixed_dictionaries(
    {"game": mostly(GAMES, ANYTHING, odds=9)},
    optional={**{name: section_strategy(model) for name, model in sections().items() if name != "game"},
              "storage": mostly(st.just("/tmp/checkpoints"), ANYTHING),
              "seed": mostly(st.integers(0, 2**33), ANYTHING)},
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=mostly(DOCUMENTS, ANYTHING, odds=19))
def test_any_document_parses_or_names_its_problem(document):
    # A document either parses, into a config whose YAML (the run directory's copy)
    # reads back to the same config, or raises ConfigError: never another exception.
    try:
        config = parse_config(document)
    except ConfigError:
        return
    assert parse_config(yaml.safe_load(config.to_yaml())) == config


def test_unreadable_and_malformed_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("game: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad)
    # past Python's 4300-digit limit for int(), and nested past the recursion limit
    for text in ("seed: " + "9" * 5000 + "\n", "game: " + "[" * 1100 + "]" * 1100 + "\n"):
        bad.write_text(text)
        with pytest.raises(ConfigError, match="not valid YAML"):
            load_config(bad)
    # a file saved in Latin-1 (an editor's old default)
    bad.write_bytes("game:\n  name: tictactoe\n# café\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 0xe9 on line 3\): save it as UTF-8"):
        load_config(bad)


def test_selfplay_demo_runs_from_a_config(capsys):
    from tengen.cli import main

    assert main(["selfplay-demo", "--config", str(CONFIGS[0]), "--games", "20"]) == 0
    out = capsys.readouterr().out
    assert "20 random games" in out
