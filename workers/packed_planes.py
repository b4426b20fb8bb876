"""The leaf batch on the wire from a self-play worker to the inference server: its
planes bit-packed, eight to a byte.

Every input plane is 0 or 1 (the stones' and the colour planes, engine/mcts/planes.py;
Go's feature planes, engine/games/go_features.py), so a uint8 batch carries seven
zero bits per byte. Packed, a go9 batch of 440 leaves (9x9x17 planes) is 76 KB
instead of 606 KB: under Ray's 100 KiB limit for arguments sent inside the call, so it
skips the object store (a put in the worker, a get in the server), and there is an
eighth as much to copy.

The layout: ``bits[B, ceil(H*W*C / 8)]`` uint8, row ``b`` being leaf ``b``'s planes in
their point-major order (``planes[b].reshape(-1)``) through ``np.packbits`` (first
value in the high bit; the last byte's unused low bits zero). Each leaf is its own
row, so packed batches concatenate row-wise like the planes they carry.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["PackedPlanes", "pack_planes"]


@dataclass(frozen=True)
class PackedPlanes:
    """A leaf batch ``planes[B, H, W, C]`` of 0s and 1s, packed (see the module)."""

    bits: np.ndarray  # [B, ceil(H*W*C / 8)] uint8
    shape: tuple[int, int, int]  # (H, W, C): one leaf's planes

    def __len__(self) -> int:
        return int(self.bits.shape[0])

    def unpack(self) -> np.ndarray:
        """The planes, ``uint8[B, H, W, C]`` of 0s and 1s."""
        per_leaf = int(np.prod(self.shape))
        if self.bits.dtype != np.uint8 or self.bits.ndim != 2 or self.bits.shape[1] != -(-per_leaf // 8):
            raise ValueError(f"packed planes for {self.shape} must be uint8[B, {-(-per_leaf // 8)}], got "
                             f"{self.bits.dtype}{list(self.bits.shape)}")
        planes = np.unpackbits(self.bits, axis=1, count=per_leaf)
        return planes.reshape(len(self), *self.shape)


def pack_planes(planes: np.ndarray) -> PackedPlanes:
    """``planes[B, H, W, C]`` (uint8 0s and 1s) -> their packed form.

    Raises ValueError for a value other than 0 or 1 (packing would turn it into a 1).
    """
    if planes.ndim != 4 or planes.dtype != np.uint8:
        raise ValueError(f"planes must be uint8[B, H, W, C], got {planes.dtype}{list(planes.shape)}")
    if planes.size and planes.max() > 1:
        raise ValueError(f"planes must be 0 or 1 to be packed, found {int(planes.max())}")
    h, w, c = (int(n) for n in planes.shape[1:])
    return PackedPlanes(np.packbits(planes.reshape(len(planes), h * w * c), axis=1), (h, w, c))
