"""The perfect players: hand-made positions whose values can be checked by eye, and
the Connect Four solver against a slow, independent pure-Python minimax."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from tengen.engine.games.mnk import (
    HEADER,
    NO_WINNER,
    TO_PLAY,
    WINNER,
    connect4,
    play_in_place,
    play_sequence,
    tictactoe,
)
from tengen.engine.mcts import uniform_evaluator
from tengen.play.players import RandomPlayer
from tengen.play.solvers import (
    MAX_SCORE,
    MIN_SCORE,
    NO_SCORE,
    SolveBudgetExceeded,
    TranspositionTable,
    connect4_labelled_positions,
    connect4_move_scores,
    connect4_optimal_actions,
    connect4_score,
    connect4_solve,
    tictactoe_optimal_actions,
    tictactoe_value,
    tictactoe_values,
)

TTT = tictactoe()
C4 = connect4()


def board_text(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def ttt(cells: str) -> np.ndarray:
    """A tic-tac-toe state from moves as cell numbers 1-9, e.g. '1 5 9'."""
    return play_sequence(TTT, cells.split())


def c4(columns: str) -> np.ndarray:
    """A Connect Four state from moves as columns 1-7, e.g. '4 4 3'."""
    return play_sequence(C4, columns.split())


# -- tic-tac-toe ---------------------------------------------------------------------


def test_tictactoe_table_is_every_reachable_position():
    values = tictactoe_values()
    assert len(values) == 5478
    # The same count by walking the engine's own rules: an independent check of both.
    seen = set()
    stack = [TTT.initial_state()]
    while stack:
        state = stack.pop()
        board = tuple(int(cell) for cell in state[HEADER:])
        if board in seen:
            continue
        seen.add(board)
        if TTT.is_terminal(state):
            # The solver's value of a finished game is -1 for a line, 0 for a full board.
            assert values[board] == (0 if state[WINNER] == 2 else -1)
            continue
        for action in np.flatnonzero(TTT.legal_mask(state)):
            stack.append(TTT.next_state(state, int(action)))
    assert seen == set(values)


def test_tictactoe_empty_board_is_a_draw_and_every_first_move_keeps_it():
    empty = TTT.initial_state()
    assert tictactoe_value(empty) == 0
    assert tictactoe_optimal_actions(empty) == set(range(9))


def test_tictactoe_win_in_one():
    # X to move; X wins on 3 (cell index 2); anything else lets O win on 6 (index 5).
    state = ttt("1 4 2 5")
    assert TTT.render(state) == board_text("""
        X X .
        O O .
        . . .
    """)
    assert tictactoe_value(state) == 1
    assert tictactoe_optimal_actions(state) == {2}


def test_tictactoe_forced_block():
    # O to move must block 3 (index 2); the block then holds the draw.
    state = ttt("1 5 2")
    assert TTT.render(state) == board_text("""
        X X .
        . O .
        . . .
    """)
    assert tictactoe_value(state) == 0
    assert tictactoe_optimal_actions(state) == {2}


def test_tictactoe_corner_trap_needs_an_edge():
    # X in opposite corners, O in the centre: a corner reply loses to a fork, an edge
    # reply (indices 1, 3, 5, 7) forces X to block and holds the draw.
    state = ttt("1 5 9")
    assert TTT.render(state) == board_text("""
        X . .
        . O .
        . . X
    """)
    assert tictactoe_value(state) == 0
    assert tictactoe_optimal_actions(state) == {1, 3, 5, 7}


def test_tictactoe_finished_game():
    state = ttt("1 4 2 5 3")  # X completes the top row
    assert tictactoe_value(state) == -1  # O is to move and has lost
    assert tictactoe_optimal_actions(state) == set()


# -- Connect Four: hand-made positions -------------------------------------------------


def test_connect4_win_in_one():
    # X to move; X wins at column 4. Any other move lets O fill column 4 and win.
    state = c4("1 5 2 6 3 7")
    assert C4.render(state).splitlines()[-2] == "X X X . O O O"
    assert connect4_solve(state) == 1
    assert connect4_optimal_actions(state) == {3}


def test_connect4_forced_block_that_wins():
    # O to move. X threatens column 4 (bottom row X X X .). Any other O move loses
    # at once. Blocking there gives O two threats: column 7 (bottom row 4-5-6-7) and
    # column 4, second row (the diagonal 2r4-3r3-4r2-5r1); X can stop only one.
    state = c4("2 2 2 2 3 5 3 3 1 6 1")
    assert C4.render(state) == board_text("""
        . . . . . . .
        . . . . . . .
        . O . . . . .
        . X O . . . .
        X O X . . . .
        X X X . O O .
        1 2 3 4 5 6 7
    """)
    assert C4.to_play(state) == 1
    assert connect4_solve(state) == 1
    assert connect4_optimal_actions(state) == {3}


def test_connect4_win_in_three_by_two_threats():
    # X to move plays column 4: X X X on the bottom row with both ends (1 and 5) open.
    state = c4("2 2 3 3")
    # Found from a handful of nodes: the move making two threats is searched first.
    assert connect4_solve(state, max_nodes=100) == 1
    after = c4("2 2 3 3 4")
    assert connect4_solve(after) == -1
    # O can block only one end, and has no threat of its own: every move loses.
    assert connect4_optimal_actions(after) == set(range(7))


def test_connect4_finished_game_and_budget():
    won = c4("1 2 1 2 1 2 1")  # X's vertical four in column 1
    assert C4.is_terminal(won)
    assert connect4_solve(won) == -1  # O to move, lost
    assert connect4_optimal_actions(won) == set()
    with pytest.raises(SolveBudgetExceeded):
        connect4_solve(C4.initial_state(), max_nodes=1000)


# -- Connect Four scores (Pascal Pons' definition): hand-made positions ------------------
#
# A win scores 22 minus the stones the winner has played when the four is made, a loss
# minus that, a draw 0 (http://blog.gamesolver.org/solving-connect-four/02-test-protocol/).


def test_connect4_score_of_the_blogs_two_examples():
    # Pons' own examples. "4455": X makes an open three on the bottom row (column 3 or
    # 6) and wins with their 4th stone whatever O does: 22 - 4 = 18.
    state = c4("4 4 5 5")
    assert C4.render(state).splitlines()[-3:-1] == [". . . O O . .", ". . . X X . ."]
    assert connect4_score(state) == 18 == MAX_SCORE
    for col in (3, 6):  # after either, O loses to X's 4th stone
        assert connect4_score(c4(f"4 4 5 5 {col}")) == -18
    # "44455554221": whatever O plays, X wins next with their 7th stone: 7 - 22 = -15.
    state = c4("4 4 4 5 5 5 5 4 2 2 1")
    assert C4.to_play(state) == 1 and np.count_nonzero(state[HEADER:] == 1) == 6
    assert connect4_score(state) == -15
    assert connect4_move_scores(state).tolist() == [-15] * 7


def test_connect4_scores_of_a_win_in_one():
    # X wins at column 4 with their 4th stone (18); anywhere else, O wins there with theirs (-18).
    state = c4("1 5 2 6 3 7")
    assert connect4_score(state) == 18
    assert connect4_move_scores(state).tolist() == [-18, -18, -18, 18, -18, -18, -18]
    # One stone later the same threat is worth less: X's four would be their 5th stone.
    state = c4("1 5 2 6 3 7 1 1")
    assert C4.render(state).splitlines()[-2] == "X X X . O O O"
    assert connect4_score(state) == 22 - 5


def test_connect4_scores_of_two_threats_and_of_a_finished_game():
    # X plays column 4: an open three, X's four comes with their 4th stone; O can only
    # lose to it, whatever they play.
    assert connect4_score(c4("2 2 3 3")) == 18
    after = c4("2 2 3 3 4")
    assert connect4_score(after) == MIN_SCORE == -18
    assert connect4_move_scores(after).tolist() == [-18] * 7
    # X's vertical four with their 4th stone: O, to move, has lost with that score.
    won = c4("1 2 1 2 1 2 1")
    assert connect4_score(won) == -18 and connect4_solve(won) == -1
    assert connect4_move_scores(won).tolist() == [NO_SCORE] * 7
    with pytest.raises(SolveBudgetExceeded):
        connect4_score(C4.initial_state(), max_nodes=1000)


# -- Connect Four: an independent referee ----------------------------------------------


def _completes_four(columns: list[list[int]], col: int) -> bool:
    """Whether the top stone of ``col`` is in a line of four (columns listed bottom-up)."""
    row = len(columns[col]) - 1
    stone = columns[col][row]

    def same(c: int, r: int) -> bool:
        return 0 <= c < 7 and 0 <= r < len(columns[c]) and columns[c][r] == stone

    for d_col, d_row in ((1, 0), (0, 1), (1, 1), (1, -1)):
        run = 1
        for sign in (1, -1):
            c, r = col + sign * d_col, row + sign * d_row
            while same(c, r):
                run += 1
                c, r = c + sign * d_col, r + sign * d_row
        if run >= 4:
            return True
    return False


def _reference_value(columns: list[list[int]], stone: int, empty: int) -> int:
    """Plain negamax over the whole tree, stopping a node only at a found win."""
    best = -1
    for col in range(7):
        if len(columns[col]) == 6:
            continue
        columns[col].append(stone)
        if _completes_four(columns, col):
            value = 1
        elif empty == 1:
            value = 0
        else:
            value = -_reference_value(columns, 3 - stone, empty - 1)
        columns[col].pop()
        best = max(best, value)
        if best == 1:
            break
    return best


def _reference_columns(state: np.ndarray) -> list[list[int]]:
    cells = state[HEADER:].reshape(6, 7)
    return [[int(cells[row, col]) for row in range(5, -1, -1) if cells[row, col]] for col in range(7)]


def _random_position(rng: np.random.Generator, stones: int) -> np.ndarray:
    while True:
        state = C4.initial_state()
        for _ in range(stones):
            play_in_place(C4.params, state, int(rng.choice(np.flatnonzero(C4.legal_mask(state)))))
            if state[WINNER] != NO_WINNER:
                break
        if state[WINNER] == NO_WINNER:
            return state


def _can_win_at_once(state: np.ndarray) -> bool:
    for action in np.flatnonzero(C4.legal_mask(state)):
        child = C4.next_state(state, int(action))
        if C4.is_terminal(child) and C4.outcome(child) != 0:
            return True
    return False


def _interesting_position(rng: np.random.Generator, stones: int) -> np.ndarray:
    """A random unfinished position whose mover has no win in one (those are trivial)."""
    while True:
        state = _random_position(rng, stones)
        if not _can_win_at_once(state):
            return state


def test_connect4_solver_agrees_with_plain_minimax():
    rng = np.random.default_rng(2024)
    values = []
    for index in range(20):
        state = _interesting_position(rng, 30 + index % 4)
        stones = int(np.count_nonzero(state[HEADER:]))
        expected = _reference_value(_reference_columns(state), 1 + int(state[TO_PLAY]), 42 - stones)
        assert connect4_solve(state) == expected, C4.render(state)
        values.append(expected)
    assert set(values) == {-1, 0, 1}  # wins, draws and losses all checked


def test_connect4_optimal_actions_agree_with_plain_minimax():
    rng = np.random.default_rng(5)
    for _ in range(6):
        state = _interesting_position(rng, 33)
        mover = 1 + int(state[TO_PLAY])
        columns = _reference_columns(state)
        child_values = {}
        for col in np.flatnonzero(C4.legal_mask(state)):
            columns[col].append(mover)
            if _completes_four(columns, col):
                child_values[int(col)] = 1
            else:
                child_values[int(col)] = -_reference_value(columns, 3 - mover, 42 - 34)
            columns[col].pop()
        best = max(child_values.values())
        expected = {col for col, value in child_values.items() if value == best}
        assert connect4_optimal_actions(state) == expected, C4.render(state)


def _reference_score(columns: list[list[int]], stone: int, stones: int) -> int:
    """Plain negamax over Pons' scores; a node stops early only at a win now, the best
    any move can score. ``stones``: on the board before the mover's move."""
    best = MIN_SCORE - 1
    for col in range(7):
        if len(columns[col]) == 6:
            continue
        columns[col].append(stone)
        wins = _completes_four(columns, col)
        if wins:
            score = 22 - (stones // 2 + 1)  # the mover's stones, this one included
        elif stones + 1 == 42:
            score = 0
        else:
            score = -_reference_score(columns, 3 - stone, stones + 1)
        columns[col].pop()
        best = max(best, score)
        if wins:
            break
    return best


def _reference_move_scores(state: np.ndarray) -> list[int]:
    mover, stones = 1 + int(state[TO_PLAY]), C4.move_number(state)
    columns = _reference_columns(state)
    scores = []
    for col in range(7):
        if len(columns[col]) == 6:
            scores.append(NO_SCORE)
            continue
        columns[col].append(mover)
        if _completes_four(columns, col):
            scores.append(22 - (stones // 2 + 1))
        else:
            scores.append(-_reference_score(columns, 3 - mover, stones + 1))
        columns[col].pop()
    return scores


def test_connect4_scores_agree_with_plain_minimax():
    rng = np.random.default_rng(2025)
    scores = []
    for index in range(24):
        state = _interesting_position(rng, 30 + index % 4)
        expected = _reference_score(_reference_columns(state), 1 + int(state[TO_PLAY]), C4.move_number(state))
        assert connect4_score(state) == expected, C4.render(state)
        assert connect4_solve(state) == np.sign(expected)
        scores.append(expected)
    # wins, draws and losses, and wins of different lengths
    assert min(scores) < 0 and 0 in scores and len({s for s in scores if s > 0}) >= 3, scores


def test_connect4_move_scores_agree_with_plain_minimax():
    rng = np.random.default_rng(3)
    slow_wins = full_columns = 0
    for _ in range(8):
        state = _interesting_position(rng, 31)
        expected = _reference_move_scores(state)
        assert connect4_move_scores(state).tolist() == expected, C4.render(state)
        best = max(expected)
        slow_wins += any(0 < score < best for score in expected)
        full_columns += expected.count(NO_SCORE)
    assert slow_wins and full_columns  # moves that win but not fastest; and full columns, both seen


def test_connect4_scores_are_consistent_in_midgame():
    # Too deep for the referee: check the negamax identity instead (a position scores
    # the best of its moves, each minus the child's score), with one table shared by
    # all the searches, as the labelling script shares it.
    rng = np.random.default_rng(23)
    table = TranspositionTable(1 << 20)
    for _ in range(6):
        state = _interesting_position(rng, 16)
        moves = connect4_move_scores(state, table=table)
        assert connect4_score(state) == moves.max() == connect4_score(state, table=table)
        for col in np.flatnonzero(C4.legal_mask(state)):
            child = C4.next_state(state, int(col))
            assert moves[col] == -connect4_score(child), (C4.render(state), col)


def test_connect4_labelled_positions_are_seeded_and_sound():
    first = connect4_labelled_positions(6, min_stones=14, max_stones=18, seed=3)
    again = connect4_labelled_positions(6, min_stones=14, max_stones=18, seed=3)
    assert len(first) == 6
    keys = set()
    for (state, optimal), (state_again, optimal_again) in zip(first, again, strict=True):
        assert np.array_equal(state, state_again) and optimal == optimal_again
        assert not C4.is_terminal(state)
        assert 14 <= C4.move_number(state) <= 18
        legal = set(np.flatnonzero(C4.legal_mask(state)).tolist())
        assert optimal and optimal <= legal
        keys.add(state.tobytes())
    assert len(keys) == 6  # no repeats


def test_connect4_values_are_consistent_in_midgame():
    # Too deep for the referee, so check the negamax identity instead: a position is
    # worth the best of minus its children (a transposition-table slip breaks it).
    rng = np.random.default_rng(17)
    for _ in range(8):
        state = _interesting_position(rng, 16)
        children = [C4.next_state(state, int(col)) for col in np.flatnonzero(C4.legal_mask(state))]
        child_values = [-connect4_solve(child) if not C4.is_terminal(child) else 1 for child in children]
        assert connect4_solve(state) == max(child_values)


def test_connect4_labelled_positions_can_skip_uninformative_ones():
    labelled = connect4_labelled_positions(5, min_stones=14, max_stones=18, seed=4, informative_only=True)
    for state, optimal in labelled:
        assert len(optimal) < int(np.count_nonzero(C4.legal_mask(state)))


# -- Grading on labelled positions (play/grading.py) ---------------------------------------

from bench_scripts import load  # noqa: E402

from tengen.play.grading import (  # noqa: E402  # noqa: E402
    DEFAULT_PATH,
    MatchScore,
    Misses,
    SearchSettings,
    canonical_moves,
    grade_model,
    grade_moves,
    parse_line,
    policy_chooser,
    position_keys,
    random_chooser,
    ratio_lines,
    read_positions,
    score_vs_mcts,
    search_chooser,
    table_row,
    value_sign_share,
)

label_stone_count, read_game_moves = load("label_connect4").label_stone_count, load("label_connect4").read_game_moves

# Lines in the data file's format: moves, the 7 columns' scores, the best.
FOUR_FOUR_FIVE_FIVE = "4455 -4 -3 18 2 2 18 -3 18"  # 3 or 6 win at once next (18); 4 and 5 win later (2)
WIN_IN_ONE = "152637 -18 -18 -18 18 -18 -18 -18 18"  # only column 4 wins; elsewhere O wins there
WON_BY_ONE = "575446266555217 1 -10 -13 0 0 1 0 1"  # a slow win in 1 or 6; 4, 5 and 7 only draw
COLUMN_FOUR_FULL = "24444477546662 -2 -2 -2 x -2 -1 -2 -1"


def test_the_hand_written_lines_are_the_solvers():
    for line in (WIN_IN_ONE, WON_BY_ONE, COLUMN_FOUR_FULL):
        position = parse_line(line)
        assert connect4_move_scores(position.state).tolist() == position.scores.tolist(), line
    position = parse_line(FOUR_FOUR_FIVE_FIVE)  # its slow wins take seconds to prove: the 18s only
    assert connect4_score(position.state) == position.best == 18


def test_grading_counts_optimal_and_outcome_kept_moves():
    positions = [parse_line(line) for line in (FOUR_FOUR_FIVE_FIVE, WIN_IN_ONE, WON_BY_ONE)]
    # Always column 4: a slow win (kept, not optimal), the win (both), a draw from a win (neither).
    grades = grade_moves(lambda states: [3] * len(states), positions)
    assert (grades.optimal.hits, grades.outcome.hits, grades.optimal.total) == (1, 2, 3)
    assert grades.optimal.se == pytest.approx(np.sqrt(1 / 3 * 2 / 3 / 3))  # 0.272
    assert grades.misses == Misses(won=3, won_slower=1, won_thrown=1)
    # Always column 1: a loss from a win, a loss from a win, the slow win (optimal).
    grades = grade_moves(lambda states: [0] * len(states), positions)
    assert (grades.optimal.hits, grades.outcome.hits) == (1, 1)
    assert grades.misses.describe() == "won 0 slower + 2 thrown away of 3; drawn 0 lost of 0; lost 0 faster of 0"
    # A lost position: column 1 loses sooner than column 6 must.
    grades = grade_moves(lambda states: [0], [parse_line(COLUMN_FOUR_FULL)])
    assert grades.misses == Misses(lost=1, lost_faster=1)
    with pytest.raises(ValueError, match="not a legal move"):
        grade_moves(lambda states: [3], [parse_line(COLUMN_FOUR_FULL)])


def test_a_model_chooser_searches_in_batches():
    positions = [parse_line(line) for line in (WIN_IN_ONE, WON_BY_ONE, COLUMN_FOUR_FULL)]
    choose = search_chooser(C4, uniform_evaluator(7), SearchSettings(simulations=64, leaves_per_round=4), batch=2)
    columns = choose([p.state for p in positions])
    assert columns[0] == 3  # the win in one: the only move whose subtree is not lost at once
    assert len(columns) == 3 and positions[2].scores[columns[2]] != NO_SCORE  # never the full column


def test_a_grade_without_matches_grades_the_positions_and_says_no_games_were_played():
    positions = [parse_line(line) for line in (WIN_IN_ONE, WON_BY_ONE, COLUMN_FOUR_FULL)]
    settings = SearchSettings(simulations=64, leaves_per_round=4)
    grades = grade_model(C4, uniform_evaluator(7), positions, settings, games=0, seed=0, log=lambda line: None)
    assert grades.moves.optimal.total == 3 and grades.vs_mcts == {}
    assert table_row("uniform", grades).count("not played") == 2
    assert [line.split()[1] for line in ratio_lines(grades)] == ["connect4_optimal_share", "connect4_outcome_share"]
    with pytest.raises(ValueError, match="games must be 0"):
        grade_model(C4, uniform_evaluator(7), positions, settings, games=-1, seed=0)


def test_the_network_alone_is_graded_by_its_policy_and_its_value_sign():
    positions = [parse_line(line) for line in (FOUR_FOUR_FIVE_FIVE, WIN_IN_ONE, WON_BY_ONE, COLUMN_FOUR_FULL)]

    def column_four_and_hopeful(planes):  # column 4 first, then 6; every position a win for the mover
        policy = np.full((len(planes), 7), 0.1, np.float32)
        policy[:, 3], policy[:, 5] = 0.3, 0.2
        return policy, np.full(len(planes), 0.3, np.float32)

    # Column 4 as in the grading test above (a slow win, the win, a draw from a win), and
    # column 6 where column 4 is full: the slowest loss there.
    columns = policy_chooser(C4, column_four_and_hopeful)([p.state for p in positions])
    assert columns == [3, 3, 3, 5]
    grades = grade_moves(policy_chooser(C4, column_four_and_hopeful), positions)
    assert (grades.optimal.hits, grades.outcome.hits) == (2, 3)
    # The three won positions have the value's sign; the lost one (column 4 full) has not.
    share = value_sign_share(C4, column_four_and_hopeful, positions)
    assert (share.hits, share.total) == (3, 4)
    despairing = value_sign_share(C4, lambda planes: column_four_and_hopeful(planes)[:1] + (
        np.full(len(planes), -0.3, np.float32),), positions)
    assert (despairing.hits, despairing.total) == (1, 4)


def test_match_score_and_its_standard_error():
    score = MatchScore(wins=2, draws=1, losses=1)
    assert score.value == 0.625  # draws count half
    # per-game scores 1, 1, 1/2, 0: sample variance 0.6875 / 3, over 4 games
    assert score.se == pytest.approx(np.sqrt(0.6875 / 3 / 4))
    # A random player against pure MCTS-100 over 4 games, colours alternated: it loses them all.
    result = score_vs_mcts(C4, RandomPlayer(C4), simulations=100, games=4, seed=1)
    assert result.games == 4 and result.value <= 0.25


def test_the_labelled_positions_file():
    positions = read_positions(DEFAULT_PATH)
    counts = {stones: sum(p.stones == stones for p in positions) for stones in range(8, 31)}
    assert set(counts.values()) == {44} and len(positions) == 44 * 23
    assert len({canonical_moves(p.moves) for p in positions}) == len(positions)  # no repeats, mirrors included
    for p in positions:
        legal = p.scores[p.scores != NO_SCORE]
        assert legal.min() < legal.max()  # some move is worse than another
        assert p.best < 22 - (p.stones // 2 + 1)  # no win at once
    # Late positions are quick to solve again: a sample of them must be the solver's.
    rng = np.random.default_rng(0)
    late = [p for p in positions if p.stones >= 24]
    sample = [late[i] for i in rng.choice(len(late), 12, replace=False)]
    for p in sample:
        assert connect4_move_scores(p.state).tolist() == p.scores.tolist(), p.moves


def test_training_labels_leave_the_graded_positions_out():
    # The bench's own seed gives back its positions, unless they are excluded.
    bench_lines = [line for line in DEFAULT_PATH.read_text().splitlines()
                   if not line.startswith("#") and parse_line(line).stones == 30]
    table = TranspositionTable(1 << 20)
    again, _ = label_stone_count(30, 4, seed=1, table=table, max_nodes=10**8, seen=set())
    assert again == bench_lines[:4]
    graded = position_keys(read_positions(DEFAULT_PATH))
    apart, tally = label_stone_count(30, 4, seed=1, table=table, max_nodes=10**8, seen=set(graded))
    assert len(apart) == 4 and tally.repeated >= 4
    assert not {canonical_moves(parse_line(line).moves) for line in apart} & graded


def test_grading_the_perfect_and_the_random_player():
    positions = [p for p in read_positions(DEFAULT_PATH) if p.stones >= 26]
    assert len(positions) == 5 * 44

    def perfect(states):  # from the solver, not from the labels
        return [int(np.argmax(connect4_move_scores(state))) for state in states]

    grades = grade_moves(perfect, positions)
    assert grades.optimal.value == grades.outcome.value == 1.0
    # A random player's expected shares, from the labels: per position, the fraction of
    # its legal moves that are optimal (or keep the outcome).
    legal = [p.scores != NO_SCORE for p in positions]
    expect_optimal = np.mean([np.mean(p.scores[m] == p.best) for p, m in zip(positions, legal, strict=True)])
    expect_outcome = np.mean([np.mean(np.sign(p.scores[m]) == np.sign(p.best))
                              for p, m in zip(positions, legal, strict=True)])
    assert expect_optimal < 0.6 and expect_outcome < 0.8
    grades = grade_moves(random_chooser(C4, np.random.default_rng(7)), positions)
    assert abs(grades.optimal.value - expect_optimal) < 3 * grades.optimal.se
    assert abs(grades.outcome.value - expect_outcome) < 3 * grades.outcome.se


def test_a_player_that_knows_only_outcomes_misses_many_optimal_moves():
    # Uniformly random among the moves that keep the outcome: every outcome kept, yet on
    # the bench's positions only ~57% optimal, since the fastest win (or slowest loss)
    # is often one of several moves that keep it.
    positions = read_positions(DEFAULT_PATH)
    expect_optimal = []
    for p in positions:
        keep = (p.scores != NO_SCORE) & (np.sign(p.scores) == np.sign(p.best))
        expect_optimal.append(np.mean(p.scores[keep] == p.best))
    assert 0.55 < np.mean(expect_optimal) < 0.6


def test_a_runs_own_games_give_positions_from_their_first_moves(tmp_path):
    # Two kept games as a run writes them (play/game_records.py's plain line, a file each).
    from tengen.engine.games import make_game
    from tengen.play.game_records import FinishedGame, write_plain

    connect4 = make_game("connect4")
    lines = ["4455667", "4266243542635112323"]  # a win in 7 moves; one in 19
    for i, moves in enumerate(lines):
        actions = tuple(connect4.text_to_action(c) for c in moves)
        (tmp_path / f"w000.x-{i}.txt").write_text(write_plain(connect4, FinishedGame(actions)) + "\n")
    (tmp_path / "gating").mkdir()  # gating's games, below, are not self-play's
    games = read_game_moves(tmp_path)
    assert sorted(games) == sorted(lines)

    table = TranspositionTable(1 << 20)
    labelled, tally = label_stone_count(12, 5, seed=0, table=table, max_nodes=10**8, seen=set(), games=games)
    # only the long game reaches 12 stones: one position, and then none are left
    position = parse_line(labelled[0])
    assert len(labelled) == 1 and tally.kept == 1 and position.moves == "426624354263"
    assert position.scores.tolist() == connect4_move_scores(position.state).tolist()
    with pytest.raises(ValueError, match="no kept games"):
        read_game_moves(tmp_path / "gating")
    (tmp_path / "w000.x-2.txt").write_text("format=1 game=tictactoe result=1-0 end=rules moves=1,4,2,5,3\n")
    with pytest.raises(ValueError, match=r"w000.x-2.txt:1: not a Connect Four game line"):
        read_game_moves(tmp_path)
