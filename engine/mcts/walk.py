"""The compiled walk: selection, virtual loss, leaves and backups.

``gather_kernel_*`` walks every active game's tree to up to ``leaves_per_round`` new
leaves, replays each leaf's moves from the root to get its position and writes its
input planes into the batch; ``apply_kernel`` sets the evaluated leaves' priors and
backs their values up. Both read the search's settings from the array that
``SearchSettings.to_array`` makes (named slots, engine/mcts/settings.py).

Virtual loss: a walk passing an edge counts there as ``virtual_loss`` visits that
lost, so the round's other walks turn elsewhere; the backup of its leaf, or the walk
giving up, takes it back. All three go through ``tree.update_edge``.

Priors: a new leaf (the root's first, or one below it) lists its moves at prior 1
in one place, the end of the walk in ``_gather``; ``apply_kernel`` replaces them
with the evaluation's policy. Both are written out in their loops rather than as
inline helpers: numba increfs an inlined helper's array arguments on entry and cannot
prune the pair around the helper's own loop: those atomic operations, once per leaf,
made ``apply_kernel`` five times slower (1.5 ms -> 8 ms per 64-game Connect Four
search of 400 simulations). Straight-line helpers such as ``update_edge`` cost
nothing.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tengen.engine.games import kernels as R
from tengen.engine.games.go_features import write_go_features
from tengen.engine.games.go_kernels import P_FEATURES as GO_FEATURES
from tengen.engine.mcts.gumbel import halve_root, halving_slot, select_interior, start_root
from tengen.engine.mcts.planes import encode_leaf
from tengen.engine.mcts.settings import (
    AVOID_OWN_EYES,
    C_PUCT,
    DISCOUNT,
    FORMULA,
    FPU_REDUCTION,
    GUMBEL_C_SCALE,
    GUMBEL_C_VISIT,
    GUMBEL_CONSIDERED,
    KEEP_LEAF_STATES,
    LEAVES_PER_ROUND,
    SEARCH,
    SEARCH_GUMBEL,
    SOLVER,
    UCT,
    VALUE_SPREAD,
    VIRTUAL_LOSS,
)
from tengen.engine.mcts.tree import (
    EXPANDED,
    ILLEGAL,
    PENDING,
    ROOT,
    TERMINAL,
    UNEXPANDED,
    copy_into,
    drop_illegal_edge,
    update_edge,
)

__all__ = ["gather_kernel_mnk", "gather_kernel_go", "apply_kernel"]


# --- selection ---------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _select_child(tree, g, node, formula, c_puct, fpu_reduction, forced_k):
    """The action maximising Q + U at ``node`` (ties to the lowest action); with
    ``forced_k`` > 0 (the root of a search with forced playouts), a visited move that
    has fewer than sqrt(forced_k * P * N) visits first."""
    if formula == UCT:
        return _select_uct(tree.prior[g, node], tree.edge_n[g, node], tree.edge_w[g, node],
                           tree.edge_n_sum[g, node], np.float32(c_puct))
    return _select_puct(tree.prior[g, node], tree.edge_n[g, node], tree.edge_w[g, node], tree.edge_n_sum[g, node],
                        tree.node_n[g, node], tree.node_w[g, node], np.float32(c_puct), np.float32(fpu_reduction),
                        np.float32(forced_k))


@njit(cache=True)
def _select_puct(prior, edge_n, edge_w, total, node_n, node_w, c_puct, fpu_reduction, forced_k):
    """argmax of Q + U over the legal moves of one node (rows of the tree arrays).
    float32 throughout: mixing in float64 made this loop several times slower."""
    k = c_puct * np.sqrt(max(total, np.float32(1.0)))
    # First-play urgency (Leela Zero's and KataGo's): an unvisited move is assumed worse
    # than the node by fpu_reduction * sqrt(the prior mass already visited). Unscaled,
    # a bad first visit pulled the node's value down and every unvisited move below it,
    # so the search kept visiting that one move: Go's pass, 15 of 16 visits.
    # Every unvisited move has that same Q, so the best of them is the one of highest
    # prior, and one pass finds it beside the best visited move and the visited mass.
    best, best_score = -1, np.float32(-1e30)
    fresh, fresh_prior = -1, np.float32(-1.0)
    visited = np.float32(0.0)
    for a in range(prior.shape[0]):
        p = prior[a]
        if p < 0:  # ILLEGAL
            continue
        n = edge_n[a]
        if n > 0:
            visited += p
            score = edge_w[a] / n + k * p / (np.float32(1.0) + n)
            if forced_k > 0 and n * n < forced_k * p * total:
                # KataGo's forced playouts: a move that the noise made look good gets
                # sqrt(k P N) visits to show it, which policy target pruning takes back
                score = np.float32(1e30)
            if score > best_score:
                best, best_score = a, score
        elif p > fresh_prior:
            fresh, fresh_prior = a, p
    if fresh >= 0:
        fpu = np.float32(-1.0)
        if node_n > 0:
            fpu = node_w / node_n - fpu_reduction * np.sqrt(visited)
        score = fpu + k * fresh_prior / np.float32(1.0)
        if score > best_score or (score == best_score and fresh < best):
            best = fresh
    return best


@njit(cache=True)
def _select_uct(prior, edge_n, edge_w, total, c):
    """UCT (Kocsis and Szepesvari) for pure MCTS: every legal move once, in order, then
    argmax of Q + c * sqrt(ln N / N(a))."""
    log_total = np.float32(np.log(max(total, np.float32(1.0))))
    best, best_score = -1, np.float32(-1e30)
    for a in range(prior.shape[0]):
        if prior[a] < 0:
            continue
        n = edge_n[a]
        if n == 0:
            return a
        score = edge_w[a] / n + c * np.sqrt(log_total / n)
        if score > best_score:
            best, best_score = a, score
    return best


# --- virtual loss and backup ----------------------------------------------------------------
@njit(cache=True, inline="always")
def _take_back_virtual_loss(tree, g, node, a, virtual_loss):
    """Take back the virtual loss of a walk that gave up on edge (node, a): from that
    edge up to the root."""
    while True:
        update_edge(tree, g, node, a, 0.0, 0.0, -virtual_loss)
        parent = tree.parent[g, node]
        if parent < 0:
            return
        a = tree.parent_action[g, node]
        node = parent


@njit(cache=True, inline="always")
def _backup(tree, g, node, value, virtual_loss, discount, spread):
    """Back ``value`` (for the mover at ``node``) up to the root, the sign flipped and
    the value multiplied by ``discount`` at each ply, taking back the virtual loss the
    walk added on each edge; with ``spread``, the squares summed too (the LCB's)."""
    v = np.float32(value)
    while True:
        tree.node_n[g, node] += 1.0
        tree.node_w[g, node] += v
        if spread:
            tree.node_w2[g, node] += v * v
        parent = tree.parent[g, node]
        if parent < 0:
            return
        a = tree.parent_action[g, node]
        v = -v * discount
        update_edge(tree, g, parent, a, 1.0, v, -virtual_loss)
        node = parent


# --- the solver ---------------------------------------------------------------------------
@njit(cache=True, inline="always")
def _exact_value(tree, g, node, discount):
    """A terminal or proven node's value for its mover, discounted by its plies to the end."""
    return tree.terminal_value[g, node] * discount ** tree.proof_plies[g, node]


@njit(cache=True)
def _propagate_proof(tree, g, node, all_moves_listed):
    """``node`` was just proven: prove its ancestors that this settles (MCTS-Solver).

    A parent is won when a move reaches a node lost for its mover (the plies: the
    fastest such win); when every move is expanded and proven, it is worth the best
    of them (a loss: the slowest). The second rule needs the node to list all its
    legal moves (``all_moves_listed``: Go's inner nodes list candidates, some illegal)."""
    num_actions = tree.prior.shape[2]
    while True:
        parent = tree.parent[g, node]
        if parent < 0 or tree.proven[g, parent]:
            return
        win_plies = -1  # fastest win found, in plies from the parent
        best_value, best_plies = np.float32(-2.0), 0
        all_proven = all_moves_listed
        for a in range(num_actions):
            if tree.prior[g, parent, a] == ILLEGAL:
                continue
            child = tree.children[g, parent, a]
            if child == UNEXPANDED or not tree.proven[g, child]:
                all_proven = False
                continue
            value = -tree.terminal_value[g, child]  # for the parent's mover
            plies = tree.proof_plies[g, child] + 1
            if value > 0:
                if win_plies < 0 or plies < win_plies:
                    win_plies = plies
            elif value > best_value or (value == best_value and value < 0 and plies > best_plies):
                best_value, best_plies = value, plies
        if win_plies >= 0:
            tree.terminal_value[g, parent] = 1.0
            tree.proof_plies[g, parent] = win_plies
        elif all_proven and best_value > -2.0:
            tree.terminal_value[g, parent] = best_value
            tree.proof_plies[g, parent] = best_plies
        else:
            return
        tree.proven[g, parent] = 1
        node = parent


# --- positions along the path --------------------------------------------------------------
@njit(cache=True, inline="always")
def _replay_to_parent(kind, params, tree, g, depth, scratch):
    """Play the first ``depth - 1`` moves of the path from the root into scratch.state:
    the position of the leaf's parent. Boards of the last T positions of the path
    (newest first, the leaf's own at slot 0) go to scratch.boards."""
    st = scratch.state
    history_length = scratch.boards.shape[0]
    copy_into(tree.root_state[g], st)
    # Board of position i (0 = root) goes to slot depth - i when it is among the last T.
    if depth < history_length:
        R.board_into(kind, params, st, scratch.boards[depth])
    for i in range(depth - 1):
        # Every node above the leaf is expanded, so these moves do not end the game.
        R.play_known_ongoing(kind, params, st, scratch.path[i], scratch.captured)
        slot = depth - (i + 1)
        if slot < history_length:
            R.board_into(kind, params, st, scratch.boards[slot])


@njit(cache=True, inline="always")
def _play_leaf_move(kind, params, scratch, action):
    """The path's last move, from the parent's position to the leaf's (board slot 0)."""
    R.play(kind, params, scratch.state, action, scratch.captured)
    if scratch.boards.shape[0] > 0:
        R.board_into(kind, params, scratch.state, scratch.boards[0])


# --- the kernels ---------------------------------------------------------------------------
# One compiled walk per game family: with ``kind`` a constant, the other family's
# rules fold away and the walk loop stays tight (Connect Four: 2.5M -> 3.3M sims/s).
@njit(cache=True)
def gather_kernel_mnk(params, tree, scratch, targets, active, settings, out, leaf_game, leaf_node, leaf_states,
                      counts):
    _gather(R.MNK, params, tree, scratch, targets, active, settings, out, leaf_game, leaf_node, leaf_states, counts)


@njit(cache=True)
def gather_kernel_go(params, tree, scratch, targets, active, settings, out, leaf_game, leaf_node, leaf_states,
                     counts):
    _gather(R.GO, params, tree, scratch, targets, active, settings, out, leaf_game, leaf_node, leaf_states, counts)


@njit(cache=True, inline="always")
def _gather(kind, params, tree, scratch, targets, active, settings, out, leaf_game, leaf_node, leaf_states, counts):
    """Walk up to leaves_per_round times per active game. Sets ``counts`` to [leaves
    that need an evaluation (rows of ``out``, and of ``leaf_states`` when asked for),
    walks that ended on a terminal node (backed up here)]."""
    leaves_per_round = int(settings[LEAVES_PER_ROUND])
    formula = int(settings[FORMULA])
    keep_states = settings[KEEP_LEAF_STATES] != 0.0
    c_puct, fpu_reduction, virtual_loss = settings[C_PUCT], settings[FPU_REDUCTION], settings[VIRTUAL_LOSS]
    gumbel = int(settings[SEARCH]) == SEARCH_GUMBEL
    considered = int(settings[GUMBEL_CONSIDERED])
    c_visit, c_scale = settings[GUMBEL_C_VISIT], settings[GUMBEL_C_SCALE]
    avoid_eyes = settings[AVOID_OWN_EYES] != 0.0
    discount = np.float32(settings[DISCOUNT])
    solver = settings[SOLVER] != 0.0
    spread = settings[VALUE_SPREAD] != 0.0
    games = tree.num_nodes.shape[0]
    max_nodes = tree.node_n.shape[1]
    num_actions = tree.prior.shape[2]
    counts[:] = 0
    b = 0
    for g in range(games):
        if not active[g]:
            continue
        # Each walk ends in a new leaf (to evaluate) or on a terminal node (backed up at
        # once). Both count against leaves_per_round: walks that keep ending on terminal
        # nodes while a sibling's leaf is pending would otherwise pour hundreds of visits
        # into whatever the virtual loss leaves open.
        walks = 0
        while walks < leaves_per_round:
            walks += 1
            if tree.node_n[g, ROOT] + tree.in_flight[g] >= targets[g]:
                break
            if tree.status[g, ROOT] == PENDING:
                # The root itself is the first leaf of a fresh tree; it lists exactly its
                # legal moves.
                if tree.in_flight[g] > 0:
                    break
                _replay_to_parent(kind, params, tree, g, 0, scratch)
                if R.is_terminal(kind, params, scratch.state):
                    break  # nothing to search in a finished game
                R.legal_mask_into(kind, params, scratch.state, scratch.legal)
                if avoid_eyes:
                    R.own_eye_rule_into(kind, params, scratch.state, scratch.legal)
                node, depth = ROOT, 0
            else:
                if tree.status[g, ROOT] == TERMINAL:
                    break
                if tree.proven[g, ROOT]:
                    # Solved: the visits still due back the exact value up at once,
                    # so that callers waiting for the target see the search end.
                    due = targets[g] - tree.node_n[g, ROOT] - tree.in_flight[g]
                    if due > 0:
                        tree.node_n[g, ROOT] += due
                        exact = _exact_value(tree, g, ROOT, discount)
                        tree.node_w[g, ROOT] += due * exact
                        if spread:
                            tree.node_w2[g, ROOT] += due * exact * exact
                        counts[1] += 1
                    break
                forced = -1
                if gumbel:
                    # Sequential halving fixes the root move: simulation k (the root's
                    # own evaluation was the search's first) of the budget below it.
                    if tree.considered[g] == 0:
                        start_root(tree, g, considered, scratch.legal)
                    k = int(tree.node_n[g, ROOT]) - 1 + tree.in_flight[g]
                    survivors, rank = halving_slot(tree.considered[g], int(targets[g]) - 1, k)
                    if survivors < tree.survivor_count[g]:
                        if tree.in_flight[g] > 0:
                            break  # the phase ends: its ranking needs the values in flight
                        halve_root(tree, g, survivors, c_visit, c_scale, scratch.weights)
                    # (a budget raised mid-search keeps the survivors it has)
                    forced = tree.survivors[g, rank % tree.survivor_count[g]]
                # Walk down, adding virtual loss, to an edge with no node behind it or
                # one whose node is not expanded.
                node, depth = ROOT, 0
                while True:
                    if depth == 0 and forced >= 0:
                        a = forced
                    elif gumbel:
                        a = select_interior(tree.prior[g, node], tree.edge_n[g, node], tree.edge_w[g, node],
                                            tree.edge_n_sum[g, node], tree.raw_value[g, node], np.float32(c_visit),
                                            np.float32(c_scale), scratch.weights)
                    else:
                        a = _select_child(tree, g, node, formula, c_puct, fpu_reduction,
                                          tree.root_forced_k[g] if depth == 0 else 0.0)
                    update_edge(tree, g, node, a, 0.0, 0.0, virtual_loss)  # the virtual loss
                    scratch.path[depth] = a
                    depth += 1
                    child = tree.children[g, node, a]
                    if child == UNEXPANDED or tree.status[g, child] != EXPANDED or tree.proven[g, child]:
                        break
                    node = child
                if child != UNEXPANDED:
                    if tree.status[g, child] == PENDING:
                        # Another walk of this round waits on that leaf: try again next round.
                        _take_back_virtual_loss(tree, g, node, a, virtual_loss)
                        break
                    # a known terminal, or a proven node
                    _backup(tree, g, child, _exact_value(tree, g, child, discount), virtual_loss, discount, spread)
                    counts[1] += 1
                    continue
                if tree.num_nodes[g] >= max_nodes:
                    _take_back_virtual_loss(tree, g, node, a, virtual_loss)
                    break
                _replay_to_parent(kind, params, tree, g, depth, scratch)
                st = scratch.state
                # Inner nodes list candidate moves (see candidate_mask_into): an edge is
                # checked when a walk first takes it, and a walk that finds it illegal
                # removes it and starts again without counting.
                if not R.candidates_are_legal(kind) and not R.is_legal(kind, params, st, a):
                    _take_back_virtual_loss(tree, g, node, a, virtual_loss)
                    drop_illegal_edge(tree, g, node, a)
                    walks -= 1
                    continue
                child = tree.num_nodes[g]
                tree.num_nodes[g] += 1
                tree.children[g, node, a] = child
                tree.parent[g, child] = node
                tree.parent_action[g, child] = a
                _play_leaf_move(kind, params, scratch, a)
                if R.is_terminal(kind, params, st):
                    tree.status[g, child] = TERMINAL
                    result = R.outcome(kind, params, st)
                    tree.terminal_value[g, child] = result if st[R.TO_PLAY] == 0 else -result
                    tree.raw_value[g, child] = tree.terminal_value[g, child]
                    if solver:
                        tree.proven[g, child] = 1
                        _propagate_proof(tree, g, child, R.candidates_are_legal(kind))
                    _backup(tree, g, child, tree.terminal_value[g, child], virtual_loss, discount, spread)
                    counts[1] += 1
                    continue
                R.candidate_mask_into(kind, params, st, scratch.legal)
                if avoid_eyes:
                    R.own_eye_rule_into(kind, params, st, scratch.legal)
                node = child
            # A new leaf (the root's first, or one below it), in one place: it lists the
            # moves in scratch.legal at prior 1 until its evaluation, and its planes (and
            # state) are row b of the batch.
            tree.status[g, node] = PENDING
            for m in range(num_actions):
                tree.prior[g, node, m] = 1.0 if scratch.legal[m] else ILLEGAL
            encode_leaf(tree, g, depth, scratch, scratch.state[R.TO_PLAY], out, b)
            if kind == R.GO and params[GO_FEATURES]:
                write_go_features(params, scratch.state, out[b], out.shape[1] // scratch.boards.shape[1],
                                  2 * scratch.boards.shape[0], scratch.feature_legal, scratch.mark, scratch.ladder)
            if keep_states:
                copy_into(scratch.state, leaf_states[b])
            leaf_game[b], leaf_node[b] = g, node
            b += 1
            tree.in_flight[g] += 1
            if node == ROOT:
                break  # its children need its priors first
    counts[0] = b


@njit(cache=True)
def apply_kernel(tree, settings, leaf_game, leaf_node, count, policy, value):
    """Set the evaluated leaves' priors (the policy renormalised over the moves they
    list) and back their values up."""
    virtual_loss = settings[VIRTUAL_LOSS]
    discount = np.float32(settings[DISCOUNT])
    spread = settings[VALUE_SPREAD] != 0.0
    num_actions = tree.prior.shape[2]
    for b in range(count):
        g, node = leaf_game[b], leaf_node[b]
        total = 0.0
        listed = 0
        for a in range(num_actions):
            if tree.prior[g, node, a] != ILLEGAL:
                total += max(policy[b, a], 0.0)
                listed += 1
        for a in range(num_actions):
            if tree.prior[g, node, a] != ILLEGAL:
                p = max(policy[b, a], 0.0)
                tree.prior[g, node, a] = p / total if total > 0.0 else 1.0 / listed
        tree.status[g, node] = EXPANDED
        tree.raw_value[g, node] = value[b]
        tree.in_flight[g] -= 1
        _backup(tree, g, node, value[b], virtual_loss, discount, spread)
