"""``EvaluationCache``: the network's answers for positions it has already evaluated
(Leela Zero's and KataGo's NN cache), so that a leaf met again costs no model call.

Self-play meets the same leaves again and again: transpositions within a tree, the
openings every game goes through, a cheap search's leaves that the next full search
walks to. Measured 2026-12-05 over 90 seconds of Connect Four self-play (256 games,
the default config, an untrained net): 39% of the leaves had been evaluated before.

The key is the leaf's input planes (``uint8[H, W, C]``), the network's whole input,
so a hit is the answer the network would give again (up to float rounding between
batch sizes). A position met twice in one batch is evaluated once (another 1.9% of the
leaves in that measurement). Two 64-bit hashes of the planes stand in for them (KataGo
keeps a 128-bit hash too): a false hit needs both to collide. The table is 4-way
set-associative: a position's set is its first hash modulo the number of sets, and a
new position replaces the set's least recently used entry, so the cache holds about
``positions`` answers in fixed arrays and never grows.

The answers are one network's: ``clear()`` when its weights change. Lookups and
inserts are one compiled loop over the batch each.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from tengen.engine.mcts.evaluators import Evaluator

__all__ = ["EvaluationCache", "CachedEvaluator", "CachedLeaves", "cache_bytes", "WAYS"]

#: entries per set: a new position evicts the least recently used of its set's
WAYS = 4

_FNV_OFFSET = np.uint64(0xCBF29CE484222325)
_FNV_PRIME = np.uint64(0x100000001B3)
_SECOND_OFFSET = np.uint64(0x9E3779B97F4A7C15)
_SECOND_PRIME = np.uint64(0xFF51AFD7ED558CCD)
_MIX_SHIFT = np.uint64(33)
_MIX = np.uint64(0xC4CEB9FE1A85EC53)


@njit(cache=True)
def _fmix(h):
    h ^= h >> _MIX_SHIFT
    h *= _MIX
    h ^= h >> _MIX_SHIFT
    return h


@njit(cache=True)
def hash_rows(rows, out):
    """Two independent 64-bit hashes of each row of ``rows`` (uint8[B, K]) into
    ``out`` (uint64[B, 2]): FNV-1a, and a second multiply-xor with other constants,
    each finished by a 64-bit mix."""
    for b in range(rows.shape[0]):
        h1 = _FNV_OFFSET
        h2 = _SECOND_OFFSET
        for k in range(rows.shape[1]):
            x = np.uint64(rows[b, k])
            h1 = (h1 ^ x) * _FNV_PRIME
            h2 = (h2 ^ (x + np.uint64(k))) * _SECOND_PRIME
        out[b, 0] = _fmix(h1)
        out[b, 1] = _fmix(h2)


@njit(cache=True)
def _lookup(keys, stamps, clock, hashes, slots):
    """The entry of each hash (slots[b], -1 when absent); refreshes the entries found."""
    sets = keys.shape[0]
    for b in range(hashes.shape[0]):
        h1, h2 = hashes[b, 0], hashes[b, 1]
        s = np.int64(h1 % np.uint64(sets))
        slots[b] = -1
        for w in range(keys.shape[1]):
            if stamps[s, w] > 0 and keys[s, w, 0] == h1 and keys[s, w, 1] == h2:
                clock[0] += 1
                stamps[s, w] = clock[0]
                slots[b] = s * keys.shape[1] + w
                break


@njit(cache=True)
def _insert(keys, stamps, clock, policies, values, hashes, policy, value):
    """Store each row's answer: over its own entry if present, else over its set's
    least recently used (or empty) one."""
    sets, ways = keys.shape[0], keys.shape[1]
    for b in range(hashes.shape[0]):
        h1, h2 = hashes[b, 0], hashes[b, 1]
        s = np.int64(h1 % np.uint64(sets))
        way = 0
        for w in range(ways):
            if stamps[s, w] > 0 and keys[s, w, 0] == h1 and keys[s, w, 1] == h2:
                way = w
                break
            if stamps[s, w] < stamps[s, way]:
                way = w
        clock[0] += 1
        stamps[s, way] = clock[0]
        keys[s, way, 0] = h1
        keys[s, way, 1] = h2
        policies[s * ways + way] = policy[b]
        values[s * ways + way] = value[b]


def _first_of_each(hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``hashes`` (uint64[N, 2]) that first show each key, ascending, and for
    every row the index of its key's first row among them."""
    keys = np.ascontiguousarray(hashes).view(np.dtype((np.void, 16))).reshape(-1)
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse.reshape(-1)]


def cache_bytes(positions: int, num_actions: int) -> int:
    """What ``EvaluationCache(positions, num_actions)`` allocates, without allocating."""
    if positions <= 0:
        return 0
    entries = -(-positions // WAYS) * WAYS
    return entries * (2 * 8 + 8 + 4 * num_actions + 4)


@dataclass
class CachedLeaves:
    """One batch of leaves after ``EvaluationCache.lookup``: the answers found, and
    the planes of the rows still to evaluate (``missing_planes``)."""

    rows: int
    found: np.ndarray  # bool[rows]
    found_policy: np.ndarray  # float32[found, A], copied out (an insert may evict them)
    found_value: np.ndarray  # float32[found]
    missing_planes: np.ndarray  # the distinct positions not found, in batch order: a copy
    missing_hashes: np.ndarray  # uint64[missing, 2]: their keys
    missing_of_row: np.ndarray  # int64[rows not found]: each such row's position in missing_planes

    def merge(self, policy: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The whole batch's ``(policy, value)``, given the evaluation of ``missing_planes``."""
        if len(value) != len(self.missing_planes):
            raise ValueError(f"expected the evaluation of {len(self.missing_planes)} rows, got {len(value)}")
        whole_policy = np.empty((self.rows, self.found_policy.shape[1]), np.float32)
        whole_value = np.empty(self.rows, np.float32)
        whole_policy[self.found], whole_value[self.found] = self.found_policy, self.found_value
        whole_policy[~self.found] = policy[self.missing_of_row]
        whole_value[~self.found] = np.asarray(value).reshape(-1)[self.missing_of_row]
        return whole_policy, whole_value


class EvaluationCache:
    """About ``positions`` network answers (``policy float32[A]``, ``value``) by their
    input planes."""

    def __init__(self, positions: int, num_actions: int):
        if positions < 1:
            raise ValueError(f"an evaluation cache holds at least one position, got {positions}")
        sets = -(-positions // WAYS)
        self.num_actions = num_actions
        self._keys = np.zeros((sets, WAYS, 2), np.uint64)
        self._stamps = np.zeros((sets, WAYS), np.int64)  # 0: empty; else the last use
        self._clock = np.zeros(1, np.int64)
        self._policies = np.zeros((sets * WAYS, num_actions), np.float32)
        self._values = np.zeros(sets * WAYS, np.float32)

    @property
    def capacity(self) -> int:
        return len(self._values)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self._keys, self._stamps, self._policies, self._values))

    def lookup(self, planes: np.ndarray) -> CachedLeaves:
        """The answers this cache holds for ``planes[B, H, W, C]`` (uint8), and the rows
        it does not."""
        planes = np.asarray(planes)
        if planes.dtype != np.uint8:
            raise ValueError(f"the cache keys uint8 planes, got {planes.dtype}")
        rows = len(planes)
        hashes = np.empty((rows, 2), np.uint64)
        hash_rows(planes.reshape(rows, int(np.prod(planes.shape[1:]))), hashes)
        slots = np.empty(rows, np.int64)
        _lookup(self._keys, self._stamps, self._clock, hashes, slots)
        found = slots >= 0
        missing = np.flatnonzero(~found)
        first, missing_of_row = _first_of_each(hashes[missing])
        return CachedLeaves(rows=rows, found=found, found_policy=self._policies[slots[found]],
                            found_value=self._values[slots[found]], missing_planes=planes[missing[first]],
                            missing_hashes=hashes[missing[first]], missing_of_row=missing_of_row)

    def insert(self, leaves: CachedLeaves, policy: np.ndarray, value: np.ndarray) -> None:
        """Keep the evaluation of ``leaves``' missing rows (``policy[M, A]``, ``value[M]``)."""
        hashes = leaves.missing_hashes
        if len(value) != len(hashes):
            raise ValueError(f"expected the evaluation of {len(hashes)} rows, got {len(value)}")
        _insert(self._keys, self._stamps, self._clock, self._policies, self._values, hashes,
                np.asarray(policy, np.float32), np.asarray(value, np.float32).reshape(-1))

    def clear(self) -> None:
        """Forget every answer (the network's weights changed)."""
        self._stamps[:] = 0


class CachedEvaluator:
    """An ``Evaluator`` in front of another, in one process: the positions its cache
    holds are answered from it, the rest (each once) by ``evaluate``, whose answers it
    keeps. It takes uint8 planes, as a ``Search`` gathers its leaves. ``clear()`` when
    ``evaluate``'s weights change. (A self-play worker, whose evaluations cross to a
    server and back, keeps its ``EvaluationCache`` itself.)"""

    def __init__(self, evaluate: Evaluator, positions: int, num_actions: int):
        self.evaluate = evaluate
        self.cache = EvaluationCache(positions, num_actions)
        self.leaves = 0  # positions asked for
        self.hits = 0  # of them, answered without an evaluation

    def __call__(self, planes: np.ndarray, /) -> tuple[np.ndarray, np.ndarray]:
        leaves = self.cache.lookup(planes)
        if len(leaves.missing_planes):
            policy, value = self.evaluate(leaves.missing_planes)
            self.cache.insert(leaves, policy, value)
        else:
            policy, value = np.zeros((0, self.cache.num_actions), np.float32), np.zeros(0, np.float32)
        self.leaves += leaves.rows
        self.hits += leaves.rows - len(leaves.missing_planes)
        return leaves.merge(policy, value)

    def clear(self) -> None:
        self.cache.clear()
