"""Games the sample stream refuses: self-play drops them, counts them and plays on,
and a worker that makes nothing else stops with the reason instead of playing on
into nothing (the score utility's bug once made every game of a run such a game)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tengen.engine.games import make_game
from tengen.engine.selfplay import GameRecord
from tengen.run.codec import encode_game, game_decoder
from tengen.run.config import parse_config
from tengen.workers.selfplay_worker import AllGamesRefused, SelfPlayWorker

GAME = make_game("tictactoe")
SETTINGS = parse_config({"game": {"name": "tictactoe"}, "mcts": {"simulations": 8, "leaves_per_round": 2}})


def evaluator(value: float):
    """A model's answers in one process: a uniform policy and ``value`` for every leaf."""
    def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(planes)
        return np.full((n, GAME.num_actions), 1.0 / GAME.num_actions, np.float32), np.full(n, value, np.float32)
    return evaluate


def worker(value: float, sink) -> SelfPlayWorker:
    return SelfPlayWorker(game=GAME, selfplay=SETTINGS.selfplay_settings(), submit=lambda planes: planes.copy(),
                          resolve=evaluator(value), sink=sink, seed=3, games=8)


def test_a_game_the_stream_refuses_is_dropped_and_counted_and_play_goes_on():
    stream: list[bytes] = []
    seen = 0

    def every_second_game_broken(record: GameRecord) -> None:
        nonlocal seen
        seen += 1
        if seen % 2 == 0:  # a value target out of range, as a broken search would record it
            record = dataclasses.replace(record, value=record.value * 3 + 2)
        stream.append(encode_game(record, worker_id="w000"))

    player = worker(0.0, every_second_game_broken)
    while player.stats()["games_refused"] < 20:
        stats = player.run_for(0.2)
    assert stats["games"] == len(stream) and stats["games_refused"] == seen - len(stream) >= 20
    assert abs(stats["games"] - stats["games_refused"]) <= 1
    assert player.last_refusal == "SampleFormatError: value holds numbers outside [-1, 1]"
    assert player.refusals_since(stats["games_refused"]) is None
    assert player.refusals_since(0) == (f"{stats['games_refused']} games refused so far; the last: "
                                        "SampleFormatError: value holds numbers outside [-1, 1]")
    decode = game_decoder(GAME)
    assert sum(len(decode(blob).value) for blob in stream) == stats["positions"]


def test_a_worker_whose_every_game_is_refused_stops_with_the_reason():
    stream: list[bytes] = []
    # a model whose value head answers outside [-1, 1]: every root's search value is too
    player = worker(1.5, lambda record: stream.append(encode_game(record, worker_id="w000")))
    with pytest.raises(AllGamesRefused, match=r"the last \d+ games .* all refused; the last: SampleFormatError: "
                                              r"search_value holds numbers outside \[-1, 1\]"):
        for _ in range(1000):
            player.run_for(0.2)
    assert stream == [] and player.stats()["games"] == 0 and player.stats()["games_refused"] >= 16
