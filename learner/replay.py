"""The replay window: the last ``capacity`` self-play positions, sampled uniformly.

AlphaZero trains on minibatches drawn uniformly from the most recent positions (the
last 500K games in AlphaGo Zero); here the window counts positions. Planes are 0/1,
so they are stored as uint8 (4x less memory than float32) and turned into float32
only for the sampled batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tengen.engine.games.base import Game

__all__ = ["ReplayWindow"]


class ReplayWindow:
    """A ring buffer of positions: ``planes uint8[N, H, W, C]``, ``policy float32[N, A]``
    (search visit distributions), ``value float32[N]`` (game outcome for the mover).

    ``positions_added`` counts every position ever added and ``samples_drawn`` every
    position ever sampled, so ``reuse`` is how many times, on average, the learner has
    seen each position (the ratio the learner holds below ``max_reuse``).
    """

    def __init__(self, *, capacity: int, planes_shape: Sequence[int], num_actions: int):
        if capacity < 1:
            raise ValueError(f"capacity must be at least 1, got {capacity}")
        self.capacity = int(capacity)
        self.planes_shape = tuple(int(n) for n in planes_shape)
        self.num_actions = int(num_actions)
        self.planes = np.zeros((self.capacity, *self.planes_shape), np.uint8)  # [N, H, W, C]
        self.policy = np.zeros((self.capacity, self.num_actions), np.float32)  # [N, A]
        self.value = np.zeros((self.capacity,), np.float32)  # [N]
        #: the slot the next position goes to
        self._head = 0
        self._size = 0
        self.positions_added = 0
        self.samples_drawn = 0

    def __len__(self) -> int:
        return self._size

    @property
    def reuse(self) -> float:
        """Samples drawn per position added (0 before anything is added)."""
        return self.samples_drawn / self.positions_added if self.positions_added else 0.0

    def add(self, planes: np.ndarray, policy: np.ndarray, value: np.ndarray) -> None:
        """Append one game: ``planes[L, H, W, C]`` (0/1 values), ``policy[L, A]``, ``value[L]``.

        The oldest positions are overwritten once the window is full; a game longer
        than the whole window keeps only its last ``capacity`` positions.
        """
        planes, policy, value = np.asarray(planes), np.asarray(policy), np.asarray(value)
        if planes.ndim != 1 + len(self.planes_shape) or planes.shape[1:] != self.planes_shape:
            raise ValueError(f"planes must be [L, {', '.join(map(str, self.planes_shape))}], got {planes.shape}")
        length = planes.shape[0]
        if policy.shape != (length, self.num_actions):
            raise ValueError(f"policy must be [{length}, {self.num_actions}], got {policy.shape}")
        if value.shape != (length,):
            raise ValueError(f"value must be [{length}], got {value.shape}")
        planes_u8 = planes.astype(np.uint8)
        # the uint8 store is only lossless for 0/1 (or small integer) planes
        if not np.array_equal(planes_u8, planes):
            raise ValueError("planes must hold integers in 0..255 (0/1 feature planes)")
        self.positions_added += length
        if length > self.capacity:
            planes_u8, policy, value = planes_u8[-self.capacity :], policy[-self.capacity :], value[-self.capacity :]
            length = self.capacity
        slots = (self._head + np.arange(length)) % self.capacity
        self.planes[slots] = planes_u8
        self.policy[slots] = policy
        self.value[slots] = value
        self._head = (self._head + length) % self.capacity
        self._size = min(self._size + length, self.capacity)

    def contents(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Copies of what is stored, oldest first: ``(planes uint8[n, ...], policy[n, A], value[n])``."""
        start = (self._head - self._size) % self.capacity
        order = (start + np.arange(self._size)) % self.capacity
        return self.planes[order], self.policy[order], self.value[order]

    def sample(
        self, batch_size: int, rng: np.random.Generator, *, game: Game | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A uniform minibatch (with replacement): ``(planes float32[B, H, W, C], policy[B, A], value[B])``.

        With ``game``, each sample gets one of the game's symmetries at random (the
        data augmentation of AlphaGo Zero); the batch is grouped by symmetry so each
        transform is one vectorised call.
        """
        if self._size == 0:
            raise ValueError("the replay window is empty")
        index = rng.integers(0, self._size, size=batch_size)
        # slots are filled from 0 up before wrapping, so 0.._size-1 are exactly the stored ones
        planes, policy, value = self.planes[index], self.policy[index], self.value[index]
        if game is not None:
            ks = rng.integers(0, len(game.symmetries), size=batch_size)
            for k in np.unique(ks):
                rows = ks == k
                # transform in uint8, before the float32 copy: 4x fewer bytes to move
                planes[rows] = game.transform_planes(planes[rows], int(k))
                policy[rows] = game.transform_policy(policy[rows], int(k))
        self.samples_drawn += batch_size
        return planes.astype(np.float32), policy, value
