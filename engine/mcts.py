"""Batched PUCT search over many games at once, in preallocated arrays.

Notation (AlphaGo Zero): for an edge (s, a) of the tree, N is its visit count, W
the sum of the values backed up through it, Q = W / N its mean value, P its prior;
the search descends by argmax of Q + U with U = c_puct * P * sqrt(sum_b N(s, b)) /
(1 + N(s, a)). Every value is seen from the point of view of the player to move at
the node the edge leaves, so a backup flips the sign at each ply.

One ``gather`` call walks every game's tree to up to ``leaves_per_round`` new leaves
(virtual loss steers the walks of one round apart), replays each leaf's moves from
the game's root to get its position, and encodes all leaves into one batch of input
planes; terminal leaves are backed up at once with their exact value and need no
evaluation. The caller evaluates the batch however it likes (a local model, an
inference server, a uniform stub) and hands the result to ``apply``, which sets
the new leaves' priors over their candidate moves and backs the values up. Positions
are not stored per node: replaying a short path from the root costs less than
copying states, and keeps a 19x19 tree small.

A new leaf lists its *candidate* moves (``candidate_mask_into``: in Go, every empty
point but the ko point), not its legal ones: a full Go legality test per leaf cost
more than a quarter of the search. A move is checked when a walk first takes it; an
illegal one leaves the node's priors, which are renormalised, so that a node's
priors are always the policy over the legal moves it has tried and the candidates
it has not. The root always lists exactly the legal moves.

Randomness stays outside the compiled code: Dirichlet noise is drawn by the caller's
``np.random.Generator`` and mixed in with ``add_root_noise``; move choice from the
visit counts lives in ``choose_move``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np
from numba import njit
from numpy.typing import DTypeLike

from tengen.engine.games import kernels as R
from tengen.engine.games.base import Game

__all__ = [
    "Search",
    "Evaluator",
    "uniform_evaluator",
    "RolloutEvaluator",
    "choose_move",
    "visit_policy",
    "best_move",
    "search_bytes",
]

#: ``evaluate(planes[B, H, W, C]) -> (policy[B, A], value[B])``, value from the
#: point of view of the player to move in each position.
Evaluator = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]

ROOT = 0
UNEXPANDED = -1  # children[]: no node behind this edge yet
ILLEGAL = -1.0  # prior[]: the edge's move is not legal
PENDING, EXPANDED, TERMINAL = 0, 1, 2  # node status
PUCT, UCT = 0, 1  # selection formulas: AlphaZero's, or plain UCT for rollout MCTS


class Tree(NamedTuple):
    """The search state of G games, M nodes each, A actions (shapes in comments)."""

    children: np.ndarray  # [G, M, A] int32: child node, or UNEXPANDED
    edge_n: np.ndarray  # [G, M, A] float32: N, virtual visits included while in flight
    edge_w: np.ndarray  # [G, M, A] float32: W, from the mover's view at the parent
    prior: np.ndarray  # [G, M, A] float32: P over legal moves, ILLEGAL elsewhere
    node_n: np.ndarray  # [G, M] float32: evaluations backed up through the node
    edge_n_sum: np.ndarray  # [G, M] float32: sum over a of edge_n (so PUCT needs one pass)
    node_w: np.ndarray  # [G, M] float32: their value sum, from the node mover's view
    parent: np.ndarray  # [G, M] int32
    parent_action: np.ndarray  # [G, M] int32
    status: np.ndarray  # [G, M] int8: PENDING / EXPANDED / TERMINAL
    terminal_value: np.ndarray  # [G, M] float32: exact value for the node's mover
    num_nodes: np.ndarray  # [G] int32
    root_state: np.ndarray  # [G, S] int32
    root_history: np.ndarray  # [G, T-1, H*W] int8: boards before the root, newest first
    in_flight: np.ndarray  # [G] int32: leaves gathered and not yet applied


class _Scratch(NamedTuple):
    state: np.ndarray  # [S] int32
    captured: np.ndarray  # [P] int32 (Go's captured points)
    boards: np.ndarray  # [T, H*W] int8: boards along the current path, newest first
    path: np.ndarray  # [M] int32: actions from the root to the leaf
    legal: np.ndarray  # [A] bool
    remap: np.ndarray  # [M] int32: old -> new node ids while re-rooting


def _new_tree(games: int, max_nodes: int, num_actions: int, state: np.ndarray, history_boards: int,
              cells: int) -> Tree:
    g, m, a = games, max_nodes, num_actions
    return Tree(
        children=np.full((g, m, a), UNEXPANDED, dtype=np.int32),
        edge_n=np.zeros((g, m, a), dtype=np.float32),
        edge_w=np.zeros((g, m, a), dtype=np.float32),
        prior=np.zeros((g, m, a), dtype=np.float32),
        node_n=np.zeros((g, m), dtype=np.float32),
        edge_n_sum=np.zeros((g, m), dtype=np.float32),
        node_w=np.zeros((g, m), dtype=np.float32),
        parent=np.full((g, m), -1, dtype=np.int32),
        parent_action=np.full((g, m), -1, dtype=np.int32),
        status=np.zeros((g, m), dtype=np.int8),
        terminal_value=np.zeros((g, m), dtype=np.float32),
        num_nodes=np.ones(g, dtype=np.int32),
        root_state=np.tile(state, (g, 1)),
        root_history=np.zeros((g, max(history_boards, 1), cells), dtype=np.int8),
        in_flight=np.zeros(g, dtype=np.int32),
    )


def _max_nodes(simulations: int, leaves_per_round: int) -> int:
    # Reused subtrees can hold up to the previous move's nodes on top of this one's.
    return 2 * simulations + 2 * leaves_per_round + 2


def search_bytes(game: Game, *, games: int, simulations: int, leaves_per_round: int = 8,
                 keep_leaf_states: bool = False) -> int:
    """The bytes ``Search(game, games=..., simulations=..., leaves_per_round=...,
    keep_leaf_states=...)`` preallocates, counted without allocating anything, so that
    a config can be refused before a worker runs out of memory. The sizes are Python
    integers throughout: an absurd config gives a huge number, never an overflow.

    The tree's four ``[G, M, A]`` arrays dominate, 16 bytes per edge with M = 2 *
    simulations + 2 * leaves_per_round + 2: 64 games of 19x19 Go at 800 simulations
    take 64 * 1618 * 362 * 16 bytes = 0.56 GiB.
    """
    g, m, a = games, _max_nodes(simulations, leaves_per_round), game.num_actions
    height, width = game.board_shape
    cells = height * width
    state = game.initial_state()
    s = state.shape[0]
    t = game.history_length
    batch = games * leaves_per_round
    # One row per array the constructor makes, in its order: (shape, dtype).
    arrays: list[tuple[tuple[int, ...], DTypeLike]] = [
        # the tree (_new_tree)
        ((g, m, a), np.int32), ((g, m, a), np.float32), ((g, m, a), np.float32), ((g, m, a), np.float32),
        ((g, m), np.float32), ((g, m), np.float32), ((g, m), np.float32), ((g, m), np.int32),
        ((g, m), np.int32), ((g, m), np.int8), ((g, m), np.float32), ((g,), np.int32),
        ((g, s), state.dtype), ((g, max(t - 1, 1), cells), np.int8), ((g,), np.int32),
        # the scratch of one walk
        ((s,), state.dtype), ((max(cells * 2 + 100, 512),), np.int32), ((t, cells), np.int8),
        ((m,), np.int32), ((a,), np.bool_), ((m,), np.int32),
        # the initial state, the kernels' parameters, the leaf batch and its bookkeeping
        ((s,), state.dtype), ((6,), np.int64), ((3,), np.float64),
        ((batch, *game.planes_shape), np.uint8), ((batch if keep_leaf_states else 1, s), np.int32),
        ((batch,), np.int32), ((batch,), np.int32), ((2,), np.int64), ((g,), np.bool_), ((g,), np.float32),
    ]
    return sum(math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in arrays)


# --- compiled kernels ------------------------------------------------------------------
@njit(cache=True, inline="always")
def _select_child(tree, g, node, formula, c_puct, fpu_reduction):
    """The action maximising Q + U at ``node`` (ties to the lowest action)."""
    if formula == UCT:
        return _select_uct(tree.prior[g, node], tree.edge_n[g, node], tree.edge_w[g, node],
                           tree.edge_n_sum[g, node], np.float32(c_puct))
    return _select_puct(tree.prior[g, node], tree.edge_n[g, node], tree.edge_w[g, node], tree.edge_n_sum[g, node],
                        tree.node_n[g, node], tree.node_w[g, node], np.float32(c_puct), np.float32(fpu_reduction))


@njit(cache=True)
def _select_puct(prior, edge_n, edge_w, total, node_n, node_w, c_puct, fpu_reduction):
    """argmax of Q + U over the legal moves of one node (rows of the tree arrays).
    float32 throughout: mixing in float64 made this loop several times slower."""
    k = c_puct * np.sqrt(max(total, np.float32(1.0)))
    # First-play urgency: an unvisited move is assumed a little worse than the node.
    fpu = np.float32(-1.0)
    if node_n > 0:
        fpu = node_w / node_n - fpu_reduction
    best, best_score = -1, np.float32(-1e30)
    for a in range(prior.shape[0]):
        p = prior[a]
        if p < 0:  # ILLEGAL
            continue
        n = edge_n[a]
        q = edge_w[a] / n if n > 0 else fpu
        score = q + k * p / (np.float32(1.0) + n)
        if score > best_score:
            best, best_score = a, score
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


@njit(cache=True, inline="always")
def _backup(tree, g, node, value, virtual_loss):
    """Back ``value`` (for the mover at ``node``) up to the root, taking back the
    virtual loss the walk added on each edge."""
    v = value
    while True:
        tree.node_n[g, node] += 1.0
        tree.node_w[g, node] += v
        parent = tree.parent[g, node]
        if parent < 0:
            return
        a = tree.parent_action[g, node]
        v = -v
        tree.edge_n[g, parent, a] += 1.0 - virtual_loss
        tree.edge_n_sum[g, parent] += 1.0 - virtual_loss
        tree.edge_w[g, parent, a] += v + virtual_loss
        node = parent


@njit(cache=True, inline="always")
def _undo_virtual_loss(tree, g, node, virtual_loss):
    while True:
        parent = tree.parent[g, node]
        if parent < 0:
            return
        a = tree.parent_action[g, node]
        tree.edge_n[g, parent, a] -= virtual_loss
        tree.edge_n_sum[g, parent] -= virtual_loss
        tree.edge_w[g, parent, a] += virtual_loss
        node = parent


@njit(cache=True, inline="always")
def _encode_leaf(tree, g, depth, scratch, to_play, out, b, height, width, history_length):
    """Write the planes of the leaf reached by ``depth`` path moves into ``out[b]``:
    mover's and opponent's stones for T positions (newest first), colour plane last."""
    boards = scratch.boards
    # Positions along the path are in boards[0..depth]; older ones come from the
    # root's history (all zeros before the game began: an empty board).
    for t in range(depth + 1, history_length):
        _copy_into(tree.root_history[g, t - depth - 1], boards[t])
    _write_planes(boards, to_play, out[b], height * width, history_length)


@njit(cache=True)
def _write_planes(boards, to_play, planes, cells, history_length):
    """``planes`` is one leaf's [H*W*C] bytes, point-major: C = 2T + 1 channels per
    point. The m,n,k games (T = 1) and AlphaGo Zero's Go input (T = 8) get loops
    whose stride the compiler can see: T = 1 then runs as vector code, several times
    faster than the general loop, whose stride is only known at run time."""
    own, other = 1 + to_play, 2 - to_play
    colour = 1 if to_play == 0 else 0
    if history_length == 1:
        board = boards[0]
        for i in range(cells):
            v = board[i]
            planes[3 * i] = v == own
            planes[3 * i + 1] = v == other
            planes[3 * i + 2] = colour
    elif history_length == 8:
        for i in range(cells):
            for t in range(8):
                v = boards[t, i]
                planes[17 * i + 2 * t] = v == own
                planes[17 * i + 2 * t + 1] = v == other
            planes[17 * i + 16] = colour
    else:
        channels = 2 * history_length + 1
        for t in range(history_length):
            board = boards[t]
            for i in range(cells):
                v = board[i]
                planes[i * channels + 2 * t] = v == own
                planes[i * channels + 2 * t + 1] = v == other
        for i in range(cells):
            planes[i * channels + 2 * history_length] = colour


@njit(cache=True, inline="always")
def _copy_into(source, target):
    """``target[:] = source`` for 1-D rows: numba's slice assignment goes through a
    general broadcasting path that cost twice this loop per leaf."""
    for i in range(source.shape[0]):
        target[i] = source[i]


@njit(cache=True, inline="always")
def _replay_to_parent(kind, params, tree, g, depth, scratch, history_length):
    """Play the first ``depth - 1`` moves of the path from the root into scratch.state:
    the position of the leaf's parent. Boards of the last T positions of the path
    (newest first, the leaf's own at slot 0) go to scratch.boards."""
    st = scratch.state
    _copy_into(tree.root_state[g], st)
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
def _play_leaf_move(kind, params, scratch, action, history_length):
    """The path's last move, from the parent's position to the leaf's (board slot 0)."""
    R.play(kind, params, scratch.state, action, scratch.captured)
    if history_length > 0:
        R.board_into(kind, params, scratch.state, scratch.boards[0])


@njit(cache=True, inline="always")
def _drop_illegal_edge(tree, g, node, a):
    """Take a candidate move found illegal out of the node's priors, renormalising the
    rest so they stay the policy over exactly the legal moves."""
    p = tree.prior[g, node, a]
    tree.prior[g, node, a] = ILLEGAL
    if tree.status[g, node] != EXPANDED or p <= 0.0 or p >= 1.0:
        return
    scale = np.float32(1.0) / (np.float32(1.0) - p)
    for b in range(tree.prior.shape[2]):
        if tree.prior[g, node, b] > 0.0:
            tree.prior[g, node, b] *= scale


# One compiled walk per game family: with ``kind`` a constant, the other family's
# rules fold away and the walk loop stays tight (Connect Four: 2.5M -> 3.3M sims/s).
@njit(cache=True)
def gather_kernel_mnk(params, tree, scratch, targets, active, iparams, fparams, out, leaf_game, leaf_node,
                      leaf_states, counts):
    _gather(R.MNK, params, tree, scratch, targets, active, iparams, fparams, out, leaf_game, leaf_node,
            leaf_states, counts)


@njit(cache=True)
def gather_kernel_go(params, tree, scratch, targets, active, iparams, fparams, out, leaf_game, leaf_node,
                     leaf_states, counts):
    _gather(R.GO, params, tree, scratch, targets, active, iparams, fparams, out, leaf_game, leaf_node,
            leaf_states, counts)


@njit(cache=True, inline="always")
def _gather(kind, params, tree, scratch, targets, active, iparams, fparams, out, leaf_game, leaf_node,
            leaf_states, counts):
    """Walk up to leaves_per_round times per active game. Sets ``counts`` to [leaves
    that need an evaluation (rows of ``out``, and of ``leaf_states`` when asked for),
    walks that ended on a terminal node (backed up here)]."""
    leaves_per_round, history_length, height, width, formula, keep_states = (
        iparams[0], iparams[1], iparams[2], iparams[3], iparams[4], iparams[5])
    c_puct, fpu_reduction, virtual_loss = fparams[0], fparams[1], fparams[2]
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
            # The root itself is the first leaf of a fresh tree.
            if tree.status[g, ROOT] == PENDING:
                if tree.in_flight[g] > 0:
                    break
                _replay_to_parent(kind, params, tree, g, 0, scratch, history_length)
                if R.is_terminal(kind, params, scratch.state):
                    break  # nothing to search in a finished game
                R.legal_mask_into(kind, params, scratch.state, scratch.legal)
                for a in range(num_actions):
                    tree.prior[g, ROOT, a] = 1.0 if scratch.legal[a] else ILLEGAL
                _encode_leaf(tree, g, 0, scratch, scratch.state[R.TO_PLAY], out, b,
                             height, width, history_length)
                if keep_states:
                    _copy_into(scratch.state, leaf_states[b])
                leaf_game[b], leaf_node[b] = g, ROOT
                b += 1
                tree.in_flight[g] += 1
                break
            if tree.status[g, ROOT] == TERMINAL:
                break
            # Walk down, adding virtual loss, until an edge with no node behind it.
            node, depth = ROOT, 0
            stop = 0  # 0: new leaf at (node, a), 1: known terminal, 2: pending (collision)
            while True:
                a = _select_child(tree, g, node, formula, c_puct, fpu_reduction)
                tree.edge_n[g, node, a] += virtual_loss
                tree.edge_n_sum[g, node] += virtual_loss
                tree.edge_w[g, node, a] -= virtual_loss
                scratch.path[depth] = a
                depth += 1
                child = tree.children[g, node, a]
                if child == UNEXPANDED:
                    break
                node = child
                if tree.status[g, child] == TERMINAL:
                    stop = 1
                    break
                if tree.status[g, child] == PENDING:
                    stop = 2
                    break
            if stop == 2:
                # Another walk of this round waits on that leaf: try again next round.
                _undo_virtual_loss(tree, g, node, virtual_loss)
                break
            if stop == 1:
                _backup(tree, g, node, tree.terminal_value[g, node], virtual_loss)
                counts[1] += 1
                continue
            if tree.num_nodes[g] >= max_nodes:
                _undo_virtual_loss_edge(tree, g, node, a, virtual_loss)
                break
            _replay_to_parent(kind, params, tree, g, depth, scratch, history_length)
            st = scratch.state
            # Inner nodes list candidate moves (see candidate_mask_into): an edge is
            # checked when a walk first takes it, and a walk that finds it illegal
            # removes it and starts again without counting.
            if not R.candidates_are_legal(kind) and not R.is_legal(kind, params, st, a):
                _undo_virtual_loss_edge(tree, g, node, a, virtual_loss)
                _drop_illegal_edge(tree, g, node, a)
                walks -= 1
                continue
            child = tree.num_nodes[g]
            tree.num_nodes[g] += 1
            tree.children[g, node, a] = child
            tree.parent[g, child] = node
            tree.parent_action[g, child] = a
            _play_leaf_move(kind, params, scratch, a, history_length)
            if R.is_terminal(kind, params, st):
                tree.status[g, child] = TERMINAL
                result = R.outcome(kind, params, st)
                tree.terminal_value[g, child] = result if st[R.TO_PLAY] == 0 else -result
                _backup(tree, g, child, tree.terminal_value[g, child], virtual_loss)
                counts[1] += 1
                continue
            tree.status[g, child] = PENDING
            R.candidate_mask_into(kind, params, st, scratch.legal)
            for m in range(num_actions):
                tree.prior[g, child, m] = 1.0 if scratch.legal[m] else ILLEGAL
            _encode_leaf(tree, g, depth, scratch, st[R.TO_PLAY], out, b,
                         height, width, history_length)
            if keep_states:
                _copy_into(st, leaf_states[b])
            leaf_game[b], leaf_node[b] = g, child
            b += 1
            tree.in_flight[g] += 1
    counts[0] = b


@njit(cache=True, inline="always")
def _undo_virtual_loss_edge(tree, g, node, a, virtual_loss):
    """Take back the virtual loss of a walk that stopped on edge (node, a)."""
    tree.edge_n[g, node, a] -= virtual_loss
    tree.edge_n_sum[g, node] -= virtual_loss
    tree.edge_w[g, node, a] += virtual_loss
    _undo_virtual_loss(tree, g, node, virtual_loss)


@njit(cache=True)
def apply_kernel(tree, leaf_game, leaf_node, count, policy, value, virtual_loss):
    """Set the evaluated leaves' priors (the policy renormalised over legal moves)
    and back their values up."""
    num_actions = tree.prior.shape[2]
    for b in range(count):
        g, node = leaf_game[b], leaf_node[b]
        total = 0.0
        legal = 0
        for a in range(num_actions):
            if tree.prior[g, node, a] != ILLEGAL:
                total += max(policy[b, a], 0.0)
                legal += 1
        for a in range(num_actions):
            if tree.prior[g, node, a] != ILLEGAL:
                p = max(policy[b, a], 0.0)
                tree.prior[g, node, a] = p / total if total > 0.0 else 1.0 / legal
        tree.status[g, node] = EXPANDED
        tree.in_flight[g] -= 1
        _backup(tree, g, node, value[b], virtual_loss)


@njit(cache=True)
def reroot_kernel(kind, params, tree, scratch, g, action):
    """Play ``action`` at game g's root and keep the subtree below it (renumbered so
    the new root is node 0). Node ids grow from parent to child, so copying the
    subtree's nodes in ascending id order to ascending new ids never overwrites a
    node that is still to be read."""
    old_root = tree.children[g, ROOT, action]
    # Move the root's board into the history (newest first), then play the move.
    hist = tree.root_history[g]
    for t in range(hist.shape[0] - 1, 0, -1):
        hist[t] = hist[t - 1]
    R.board_into(kind, params, tree.root_state[g], hist[0])
    R.play(kind, params, tree.root_state[g], action, scratch.captured)
    n = tree.num_nodes[g]
    if old_root == UNEXPANDED or tree.status[g, old_root] == PENDING:
        _clear_game(tree, g, n)
        return
    remap = scratch.remap
    remap[:n] = -1
    remap[old_root] = 0
    count = 1
    for old in range(old_root + 1, n):
        parent = tree.parent[g, old]
        if parent >= 0 and remap[parent] >= 0:
            remap[old] = count
            count += 1
    for old in range(old_root, n):
        new = remap[old]
        if new < 0:
            continue
        for a in range(tree.prior.shape[2]):
            c = tree.children[g, old, a]
            tree.children[g, new, a] = remap[c] if c >= 0 else UNEXPANDED
            tree.edge_n[g, new, a] = tree.edge_n[g, old, a]
            tree.edge_w[g, new, a] = tree.edge_w[g, old, a]
            tree.prior[g, new, a] = tree.prior[g, old, a]
        tree.node_n[g, new] = tree.node_n[g, old]
        tree.edge_n_sum[g, new] = tree.edge_n_sum[g, old]
        tree.node_w[g, new] = tree.node_w[g, old]
        tree.status[g, new] = tree.status[g, old]
        tree.terminal_value[g, new] = tree.terminal_value[g, old]
        tree.parent[g, new] = remap[tree.parent[g, old]] if new > 0 else -1
        tree.parent_action[g, new] = tree.parent_action[g, old] if new > 0 else -1
    _clear_nodes(tree, g, count, n)
    tree.num_nodes[g] = count
    # An inner node lists candidate moves; the root's priors must be over exactly the
    # legal ones (root noise, the policy target and the move shown to users read them).
    if tree.status[g, ROOT] == EXPANDED:
        R.legal_mask_into(kind, params, tree.root_state[g], scratch.legal)
        for a in range(tree.prior.shape[2]):
            if tree.prior[g, ROOT, a] != ILLEGAL and not scratch.legal[a]:
                _drop_illegal_edge(tree, g, ROOT, a)


@njit(cache=True)
def _clear_nodes(tree, g, start, stop):
    for node in range(start, stop):
        for a in range(tree.prior.shape[2]):  # loops, not slices: see _copy_into
            tree.children[g, node, a] = UNEXPANDED
            tree.edge_n[g, node, a] = 0.0
            tree.edge_w[g, node, a] = 0.0
            tree.prior[g, node, a] = 0.0
        tree.node_n[g, node] = 0.0
        tree.edge_n_sum[g, node] = 0.0
        tree.node_w[g, node] = 0.0
        tree.status[g, node] = PENDING
        tree.terminal_value[g, node] = 0.0
        tree.parent[g, node] = -1
        tree.parent_action[g, node] = -1


@njit(cache=True)
def _clear_game(tree, g, used):
    _clear_nodes(tree, g, 0, used)
    tree.num_nodes[g] = 1
    tree.in_flight[g] = 0


# --- the Python surface ----------------------------------------------------------------
class Search:
    """PUCT search trees for G games of one game type.

    ``gather(targets)`` returns the planes of this round's leaves (``uint8[B, H, W, C]``,
    a view valid until the next call); ``apply(policy, value)`` takes their evaluation.
    ``run(evaluate, simulations)`` loops the two until every game's root has been
    visited ``simulations`` times.
    """

    def __init__(
        self,
        game: Game,
        *,
        games: int,
        simulations: int,
        c_puct: float = 1.25,
        fpu_reduction: float = 0.25,
        leaves_per_round: int = 8,
        virtual_loss: float = 1.0,
        formula: str = "puct",
        keep_leaf_states: bool = False,
    ):
        if games < 1 or simulations < 1 or leaves_per_round < 1:
            raise ValueError("games, simulations and leaves_per_round must be at least 1")
        if formula not in ("puct", "uct"):
            raise ValueError(f"formula must be 'puct' or 'uct', not {formula!r}")
        self.game = game
        self.games = games
        self.simulations = simulations
        height, width = game.board_shape
        self._cells = height * width
        self.max_nodes = _max_nodes(simulations, leaves_per_round)  # search_bytes counts from the same
        self._initial = game.initial_state()
        self.tree = _new_tree(games, self.max_nodes, game.num_actions, self._initial,
                              game.history_length - 1, self._cells)
        self._scratch = _Scratch(
            state=self._initial.copy(),
            captured=np.zeros(max(self._cells * 2 + 100, 512), dtype=np.int32),
            boards=np.zeros((game.history_length, self._cells), dtype=np.int8),
            path=np.zeros(self.max_nodes, dtype=np.int32),
            legal=np.zeros(game.num_actions, dtype=np.bool_),
            remap=np.zeros(self.max_nodes, dtype=np.int32),
        )
        self._iparams = np.array([leaves_per_round, game.history_length, height, width,
                                  PUCT if formula == "puct" else UCT, int(keep_leaf_states)], dtype=np.int64)
        self._fparams = np.array([c_puct, fpu_reduction, virtual_loss], dtype=np.float64)
        batch = games * leaves_per_round
        self._planes = np.zeros((batch, *game.planes_shape), dtype=np.uint8)
        self._planes_flat = self._planes.reshape(batch, -1)  # what the kernel writes
        self._states = np.zeros((batch if keep_leaf_states else 1, self._initial.shape[0]), dtype=np.int32)
        self.keep_leaf_states = keep_leaf_states
        self._leaf_game = np.zeros(batch, dtype=np.int32)
        self._leaf_node = np.zeros(batch, dtype=np.int32)
        self._pending = 0
        self._counts = np.zeros(2, dtype=np.int64)
        #: walks of the last gather that ended on a terminal node (no evaluation needed)
        self.terminal_backups = 0
        self._active = np.ones(games, dtype=np.bool_)
        self._default_targets = np.full(games, simulations, dtype=np.float32)
        self._gather_kernel = gather_kernel_go if game.kernel_kind == R.GO else gather_kernel_mnk
        self.virtual_loss = virtual_loss

    # -- positions --------------------------------------------------------------------
    def reset(self, g: int, state: np.ndarray | None = None, history: Sequence[np.ndarray] = ()) -> None:
        """Start game g's tree afresh at ``state`` (default: the initial position);
        ``history`` holds earlier states, oldest first, for the input planes."""
        t = self.tree
        _clear_game(t, g, int(t.num_nodes[g]))
        t.root_state[g] = self._initial if state is None else state
        t.root_history[g] = 0
        for i, past in enumerate(list(history)[::-1][: t.root_history.shape[1]]):
            t.root_history[g, i] = self.game.board(past).reshape(-1)

    def root_state(self, g: int) -> np.ndarray:
        return self.tree.root_state[g]

    def advance(self, g: int, action: int) -> None:
        """Play ``action`` in game g and keep its subtree for the next search."""
        if self.tree.in_flight[g]:
            raise RuntimeError(f"game {g} still has leaves in flight")
        if not self.game.legal_mask(self.tree.root_state[g])[action]:
            raise ValueError(f"{self.game.action_to_text(action)} is not legal in game {g}")
        reroot_kernel(self.game.kernel_kind, self.game.params, self.tree, self._scratch, g, int(action))

    # -- search -------------------------------------------------------------------------
    def gather(self, targets: np.ndarray | int | None = None, active: np.ndarray | None = None) -> np.ndarray:
        """Planes of this round's leaves, ``uint8[B, H, W, C]``. B is 0 when every active
        game reached its target, or when every walk of the round ended on a terminal
        node (``terminal_backups`` > 0: gather again)."""
        if self._pending:
            raise RuntimeError("apply() the previous batch first")
        if targets is None:
            goal = self._default_targets
        else:
            goal = np.broadcast_to(np.asarray(targets, dtype=np.float32), (self.games,)).copy()
        act = self._active if active is None else np.asarray(active, dtype=np.bool_)
        self._gather_kernel(self.game.params, self.tree, self._scratch, goal, act, self._iparams, self._fparams,
                            self._planes_flat, self._leaf_game, self._leaf_node, self._states, self._counts)
        self._pending = n = int(self._counts[0])
        self.terminal_backups = int(self._counts[1])
        return self._planes[:n]

    def leaf_states(self) -> np.ndarray:
        """The positions of the gathered leaves, ``int32[B, S]`` (for rollout evaluators;
        needs ``keep_leaf_states=True``)."""
        if not self.keep_leaf_states:
            raise RuntimeError("create the Search with keep_leaf_states=True")
        return self._states[: self._pending]

    def apply(self, policy: np.ndarray, value: np.ndarray) -> None:
        n = self._pending
        policy = np.asarray(policy, dtype=np.float32)
        value = np.asarray(value, dtype=np.float32).reshape(-1)
        if policy.shape != (n, self.game.num_actions) or value.shape != (n,):
            raise ValueError(f"expected policy [{n}, {self.game.num_actions}] and value [{n}], "
                             f"got {policy.shape} and {value.shape}")
        apply_kernel(self.tree, self._leaf_game, self._leaf_node, n, policy, value, self.virtual_loss)
        self._pending = 0

    def run(self, evaluate: Evaluator, simulations: np.ndarray | int | None = None,
            active: np.ndarray | None = None) -> int:
        """Search until every active game's root has ``simulations`` visits; returns the
        number of evaluator calls."""
        calls = 0
        while True:
            planes = self.gather(simulations, active)
            if len(planes) == 0:
                if self.terminal_backups:
                    self.apply(*_no_evaluation(self.game))
                    continue
                return calls
            policy, value = evaluate(planes)
            self.apply(policy, value)
            calls += 1

    # -- results ------------------------------------------------------------------------
    def root_visits(self, g: int) -> np.ndarray:
        """N(root, a) for every action, ``float32[A]``."""
        return self.tree.edge_n[g, ROOT].copy()

    def root_value(self, g: int) -> float:
        """Mean value of the root for its player to move."""
        n = self.tree.node_n[g, ROOT]
        return float(self.tree.node_w[g, ROOT] / n) if n > 0 else 0.0

    def root_q(self, g: int) -> np.ndarray:
        """Q(root, a) (0 where unvisited), ``float32[A]``."""
        n = self.tree.edge_n[g, ROOT]
        return np.where(n > 0, self.tree.edge_w[g, ROOT] / np.maximum(n, 1), 0.0).astype(np.float32)

    def root_prior(self, g: int) -> np.ndarray:
        return np.maximum(self.tree.prior[g, ROOT], 0.0)

    def root_expanded(self, g: int) -> bool:
        return bool(self.tree.status[g, ROOT] == EXPANDED)

    def add_root_noise(self, g: int, rng: np.random.Generator, *, alpha: float, fraction: float) -> None:
        """Mix Dirichlet(alpha) noise into the root's priors over its legal moves
        (AlphaZero: P = (1 - fraction) P + fraction * eta)."""
        prior = self.tree.prior[g, ROOT]
        legal = prior != ILLEGAL
        if not legal.any() or fraction <= 0:
            return
        eta = rng.dirichlet(np.full(int(legal.sum()), alpha))
        prior[legal] = (1.0 - fraction) * prior[legal] + fraction * eta


def _no_evaluation(game: Game) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((0, game.num_actions), np.float32), np.zeros(0, np.float32)


def visit_policy(visits: np.ndarray) -> np.ndarray:
    """The search policy target: visit counts normalised to sum to 1."""
    total = visits.sum()
    return (visits / total).astype(np.float32) if total > 0 else visits.astype(np.float32)


def choose_move(visits: np.ndarray, rng: np.random.Generator, *, temperature: float) -> int:
    """Sample a move with probability proportional to N^(1 / temperature); temperature
    0 takes the most visited (ties broken at random)."""
    if temperature <= 0:
        best = np.flatnonzero(visits == visits.max())
        return int(rng.choice(best))
    weights = visits.astype(np.float64) ** (1.0 / temperature)
    return int(rng.choice(len(visits), p=weights / weights.sum()))


def uniform_evaluator(num_actions: int) -> Evaluator:
    """Uniform priors and value 0: search by visit counts alone (tests, benchmarks)."""

    def evaluate(planes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(planes)
        return np.full((n, num_actions), 1.0 / num_actions, dtype=np.float32), np.zeros(n, dtype=np.float32)

    return evaluate


@njit(cache=True)
def rollout_values_kernel(kind, params, states, count, rollouts, seed, out):
    """Mean result of ``rollouts`` random playouts from each state, for its mover."""
    np.random.seed(seed)
    scratch = states[0].copy()
    for b in range(count):
        total = 0.0
        for _ in range(rollouts):
            _copy_into(states[b], scratch)
            R.random_moves(kind, params, scratch)
            total += R.outcome(kind, params, scratch)
        out[b] = (total if states[b, R.TO_PLAY] == 0 else -total) / rollouts


class RolloutEvaluator:
    """Pure MCTS's evaluator: uniform priors, value from random playouts to the end.

    It needs the leaves' positions, not planes: ``run(search)`` drives a Search made
    with ``keep_leaf_states=True``.
    """

    def __init__(self, game: Game, *, rollouts: int = 1, seed: int = 0):
        self.game = game
        self.rollouts = rollouts
        self._seed = seed

    def evaluate_states(self, states: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        n = len(states)
        values = np.zeros(n, dtype=np.float32)
        if n:
            rollout_values_kernel(self.game.kernel_kind, self.game.params, states, n, self.rollouts,
                                  self._seed, values)
            self._seed = (self._seed + 1) % (2**32)
        policy = np.full((n, self.game.num_actions), 1.0 / self.game.num_actions, dtype=np.float32)
        return policy, values

    def run(self, search: Search, simulations: np.ndarray | int | None = None,
            active: np.ndarray | None = None) -> int:
        calls = 0
        while True:
            planes = search.gather(simulations, active)
            if len(planes) == 0 and not search.terminal_backups:
                return calls
            search.apply(*self.evaluate_states(search.leaf_states()))
            calls += int(len(planes) > 0)


def best_move(game: Game, evaluate: Evaluator, state: np.ndarray, history: Sequence[np.ndarray] = (), *,
              simulations: int, c_puct: float = 1.25, fpu_reduction: float = 0.25,
              leaves_per_round: int = 8) -> int:
    """The move to play in one position: the most visited after ``simulations`` of
    search, or with ``simulations=0`` the legal move the evaluator's policy likes best."""
    if game.is_terminal(state):
        raise ValueError("the game is over")
    if simulations == 0:
        policy, _ = evaluate(game.encode(state, history)[None].astype(np.uint8))
        return int(np.argmax(np.where(game.legal_mask(state), policy[0], -1.0)))
    search = Search(game, games=1, simulations=simulations, c_puct=c_puct, fpu_reduction=fpu_reduction,
                    leaves_per_round=leaves_per_round)
    search.reset(0, state, history)
    search.run(evaluate)
    visits = search.root_visits(0)
    return int(np.argmax(np.where(game.legal_mask(state), visits, -1.0)))
