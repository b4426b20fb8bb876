"""The evaluation cache: a leaf met again is answered without a model call, with the
answer the model gave, and never with an old model's."""

import numpy as np
import pytest

from tengen.engine.games import make_game
from tengen.engine.mcts import CachedEvaluator, EvaluationCache, cache_bytes
from tengen.run.config import parse_config
from tengen.workers.selfplay_worker import SelfPlayWorker

C4 = make_game("connect4")


def exact_evaluator(game, seed=0, value_shift=0.0):
    """A function of each row's planes alone, bit for bit whatever the batch (integer
    arithmetic, no BLAS), and not uniform."""
    size = int(np.prod(game.planes_shape))
    weights = np.random.default_rng(seed).integers(-3, 4, size=(size, game.num_actions + 1))

    def evaluate(planes):
        out = (planes.reshape(len(planes), size).astype(np.int64) @ weights).astype(np.float32) / 8
        policy = np.exp(out[:, :-1] - out[:, :-1].max(axis=1, keepdims=True))
        value = np.tanh(out[:, -1]) * 0.4 + value_shift
        return (policy / policy.sum(axis=1, keepdims=True)).astype(np.float32), value.astype(np.float32)

    return evaluate


def random_planes(n, seed=0):
    return np.random.default_rng(seed).integers(0, 2, size=(n, *C4.planes_shape), dtype=np.uint8)


def test_a_position_evaluated_once_is_answered_from_the_cache():
    cache, evaluate = EvaluationCache(64, C4.num_actions), exact_evaluator(C4)
    planes = random_planes(10)
    first = cache.lookup(planes)
    assert not first.found.any() and len(first.missing_planes) == 10
    cache.insert(first, *evaluate(first.missing_planes))

    again = cache.lookup(planes[[3, 1, 3]])
    assert again.found.all() and len(again.missing_planes) == 0
    policy, value = again.merge(*evaluate(again.missing_planes))
    expected_policy, expected_value = evaluate(planes[[3, 1, 3]])
    assert np.array_equal(policy, expected_policy) and np.array_equal(value, expected_value)

    other = planes[3].copy()
    other.flat[0] ^= 1  # one stone different: another position
    assert not cache.lookup(other[None]).found.any()


def test_merge_puts_found_and_evaluated_rows_back_in_the_batch_order():
    cache, evaluate = EvaluationCache(64, C4.num_actions), exact_evaluator(C4)
    planes = random_planes(8)
    known = cache.lookup(planes[::2])
    cache.insert(known, *evaluate(known.missing_planes))

    mixed = cache.lookup(planes)
    assert mixed.found.tolist() == [True, False] * 4
    policy, value = mixed.merge(*evaluate(mixed.missing_planes))
    assert np.array_equal(value, evaluate(planes)[1]) and np.array_equal(policy, evaluate(planes)[0])
    with pytest.raises(ValueError, match="evaluation of 4 rows"):
        mixed.merge(*evaluate(planes[:3]))


def test_a_position_met_twice_in_one_batch_is_evaluated_once():
    cache, evaluate = EvaluationCache(64, C4.num_actions), exact_evaluator(C4)
    planes = random_planes(4)
    known = cache.lookup(planes[[0]])
    cache.insert(known, *evaluate(known.missing_planes))

    batch = planes[[2, 1, 0, 2, 3, 1, 2]]
    leaves = cache.lookup(batch)
    assert leaves.found.tolist() == [False, False, True, False, False, False, False]
    assert np.array_equal(leaves.missing_planes, planes[[2, 1, 3]])  # once each, in batch order
    policy, value = leaves.merge(*evaluate(leaves.missing_planes))
    assert np.array_equal(policy, evaluate(batch)[0]) and np.array_equal(value, evaluate(batch)[1])

    cache.insert(leaves, *evaluate(leaves.missing_planes))
    assert cache.lookup(planes).found.all()


def test_a_full_set_gives_way_to_a_new_position_by_least_recent_use():
    cache, evaluate = EvaluationCache(4, C4.num_actions), exact_evaluator(C4)  # one set of four
    planes = random_planes(5)
    for row in planes[:4]:
        one = cache.lookup(row[None])
        cache.insert(one, *evaluate(one.missing_planes))
    cache.lookup(planes[0][None])  # used again: now the most recent
    fifth = cache.lookup(planes[4][None])
    cache.insert(fifth, *evaluate(fifth.missing_planes))

    held = cache.lookup(planes).found
    assert held.tolist() == [True, False, True, True, True]  # the second was the least recently used
    assert cache.capacity == 4 and cache.nbytes == cache_bytes(4, C4.num_actions)


def test_clear_forgets_every_answer():
    cache, evaluate = EvaluationCache(64, C4.num_actions), exact_evaluator(C4)
    planes = random_planes(6)
    first = cache.lookup(planes)
    cache.insert(first, *evaluate(first.missing_planes))
    cache.clear()
    assert not cache.lookup(planes).found.any()


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least one position"):
        EvaluationCache(0, 7)
    cache = EvaluationCache(8, 7)
    with pytest.raises(ValueError, match="uint8"):
        cache.lookup(random_planes(2).astype(np.float32))
    leaves = cache.lookup(random_planes(2))
    with pytest.raises(ValueError, match="evaluation of 2 rows"):
        cache.insert(leaves, np.zeros((1, 7), np.float32), np.zeros(1, np.float32))


def _worker(cache_positions, evaluate, games, halves=1, submit=None, resolve=None):
    """A self-play worker on Connect Four; the evaluation happens at ``resolve`` unless
    ``submit`` does it (as a server that answers at once would)."""
    settings = parse_config({"game": {"name": "connect4"}, "mcts": {"simulations": 24},
                             "selfplay": {"temperature_moves": 4}})
    sent = []

    def record_and_pass_on(planes):
        sent.append(len(planes))
        return planes if submit is None else submit(planes)

    worker = SelfPlayWorker(game=C4, selfplay=settings.selfplay_settings(), submit=record_and_pass_on,
                            resolve=resolve or evaluate, sink=games.append, seed=3, games=16, halves=halves,
                            cache_positions=cache_positions)
    return worker, sent


@pytest.mark.parametrize("halves", [1, 2])
def test_a_worker_with_a_cache_plays_the_same_games_with_fewer_evaluations(halves):
    evaluate = exact_evaluator(C4, seed=1)
    runs = []
    for cache_positions in (0, 4096):
        games = []
        worker, sent = _worker(cache_positions, evaluate, games, halves=halves)
        while len(games) < 24:
            worker.run_for(0.05)
        out = sum(len(f.sent) for f in worker._in_flight if f is not None)  # sent, not yet back
        runs.append((games[:24], sum(sent) - out, worker.stats()))

    (plain_games, plain_sent, plain), (cached_games, cached_sent, cached) = runs
    assert [g.moves.tolist() for g in cached_games] == [g.moves.tolist() for g in plain_games]
    for a, b in zip(cached_games, plain_games, strict=True):
        assert np.array_equal(a.policy, b.policy) and np.array_equal(a.search_value, b.search_value)
    assert plain["cache_hits"] == 0 and plain_sent == plain["evaluations"]  # every leaf went to the model
    assert cached["cache_hits"] > 0.2 * cached["evaluations"]
    assert cached_sent == cached["evaluations"] - cached["cache_hits"]


def test_a_new_model_version_clears_the_cache_and_keeps_no_answer_of_the_old_model():
    # the old model's values are in [0.1, 0.9], the new one's in [-0.9, -0.1]
    old, new = exact_evaluator(C4, seed=1, value_shift=0.5), exact_evaluator(C4, seed=1, value_shift=-0.5)
    serving = [old]
    games = []
    # The server answers when the leaves arrive: leaves sent before the new version are
    # the old model's even when they come back after it.
    worker, _ = _worker(4096, old, games, submit=lambda planes: serving[0](planes), resolve=lambda answer: answer)
    worker.run_for(0.3)
    assert worker.stats()["cache_hits"] > 0
    assert worker._in_flight[0] is not None and len(worker._in_flight[0].sent), "leaves the old model answers"

    serving[0] = new  # the driver loads the new weights first, then tells the workers
    worker.set_model_version(1)
    worker.run_for(0.3)

    cache = worker.cache
    kept = cache._values[(cache._stamps > 0).reshape(-1)]
    assert len(kept) > 0 and np.all(kept < 0)


def test_a_cached_evaluator_answers_as_its_evaluator_with_fewer_rows():
    evaluate = exact_evaluator(C4)
    asked = []

    def counting(planes):
        asked.append(len(planes))
        return evaluate(planes)

    cached = CachedEvaluator(counting, 64, C4.num_actions)
    planes = random_planes(6)
    for batch in (planes[[0, 1, 0]], planes[[1, 2, 3]], planes[[3, 0]]):
        policy, value = cached(batch)
        assert np.array_equal(policy, evaluate(batch)[0]) and np.array_equal(value, evaluate(batch)[1])
    assert asked == [2, 2]  # 0 and 1; then 2 and 3; then nothing (no call)
    assert (cached.leaves, cached.hits) == (8, 4)
    cached.clear()
    cached(planes[[0]])
    assert asked == [2, 2, 1]


def _roots(result, candidate):
    """The positions where one side of a gating match chose a move, as a search's leaves
    (uint8): its searches evaluated each of them."""
    roots = []
    for played in result["games"]:
        for ply in range(len(played["moves"])):
            if (ply % 2 == 0) == (played["candidate_black"] == candidate):
                roots.append(C4.encode(*C4.state_from_moves(played["moves"][:ply])))
    return np.stack(roots).astype(np.uint8)


def test_the_gatekeeper_keeps_each_networks_answers_while_it_plays_and_only_theirs(tmp_path):
    # The models load TensorFlow: this test and the worker's do.
    import keras

    from tengen.engine.network import CompiledModel, weights_to_bytes
    from tengen.run.model_registry import LocalModelRegistry
    from tengen.workers.gatekeeper import Gatekeeper

    config = parse_config({"game": {"name": "connect4"}, "network": {"blocks": 1, "filters": 8},
                           "mcts": {"simulations": 16},
                           "gating": {"rule": "threshold", "games": 4, "games_in_flight": 4}, "seed": 5})
    spec = config.network_spec()
    keras.utils.set_random_seed(0)  # networks whose matches go as the comments say
    nets = [spec.build() for _ in range(3)]  # three different fresh networks
    registry = LocalModelRegistry("cache")
    for version, net in enumerate(nets):
        registry.publish(version, weights_to_bytes(net, metadata={"version": version}), {"step": version})
    registry.promote(0, elo=0.0, result={"initial": True})  # as a run begins
    gatekeeper = Gatekeeper(game=C4, network=spec, registry=registry, options=config.gating_options(), seed=6)
    values = [CompiledModel(net) for net in nets]

    def cache_of(version):
        return gatekeeper.evaluators[gatekeeper.loaded.index(version)].cache

    first = gatekeeper.gate(1, 0)
    assert first["decision"] == "promote"
    assert all(isinstance(side, CachedEvaluator) and side.hits > 0 for side in gatekeeper.evaluators)
    second = gatekeeper.gate(2, 1)  # 1 was promoted: it plays on as the best, 0's network now holds 2
    assert second["decision"] == "reject"
    assert cache_of(1).lookup(_roots(first, True)).found.all()  # its answers from the first match
    for version, roots, before in ((2, _roots(second, True), 0), (1, _roots(second, False), 0)):
        leaves = cache_of(version).lookup(roots)
        assert leaves.found.all()
        assert np.allclose(leaves.found_value, values[version](roots)[1], atol=1e-4)
        assert not np.allclose(leaves.found_value, values[before](roots)[1], atol=1e-4)  # so the check can fail

    gatekeeper.gate(0, 1)  # a rejected candidate's best plays on, with network 1's answers
    assert cache_of(1).lookup(_roots(second, False)).found.all()
    assert not cache_of(0).lookup(_roots(second, True)).found.all()  # network 2's are gone
