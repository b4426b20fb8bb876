"""The search's solver (``solver=True``): positions proven inside the tree. Checked
against a negamax of tic-tac-toe that counts plies, and against Connect Four's
solved positions (play/data/connect4_positions.txt)."""

import functools

import numpy as np
import pytest

from tengen.engine.games import make_game
from tengen.engine.mcts import Search, SearchSettings, uniform_evaluator
from tengen.engine.mcts.tree import ROOT
from tengen.engine.selfplay import SelfPlay, SelfPlaySettings
from tengen.play.grading import read_positions

TTT = make_game("tictactoe")
C4 = make_game("connect4")
WIN = 100  # a win k plies away scores WIN - k, a loss -(WIN - k), a draw 0


def distance_score(state: np.ndarray) -> int:
    """Tic-tac-toe by negamax, for the player to move: the fastest win, or the slowest loss."""
    return _distance_score(state.tobytes())


@functools.cache
def _distance_score(key: bytes) -> int:
    state = np.frombuffer(key, dtype=np.int32)
    best = -WIN - 1
    for action in np.flatnonzero(TTT.legal_mask(state)):
        child = state.copy()
        TTT.play(child, int(action))
        best = max(best, _for_the_parent(child))
    return best


def _for_the_parent(child: np.ndarray) -> int:
    """A child's score seen from the player who moved into it, one ply further away."""
    if TTT.is_terminal(child):
        return 0 if TTT.outcome(child) == 0 else WIN - 1  # the mover just won
    score = distance_score(child)
    return 0 if score == 0 else (-(score - 1) if score > 0 else -score - 1)


def ttt_positions(stones: int, count: int, seed: int) -> list[np.ndarray]:
    """``count`` distinct unfinished positions with ``stones`` stones, by random play."""
    rng = np.random.default_rng(seed)
    found: dict[bytes, np.ndarray] = {}
    while len(found) < count:
        state = TTT.initial_state()
        for _ in range(stones):
            if TTT.is_terminal(state):
                break
            TTT.play(state, int(rng.choice(np.flatnonzero(TTT.legal_mask(state)))))
        else:
            if not TTT.is_terminal(state):
                found.setdefault(state.tobytes(), state)
    return list(found.values())


def solved_search(game, states, simulations):
    search = Search(game, games=len(states),
                    settings=SearchSettings(simulations=simulations, leaves_per_round=4, solver=True))
    for g, state in enumerate(states):
        search.reset(g, state)
    search.run(uniform_evaluator(game.num_actions))
    return search


def test_a_solved_search_plays_a_forced_win_the_draw_or_the_slowest_loss():
    # With no network to lean on (uniform priors, value 0), a search of 1,500
    # simulations proves every 4- and 5-stone tic-tac-toe position it is given.
    states = ttt_positions(4, 40, seed=1) + ttt_positions(5, 40, seed=2)
    search = solved_search(TTT, states, 1500)
    kinds = set()
    for g, state in enumerate(states):
        score = distance_score(state)
        assert search.root_proven(g)
        assert search.tree.terminal_value[g, ROOT] == np.sign(score)
        chosen = search.move_visits(g)
        assert np.count_nonzero(chosen) == 1  # the proof's move takes every visit
        child = state.copy()
        TTT.play(child, int(np.argmax(chosen)))
        played = _for_the_parent(child)
        plies = int(search.tree.proof_plies[g, ROOT])
        if score > 0:
            # a win, maybe not the fastest (the first proof ends the search), and
            # never said to be faster than it is
            assert played > 0 and WIN - plies <= score
        else:
            # a draw, or the slowest loss: every move was proven, so this is exact
            assert played == score and (score == 0 or WIN - plies == -score)
        kinds.add(int(np.sign(score)))
    assert kinds == {-1, 0, 1}

def test_a_proven_root_ends_its_search_early_at_its_exact_value():
    state = TTT.initial_state()
    for action in (0, 3, 1, 4):  # X to move: 2 wins at once
        TTT.play(state, action)
    search = solved_search(TTT, [state], 200)
    assert search.root_proven(0) and search.tree.proof_plies[0, ROOT] == 1
    assert search.tree.node_n[0, ROOT] == 200  # the visits still due were the exact value's
    assert search.root_value(0) > 0.9
    assert search.root_visits(0).sum() < 100  # fewer walks than simulations
    unsolved = Search(TTT, games=1, settings=SearchSettings(simulations=200, leaves_per_round=4))
    unsolved.reset(0, state)
    unsolved.run(uniform_evaluator(9))
    assert unsolved.root_visits(0).sum() == 199


def test_proofs_in_connect4_agree_with_the_solved_scores():
    positions = [p for p in read_positions() if p.stones >= 24]
    search = solved_search(C4, [p.state for p in positions], 800)
    proven = 0
    for g, position in enumerate(positions):
        if not search.root_proven(g):
            continue
        proven += 1
        assert search.tree.terminal_value[g, ROOT] == np.sign(position.best), position.moves
        # a proven win is a real forced win, so it is at best as fast as the solver's
        plies = int(search.tree.proof_plies[g, ROOT])
        if position.best > 0:
            stones_at_the_win = position.stones + plies
            assert (43 - stones_at_the_win + 1) // 2 <= position.best, position.moves
        column = int(np.argmax(search.move_visits(g)))
        assert np.sign(position.scores[column]) == np.sign(position.best), position.moves
    assert proven >= len(positions) // 3  # not a test of nothing


def test_moves_proven_lost_are_not_played_while_another_is_open():
    # O to move; X threatens 2 (0 1 _). Every O move but 2 loses at once; 2 is open.
    state = TTT.initial_state()
    for action in (0, 4, 1):
        TTT.play(state, action)
    search = solved_search(TTT, [state], 200)
    chosen = search.move_visits(0)
    assert np.argmax(chosen) == 2
    raw = search.root_visits(0)
    lost = [a for a in np.flatnonzero(raw) if a != 2 and search.tree.proven[0, search.tree.children[0, ROOT, a]]]
    assert lost and all(chosen[a] == 0 for a in lost)


def test_self_play_with_the_solver_finishes_its_games_and_targets_the_proof():
    selfplay = SelfPlay(TTT, games=8, seed=3,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=300, solver=True),
                                                  temperature_moves=2))
    records = selfplay.play(uniform_evaluator(9), 24)
    assert len(records) == 24
    # late positions are proven: their policy targets are one move
    last = [record.policy[-1] for record in records]
    assert sum(np.count_nonzero(p) == 1 for p in last) >= 20


def test_the_solver_is_for_puct():
    with pytest.raises(ValueError, match="solver needs search='puct'"):
        Search(C4, games=1, settings=SearchSettings(simulations=16, search="gumbel", solver=True))
