"""The Learner against a real Redis stream and registry: reading, training, publishing,
and a restart that loses nothing and repeats nothing."""

import dataclasses

import numpy as np
import pytest

from tengen.cluster.registry import ModelRegistry
from tengen.cluster.stream import SampleStream
from tengen.engine.games import make_game
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.engine.network_spec import NetworkSpec
from tengen.engine.selfplay import SelfPlay, SelfPlaySettings
from tengen.learner.learner import CHECKPOINT_FILE, PREVIOUS_CHECKPOINT_FILE, Learner
from tengen.learner.options import LearnerOptions
from tengen.run.codec import encode_game, game_decoder

GAME = make_game("tictactoe")
NETWORK = NetworkSpec(input_shape=GAME.planes_shape, num_actions=GAME.num_actions, blocks=1, filters=8, l2=1e-4,
                      value_hidden=64, ownership=False)
#: what the learner tests train with: small batches, an early first step, a candidate often
OPTIONS = LearnerOptions(batch_size=16, optimizer="sgd", learning_rate=0.02, momentum=0.9, replay_window=100_000,
                         min_positions=32, max_reuse=2.0, candidate_every=10,
                         ownership_weight=1.0, opponent_policy_weight=0.15, score_weight=0.02, value_q_weight=0.0)


@pytest.fixture(scope="module")
def games():
    settings = SelfPlaySettings(search=SearchSettings(simulations=16))
    return SelfPlay(GAME, games=16, seed=0, settings=settings).play(uniform_evaluator(9), games=60)


def make_learner(stream, registry, storage):
    return Learner(game=GAME, network=NETWORK, options=OPTIONS, source=stream, registry=registry,
                   decode=game_decoder(GAME), storage=storage, seed=3)


@pytest.mark.slow
def test_learner_reads_trains_publishes_and_resumes(redis_client, tmp_path, games):
    stream = SampleStream(redis_client, "restart", maxlen=10_000)
    registry = ModelRegistry(redis_client, "restart")
    first_half, second_half = games[:40], games[40:]
    stream.add_many([encode_game(g, worker_id="w0") for g in first_half])
    positions = sum(len(g.value) for g in first_half)

    learner = make_learner(stream, registry, tmp_path)
    stats = learner.step(seconds=20)
    assert stats["positions_read"] == positions and stats["window"] == positions
    # The reuse ratio caps training: positions * max_reuse / batch_size steps.
    assert stats["step"] == int(positions * 2.0 / 16)
    assert stats["published"] == list(range(1, stats["step"] // 10 + 1))
    assert stream.lag("learner") == 0  # everything read was acknowledged
    published = stats["published"]

    # A new learner on the same storage and stream: it resumes where the checkpoint
    # (taken at the last candidate) left off, with the window rebuilt from the stream.
    assert (tmp_path / CHECKPOINT_FILE).exists()
    stream.add_many([encode_game(g, worker_id="w0") for g in second_half])
    again = make_learner(stream, registry, tmp_path)
    assert again.resumed and again.next_version == published[-1] + 1
    assert again.trainer.step == (stats["step"] // 10) * 10
    all_positions = positions + sum(len(g.value) for g in second_half)
    assert len(again.window) == all_positions  # nothing lost, nothing read twice
    more = again.step(seconds=20)
    assert more["positions_read"] == all_positions and more["window"] == all_positions
    assert more["published"] and more["published"][0] == published[-1] + 1  # no version repeated
    assert registry.candidates() == published + more["published"]


def test_a_forged_entry_is_skipped_and_counted(redis_client, tmp_path, games):
    stream = SampleStream(redis_client, "forged", maxlen=10_000)
    stream.add(encode_game(games[0], worker_id="w0"))
    stream.add(b"\x80\x04\x95 not a game, a pickle header")
    stream.add(encode_game(games[1], worker_id="w0"))
    learner = make_learner(stream, ModelRegistry(redis_client, "forged"), tmp_path)
    stats = learner.step(seconds=1)
    assert stats["positions_read"] == len(games[0].value) + len(games[1].value)
    assert stream.bad_entries == 1 and stream.lag("learner") == 0
    assert np.isfinite(list(stats["losses"].values()) or [0.0]).all()


def test_a_game_written_twice_is_read_once(redis_client, tmp_path, games):
    # A worker's XADD retried after its reply was lost: the same game id twice.
    stream = SampleStream(redis_client, "twice", maxlen=10_000)
    named = [dataclasses.replace(g, game_id=f"w000.ab12:{i}") for i, g in enumerate(games[:10])]
    blobs = [encode_game(g, worker_id="w000") for g in named]
    stream.add_many(blobs[:6] + blobs[5:6] + blobs[6:] + blobs[9:])
    learner = make_learner(stream, ModelRegistry(redis_client, "twice"), tmp_path)
    stats = learner.step(seconds=0.5)
    assert stats["duplicate_games"] == 2
    assert stats["positions_read"] == sum(len(g.value) for g in games[:10])
    assert stream.lag("learner") == 0  # the repeats were acknowledged too


@pytest.mark.slow
def test_a_learner_behind_the_registry_takes_the_next_free_version(redis_client, tmp_path, games):
    # Killed between publishing candidate 1 and checkpointing it: a new learner starts
    # from no checkpoint (or an older one), and must not publish other bytes as 000001.
    stream = SampleStream(redis_client, "behind", maxlen=10_000)
    registry = ModelRegistry(redis_client, "behind")
    registry.publish(1, b"the lost learner's candidate", {"step": 10})
    stream.add_many([encode_game(g, worker_id="w0") for g in games[:40]])
    learner = make_learner(stream, registry, tmp_path)
    stats = learner.step(seconds=20)
    assert stats["published"] and stats["published"][0] == 2
    assert registry.fetch(1)[0] == b"the lost learner's candidate"


def test_a_learner_whose_checkpoint_is_lost_still_rebuilds_its_window_from_the_stream(redis_client, tmp_path,
                                                                                    games):
    # Its checkpoint lived on a node that is gone: the new learner, on an empty storage,
    # starts training from scratch but with every game the stream holds, and goes on
    # after the registry's newest version.
    stream = SampleStream(redis_client, "no-checkpoint", maxlen=10_000)
    registry = ModelRegistry(redis_client, "no-checkpoint")
    stream.add_many([encode_game(g, worker_id="w0") for g in games[:40]])
    first = make_learner(stream, registry, tmp_path / "lost-node").step(seconds=20)
    assert first["published"] and stream.lag("learner") == 0  # all of it read, acknowledged
    again = make_learner(stream, registry, tmp_path / "new-node")
    assert not again.resumed and again.restored_from is None and again.trainer.step == 0
    assert len(again.window) == sum(len(g.value) for g in games[:40])
    more = again.step(seconds=20)
    assert more["published"] and more["published"][0] == first["published"][-1] + 1


def test_a_damaged_checkpoint_is_found_and_the_previous_one_restored(redis_client, tmp_path, games):
    stream = SampleStream(redis_client, "damaged", maxlen=10_000)
    registry = ModelRegistry(redis_client, "damaged")
    stream.add_many([encode_game(g, worker_id="w0") for g in games[:40]])
    stats = make_learner(stream, registry, tmp_path).step(seconds=20)
    assert len(stats["published"]) >= 2  # a checkpoint at each: the newest, and the one before
    newest = tmp_path / CHECKPOINT_FILE
    data = bytearray(newest.read_bytes())
    data[-100] ^= 0x01  # one bit of a weight, flipped on disk
    newest.write_bytes(bytes(data))
    again = make_learner(stream, registry, tmp_path)
    assert again.resumed and again.trainer.step == (stats["step"] // 10 - 1) * 10  # the previous checkpoint's
    assert again.restored_from is not None and again.restored_from.startswith(PREVIOUS_CHECKPOINT_FILE)
    assert "sha256" in again.restored_from and CHECKPOINT_FILE in again.restored_from
    # and a truncated one as well: both gone, the learner starts afresh, and says why
    newest.write_bytes(bytes(data[: len(data) // 2]))
    (tmp_path / PREVIOUS_CHECKPOINT_FILE).write_bytes(b"")
    fresh = make_learner(stream, registry, tmp_path)
    assert not fresh.resumed and fresh.restored_from is not None and fresh.restored_from.startswith("none: ")


def test_the_value_target_averages_the_result_and_the_search_value(redis_client, tmp_path):
    # With playout caps only the full searches are positions: each is paired with the
    # root value of its own search, not with a cheap search's beside it.
    capped = SelfPlay(GAME, games=8, seed=1,
                      settings=SelfPlaySettings(search=SearchSettings(simulations=16), full_search_fraction=0.5,
                                                cheap_simulations=4)).play(uniform_evaluator(9), games=8)
    stream = SampleStream(redis_client, "q-mix", maxlen=10_000)
    stream.add_many([encode_game(g, worker_id="w0") for g in capped])
    options = dataclasses.replace(OPTIONS, value_q_weight=0.5)
    learner = Learner(game=GAME, network=NETWORK, options=options, source=stream,
                      registry=ModelRegistry(redis_client, "q-mix"), decode=game_decoder(GAME),
                      storage=tmp_path, seed=3)
    learner.step(seconds=0.1, until_step=0)  # reads the stream into the window, trains nothing

    result = np.concatenate([g.value for g in capped])
    searched = np.concatenate([g.search_value[g.full_search] for g in capped])
    assert not np.allclose(result, searched)  # the two disagree somewhere, or this shows nothing
    np.testing.assert_allclose(learner.window.contents()[2], (result + searched) / 2, atol=1e-6)
