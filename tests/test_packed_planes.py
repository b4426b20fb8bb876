"""The leaf batch's wire format (workers/packed_planes.py): bits worked out by hand, the
round trip, and what it refuses."""

import numpy as np
import pytest

from tengen.workers.packed_planes import PackedPlanes, pack_planes


def test_a_leaf_is_its_planes_in_point_major_order_eight_to_a_byte_high_bit_first():
    # one leaf, a 1x3 board with 3 planes: points (0,0) (0,1) (0,2), each [mine, theirs, colour]
    planes = np.array([[[[1, 0, 1], [0, 1, 1], [0, 0, 1]]]], np.uint8)  # [1, 1, 3, 3]
    packed = pack_planes(planes)
    # flattened: 1 0 1 0 1 1 0 0 | 1 -> 0b10101100, then 0b1 and seven zero bits
    assert packed.bits.tolist() == [[0b10101100, 0b10000000]]
    assert packed.shape == (1, 3, 3) and len(packed) == 1
    np.testing.assert_array_equal(packed.unpack(), planes)


def test_a_batch_of_odd_size_and_odd_leaf_length_round_trips():
    # 5 leaves (not a multiple of 8) of 2x2x5 = 20 values (not a multiple of 8 either)
    planes = np.random.default_rng(7).integers(0, 2, size=(5, 2, 2, 5), dtype=np.uint8)
    packed = pack_planes(planes)
    assert packed.bits.shape == (5, 3)  # ceil(20 / 8) bytes per leaf, one row each
    unpacked = packed.unpack()
    assert unpacked.dtype == np.uint8
    np.testing.assert_array_equal(unpacked, planes)


def test_packed_batches_concatenate_row_wise_like_their_planes():
    a, b = (np.random.default_rng(seed).integers(0, 2, size=(n, 3, 3, 3), dtype=np.uint8)
            for seed, n in ((1, 2), (2, 3)))
    joined = PackedPlanes(np.concatenate([pack_planes(a).bits, pack_planes(b).bits]), (3, 3, 3))
    np.testing.assert_array_equal(joined.unpack(), np.concatenate([a, b]))


def test_an_empty_batch_round_trips():
    packed = pack_planes(np.zeros((0, 9, 9, 17), np.uint8))
    assert packed.bits.shape == (0, 173)  # ceil(1377 / 8)
    assert packed.unpack().shape == (0, 9, 9, 17)


def test_a_value_other_than_0_or_1_is_refused_rather_than_turned_into_a_1():
    planes = np.zeros((2, 3, 3, 3), np.uint8)
    planes[1, 2, 2, 0] = 2
    with pytest.raises(ValueError, match="0 or 1"):
        pack_planes(planes)


def test_only_uint8_batches_are_packed_and_bits_of_the_wrong_width_are_refused():
    with pytest.raises(ValueError, match="uint8"):
        pack_planes(np.zeros((2, 3, 3, 3), np.float32))
    with pytest.raises(ValueError, match="uint8"):
        pack_planes(np.zeros((3, 3, 3), np.uint8))  # no batch axis
    with pytest.raises(ValueError, match=r"uint8\[B, 4\]"):  # 3x3x3 = 27 bits need 4 bytes
        PackedPlanes(np.zeros((2, 3), np.uint8), (3, 3, 3)).unpack()
