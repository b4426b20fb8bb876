"""The ownership head's target: each Go game's final Tromp-Taylor owners, kept in the
record (codec), seen from each position's mover in the replay window, and moved by
the same symmetry as the planes."""

import dataclasses
import re

import msgpack
import numpy as np
import pytest
import zstandard

from tengen.engine.games import make_game
from tengen.engine.mcts import SearchSettings, uniform_evaluator
from tengen.engine.selfplay import SelfPlay, SelfPlaySettings
from tengen.learner.replay import ReplayWindow, mover_ownership
from tengen.run.codec import SampleFormatError, encode_game, game_decoder

GO5 = make_game("go", size=5, max_moves=40)
DECODE_GO5 = game_decoder(GO5)


def board(text: str) -> np.ndarray:
    """An ASCII board, top row first: X black, O white, . empty."""
    rows = [line.split() for line in text.strip().splitlines()]
    return np.array([[{".": 0, "X": 1, "O": 2}[c] for c in row] for row in rows], np.int8)


def test_final_ownership_is_tromp_taylor_by_hand():
    state = GO5.state_from_board(board("""
        . X . O .
        X X O O .
        . X O . O
        X X O O O
        . X O . .
    """))
    # Black's empty points reach only black; (0, 2) touches both colours: dame.
    expected = np.array([
        [1, 1, 0, -1, -1],
        [1, 1, -1, -1, -1],
        [1, 1, -1, -1, -1],
        [1, 1, -1, -1, -1],
        [1, 1, -1, -1, -1],
    ], np.int8).reshape(-1)
    owners = GO5.final_ownership(state)
    assert owners.dtype == np.int8 and owners.shape == (25,)
    assert owners.tolist() == expected.tolist()
    assert int(owners.sum()) == GO5.area(state) == 10 - 14


def test_games_without_territory_have_no_ownership():
    assert make_game("connect4").final_ownership(make_game("connect4").initial_state()) is None


@pytest.fixture(scope="module")
def go_records():
    selfplay = SelfPlay(GO5, games=4, seed=5,
                        settings=SelfPlaySettings(search=SearchSettings(simulations=8, leaves_per_round=4)))
    return selfplay.play(uniform_evaluator(GO5.num_actions), games=6)


def test_a_go_game_played_to_the_end_records_its_final_owners(go_records):
    for r in go_records:
        assert not r.resigned
        state, _ = GO5.state_from_moves(r.moves)
        assert GO5.is_terminal(state)
        assert r.ownership is not None and r.ownership.dtype == np.int8
        assert r.ownership.tolist() == GO5.final_ownership(state).tolist()
        # the target agrees with the value target: the same count decides the game
        assert np.sign(r.ownership.sum() - GO5.komi) == r.outcome


def test_resigned_games_and_connect_four_record_none():
    # A uniform evaluator's root value is 0, above -1 and below 0.5: every mover resigns.
    resigning = SelfPlay(GO5, games=2, seed=1,
                         settings=SelfPlaySettings(search=SearchSettings(simulations=4), resign_threshold=0.5,
                                                   no_resign_fraction=0.0, resign_max_false_positives=1.0))
    resigned = resigning.play(uniform_evaluator(GO5.num_actions), games=2)
    assert all(r.resigned and r.ownership is None for r in resigned)
    c4 = make_game("connect4")
    settings = SelfPlaySettings(search=SearchSettings(simulations=4))
    records = SelfPlay(c4, games=2, seed=1, settings=settings).play(uniform_evaluator(c4.num_actions), games=2)
    assert all(r.ownership is None for r in records)


# -- the codec ---------------------------------------------------------------------------------


def test_the_codec_keeps_the_ownership_and_old_entries_decode_with_none(go_records):
    record = go_records[0]
    back = DECODE_GO5(encode_game(record, worker_id="w"))
    assert back.ownership.dtype == np.int8 and back.ownership.tolist() == record.ownership.tolist()
    # an entry written before the array existed (or of a resigned game) has none
    older = DECODE_GO5(encode_game(dataclasses.replace(record, ownership=None), worker_id="w"))
    assert older.ownership is None and np.array_equal(older.moves, record.moves)


def _header(record):
    return msgpack.unpackb(zstandard.decompress(encode_game(record, worker_id="w")), raw=False)


def _pack(header) -> bytes:
    return zstandard.ZstdCompressor().compress(msgpack.packb(header, use_bin_type=True))


@pytest.mark.parametrize(("case", "reason"), [
    ("value 2", "ownership holds values other than -1, 0 and 1"),
    ("a point short", "ownership: shape [24] does not match the expected [25]"),
    ("resigned", "a resigned game has no final ownership"),
    ("version 2", "arrays must be exactly ['moves', 'planes', 'policy', 'value']"),
    ("dtype", "ownership: dtype '<f4', expected '|i1'"),
])
def test_the_reader_refuses_a_bad_ownership_array(go_records, case, reason):
    header = _header(go_records[0])
    entry = header["arrays"]["ownership"]
    if case == "value 2":
        entry["data"] = np.full(25, 2, np.int8).tobytes()
    elif case == "a point short":
        entry["data"], entry["shape"] = np.zeros(24, np.int8).tobytes(), [24]
    elif case == "resigned":
        header["resigned"] = True
    elif case == "version 2":
        header["version"] = 2
        for name in ("search_value", "search_visits", "full_search"):
            del header["arrays"][name]
    elif case == "dtype":
        entry["dtype"] = "<f4"
    with pytest.raises(SampleFormatError, match=re.escape(reason)):
        DECODE_GO5(_pack(header))


def test_the_writer_refuses_what_the_reader_would(go_records):
    record = go_records[0]
    with pytest.raises(SampleFormatError, match="a resigned game has no final ownership"):
        encode_game(dataclasses.replace(record, resigned=True), worker_id="w")
    with pytest.raises(SampleFormatError, match="the board has 25 points"):
        encode_game(dataclasses.replace(record, ownership=np.zeros(9, np.int8)), worker_id="w")
    with pytest.raises(SampleFormatError, match="integers"):
        encode_game(dataclasses.replace(record, ownership=np.full(25, 0.5)), worker_id="w")


# -- the replay window ------------------------------------------------------------------------


def test_each_position_sees_the_final_owners_from_its_movers_side():
    # Black plays, White plays, Black plays: positions with Black, White, Black to move.
    state, history, planes = GO5.initial_state(), [], []
    for move in ("C3", "D4", "B2"):
        planes.append(GO5.encode(state, history))
        history.append(state.copy())
        GO5.play(state, GO5.text_to_action(move))
    final = np.array([1, -1, 0] + [1] * 22, np.int8)  # +1: Black's (player 0's)
    rows = mover_ownership(np.stack(planes), final)
    assert rows.dtype == np.int8 and rows.shape == (3, 25)
    assert rows[0].tolist() == final.tolist()  # Black to move: as it is
    assert rows[1].tolist() == (-final).tolist()  # White to move: flipped
    assert rows[1][:3].tolist() == [-1, 1, 0]  # Black's point is White's opponent's; dame stays 0
    assert rows[2].tolist() == final.tolist()


def test_the_window_keeps_ownership_with_a_mask_and_wraps_it_with_the_rest():
    window = ReplayWindow(capacity=4, planes_shape=GO5.planes_shape, num_actions=GO5.num_actions,
                          ownership_points=25)
    planes = np.zeros((3, *GO5.planes_shape), np.uint8)
    policy = np.full((3, 26), 1 / 26, np.float32)
    owned = np.ones((3, 25), np.int8)
    window.add(planes, policy, np.ones(3, np.float32), owned)
    window.add(planes[:2], policy[:2], -np.ones(2, np.float32))  # a resigned game: no target
    ownership, has = window.ownership_contents()
    assert has.tolist() == [True, True, False, False]  # the first position was overwritten
    assert ownership.tolist() == [[1] * 25, [1] * 25, [0] * 25, [0] * 25]
    batch = window.sample(64, np.random.default_rng(0))
    assert batch.ownership.shape == (64, 25) and batch.ownership.dtype == np.float32
    # a sample has a target exactly when it is one of the first game's positions
    np.testing.assert_array_equal(batch.has_ownership, batch.value == 1.0)
    np.testing.assert_array_equal(batch.ownership.sum(axis=1), 25 * batch.has_ownership)


def test_the_window_refuses_ownership_it_cannot_keep():
    plain = ReplayWindow(capacity=4, planes_shape=GO5.planes_shape, num_actions=26)
    args = (np.zeros((1, *GO5.planes_shape)), np.full((1, 26), 1 / 26), np.zeros(1))
    with pytest.raises(ValueError, match="keeps no ownership"):
        plain.add(*args, np.zeros((1, 25), np.int8))
    with pytest.raises(ValueError, match="ownership_points must be the board's 25 points"):
        ReplayWindow(capacity=4, planes_shape=GO5.planes_shape, num_actions=26, ownership_points=26)
    window = ReplayWindow(capacity=4, planes_shape=GO5.planes_shape, num_actions=26, ownership_points=25)
    with pytest.raises(ValueError, match="only -1, 0 and 1"):
        window.add(*args, np.full((1, 25), 2, np.int8))


def test_a_symmetry_moves_the_ownership_like_the_planes():
    # An ownership equal to the mover's stones plane: whatever symmetry a sample gets,
    # its ownership must still be its own stones plane, point for point.
    state, history = GO5.initial_state(), []
    for move in ("A5", "E1", "B5", "C2", "A4"):  # no symmetry maps these stones onto themselves
        history.append(state.copy())
        GO5.play(state, GO5.text_to_action(move))
    planes = GO5.encode(state, history).astype(np.uint8)
    images = [GO5.transform_planes(planes, k).tobytes() for k in range(8)]
    assert len(set(images)) == 8
    window = ReplayWindow(capacity=2, planes_shape=GO5.planes_shape, num_actions=26, ownership_points=25)
    own_stones = planes[:, :, 0].reshape(1, 25).astype(np.int8)
    window.add(planes[None], np.full((1, 26), 1 / 26, np.float32), np.zeros(1, np.float32), own_stones)
    batch = window.sample(200, np.random.default_rng(4), game=GO5)
    seen = {images.index(p.astype(np.uint8).tobytes()) for p in batch.planes}
    assert seen == set(range(8))
    np.testing.assert_array_equal(batch.ownership, batch.planes[:, :, :, 0].reshape(200, 25))
