"""Batched PUCT search, checked by hand and against a plain recursive reference."""

import math

import numpy as np
import pytest
from positions import own_eyes_and_other_moves, pass_loving_evaluator

from tengen.engine.games import make_game
from tengen.engine.mcts import (
    MoveRule,
    RolloutEvaluator,
    Search,
    SearchSettings,
    choose_move,
    uniform_evaluator,
    visit_policy,
)
from tengen.engine.mcts.tree import EXPANDED

TTT = make_game("tictactoe")
C4 = make_game("connect4")


def play_text(game, moves):
    state = game.initial_state()
    history = []
    for m in moves:
        history.append(state.copy())
        game.play(state, game.text_to_action(m))
    return state, history


def path_from_root(tree, g, node):
    """The actions from game g's root down to ``node``."""
    path = []
    while tree.parent[g, node] >= 0:
        path.append(int(tree.parent_action[g, node]))
        node = int(tree.parent[g, node])
    return path[::-1]


def eye_at_a1():
    """5x5 Go, black to move; black's A2 and B1 make A1 an eye: legal for black (it
    connects), suicide for white."""
    go = make_game("go", size=5)
    state, _ = play_text(go, ["A2", "E5", "B1", "E4"])
    return go, state, go.text_to_action("A1")


def fixed_evaluator(game, seed=0):
    """A deterministic evaluator whose output depends only on the planes."""

    def evaluate(planes):
        flat = planes.reshape(len(planes), -1).astype(np.float64)
        weights = np.random.default_rng(seed).normal(size=(flat.shape[1], game.num_actions + 1))
        out = flat @ weights / 4.0
        logits = out[:, :-1]
        policy = np.exp(logits - logits.max(axis=1, keepdims=True))
        policy /= policy.sum(axis=1, keepdims=True)
        return policy.astype(np.float32), np.tanh(out[:, -1]).astype(np.float32)

    return evaluate


def reference_visits(game, state, evaluate, simulations, c_puct, fpu_reduction):
    """A plain recursive PUCT with one leaf at a time, written for reading, not speed."""

    class Node:
        def __init__(self, state, history):
            self.state, self.history = state, history
            self.children, self.n, self.w = {}, {}, {}
            self.prior, self.visits, self.value_sum = None, 0, 0.0

    def evaluate_node(node):
        if game.is_terminal(node.state):
            o = game.outcome(node.state)
            return o if game.to_play(node.state) == 0 else -o
        if node.prior is None:
            policy, value = evaluate(game.encode(node.state, node.history)[None].astype(np.uint8))
            legal = game.legal_mask(node.state)
            p = np.where(legal, policy[0], 0.0)
            node.prior = p / p.sum()
            return float(value[0])
        return None

    def simulate(node):
        v = evaluate_node(node)
        if v is None:
            total = sum(node.n.values())
            visited = sum(node.prior[a] for a, n in node.n.items() if n > 0)
            fpu = node.value_sum / node.visits - fpu_reduction * math.sqrt(visited)
            best, best_score = None, -math.inf
            for a in np.flatnonzero(node.prior > 0):
                n = node.n.get(a, 0)
                q = node.w[a] / n if n else fpu
                score = q + c_puct * node.prior[a] * math.sqrt(max(total, 1)) / (1 + n)
                if score > best_score:
                    best, best_score = a, score
            if best not in node.children:
                child_state = node.state.copy()
                game.play(child_state, int(best))
                node.children[best] = Node(child_state, node.history + [node.state])
            v = -simulate(node.children[best])
            node.n[best] = node.n.get(best, 0) + 1
            node.w[best] = node.w.get(best, 0.0) + v
        node.visits += 1
        node.value_sum += v
        return v

    root = Node(state, [])
    for _ in range(simulations):
        simulate(root)
    visits = np.zeros(game.num_actions, dtype=np.float32)
    for a, n in root.n.items():
        visits[a] = n
    return visits


@pytest.mark.parametrize("game, moves", [(TTT, ["5"]), (C4, ["4", "4", "3"]), (make_game("go", size=5), [])])
def test_one_leaf_per_round_matches_the_reference_search(game, moves):
    state, _ = play_text(game, moves)
    evaluate = fixed_evaluator(game)
    search = Search(game, games=1,
                    settings=SearchSettings(simulations=120, leaves_per_round=1, c_puct=1.5, fpu_reduction=0.2))
    search.reset(0, state)
    search.run(evaluate)
    expected = reference_visits(game, state, evaluate, 120, 1.5, 0.2)
    assert np.array_equal(search.root_visits(0), expected)


def test_puct_numbers_by_hand():
    # Root: priors 0.6 / 0.3 / 0.1 over the three legal moves, value 0.2 for the root's
    # mover; each child evaluates to 0.5 for its own mover, i.e. -0.5 for the root's.
    state, _ = play_text(TTT, ["1", "2", "3", "4", "5", "6"])  # X to move; 7, 8, 9 free

    def evaluate(planes):
        n = len(planes)
        policy = np.zeros((n, 9), np.float32)
        policy[:, [6, 7, 8]] = [0.6, 0.3, 0.1]
        root = planes[:, 0, 0, 2] == 1  # X to move: only the root
        return policy, np.where(root, 0.2, 0.5).astype(np.float32)

    search = Search(TTT, games=1,
                    settings=SearchSettings(simulations=3, leaves_per_round=1, c_puct=1.0, fpu_reduction=0.25))
    search.reset(0, state)
    search.run(evaluate)
    # Sim 1 evaluates the root. Sim 2: all unvisited, none of the prior visited, so
    # Q = fpu = 0.2 - 0.25 * sqrt(0) = 0.2 for each; U = 1.0 * P * sqrt(max(0, 1)) / 1
    # -> 0.6, 0.3, 0.1: cell 7 wins (0.8).
    # X holds 1, 3, 5, so cell 7 makes 3-5-7 and ends the game: exact value +1 for the
    # root's mover, no evaluation. Sim 3: root value (0.2 + 1) / 2 = 0.6, 0.6 of the
    # prior visited: fpu = 0.6 - 0.25 * sqrt(0.6) = 0.406; cell 7: Q = 1, U = 0.6 *
    # sqrt(1) / 2 = 0.3 -> 1.3; cell 8: 0.406 + 0.3 = 0.706.
    assert search.root_visits(0).tolist() == [0, 0, 0, 0, 0, 0, 2, 0, 0]
    assert search.root_q(0)[6] == 1.0
    assert search.root_value(0) == pytest.approx((0.2 + 1 + 1) / 3)


def test_a_losing_first_visit_does_not_keep_the_search_on_it():
    # Empty 5x5 board, Black to move, every position valued 0, the pass a little
    # likelier than any point: passing loses (White passes back and wins on komi).
    # The first-play urgency must let the other moves be tried once the pass's -1
    # shows, though the pass is the first visited and drags the root's value down.
    go = make_game("go", size=5)

    def evaluate(planes):
        policy = np.full((len(planes), go.num_actions), 1.0, np.float32)
        policy[:, go.pass_action] = 1.5
        return policy / policy.sum(axis=1, keepdims=True), np.zeros(len(planes), np.float32)

    search = Search(go, games=1,
                    settings=SearchSettings(simulations=16, leaves_per_round=1, c_puct=1.5, fpu_reduction=0.25))
    search.reset(0, go.initial_state())
    search.run(evaluate)
    visits = search.root_visits(0)
    assert visits.sum() == 15 and visits[go.pass_action] <= 2


def test_terminal_leaves_are_exact_and_need_no_evaluation():
    state, _ = play_text(C4, ["4", "1", "4", "1", "4", "2"])  # X to move wins in column 4
    calls = []

    def evaluate(planes):
        calls.append(len(planes))
        return uniform_evaluator(7)(planes)

    search = Search(C4, games=1, settings=SearchSettings(simulations=200, leaves_per_round=4))
    search.reset(0, state)
    search.run(evaluate)
    visits = search.root_visits(0)
    assert np.argmax(visits) == 3 and search.root_q(0)[3] == 1.0
    assert sum(calls) < 200  # repeated visits of the won position cost no evaluation


def test_a_discounted_search_values_a_win_by_how_far_away_it_is():
    state, _ = play_text(C4, ["4", "1", "4", "1", "4", "2"])  # X to move wins in column 4
    for discount in (1.0, 0.9):
        search = Search(C4, games=1, settings=SearchSettings(simulations=200, leaves_per_round=4, discount=discount))
        search.reset(0, state)
        search.run(uniform_evaluator(7))
        # the win one ply away, on every visit; the root's other moves hold the
        # uniform evaluator's 0 and then, two plies on, X's win
        assert search.root_q(0)[3] == pytest.approx(discount, abs=1e-6)
    with pytest.raises(ValueError, match="discount must be in"):
        Search(C4, games=1, settings=SearchSettings(simulations=8, discount=0.0))


def test_virtual_loss_spreads_the_leaves_of_a_round():
    search = Search(C4, games=1, settings=SearchSettings(simulations=100, leaves_per_round=6))
    evaluate = uniform_evaluator(7)
    search.apply(*evaluate(search.gather()))  # the root
    planes = search.gather()
    assert len(planes) == 6
    assert len({p.tobytes() for p in planes}) == 6  # six different positions


def test_batch_rows_are_independent():
    evaluate = fixed_evaluator(C4, seed=3)
    openings = [[], ["4"], ["1", "7"], ["4", "4", "4"]]
    together = Search(C4, games=4, settings=SearchSettings(simulations=80, leaves_per_round=4))
    for g, moves in enumerate(openings):
        together.reset(g, play_text(C4, moves)[0])
    together.run(evaluate)
    for g, moves in enumerate(openings):
        alone = Search(C4, games=1, settings=SearchSettings(simulations=80, leaves_per_round=4))
        alone.reset(0, play_text(C4, moves)[0])
        alone.run(evaluate)
        assert np.array_equal(alone.root_visits(0), together.root_visits(g))


def test_subtree_is_reused_after_a_move():
    search = Search(C4, games=1, settings=SearchSettings(simulations=300, leaves_per_round=4))
    search.run(uniform_evaluator(7))
    tree = search.tree
    child = tree.children[0, 0, 3]
    visits_below = tree.edge_n[0, child].copy()
    search.advance(0, 3)
    assert tree.node_n[0, 0] == visits_below.sum() + 1
    assert np.array_equal(search.root_visits(0), visits_below)
    assert C4.move_number(search.root_state(0)) == 1
    search.run(uniform_evaluator(7))  # and the search goes on from there
    assert search.tree.node_n[0, 0] == 300


def test_search_planes_match_the_game_encoder_with_history():
    go = make_game("go", size=5, history_length=4)
    state, history = play_text(go, ["C3", "C4", "D3", "pass", "B2"])
    search = Search(go, games=1, settings=SearchSettings(simulations=40, leaves_per_round=8))
    search.reset(0, state, history)
    evaluate = fixed_evaluator(go, seed=1)
    checked = 0
    for _ in range(4):
        planes = search.gather()
        for b in range(len(planes)):
            g, node = int(search._leaf_game[b]), int(search._leaf_node[b])
            leaf, leaf_history = state.copy(), list(history)
            for a in path_from_root(search.tree, g, node):
                leaf_history.append(leaf.copy())
                go.play(leaf, a)
            assert np.array_equal(planes[b], go.encode(leaf, leaf_history))
            checked += 1
        search.apply(*evaluate(planes))
    assert checked > 20


def test_dirichlet_noise_keeps_a_distribution_over_legal_moves():
    search = Search(C4, games=1, settings=SearchSettings(simulations=10))
    search.reset(0, play_text(C4, ["1"] * 6)[0])  # column 1 is full
    search.run(uniform_evaluator(7), simulations=1)
    search.add_root_noise(0, np.random.default_rng(0), alpha=1.0, fraction=0.25)
    prior = search.root_prior(0)
    assert prior[0] == 0 and prior.sum() == pytest.approx(1.0) and len(set(prior[1:])) == 6


def test_move_rules_keep_the_search_off_a_players_moves_until_their_depth():
    # X (player 0) may not open in a corner; O may not answer in the centre, for two
    # plies: the rules are KataGo's avoidMoves, counted from the root.
    corners, centre = np.zeros(9, np.bool_), np.zeros(9, np.bool_)
    corners[[0, 2, 6, 8]] = True
    centre[4] = True
    search = Search(TTT, games=2, settings=SearchSettings(simulations=300))
    search.reset(0)
    search.restrict(0, [MoveRule(0, corners, 1), MoveRule(1, centre, 2)])
    search.reset(1)  # game 1 is searched without rules
    search.run(uniform_evaluator(9))
    assert search.root_visits(0)[[0, 2, 6, 8]].sum() == 0 and search.root_visits(0).sum() > 0
    assert search.root_visits(1)[[0, 2, 6, 8]].sum() > 0
    t = search.tree
    replies = [int(t.children[0, 0, a]) for a in (1, 3) if t.children[0, 0, a] >= 0]
    assert replies and all(t.edge_n[0, node, 4] == 0 and t.edge_n[0, node].sum() > 0 for node in replies)
    # three plies down, X's corners are open again (its rule held for one ply)
    deep = [int(c) for node in replies for c in t.children[0, node] if c >= 0 and t.edge_n[0, c].sum() > 0]
    assert any(t.edge_n[0, node, [0, 2, 6, 8]].sum() > 0 for node in deep)


def test_a_rule_that_forbids_every_move_leaves_the_moves_and_a_begun_search_refuses_rules():
    search = Search(TTT, games=1, settings=SearchSettings(simulations=20))
    search.reset(0)
    search.restrict(0, [MoveRule(0, np.ones(9, np.bool_), 1)])
    search.run(uniform_evaluator(9))
    assert (search.root_visits(0) > 0).sum() == 9
    with pytest.raises(RuntimeError, match="has begun"):
        search.restrict(0, [])
    with pytest.raises(RuntimeError, match="reset it instead"):
        search.reset(0)
        search.restrict(0, [MoveRule(0, np.ones(9, np.bool_), 1)])
        search.advance(0, 4)
    with pytest.raises(ValueError, match="bool\\[9\\]"):
        search.reset(0)
        search.restrict(0, [MoveRule(0, np.ones(4, np.bool_), 1)])


def test_a_flattened_root_prior_spreads_the_search_as_katagos_wide_root_noise():
    from tengen.play.search_player import SearchPlayer

    def peaked(planes):  # nearly all the policy on the centre; every position looks even
        policy = np.full((len(planes), 9), 0.01, np.float32)
        policy[:, 4] = 0.92
        return policy, np.zeros(len(planes), np.float32)

    search = Search(TTT, games=1, settings=SearchSettings(simulations=2))
    search.reset(0)
    search.run(peaked, simulations=1)
    search.sharpen_root_prior(0, 0.5)  # sqrt, renormalised: 0.92 ** 0.5 / (0.92 ** 0.5 + 8 * 0.1)
    assert search.root_prior(0)[4] == pytest.approx(0.959 / (0.959 + 0.8), abs=1e-3)
    player = SearchPlayer(peaked, search=SearchSettings(simulations=200), simulations=200)
    state = TTT.initial_state()
    plain = player.search(TTT, state)
    wide = player.search(TTT, state, root_policy_power=1 / (1 + 4 * 1.0))  # wideRootNoise 1
    spread = {name: sum(m.visits >= 10 for m in a.moves) for name, a in (("plain", plain), ("wide", wide))}
    assert spread["wide"] > spread["plain"] and wide.visits == plain.visits


def late_refutation_evaluator(a, b):
    """Tic-tac-toe values for X: opening ``a`` looks worth +0.6 until X's third stone,
    where every position is -0.8 (a refutation the search finds late); opening ``b``
    is a steady +0.3. The priors favour ``a``."""

    def evaluate(planes):
        policy = np.full((len(planes), 9), 0.02, np.float32)
        policy[:, a], policy[:, b] = 0.6, 0.26
        values = np.zeros(len(planes), np.float32)
        for i, p in enumerate(planes):
            x_to_move = p[0, 0, 2] == 1
            x = (p[..., 0] if x_to_move else p[..., 1]).reshape(-1)
            v = 0.0
            if x[a] and not x[b]:
                v = 0.6 if p[..., :2].sum() < 5 else -0.8
            elif x[b] and not x[a]:
                v = 0.3
            values[i] = v if x_to_move else -v
        return policy, values

    return evaluate


def test_the_lower_confidence_bound_plays_the_better_move_that_has_fewer_visits():
    # Leela Zero's and KataGo's rule: after 200 visits the refuted opening still has the
    # most visits, the steady one the better value, surely enough to be played
    a, b = 0, 4
    moves = {}
    for name, settings in {"visits": SearchSettings(simulations=200, value_spread=True),
                           "lcb": SearchSettings(simulations=200, lcb_z=5.0),
                           "lcb, b too rare": SearchSettings(simulations=200, lcb_z=5.0, lcb_min_visit_share=0.9)
                           }.items():
        search = Search(TTT, games=1, settings=settings)
        search.reset(0)
        search.run(late_refutation_evaluator(a, b))
        n, q, lcb = search.root_visits(0), search.root_q(0), search.root_lcb(0)
        assert n[a] > n[b] and q[b] > q[a]
        moves[name] = search.best_move(0)
    assert moves == {"visits": a, "lcb": b, "lcb, b too rare": a}
    assert lcb[b] > lcb[a] and lcb[b] < q[b]  # the bound lies below the value
    assert np.isinf(lcb[n == 0]).all() and np.isfinite(lcb[n > 0]).all()
    # GTP, analysis and the play page play and list the same move first
    from tengen.play.search_player import SearchPlayer

    player = SearchPlayer(late_refutation_evaluator(a, b), search=SearchSettings(simulations=200, lcb_z=5.0))
    analysis = player.search(TTT, TTT.initial_state())
    assert analysis.best == b and analysis.moves[0].lcb > analysis.moves[1].lcb
    # and so do gating and tengen match past their opening temperature (a match's player)
    from tengen.play.players import MctsPlayer

    for settings, move in [(SearchSettings(simulations=200, lcb_z=5.0), b), (SearchSettings(simulations=200), a)]:
        match_player = MctsPlayer(TTT, late_refutation_evaluator(a, b), slots=1, search=settings)
        match_player.new_game(0, TTT.initial_state())
        assert match_player.choose([0], [TTT.initial_state()], np.random.default_rng(0)) == [move]


def test_self_play_keeps_no_spread_of_values_and_play_does():
    # the sum of squared values costs a write per ply of every backup: self-play, whose
    # moves follow the visits, and matches without the bound do without it
    for settings, kept in [(SearchSettings(simulations=50), False), (SearchSettings(simulations=50).for_play(), False),
                           (SearchSettings(simulations=50, lcb_z=5.0).for_selfplay(), False),
                           (SearchSettings(simulations=50, value_spread=True), True),
                           (SearchSettings(simulations=50, lcb_z=1.0), True)]:
        search = Search(TTT, games=1, settings=settings)
        search.reset(0)
        search.run(late_refutation_evaluator(0, 4))
        assert bool(search.tree.node_w2[0].any()) == kept
        if not kept:
            with pytest.raises(ValueError, match="value_spread"):
                search.root_lcb(0)
    # go9 plays by the bound in gating and matches; its self-play searches do not pay for it
    from tengen.run.config import load_config

    go9 = load_config("go9")
    assert go9.mcts.lcb_z > 0 and go9.gating_options().player.search.keeps_spread
    assert not go9.selfplay_settings().search.keeps_spread


def test_forced_playouts_give_every_visited_root_move_sqrt_k_p_n_visits():
    def centre_wins(planes):  # X's centre opening is worth +0.5 to X, every other -0.5
        policy = np.full((len(planes), 9), 0.03, np.float32)
        policy[:, 4] = 0.76
        x_to_move = planes[:, 0, 0, 2] == 1
        x_centre = np.where(x_to_move, planes[:, 1, 1, 0], planes[:, 1, 1, 1]) == 1
        value_for_x = np.where(x_centre, 0.5, -0.5)
        return policy, np.where(x_to_move, value_for_x, -value_for_x).astype(np.float32)

    short = {}
    for k in (0.0, 2.0):
        search = Search(TTT, games=1, settings=SearchSettings(simulations=300, leaves_per_round=1))
        search.reset(0)
        search.force_playouts(0, k)
        search.run(centre_wins)
        n, p = search.root_visits(0), search.root_prior(0)
        visited = n > 0
        short[k] = int((n[visited] + 1 < np.sqrt(2.0 * p[visited] * n.sum())).sum())
    assert short == {0.0: short[0.0], 2.0: 0} and short[0.0] > 0


def test_policy_target_pruning_takes_back_the_forced_visits_by_hand():
    search = Search(TTT, games=1, settings=SearchSettings(simulations=200, c_puct=1.25))
    search.reset(0)
    search.run(uniform_evaluator(9), simulations=1)  # the root, expanded
    t = search.tree
    t.prior[0, 0] = -1.0
    for a, (p, n, q) in enumerate([(0.5, 60, 0.2), (0.3, 25, 0.1), (0.2, 15, -0.1), (0.05, 2, -0.5)]):
        t.prior[0, 0, a], t.edge_n[0, 0, a], t.edge_w[0, 0, a] = p, n, n * q
    assert search.pruned_visits(0).tolist() == [60, 25, 15, 2, 0, 0, 0, 0, 0]  # not forced: nothing to prune
    search.force_playouts(0, 2.0)
    # N = 102, c = 1.25 sqrt(102) = 12.624; the most visited's PUCT: 0.2 + c 0.5 / 61 = 0.30348
    # move 1: forced sqrt(2 0.3 102) = 7.82; its PUCT reaches 0.30348 at n = c 0.3 / 0.20348 - 1 = 17.6,
    #   so it keeps 18 of 25 (25 - 7.82 would put it above the best)
    # move 2: forced sqrt(2 0.2 102) = 6.39, 15 - 6.39 = 8.61 (its PUCT stays below: it needs 5.3)
    # move 3: forced sqrt(2 0.05 102) = 3.19 > 2 visits: none left, dropped
    assert search.pruned_visits(0).tolist() == pytest.approx([60, 18, 8.6125, 0, 0, 0, 0, 0, 0], abs=1e-3)


def test_pure_mcts_with_rollouts_finds_the_block():
    state, _ = play_text(C4, ["4", "1", "4", "1", "4"])  # O must block column 4
    search = Search(C4, games=1,
                    settings=SearchSettings(simulations=400, leaves_per_round=1, c_puct=2.0, formula="uct",
                                            keep_leaf_states=True))
    search.reset(0, state)
    RolloutEvaluator(C4, rollouts=1, seed=0).run(search)
    assert int(np.argmax(search.root_visits(0))) == 3


def test_move_choice_from_visits():
    visits = np.array([10, 30, 0, 60], dtype=np.float32)
    rng = np.random.default_rng(0)
    assert choose_move(visits, rng, temperature=0) == 3
    picks = np.bincount([choose_move(visits, rng, temperature=1.0) for _ in range(4000)], minlength=4)
    assert picks[2] == 0 and abs(picks[3] / 4000 - 0.6) < 0.03
    assert visit_policy(visits).tolist() == pytest.approx([0.1, 0.3, 0.0, 0.6])


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError):
        Search(C4, games=0, settings=SearchSettings(simulations=10))
    search = Search(C4, games=1, settings=SearchSettings(simulations=10))
    with pytest.raises(ValueError, match="not legal"):
        search.reset(0, play_text(C4, ["1"] * 6)[0])
        search.advance(0, 0)
    planes = search.gather()
    with pytest.raises(ValueError, match="expected policy"):
        search.apply(np.zeros((len(planes), 3)), np.zeros(len(planes)))


def test_a_round_walks_at_most_leaves_per_round_times_per_game():
    # Late in a tic-tac-toe game most walks end on finished positions. They count as
    # walks: otherwise, while one leaf waits for its evaluation (virtual loss on its
    # branch), the round would pour hundreds of visits into the other branches.
    state, _ = play_text(TTT, ["9", "7", "3", "6", "8"])  # O to move; only 4 wins
    search = Search(TTT, games=1, settings=SearchSettings(simulations=800, leaves_per_round=4))
    search.reset(0, state)
    evaluate = uniform_evaluator(9)
    visits = []
    while True:
        planes = search.gather()
        if len(planes) == 0 and not search.terminal_backups:
            break
        visits.append(search.tree.node_n[0, 0] + search.tree.in_flight[0])
        search.apply(*evaluate(planes))
    assert max(np.diff(visits)) <= 4
    assert int(np.argmax(search.root_visits(0))) == 3


def test_go_search_never_expands_an_illegal_move_and_keeps_priors_over_legal_ones():
    # Inner nodes list every empty point and check a move only when a walk first
    # takes it, so at white's nodes A1 must be tried, found illegal and dropped.
    go, state, a1 = eye_at_a1()
    search = Search(go, games=1, settings=SearchSettings(simulations=3000, leaves_per_round=8))
    search.reset(0, state)
    search.run(uniform_evaluator(go.num_actions))
    tree = search.tree
    dropped = 0
    for node in range(1, int(tree.num_nodes[0])):
        position = state.copy()
        for a in path_from_root(tree, 0, node):
            assert go.is_legal(position, a), f"illegal {go.action_to_text(a)} expanded"
            go.play(position, a)
        prior = tree.prior[0, node]
        if prior[a1] == -1.0 and go.to_play(position) == 1:
            dropped += 1
            assert prior[prior >= 0].sum() == pytest.approx(1.0, abs=1e-5)
    assert dropped > 0
    assert search.root_prior(0)[a1] > 0  # A1 is legal for black at the root


def test_a_new_root_lists_exactly_the_legal_moves():
    # A short search has not tried white's A1 below black's moves, yet once a move is
    # played the root must list only legal moves: root noise, the policy target and
    # users read them.
    go, state, a1 = eye_at_a1()
    search = Search(go, games=1, settings=SearchSettings(simulations=60, leaves_per_round=4))
    search.reset(0, state)
    search.run(uniform_evaluator(go.num_actions))
    search.advance(0, int(np.argmax(search.root_visits(0))))
    legal = go.legal_mask(search.root_state(0))
    assert not legal[a1]
    assert np.array_equal(search.tree.prior[0, 0] >= 0, legal)
    assert search.root_prior(0).sum() == pytest.approx(1.0, abs=1e-5)


def test_a_search_that_avoids_own_eyes_lists_no_eye_and_the_pass_only_when_nothing_else_is_left():
    # Black to move. Black's B4 and D4 and White's B1 are eyes (Black's B1 is suicide);
    # D1 and E1 are open, so Black must play on and may not pass. At every node of the
    # tree, the mover's own eyes are not listed and the pass is listed only where no
    # other legal move is left, though the evaluator would pass at every one of them.
    go = make_game("go", size=5)
    board = np.array([[".XO".index(c) for c in row.split()] for row in """
        X X X X X
        X . X . X
        X X X X X
        O O O O O
        O . O . .""".strip().splitlines()], dtype=np.int8)
    state = go.state_from_board(board, to_play=0)
    search = Search(go, games=1, settings=SearchSettings(simulations=400, leaves_per_round=4, avoid_own_eyes=True))
    search.reset(0, state)
    search.run(pass_loving_evaluator(go))
    assert np.flatnonzero(search.root_prior(0)).tolist() == [go.text_to_action("D1"), go.text_to_action("E1")]
    tree, nodes = search.tree, {True: 0, False: 0}
    for node in np.flatnonzero(tree.status[0, : tree.num_nodes[0]] == EXPANDED):
        position = state.copy()
        for a in path_from_root(tree, 0, node):
            go.play(position, a)
        listed = tree.prior[0, node] >= 0  # inner nodes may list points still to be found illegal
        eyes, others = own_eyes_and_other_moves(go, position)
        assert not listed[eyes].any() and listed[others].all(), go.render(position)
        assert listed[go.pass_action] == (len(others) == 0), go.render(position)
        nodes[len(others) == 0] += 1
    assert nodes[True] > 0 and nodes[False] > 0
    # Black D1 (in atari), White takes it at E1: Black has nothing but B4 and D4 left,
    # and passes at the root too.
    after = state.copy()
    for vertex in ("D1", "E1"):
        go.play(after, go.text_to_action(vertex))
    search.reset(0, after)
    search.run(pass_loving_evaluator(go))
    assert np.flatnonzero(search.root_prior(0)).tolist() == [go.pass_action]


def test_compiled_kernels_are_cached_by_the_contents_of_all_engine_sources(tmp_path):
    # Numba alone would keep a caller's compiled copy of a kernel from another file
    # after that file changed; the engine names its cache folder by all its sources.
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    shutil.copytree(Path(__file__).resolve().parent.parent / "engine", tmp_path / "engine",
                    ignore=shutil.ignore_patterns("__pycache__"))

    def cache_dir():
        code = "import engine, numba.core.config as c; print(c.CACHE_DIR)"
        env = {"PYTHONPATH": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "cache"), "PATH": ""}
        return subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, check=True,
                              capture_output=True, text=True).stdout.strip()

    before = cache_dir()
    assert before.startswith(str(tmp_path / "cache")) and cache_dir() == before
    with open(tmp_path / "engine" / "games" / "mnk.py", "a") as kernel_file:
        kernel_file.write("\n# a changed rule kernel\n")
    assert cache_dir() != before
