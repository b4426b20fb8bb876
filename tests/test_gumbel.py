"""Gumbel AlphaZero's search (engine/mcts/gumbel.py) in the batched search, checked
by hand: the sequential-halving schedule, the improved policy, the move played."""

import math

import numpy as np
import pytest
from positions import reachable_positions

from tengen.engine.games import make_game
from tengen.engine.mcts import Search, SearchSettings, uniform_evaluator
from tengen.play.solvers import tictactoe_optimal_actions, tictactoe_value

TTT = make_game("tictactoe")
C4 = make_game("connect4")


def play_text(game, moves):
    state = game.initial_state()
    for m in moves:
        game.play(state, game.text_to_action(m))
    return state


def gumbel_search(game, *, games, **settings):
    return Search(game, games=games, settings=SearchSettings(search="gumbel", **settings))


def test_sequential_halving_visits_for_m4_n16():
    # m = 4 over n = 16 simulations below the root (17 with the root's own): ceil(log2 4)
    # = 2 phases. Phase 1: the 4 moves of highest g + logits, max(1, 16 // (2 * 4)) = 2
    # visits each (8 simulations); phase 2: the best 2, 16 // (2 * 2) = 4 more each (8).
    # A uniform evaluator (value 0) leaves every Q at 0, so g alone ranks the moves.
    search = gumbel_search(C4, games=1, simulations=17, gumbel_considered=4, leaves_per_round=4)
    search.sample_gumbel(0, np.random.default_rng(5))
    noise = np.random.default_rng(5).gumbel(size=7)  # the same draw
    by_noise = list(np.argsort(-noise))
    search.run(uniform_evaluator(7))
    expected = np.zeros(7)
    expected[by_noise[:2]] = 2 + 4
    expected[by_noise[2:4]] = 2
    assert np.array_equal(search.root_visits(0), expected)
    assert search.gumbel_action(0) == by_noise[0]  # same visits and Q: the higher g


def test_sequential_halving_visits_for_m16_n32():
    # 5x5 Go has 26 legal moves at the start, so m = 16 of them. n = 32, ceil(log2 16)
    # = 4 phases: 16 moves x max(1, 32 // 64) = 1 visit (16), then 8 x 32 // 32 = 1
    # (8), then 4 x 32 // 16 = 2 (8): 32. So 4 moves end with 1 + 1 + 2 = 4 visits,
    # 4 with 2, 8 with 1, and 10 are never visited.
    go = make_game("go", size=5)
    search = gumbel_search(go, games=1, simulations=33, gumbel_considered=16, leaves_per_round=8)
    search.sample_gumbel(0, np.random.default_rng(11))
    noise = np.random.default_rng(11).gumbel(size=go.num_actions)
    by_noise = list(np.argsort(-noise))
    search.run(uniform_evaluator(go.num_actions))
    visits = search.root_visits(0)
    assert sorted(visits[by_noise[:4]]) == [4] * 4
    assert sorted(visits[by_noise[4:8]]) == [2] * 4
    assert sorted(visits[by_noise[8:16]]) == [1] * 8
    assert visits.sum() == 32


def test_a_round_takes_the_next_simulations_of_a_phase_and_waits_at_its_end():
    # m = 4, n = 16, 3 leaves per round. The root is the first batch; phase 1 is the
    # simulations 0..7 (ranks 0 1 2 3 0 1 2 3): rounds of 3, 3, then 2, since the
    # ranking for phase 2 waits for the values in flight; phase 2 (8..15): 3, 3, 2.
    search = gumbel_search(C4, games=1, simulations=17, gumbel_considered=4, leaves_per_round=3)
    evaluate = uniform_evaluator(7)
    sizes = []
    while len(planes := search.gather()):
        sizes.append(len(planes))
        search.apply(*evaluate(planes))
    assert sizes == [1, 3, 3, 2, 3, 3, 2]
    assert search.root_visits(0).sum() == 16


def one_stone_evaluator(prior, root_value, leaf_values):
    """Connect Four: the policy ``prior`` everywhere; value ``root_value`` for the empty
    board, and after one stone in column c ``leaf_values[c]`` (for the player to move
    there, the root's opponent)."""

    def evaluate(planes):
        values = np.zeros(len(planes), dtype=np.float32)
        for i, p in enumerate(planes):
            stones = np.argwhere(p[..., 1])  # the opponent's stones, from the mover's view
            values[i] = root_value if len(stones) == 0 else leaf_values[stones[0][1]]
        return np.tile(np.asarray(prior, np.float32), (len(planes), 1)), values

    return evaluate


def test_improved_policy_by_hand():
    prior = [0.05, 0.1, 0.2, 0.3, 0.2, 0.1, 0.05]
    # Q for the root's mover is minus the leaf's value: Q(1) = 0.2, Q(2) = -0.4,
    # Q(3) = 0, Q(4) = 0.6.
    leaf_values = [0.0, -0.2, 0.4, 0.0, -0.6, 0.0, 0.0]
    evaluate = one_stone_evaluator(prior, root_value=0.1, leaf_values=leaf_values)
    # m = 4 and n = 4: one phase, one visit to each of the 4 highest priors: 3, then 2
    # and 4 (0.2, the lower first), then 1 (0.1, lower than 5).
    search = gumbel_search(C4, games=1, simulations=5, gumbel_considered=4, gumbel_c_scale=0.1)
    search.run(evaluate)
    assert list(search.root_visits(0)) == [0, 1, 1, 1, 1, 0, 0]
    # Completed Q: the mixed value for the unvisited moves 0, 5, 6:
    # sum P of visited = 0.8, sum P Q / 0.8 = (0.02 - 0.08 + 0 + 0.12) / 0.8 = 0.075,
    # v_mix = (0.1 + 4 * 0.075) / (1 + 4) = 0.08.
    completed = np.array([0.08, 0.2, -0.4, 0.0, 0.6, 0.08, 0.08])
    # min -0.4, max 0.6: normalised (q + 0.4) / 1.0; sigma = (50 + max N = 1) * 0.1 * that
    sigma = (50 + 1) * 0.1 * (completed + 0.4) / 1.0
    logits = np.log(prior) + sigma
    expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
    assert np.allclose(search.improved_policy(0), expected, atol=1e-6)
    # The move: all 4 have one visit; log P + sigma: 1: -2.30 + 3.06, 2: -1.61 + 0,
    # 3: -1.20 + 2.04, 4: -1.61 + 5.1 -> 4.
    assert search.gumbel_action(0) == 4


def test_noise_can_overrule_the_prior_and_none_is_deterministic():
    prior = [0.05, 0.1, 0.2, 0.3, 0.2, 0.1, 0.05]
    evaluate = one_stone_evaluator(prior, root_value=0.0, leaf_values=[0.0] * 7)
    plain = gumbel_search(C4, games=1, simulations=1, gumbel_considered=4)
    plain.run(evaluate)
    assert plain.gumbel_action(0) == 3  # no simulation below the root: argmax of logits
    # With noise, a search of one evaluation plays argmax g + logits: a sample of P.
    rng = np.random.default_rng(0)
    counts = np.zeros(7)
    for _ in range(400):
        noisy = gumbel_search(C4, games=1, simulations=1)
        noisy.sample_gumbel(0, rng)
        noisy.run(evaluate)
        counts[noisy.gumbel_action(0)] += 1
    assert np.all(np.abs(counts / 400 - prior) < 0.06)


def test_a_winning_connect_four_move_is_played():
    # X (to move) has three in the bottom row, in columns 2, 3, 4 (O on top): columns
    # 1 and 5 win at once, nothing else does. A uniform evaluator knows nothing; the
    # search finds the win as a terminal leaf.
    state = play_text(C4, ["2", "2", "3", "3", "4", "4"])
    search = gumbel_search(C4, games=1, simulations=16)
    search.reset(0, state)
    search.sample_gumbel(0, np.random.default_rng(1))
    search.run(uniform_evaluator(7))
    assert search.gumbel_action(0) in (C4.text_to_action("1"), C4.text_to_action("5"))




def perfect_ish_evaluator(positions):
    """Tic-tac-toe: exact minimax values, and a policy with half its mass spread over
    the optimal moves, half over all legal ones."""
    table = {}
    for state in positions:
        legal = TTT.legal_mask(state).astype(np.float32)
        optimal = np.zeros(9, np.float32)
        optimal[list(tictactoe_optimal_actions(state))] = 1.0
        policy = 0.5 * legal / legal.sum() + 0.5 * optimal / optimal.sum()
        table[TTT.encode(state, []).astype(np.uint8).tobytes()] = policy, tictactoe_value(state)

    def evaluate(planes):
        found = [table[p.tobytes()] for p in planes]
        return np.array([f[0] for f in found], np.float32), np.array([f[1] for f in found], np.float32)

    return evaluate


def test_with_a_perfect_ish_evaluator_gumbel_plays_an_optimal_tictactoe_move_everywhere():
    # Below the root Gumbel's rule is greedy (argmax of pi' - N share): with uniform
    # priors it can keep to the first move that holds up and never try the one that
    # wins, so the prior must help. With 16 simulations below the root and no noise
    # (an evaluation's search), every one of the 4,520 positions gets an optimal move.
    # With noise drawn as in self-play the move is a sample of the improved policy,
    # softmax(logits + sigma), whose best move leads by (50 + max N) * 0.1 = 5.5 logits
    # at most: a Gumbel difference beats that about once in 250 (15 positions here).
    positions = reachable_positions(TTT)
    evaluate = perfect_ish_evaluator(positions)
    rng = np.random.default_rng(2)
    for noise, most_wrong in ((False, 0), (True, len(positions) // 100)):
        search = gumbel_search(TTT, games=len(positions), simulations=17)
        for g, state in enumerate(positions):
            search.reset(g, state)
            if noise:
                search.sample_gumbel(g, rng)
        search.run(evaluate)
        wrong = [g for g, state in enumerate(positions)
                 if search.gumbel_action(g) not in tictactoe_optimal_actions(state)]
        assert len(wrong) <= most_wrong, (noise, len(wrong), TTT.render(positions[wrong[0]]))


def fixed_evaluator(game, seed=0):
    """Deterministic, and a function of the planes alone."""
    weights = np.random.default_rng(seed).normal(size=(math.prod(game.planes_shape), game.num_actions + 1))

    def evaluate(planes):
        out = planes.reshape(len(planes), -1).astype(np.float64) @ weights / 4.0
        logits = out[:, :-1]
        policy = np.exp(logits - logits.max(axis=1, keepdims=True))
        return (policy / policy.sum(axis=1, keepdims=True)).astype(np.float32), np.tanh(out[:, -1]).astype(np.float32)

    return evaluate


@pytest.mark.parametrize("game, openings", [(C4, [[], ["4"], ["1", "7"], ["4", "4", "4"]]),
                                            (make_game("go", size=5), [[], ["C3"], ["B2", "D4"], ["pass"]])])
def test_batch_rows_are_independent(game, openings):
    evaluate = fixed_evaluator(game, seed=3)
    options = {"simulations": 40, "leaves_per_round": 4, "gumbel_considered": 8}
    together = gumbel_search(game, games=len(openings), **options)
    for g, moves in enumerate(openings):
        together.reset(g, play_text(game, moves))
        together.sample_gumbel(g, np.random.default_rng(g))
    together.run(evaluate)
    for g, moves in enumerate(openings):
        alone = gumbel_search(game, games=1, **options)
        alone.reset(0, play_text(game, moves))
        alone.sample_gumbel(0, np.random.default_rng(g))
        alone.run(evaluate)
        assert np.array_equal(alone.root_visits(0), together.root_visits(g))
        assert np.array_equal(alone.improved_policy(0), together.improved_policy(g))
        assert alone.gumbel_action(0) == together.gumbel_action(g)


def test_each_move_is_a_fresh_search():
    search = gumbel_search(C4, games=1, simulations=20)
    search.run(uniform_evaluator(7))
    search.advance(0, 3)
    assert search.tree.node_n[0, 0] == 0 and not search.root_expanded(0)
    search.run(uniform_evaluator(7))
    assert search.root_visits(0).sum() == 19


def test_misuse_is_refused():
    with pytest.raises(ValueError, match="search must be 'puct' or 'gumbel'"):
        Search(C4, games=1, settings=SearchSettings(simulations=8, search="mcts"))
    with pytest.raises(ValueError, match="leave formula at 'puct'"):
        Search(C4, games=1, settings=SearchSettings(simulations=8, search="gumbel", formula="uct"))
    with pytest.raises(ValueError, match="gumbel_considered"):
        gumbel_search(C4, games=1, simulations=8, gumbel_considered=0)
    search = gumbel_search(C4, games=1, simulations=8)
    with pytest.raises(RuntimeError, match="no finished search"):
        search.improved_policy(0)
    search.run(uniform_evaluator(7))
    with pytest.raises(RuntimeError, match="has begun"):
        search.sample_gumbel(0, np.random.default_rng(0))
    with pytest.raises(RuntimeError, match="not Dirichlet's"):
        search.add_root_noise(0, np.random.default_rng(0), alpha=0.3, fraction=0.25)
    with pytest.raises(RuntimeError, match="needs search='gumbel'"):
        Search(C4, games=1, settings=SearchSettings(simulations=8)).gumbel_action(0)


def test_the_rule_below_the_root_is_argmax_of_improved_policy_minus_visit_share():
    # select_interior is the walk's fast form of pi'(a) - N(a) / (1 + sum_b N(b));
    # checked at roots, where improved_policy gives pi' the slow way.
    from tengen.engine.mcts.gumbel import select_interior

    evaluate = fixed_evaluator(C4, seed=5)
    for simulations in (2, 5, 9, 30):
        search = gumbel_search(C4, games=1, simulations=simulations, gumbel_considered=4)
        search.run(evaluate)
        t = search.tree
        visits = search.root_visits(0)
        expected = np.argmax(np.where(t.prior[0, 0] >= 0, search.improved_policy(0) - visits / (1 + visits.sum()),
                                      -np.inf))
        chosen = select_interior(t.prior[0, 0], t.edge_n[0, 0], t.edge_w[0, 0], t.edge_n_sum[0, 0],
                                 t.raw_value[0, 0], np.float32(50.0), np.float32(0.1),
                                 np.zeros(7, np.float32))
        assert chosen == expected, simulations


def test_an_arena_player_with_gumbel_search_never_loses_to_a_random_player():
    from tengen.play.match import play_match
    from tengen.play.players import MctsPlayer, RandomPlayer

    # Noise in each game's first move, so that the games differ (every opening holds
    # the draw), none after.
    player = MctsPlayer(TTT, perfect_ish_evaluator(reachable_positions(TTT)), slots=20, temperature_moves=1,
                        search=SearchSettings(simulations=17, search="gumbel"))
    result = play_match(TTT, player, RandomPlayer(TTT), games=40, slots=20, rng=np.random.default_rng(0))
    assert result.games == 40 and result.losses == 0 and result.wins >= 30, result
