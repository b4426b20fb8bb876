"""Gumbel AlphaZero's rules (Danihelka et al., "Policy improvement by planning with
Gumbel", ICLR 2022), compiled for the walk in ``engine.mcts.walk``.

Notation of the paper: g(a) a Gumbel(0, 1) sample per root move (0 when searching
without noise), logits(a) = log P(a), n the simulations below the root, m the root
moves considered, and sigma(q) = (c_visit + max_b N(b)) * c_scale * q, a monotone
transform of a Q already normalised to [0, 1].

- Completed Q: a visited edge keeps its Q; an unvisited one gets the node's mixed
  value v_mix = (v_hat + sum_b N(b) * sum_{visited a} P(a) Q(a) / sum_{visited a} P(a))
  / (1 + sum_b N(b)), v_hat the network's value of the node (the paper's appendix D).
  The completed Qs are then min-max normalised over the node's moves, as mctx does,
  so that the best move's sigma is always (c_visit + max N) * c_scale: hence mctx's
  c_scale of 0.1, where the paper's 1.0 (with its own normalisation) made pi' nearly
  one-hot on whichever move a few simulations happened to value best.
- Improved policy pi' = softmax(logits + sigma(completed Q)): the policy target.
- Root: the m moves of highest g + logits (Gumbel-top-m, m capped by the legal moves),
  then sequential halving. The budget is spread over ceil(log2 m) phases; a phase
  visits each survivor the same number of times, max(1, floor(n / (ceil(log2 m) *
  survivors))), round-robin in rank order, and the next keeps the best half (at least
  2) by g + logits + sigma(completed Q). After the last phase, while simulations
  remain, the two survivors keep being visited in turn. This is mctx's
  ``get_sequence_of_considered_visits`` schedule with the order inside a phase fixed
  at its start, so a round can take the next several simulations of a phase at once
  (the forced root moves are known); only at a phase's end does a game wait for its
  leaves in flight, since the ranking needs their values.
- The move played: among the root moves with the most visits (the last survivors),
  the one of highest g + logits + sigma(completed Q).
- Below the root, deterministic: argmax of pi'(a) - N(a) / (1 + sum_b N(b)).

Each node's N and W include the walks in flight (virtual loss), so the walks of one
round spread below the root as under PUCT.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from tengen.engine.mcts.tree import ROOT

__all__ = ["halving_slot", "select_interior", "start_root", "halve_root", "gumbel_action", "improved_policy_into"]

#: logits of moves whose prior underflowed to 0 (mctx uses -1e9 likewise)
_LOW_LOGIT = np.float32(-1e9)
#: the normalisation's floor on max Q - min Q (mctx's epsilon)
_EPSILON = np.float32(1e-8)


@njit(cache=True)
def halving_slot(considered, budget, k):
    """For simulation ``k`` (0-based) of ``budget`` over ``considered`` root moves: the
    number of survivors of its phase and the rank (0 = best) of the survivor it visits."""
    if considered <= 1:
        return 1, 0
    phases = 0
    while (1 << phases) < considered:
        phases += 1
    survivors, start = considered, 0
    while True:
        visits = max(1, budget // (phases * survivors))
        block = visits * survivors
        if k < start + block:
            return survivors, (k - start) % survivors
        start += block
        survivors = max(2, survivors // 2)


@njit(cache=True)
def _logit(p):
    return np.float32(np.log(p)) if p > 0 else _LOW_LOGIT


@njit(cache=True)
def _sigma_into(prior, edge_n, edge_w, total, raw_value, c_visit, c_scale, out):
    """``out[a] = sigma(normalised completed Q(a))`` for the node's listed moves (prior
    >= 0; the rest of ``out`` is left as it is). Returns the largest sigma."""
    num_actions = prior.shape[0]
    prior_visited = np.float32(0.0)
    weighted_q = np.float32(0.0)
    max_n = np.float32(0.0)
    for a in range(num_actions):
        p, n = prior[a], edge_n[a]
        if p >= 0 and n > 0:
            prior_visited += p
            weighted_q += p * edge_w[a] / n
            max_n = max(max_n, n)
    v_mix = np.float32(raw_value)
    if prior_visited > 0:
        v_mix = (raw_value + total * weighted_q / prior_visited) / (np.float32(1.0) + total)
    low, high = np.float32(np.inf), np.float32(-np.inf)
    for a in range(num_actions):
        if prior[a] < 0:
            continue
        n = edge_n[a]
        q = edge_w[a] / n if n > 0 else v_mix
        out[a] = q
        low, high = min(low, q), max(high, q)
    scale = (np.float32(c_visit) + max_n) * np.float32(c_scale) / max(high - low, _EPSILON)
    for a in range(num_actions):
        if prior[a] >= 0:
            out[a] = (out[a] - low) * scale
    return (high - low) * scale


@njit(cache=True)
def select_interior(prior, edge_n, edge_w, total, raw_value, c_visit, c_scale, weights):
    """The move below the root: argmax of pi'(a) - N(a) / (1 + sum_b N(b)) over the
    node's listed moves (rows of the tree arrays; ``weights`` float32[A] scratch).

    What ``improved_policy_into`` computes, in two passes instead of four and with
    one exp per visited move: every unvisited move has the same completed Q (v_mix),
    so pi' = P exp(sigma) / z gives them one factor, and the best of them is the one
    of highest prior. This walk runs once per node per simulation."""
    num_actions = prior.shape[0]
    prior_visited = np.float32(0.0)
    prior_unvisited = np.float32(0.0)
    weighted_q = np.float32(0.0)
    max_n = np.float32(0.0)
    low, high = np.float32(np.inf), np.float32(-np.inf)
    best_unvisited, best_unvisited_prior = -1, np.float32(-1.0)
    for a in range(num_actions):
        p = prior[a]
        if p < 0:
            continue
        n = edge_n[a]
        if n > 0:
            q = edge_w[a] / n
            weights[a] = q
            prior_visited += p
            weighted_q += p * q
            max_n = max(max_n, n)
            low, high = min(low, q), max(high, q)
        else:
            prior_unvisited += p
            if p > best_unvisited_prior:
                best_unvisited, best_unvisited_prior = a, p
    v_mix = np.float32(raw_value)
    if prior_visited > 0:
        v_mix = (raw_value + total * weighted_q / prior_visited) / (np.float32(1.0) + total)
    if best_unvisited >= 0:
        low, high = min(low, v_mix), max(high, v_mix)
    scale = (np.float32(c_visit) + max_n) * np.float32(c_scale) / max(high - low, _EPSILON)
    # exp(sigma(q) - max sigma) = exp((q - high) * scale)
    unvisited_factor = np.float32(np.exp((v_mix - high) * scale))
    z = prior_unvisited * unvisited_factor
    for a in range(num_actions):
        if prior[a] >= 0 and edge_n[a] > 0:
            weights[a] = prior[a] * np.float32(np.exp((weights[a] - high) * scale))
            z += weights[a]
    inv_z = np.float32(1.0) / z if z > 0 else np.float32(0.0)
    share = np.float32(1.0) / (np.float32(1.0) + total)
    best, best_score = best_unvisited, np.float32(-np.inf)
    if best_unvisited >= 0:
        best_score = best_unvisited_prior * unvisited_factor * inv_z
    for a in range(num_actions):
        if prior[a] < 0 or edge_n[a] <= 0:
            continue
        score = weights[a] * inv_z - edge_n[a] * share
        if score > best_score or (score == best_score and a < best):
            best, best_score = a, score
    return best


@njit(cache=True)
def start_root(tree, g, considered, taken):
    """Game g's root has its priors: keep its ``considered`` (m) moves of highest
    g + logits, best first (ties to the lower move), as the first phase's survivors.
    ``taken`` is bool[A] scratch."""
    prior, noise = tree.prior[g, ROOT], tree.gumbel[g]
    legal = 0
    for a in range(prior.shape[0]):
        taken[a] = False
        if prior[a] >= 0:
            legal += 1
    m = min(considered, legal)
    for i in range(m):
        best, best_score = -1, np.float32(-np.inf)
        for a in range(prior.shape[0]):
            if prior[a] < 0 or taken[a]:
                continue
            score = noise[a] + _logit(prior[a])
            if score > best_score:
                best, best_score = a, score
        taken[best] = True
        tree.survivors[g, i] = best
    tree.considered[g] = m
    tree.survivor_count[g] = m


@njit(cache=True)
def _root_scores_into(tree, g, c_visit, c_scale, out):
    """g + logits + sigma(completed Q) of game g's root moves into ``out``."""
    prior = tree.prior[g, ROOT]
    _sigma_into(prior, tree.edge_n[g, ROOT], tree.edge_w[g, ROOT], tree.edge_n_sum[g, ROOT],
                tree.raw_value[g, ROOT], c_visit, c_scale, out)
    for a in range(prior.shape[0]):
        if prior[a] >= 0:
            out[a] += tree.gumbel[g, a] + _logit(prior[a])


@njit(cache=True)
def halve_root(tree, g, keep, c_visit, c_scale, scores):
    """The end of a phase (no walk in flight): rank the survivors by g + logits +
    sigma(completed Q), best first (ties to the lower move), and keep ``keep``."""
    _root_scores_into(tree, g, c_visit, c_scale, scores)
    count = tree.survivor_count[g]
    row = tree.survivors[g]
    for i in range(count):  # selection sort: a handful of moves, once a phase
        best = i
        for j in range(i + 1, count):
            a, b = row[j], row[best]
            if scores[a] > scores[b] or (scores[a] == scores[b] and a < b):
                best = j
        row[i], row[best] = row[best], row[i]
    tree.survivor_count[g] = min(keep, count)


@njit(cache=True)
def gumbel_action(tree, g, c_visit, c_scale, scores):
    """The move to play: among the most visited root moves, the highest g + logits +
    sigma(completed Q) (ties to the lower move)."""
    prior, edge_n = tree.prior[g, ROOT], tree.edge_n[g, ROOT]
    _root_scores_into(tree, g, c_visit, c_scale, scores)
    most = np.float32(-1.0)
    for a in range(prior.shape[0]):
        if prior[a] >= 0:
            most = max(most, edge_n[a])
    best, best_score = -1, np.float32(-np.inf)
    for a in range(prior.shape[0]):
        if prior[a] >= 0 and edge_n[a] == most and scores[a] > best_score:
            best, best_score = a, scores[a]
    return best


@njit(cache=True)
def improved_policy_into(tree, g, c_visit, c_scale, out):
    """pi' = softmax(logits + sigma(completed Q)) over game g's legal root moves into
    ``out`` (float32[A], 0 for the illegal ones): the policy target."""
    prior = tree.prior[g, ROOT]
    top = _sigma_into(prior, tree.edge_n[g, ROOT], tree.edge_w[g, ROOT], tree.edge_n_sum[g, ROOT],
                      tree.raw_value[g, ROOT], c_visit, c_scale, out)
    z = 0.0
    for a in range(prior.shape[0]):
        if prior[a] >= 0:
            out[a] = prior[a] * np.float32(np.exp(out[a] - top))
            z += out[a]
        else:
            out[a] = 0.0
    for a in range(prior.shape[0]):
        out[a] = out[a] / z if z > 0 else 0.0
