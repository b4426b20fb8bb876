"""The search trees of G games in preallocated arrays, their sentinels, and the
compiled edits that keep a tree's invariants: an edge's N, W and its node's sum of
N change together (``update_edge``), a move found illegal leaves its node's priors,
which stay a distribution (``drop_illegal_edge``), and a kept subtree is renumbered
from 0 after a move (``reroot_kernel``).

Notation as in ``engine.mcts``: N visits, W value sum, P prior, per edge (s, a).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit

from tengen.engine.games import kernels as R
from tengen.engine.games.base import KERNEL_GO, Game
from tengen.engine.games.go_features import feature_scratch_shape
from tengen.engine.games.go_kernels import P_FEATURES

__all__ = [
    "ROOT",
    "UNEXPANDED",
    "ILLEGAL",
    "PENDING",
    "EXPANDED",
    "TERMINAL",
    "Tree",
    "Scratch",
    "new_tree",
    "new_scratch",
    "ladder_shape",
    "max_nodes",
    "captured_capacity",
]

ROOT = 0
UNEXPANDED = -1  # children[]: no node behind this edge yet
ILLEGAL = -1.0  # prior[]: the edge's move is not legal
PENDING, EXPANDED, TERMINAL = 0, 1, 2  # node status


class Tree(NamedTuple):
    """The search state of G games, M nodes each, A actions (shapes in comments)."""

    children: np.ndarray  # [G, M, A] int32: child node, or UNEXPANDED
    edge_n: np.ndarray  # [G, M, A] float32: N, virtual visits included while in flight
    edge_w: np.ndarray  # [G, M, A] float32: W, from the mover's view at the parent
    prior: np.ndarray  # [G, M, A] float32: P over legal moves, ILLEGAL elsewhere
    node_n: np.ndarray  # [G, M] float32: evaluations backed up through the node
    edge_n_sum: np.ndarray  # [G, M] float32: sum over a of edge_n (so PUCT needs one pass)
    node_w: np.ndarray  # [G, M] float32: their value sum, from the node mover's view
    node_w2: np.ndarray  # [G, M] float32: the sum of their squares (the spread, for the LCB)
    parent: np.ndarray  # [G, M] int32
    parent_action: np.ndarray  # [G, M] int32
    status: np.ndarray  # [G, M] int8: PENDING / EXPANDED / TERMINAL
    terminal_value: np.ndarray  # [G, M] float32: exact value for the node's mover (terminal or proven)
    proven: np.ndarray  # [G, M] int8: 1 when terminal_value is exact (the solver's proof; terminal nodes too)
    proof_plies: np.ndarray  # [G, M] int32: plies to the game's end under the proof
    num_nodes: np.ndarray  # [G] int32
    root_state: np.ndarray  # [G, S] int32
    root_history: np.ndarray  # [G, T-1, H*W] int8: boards before the root, newest first
    in_flight: np.ndarray  # [G] int32: leaves gathered and not yet applied
    raw_value: np.ndarray  # [G, M] float32: the evaluator's value of the node (Gumbel's v_hat)
    # Gumbel's root (engine/mcts/gumbel.py), per game:
    gumbel: np.ndarray  # [G, A] float32: g(a), drawn by the caller; 0 = no noise
    survivors: np.ndarray  # [G, A] int32: root moves of the phase, best first (first survivor_count)
    survivor_count: np.ndarray  # [G] int32
    considered: np.ndarray  # [G] int32: m of this search; 0 = not started
    root_forced_k: np.ndarray  # [G] float32: KataGo's forced playouts' k at the root; 0 = none


class Scratch(NamedTuple):
    """What one walk works in (one walk at a time, so one per Search)."""

    state: np.ndarray  # [S] int32
    captured: np.ndarray  # [P] int32 (Go's captured points)
    boards: np.ndarray  # [T, H*W] int8: boards along the current path, newest first
    path: np.ndarray  # [M] int32: actions from the root to the leaf
    legal: np.ndarray  # [A] bool
    remap: np.ndarray  # [M] int32: old -> new node ids while re-rooting
    weights: np.ndarray  # [A] float32: a node's per-move numbers (Gumbel's sigma, pi')
    feature_legal: np.ndarray  # [A] bool: a leaf's legal moves for its feature planes (Go)
    mark: np.ndarray  # [P] int32: points counted as a group's liberties (Go's feature planes)
    ladder: np.ndarray  # [R, L] int32: positions along a ladder (Go's feature planes; [1, 1] without them)


def max_nodes(simulations: int, leaves_per_round: int) -> int:
    """M, the nodes a tree holds: reused subtrees can hold up to the previous move's
    nodes on top of this one's."""
    return 2 * simulations + 2 * leaves_per_round + 2


def captured_capacity(cells: int) -> int:
    """P, the length of the captured-points buffer of a board of ``cells`` points."""
    return max(cells * 2 + 100, 512)


def new_tree(games: int, max_nodes: int, num_actions: int, state: np.ndarray, history_boards: int,
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
        node_w2=np.zeros((g, m), dtype=np.float32),
        parent=np.full((g, m), -1, dtype=np.int32),
        parent_action=np.full((g, m), -1, dtype=np.int32),
        status=np.zeros((g, m), dtype=np.int8),
        terminal_value=np.zeros((g, m), dtype=np.float32),
        proven=np.zeros((g, m), dtype=np.int8),
        proof_plies=np.zeros((g, m), dtype=np.int32),
        num_nodes=np.ones(g, dtype=np.int32),
        root_state=np.tile(state, (g, 1)),
        root_history=np.zeros((g, max(history_boards, 1), cells), dtype=np.int8),
        in_flight=np.zeros(g, dtype=np.int32),
        raw_value=np.zeros((g, m), dtype=np.float32),
        gumbel=np.zeros((g, a), dtype=np.float32),
        survivors=np.zeros((g, a), dtype=np.int32),
        survivor_count=np.zeros(g, dtype=np.int32),
        considered=np.zeros(g, dtype=np.int32),
        root_forced_k=np.zeros(g, dtype=np.float32),
    )


def new_scratch(game: Game, max_nodes: int) -> Scratch:
    height, width = game.board_shape
    cells = height * width
    return Scratch(
        state=game.initial_state(),
        captured=np.zeros(captured_capacity(cells), dtype=np.int32),
        boards=np.zeros((game.history_length, cells), dtype=np.int8),
        path=np.zeros(max_nodes, dtype=np.int32),
        legal=np.zeros(game.num_actions, dtype=np.bool_),
        remap=np.zeros(max_nodes, dtype=np.int32),
        weights=np.zeros(game.num_actions, dtype=np.float32),
        feature_legal=np.zeros(game.num_actions, dtype=np.bool_),
        mark=np.zeros((height + 2) * (width + 2), dtype=np.int32),
        ladder=np.zeros(ladder_shape(game), dtype=np.int32),
    )


def ladder_shape(game: Game) -> tuple[int, int]:
    """The shape of ``Scratch.ladder``: Go's with feature planes reads its ladders in
    ``go_features.feature_scratch``; other games keep a [1, 1] stand-in."""
    if game.kernel_kind == KERNEL_GO and game.params[P_FEATURES]:
        return feature_scratch_shape(game.params)
    return 1, 1


# --- compiled edits --------------------------------------------------------------------
@njit(cache=True, inline="always")
def copy_into(source, target):
    """``target[:] = source`` for 1-D rows: numba's slice assignment goes through a
    general broadcasting path that cost twice this loop per leaf."""
    for i in range(source.shape[0]):
        target[i] = source[i]


@njit(cache=True, inline="always")
def update_edge(tree, g, node, a, visits, value, virtual_loss):
    """Add to edge (node, a) ``visits`` real visits worth ``value`` in all, and
    ``virtual_loss`` virtual visits that each lost (negative: taken back). Every change
    to an edge's N and W goes through here, so the node's sum of N moves with them.

    The three amounts are added in one step each (not a visit, then the virtual loss
    taken back): float32 W rounds once per backup, as it always has."""
    tree.edge_n[g, node, a] += visits + virtual_loss
    tree.edge_n_sum[g, node] += visits + virtual_loss
    tree.edge_w[g, node, a] += value - virtual_loss


@njit(cache=True, inline="always")
def drop_illegal_edge(tree, g, node, a):
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
        clear_game(tree, g, n)
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
        tree.node_w2[g, new] = tree.node_w2[g, old]
        tree.status[g, new] = tree.status[g, old]
        tree.terminal_value[g, new] = tree.terminal_value[g, old]
        tree.proven[g, new] = tree.proven[g, old]
        tree.proof_plies[g, new] = tree.proof_plies[g, old]
        tree.raw_value[g, new] = tree.raw_value[g, old]
        tree.parent[g, new] = remap[tree.parent[g, old]] if new > 0 else -1
        tree.parent_action[g, new] = tree.parent_action[g, old] if new > 0 else -1
    clear_nodes(tree, g, count, n)
    tree.num_nodes[g] = count
    # An inner node lists candidate moves; the root's priors must be over exactly the
    # legal ones (root noise, the policy target and the move shown to users read them).
    if tree.status[g, ROOT] == EXPANDED:
        R.legal_mask_into(kind, params, tree.root_state[g], scratch.legal)
        for a in range(tree.prior.shape[2]):
            if tree.prior[g, ROOT, a] != ILLEGAL and not scratch.legal[a]:
                drop_illegal_edge(tree, g, ROOT, a)


@njit(cache=True)
def clear_nodes(tree, g, start, stop):
    for node in range(start, stop):
        for a in range(tree.prior.shape[2]):  # loops, not slices: see copy_into
            tree.children[g, node, a] = UNEXPANDED
            tree.edge_n[g, node, a] = 0.0
            tree.edge_w[g, node, a] = 0.0
            tree.prior[g, node, a] = 0.0
        tree.node_n[g, node] = 0.0
        tree.edge_n_sum[g, node] = 0.0
        tree.node_w[g, node] = 0.0
        tree.node_w2[g, node] = 0.0
        tree.status[g, node] = PENDING
        tree.terminal_value[g, node] = 0.0
        tree.proven[g, node] = 0
        tree.proof_plies[g, node] = 0
        tree.raw_value[g, node] = 0.0
        tree.parent[g, node] = -1
        tree.parent_action[g, node] = -1


@njit(cache=True)
def clear_game(tree, g, used):
    """A fresh tree for game g, and a fresh Gumbel root: noise is drawn per search."""
    clear_nodes(tree, g, 0, used)
    tree.num_nodes[g] = 1
    tree.in_flight[g] = 0
    for a in range(tree.gumbel.shape[1]):
        tree.gumbel[g, a] = 0.0
    tree.survivor_count[g] = 0
    tree.considered[g] = 0
