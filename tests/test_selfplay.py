"""Self-play records: what a learner receives from G concurrent games."""

import numpy as np
from positions import fixed_evaluator, own_eyes_and_other_moves, pass_loving_evaluator

from tengen.engine.games import make_game
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.engine.selfplay import MIN_RESIGN_CHECKS, SelfPlay, SelfPlaySettings

C4 = make_game("connect4")
TTT = make_game("tictactoe")


def replay(game, moves):
    state, history, planes = game.initial_state(), [], []
    for a in moves:
        planes.append(game.encode(state, history))
        history.append(state.copy())
        game.play(state, int(a))
    return state, planes


def test_records_hold_consistent_targets():
    selfplay = SelfPlay(C4, games=8, seed=0, model_version=7,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=32)))
    records = selfplay.play(uniform_evaluator(7), games=12)
    assert len(records) == 12
    for r in records:
        final, planes = replay(C4, r.moves)  # the moves are legal and end the game
        assert C4.is_terminal(final) and C4.outcome(final) == r.outcome
        assert r.model_version == 7 and r.game == "connect4"
        assert len(r.planes) == len(r.policy) == len(r.value) == r.length
        assert np.array_equal(r.planes, np.stack(planes))
        assert np.allclose(r.policy.sum(axis=1), 1.0)
        movers = np.arange(r.length) % 2  # Connect Four alternates from player 0
        assert np.array_equal(r.value, np.where(movers == 0, r.outcome, -r.outcome))
        # The policy target only covers legal moves.
        for p, x in zip(r.policy, planes, strict=True):
            full_columns = (x[0, :, 0] + x[0, :, 1]) > 0
            assert not p[full_columns].any()


def test_a_seed_replays_the_same_games():
    settings = SelfPlaySettings(search=SearchSettings(simulations=24))
    runs = [SelfPlay(TTT, games=4, seed=5, settings=settings).play(uniform_evaluator(9), games=6) for _ in range(2)]
    assert [r.moves.tolist() for r in runs[0]] == [r.moves.tolist() for r in runs[1]]


def test_playout_cap_randomisation_records_only_full_searches():
    selfplay = SelfPlay(C4, games=8, seed=1,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=48), full_search_fraction=0.25,
                                                  cheap_simulations=8))
    records = selfplay.play(uniform_evaluator(7), games=16)
    moves = sum(r.length for r in records)
    recorded = sum(len(r.value) for r in records)
    assert 0.1 * moves < recorded < 0.45 * moves


def test_forced_playouts_explore_full_searches_and_their_targets_stay_distributions():
    def play(k):
        settings = SelfPlaySettings(search=SearchSettings(simulations=48), full_search_fraction=0.5,
                                    cheap_simulations=8, forced_playouts_k=k)
        return SelfPlay(C4, games=8, seed=3, settings=settings).play(fixed_evaluator(C4), games=12)

    forced, plain = play(2.0), play(0.0)
    for r in forced:
        assert np.allclose(r.policy.sum(axis=1), 1.0) and (r.policy >= 0).all()
    # the same seed, games and network: the forced searches (and their pruned targets) differ
    assert [r.moves.tolist() for r in forced] != [r.moves.tolist() for r in plain]


def test_each_move_keeps_what_its_search_saw():
    selfplay = SelfPlay(C4, games=8, seed=1,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=48), full_search_fraction=0.25,
                                                  cheap_simulations=8))
    for r in selfplay.play(uniform_evaluator(7), games=8):
        assert r.search_value.shape == r.search_visits.shape == r.full_search.shape == (r.length,)
        assert r.full_search.dtype == np.bool_ and r.full_search.sum() == len(r.value)  # full ones are recorded
        # a move is played once its root has the visits its search was given (a kept subtree may hold more)
        assert (r.search_visits[r.full_search] >= 48).all() and (r.search_visits[~r.full_search] >= 8).all()
        assert (np.abs(r.search_value) <= 1).all()


def test_the_winning_move_is_chosen_with_a_winning_value():
    # Tic-tac-toe with 64 simulations: the move that completes a line backs up +1 on
    # every visit, so the root's value for its mover is positive when it is played.
    settings = SelfPlaySettings(search=SearchSettings(simulations=64))
    records = SelfPlay(TTT, games=4, seed=3, settings=settings).play(uniform_evaluator(9), games=8)
    decided = [r for r in records if r.outcome != 0]
    assert decided
    for r in decided:
        assert r.search_value[-1] > 0.5, r.search_value


def test_discounted_value_targets_shrink_with_the_moves_left():
    # MuZero's discount per ply: a position k moves before the end is worth
    # discount ** k of the result, as the search backs it up.
    selfplay = SelfPlay(TTT, games=4, seed=2,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=32, discount=0.9),
                                                  full_search_fraction=0.5, cheap_simulations=8))
    records = selfplay.play(uniform_evaluator(9), games=12)
    assert any(r.outcome != 0 for r in records)
    for r in records:
        plies = np.flatnonzero(r.full_search)
        movers = plies % 2  # tic-tac-toe alternates from player 0
        expected = np.where(movers == 0, r.outcome, -r.outcome) * 0.9 ** (r.length - plies)
        assert np.allclose(r.value, expected)
    last_moves = [r for r in records if r.outcome != 0 and r.full_search[-1]]
    assert last_moves and all(abs(r.value[-1]) == np.float32(0.9) for r in last_moves)


def test_resignation_and_the_games_that_may_not_resign():
    # With a uniform evaluator the root value is 0 until a forced loss shows up; a
    # threshold just below 0 makes resignations common.
    selfplay = SelfPlay(C4, games=8, seed=2,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=64), resign_threshold=-0.3,
                                                  no_resign_fraction=0.5, resign_max_false_positives=1.0))
    records = selfplay.play(uniform_evaluator(7), games=30)
    resigned = [r for r in records if r.resigned]
    assert resigned, "some games should resign"
    for r in resigned:
        final, _ = replay(C4, r.moves)
        assert not C4.is_terminal(final)  # it stopped before the end
        loser = len(r.moves) % 2  # the player to move resigned
        assert r.outcome == (-1.0 if loser == 0 else 1.0)
    assert all(r.would_resign is None for r in resigned)


def test_resigning_waits_until_played_out_games_show_it_is_safe():
    # Tic-tac-toe without temperature: a uniform evaluator's root value falls below
    # -0.5 only when the search sees a forced loss, so would-be resigners lose, and
    # after MIN_RESIGN_CHECKS played-out games resigning starts.
    selfplay = SelfPlay(TTT, games=8, seed=2,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=128), resign_threshold=-0.5,
                                                  no_resign_fraction=0.1, temperature_moves=0))
    records = selfplay.play(uniform_evaluator(9), games=100)
    first = next(i for i, r in enumerate(records) if r.resigned)
    checked = [r for r in records[:first] if r.would_resign is not None]
    assert len(checked) >= MIN_RESIGN_CHECKS
    assert all(r.outcome == (-1.0 if r.would_resign == 0 else 1.0) for r in checked)
    assert selfplay.resigning


def test_resigning_stays_off_when_would_be_resigners_go_on_to_win():
    # An evaluator sure that player 0 loses every position: player 0 would resign at
    # once, yet played out, tic-tac-toe's first player mostly wins or draws; no game
    # may resign.
    def gloomy_for_player_0(planes):
        policy, _ = uniform_evaluator(9)(planes)
        return policy, np.where(TTT.movers(planes) == 0, -0.95, 0.95).astype(np.float32)

    selfplay = SelfPlay(TTT, games=8, seed=4,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=16), resign_threshold=-0.9,
                                                  no_resign_fraction=0.0))
    records = selfplay.play(gloomy_for_player_0, games=40)
    assert all(not r.resigned and r.would_resign is not None for r in records)
    assert not selfplay.resigning
    assert len(selfplay.resign_checks) == 40 and sum(selfplay.resign_checks) > 0.05 * 40


def test_go_self_play_never_samples_a_pass_it_did_not_prefer():
    # In the temperature moves a pass is drawn only when it has more visits than any
    # other move: a uniform evaluator spreads 16 visits over 26 moves, so no game
    # passes in its first moves.
    go = make_game("go", size=5, max_moves=40)
    records = SelfPlay(go, games=8, seed=6,
                       settings=SelfPlaySettings(search=SearchSettings(simulations=16), temperature_moves=20)).play(
        uniform_evaluator(go.num_actions), games=16)
    for r in records:
        assert go.pass_action not in r.moves[:10].tolist()


def test_go_self_play_that_avoids_own_eyes_plays_on_until_nothing_else_is_left():
    # A search that loves to pass ends its games in two or three moves, a pass and a
    # pass back. With avoid_own_eyes it plays on: no move and no policy target fills
    # the mover's own eye, and it passes (or gives the pass a share of a target) only
    # where no other legal move is left.
    go = make_game("go", size=5)
    free = SelfPlay(go, games=4, seed=1,
                    settings=SelfPlaySettings(search=SearchSettings(simulations=16), temperature_moves=0)).play(
        pass_loving_evaluator(go), games=4)
    assert all(r.length <= 3 for r in free)
    settled = SelfPlay(go, games=4, seed=1,
                       settings=SelfPlaySettings(search=SearchSettings(simulations=16, avoid_own_eyes=True),
                                                 temperature_moves=0)).play(
        pass_loving_evaluator(go), games=8)
    passes = 0
    for r in settled:
        state = go.initial_state()
        for a, policy in zip(r.moves, r.policy, strict=True):
            eyes, others = own_eyes_and_other_moves(go, state)
            assert a not in eyes and not policy[eyes].any()
            if len(others):
                assert a != go.pass_action and policy[go.pass_action] == 0
            passes += a == go.pass_action
            go.play(state, int(a))
        assert go.is_terminal(state)
    assert passes > 0 and np.mean([r.length for r in settled]) > 20


def test_constant_temperature_schedule_still_plays_legal_games():
    selfplay = SelfPlay(TTT, games=4, seed=3,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=16),
                                                  temperature_schedule="constant", temperature=0.5))
    records = selfplay.play(uniform_evaluator(9), games=4)
    assert all(TTT.is_terminal(replay(TTT, r.moves)[0]) for r in records)


def test_go_self_play_with_history_planes():
    go = make_game("go", size=5, max_moves=30)
    selfplay = SelfPlay(go, games=4, seed=4, settings=SelfPlaySettings(search=SearchSettings(simulations=16)))
    records = selfplay.play(uniform_evaluator(go.num_actions), games=4)
    for r in records:
        final, planes = replay(go, r.moves)
        assert go.is_terminal(final)
        assert np.array_equal(r.planes, np.stack(planes)) and r.planes.shape[1:] == (5, 5, 17)


def test_forked_games_branch_off_a_finished_game_with_one_random_move():
    selfplay = SelfPlay(C4, games=4, seed=6,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=16), fork_fraction=0.6))
    records = selfplay.play(uniform_evaluator(7), games=40)
    forked = [r for r in records if not r.full_search.all()]
    assert 8 <= len(forked) < len(records)
    for i, r in enumerate(records):
        final, planes = replay(C4, r.moves)
        assert C4.is_terminal(final) and C4.outcome(final) == r.outcome
        # only the fork's own moves are training positions, with their own game's result
        start = int(np.argmax(r.full_search))
        assert not r.full_search[:start].any() and r.full_search[start:].all()
        assert np.array_equal(r.planes, np.stack(planes[start:]))
        movers = np.arange(start, r.length) % 2
        assert np.array_equal(r.value, np.where(movers == 0, r.outcome, -r.outcome))
        if start == 0:
            continue
        # it branched off an earlier game one move before its first search, and the
        # moves it took from there carry that game's search values
        branched = start - 1
        sources = [s for s in records[:i] if s.length > branched
                   and np.array_equal(s.moves[:branched], r.moves[:branched])
                   and np.array_equal(s.search_value[:start], r.search_value[:start])]
        assert sources, f"game {i} branched off no earlier game"


def test_forked_go_games_keep_the_history_planes():
    go = make_game("go", size=5, max_moves=30)
    selfplay = SelfPlay(go, games=4, seed=4,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=16), fork_fraction=0.6))
    records = selfplay.play(uniform_evaluator(go.num_actions), games=16)
    assert any(not r.full_search[0] for r in records)
    for r in records:
        start = int(np.argmax(r.full_search))
        final, planes = replay(go, r.moves)
        assert go.is_terminal(final)
        assert np.array_equal(r.planes, np.stack(planes[start:]))
        assert go.pass_action not in r.moves[start - 1: start]  # the random move is a pass only when forced


def test_gumbel_self_play_records_the_improved_policy_and_plays_the_survivor():
    evaluate = fixed_evaluator(C4, seed=1)
    selfplay = SelfPlay(C4, games=4, seed=3,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=16, search="gumbel",
                                                                        gumbel_considered=4)))
    records = selfplay.play(evaluate, games=4)
    for r in records:
        final, planes = replay(C4, r.moves)
        assert C4.is_terminal(final) and C4.outcome(final) == r.outcome
        assert len(r.policy) == r.length and np.allclose(r.policy.sum(axis=1), 1.0)
        for p, x in zip(r.policy, planes, strict=True):
            full_columns = (x[0, :, 0] + x[0, :, 1]) > 0
            assert not p[full_columns].any()
    # The target is pi', not the visit shares: with m = 4 and 15 simulations below the
    # root the visits are multiples of 1/15 on at most 4 moves, pi' is positive on
    # every legal move.
    first = records[0].policy[0]
    assert (first > 0).sum() == 7


def test_gumbel_self_play_replays_from_its_seed():
    def games(seed):
        selfplay = SelfPlay(C4, games=3, seed=seed,
                            settings=SelfPlaySettings(search=SearchSettings(simulations=12, search="gumbel",
                                                                            leaves_per_round=4)))
        return selfplay.play(fixed_evaluator(C4, seed=2), games=5)

    first, again, other = games(9), games(9), games(10)
    assert [r.moves.tolist() for r in first] == [r.moves.tolist() for r in again]
    assert all(np.array_equal(a.policy, b.policy) for a, b in zip(first, again, strict=True))
    assert [r.moves.tolist() for r in first] != [r.moves.tolist() for r in other]


def test_gumbel_self_play_keeps_playout_caps():
    # 30% full searches (recorded, 16 simulations), the rest cheap (4, only a move):
    # each search draws its noise, and only the full ones become samples.
    selfplay = SelfPlay(C4, games=8, seed=0,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=16, search="gumbel"),
                                                  full_search_fraction=0.3, cheap_simulations=4))
    records = selfplay.play(uniform_evaluator(7), games=8)
    recorded = sum(len(r.policy) for r in records)
    played = sum(r.length for r in records)
    assert 0.15 * played < recorded < 0.45 * played
    assert selfplay.evaluations < played * 16
