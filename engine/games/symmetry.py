"""Board symmetries as index permutations, for planes, policies and move mapping.

A symmetry is stored as a permutation of the H*W board cells: ``gather[k][i]`` is the
cell of the original board that lands on cell ``i`` of the image. With it one fancy
index transforms a board, a stack of planes (any leading batch axes) or a policy
vector; extra actions past the board (Go's pass) map to themselves.

The dihedral group of a square board is listed as (rotations by 0, 90, 180, 270
degrees counter-clockwise) then the same four after a left-right mirror, so
``k = 4 * mirror + quarter_turns``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["SymmetrySet", "dihedral", "mirror_only", "identity_only"]


class SymmetrySet:
    """The symmetries of one board shape, applied to boards, planes and policies."""

    def __init__(self, height: int, width: int, transforms: list[tuple[bool, int]]):
        cells = np.arange(height * width).reshape(height, width)
        gathers, names = [], []
        for mirror, turns in transforms:
            image = cells[:, ::-1] if mirror else cells
            image = np.rot90(image, turns)
            if image.shape != (height, width):
                raise ValueError(f"a {turns * 90} degree turn does not fit a {height}x{width} board")
            gathers.append(image.reshape(-1))
            names.append(("mirror+" if mirror else "") + f"rot{turns * 90}")
        self.height, self.width = height, width
        self.names = tuple(names)
        #: int64[K, H*W]: image cell -> original cell
        self.gather = np.stack(gathers)
        #: int64[K, H*W]: original cell -> image cell (the inverse permutation)
        self.scatter = np.argsort(self.gather, axis=1)
        #: index of the inverse symmetry of each symmetry
        identity = cells.reshape(-1)
        self.inverse = np.array([
            next(j for j in range(len(gathers)) if np.array_equal(self.gather[k][self.gather[j]], identity))
            for k in range(len(gathers))
        ])

    def __len__(self) -> int:
        return len(self.gather)

    def apply_board(self, board: np.ndarray, k: int) -> np.ndarray:
        """``board[..., H, W]`` -> its image under symmetry ``k``."""
        flat = board.reshape(*board.shape[:-2], self.height * self.width)
        return flat[..., self.gather[k]].reshape(board.shape)

    def apply_planes(self, planes_hwc: np.ndarray, k: int) -> np.ndarray:
        """``planes[..., H, W, C]`` -> their image under symmetry ``k``."""
        lead = planes_hwc.shape[:-3]
        flat = planes_hwc.reshape(*lead, self.height * self.width, planes_hwc.shape[-1])
        return flat[..., self.gather[k], :].reshape(planes_hwc.shape)

    def apply_policy(self, policy: np.ndarray, k: int) -> np.ndarray:
        """``policy[..., A]`` over the board cells (+ extra actions kept in place) -> image."""
        cells = self.height * self.width
        order = np.concatenate([self.gather[k], np.arange(cells, policy.shape[-1])])
        return policy[..., order]

    def map_action(self, action: int, k: int) -> int:
        """Where a move on the original board lands on the image (extra actions stay)."""
        if action >= self.height * self.width:
            return int(action)
        return int(self.scatter[k][action])


def dihedral(size: int) -> SymmetrySet:
    """The 8 rotations and reflections of a square board."""
    return SymmetrySet(size, size, [(m, t) for m in (False, True) for t in range(4)])


def mirror_only(height: int, width: int) -> SymmetrySet:
    """Identity and the left-right mirror (Connect Four: gravity breaks the rest)."""
    return SymmetrySet(height, width, [(False, 0), (True, 0)])


def identity_only(height: int, width: int) -> SymmetrySet:
    return SymmetrySet(height, width, [(False, 0)])
