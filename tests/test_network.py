"""The dual network, its compiled inference call and its weights blob (tiny nets)."""

import logging
import pickle

import keras
import numpy as np
import pytest

from tengen.engine.backend import backend, gpu_available, mixed_precision_policy
from tengen.engine.compiled_call import needs_fixed_shapes
from tengen.engine.games import make_game
from tengen.engine.network import (
    DEFAULT_BUCKETS,
    WEIGHTS_FORMAT,
    CompiledModel,
    WeightsError,
    blob_sha256,
    build_network,
    load_weights_file,
    model_variables,
    pack_tensors,
    save_weights_file,
    weights_from_bytes,
    weights_to_bytes,
)


def tiny(game, *, filters=8, **kwargs):
    return build_network(
        input_shape=game.planes_shape, num_actions=game.num_actions, blocks=1, filters=filters, **kwargs
    )


def random_planes(game, batch, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 2, size=(batch, *game.planes_shape)).astype(np.float32)


@pytest.fixture(scope="module")
def connect4():
    return make_game("connect4")


@pytest.fixture(scope="module")
def c4_model(connect4):
    return tiny(connect4)


@pytest.mark.parametrize(
    "name, rules, planes_shape, actions",
    [("connect4", {}, (6, 7, 3), 7), ("go", {"size": 9}, (9, 9, 17), 82)],
)
def test_output_shapes_probabilities_and_values(name, rules, planes_shape, actions):
    game = make_game(name, **rules)
    assert game.planes_shape == planes_shape
    model = tiny(game)
    # the model itself gives logits and a squeezed value
    assert list(model.output_shape) == [(None, actions), (None,)]

    policy, value = CompiledModel(model)(random_planes(game, 3))

    assert policy.shape == (3, actions) and policy.dtype == np.float32
    assert value.shape == (3,) and value.dtype == np.float32
    np.testing.assert_allclose(policy.sum(axis=1), 1.0, rtol=1e-5)
    assert np.all(policy >= 0)
    assert np.all(np.abs(value) <= 1.0)


#: PyTorch runs the model eagerly: one "program" for every batch size, never traced per shape
EAGER = backend() == "torch"


def test_l2_regularises_every_kernel(c4_model):
    kernels = [v for v in c4_model.trainable_variables if v.path.endswith("/kernel")]
    # stem, 2 per block, policy conv + dense, value conv + hidden + output
    assert len(kernels) == 1 + 2 + 2 + 3
    assert len(c4_model.losses) == len(kernels)


@pytest.mark.skipif(backend() == "jax", reason="JAX compiles one program per shape: it always pads to buckets")
def test_without_xla_any_batch_size_runs_unpadded_from_one_trace(connect4, c4_model):
    compiled = CompiledModel(c4_model, jit_compile=False)
    assert compiled.buckets == ()
    planes = random_planes(connect4, 300, seed=1)
    everything_policy, everything_value = compiled(planes)

    for batch in range(1, 301):
        policy, value = compiled(planes[:batch])
        assert policy.shape == (batch, 7)
        assert compiled.bucket_for(batch) == batch

    assert compiled.trace_count == 1 and compiled.traced_batch_sizes == [None]
    assert compiled.calls == 301  # one call a batch, nothing cut into chunks
    # row i is the same answer at every batch size
    np.testing.assert_allclose(policy, everything_policy, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, everything_value, rtol=1e-5, atol=1e-6)


def test_bucketed_batches_retrace_once_per_bucket_across_sizes_1_to_300(connect4, c4_model):
    compiled = CompiledModel(c4_model, buckets=DEFAULT_BUCKETS)
    planes = random_planes(connect4, 300, seed=1)
    everything_policy, everything_value = compiled(planes)  # one bucket: 512

    for batch in range(1, 301):
        policy, value = compiled(planes[:batch])
        assert policy.shape == (batch, 7)

    used = {compiled.bucket_for(b) for b in range(1, 301)}
    assert used == {1, 8, 32, 128, 256, 512}
    assert sorted(compiled.traced_batch_sizes) == ([None] if EAGER else sorted(used))
    # pad rows never leak into real rows: row i is the same answer at every batch size
    np.testing.assert_allclose(policy, everything_policy, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(value, everything_value, rtol=1e-5, atol=1e-6)


@pytest.mark.skipif(backend() != "tensorflow", reason="TensorFlow's retracing warning")
def test_tracing_every_bucket_of_several_models_is_no_retracing_warning(connect4, c4_model, caplog):
    # TensorFlow warns when one Python function traces five times within a few hundred
    # calls, in any of its tf.functions: a process's models (self-play's, gating's two)
    # each trace their buckets by design, and the warning landed on a run's terminal
    models = [CompiledModel(c4_model, buckets=DEFAULT_BUCKETS), CompiledModel(c4_model, buckets=DEFAULT_BUCKETS)]
    planes = random_planes(connect4, 1024, seed=2)
    with caplog.at_level(logging.WARNING, logger="tensorflow"):
        for compiled in models:
            for size in compiled.buckets:
                compiled(planes[:size])
        import tensorflow as tf

        tf.get_logger().warning("another warning of TensorFlow's still shows")
    assert [compiled.trace_count for compiled in models] == [len(models[0].buckets)] * 2
    assert [r.getMessage() for r in caplog.records] == ["another warning of TensorFlow's still shows"]


def test_batches_are_padded_and_split_never_run_one_position_at_a_time(connect4, c4_model):
    compiled = CompiledModel(c4_model, buckets=(8, 32))
    compiled(random_planes(connect4, 3).astype(np.uint8))  # uint8 planes are accepted too
    assert compiled.traced_batch_sizes == ([None] if EAGER else [8])
    assert compiled.calls == 1

    # 70 = 32 + 32 + 6 (padded to 8): three calls, no new trace
    policy, value = compiled(random_planes(connect4, 70))
    assert policy.shape == (70, 7) and value.shape == (70,)
    assert compiled.calls == 4
    assert sorted(compiled.traced_batch_sizes) == ([None] if EAGER else [8, 32])


def test_buckets_and_xla_by_default_only_with_a_gpu(c4_model):
    compiled = CompiledModel(c4_model)
    assert compiled.jit_compile == gpu_available()
    assert compiled.buckets == (DEFAULT_BUCKETS if needs_fixed_shapes(gpu_available()) else ())
    assert CompiledModel(c4_model, jit_compile=True).buckets == (() if EAGER else DEFAULT_BUCKETS)


def test_weights_round_trip_gives_identical_outputs(connect4):
    planes = random_planes(connect4, 5)
    source, target = tiny(connect4), tiny(connect4)
    assert not np.allclose(CompiledModel(source)(planes)[0], CompiledModel(target)(planes)[0])

    blob = weights_to_bytes(source, metadata={"generation": "000007", "step": 1200})
    compiled = CompiledModel(target)
    compiled(planes)
    metadata = compiled.load_weights_blob(blob)

    assert metadata == {"generation": "000007", "step": 1200}
    np.testing.assert_array_equal(compiled(planes)[0], CompiledModel(source)(planes)[0])
    np.testing.assert_array_equal(compiled(planes)[1], CompiledModel(source)(planes)[1])
    assert compiled.trace_count == 1  # the hot swap reused the traced function


def test_set_weights_from_another_model(connect4):
    planes = random_planes(connect4, 4)
    source, compiled = tiny(connect4), CompiledModel(tiny(connect4))
    compiled.set_weights_from(source)
    np.testing.assert_array_equal(compiled(planes)[0], CompiledModel(source)(planes)[0])


def test_blob_for_a_wider_net_names_the_first_bad_tensor(connect4):
    narrow, wide = tiny(connect4, filters=8), tiny(connect4, filters=16)
    before = [v.numpy().copy() for v in narrow.weights]

    with pytest.raises(WeightsError, match=r"'stem_conv/kernel'.*\(3, 3, 3, 16\).*\(3, 3, 3, 8\)"):
        weights_from_bytes(narrow, weights_to_bytes(wide, metadata={}))

    # all or nothing: nothing was assigned
    for old, v in zip(before, narrow.weights, strict=True):
        np.testing.assert_array_equal(old, v.numpy())


def test_weights_of_another_encoding_say_how_many_planes_each_reads():
    # a Go model trained without the feature planes, loaded where the config asks for them
    plain = build_network(input_shape=(9, 9, 17), num_actions=82, blocks=1, filters=8)
    featured = build_network(input_shape=(9, 9, 37), num_actions=82, blocks=1, filters=8)
    with pytest.raises(WeightsError, match="the weights read 17 input planes and this config's game gives 37"):
        weights_from_bytes(featured, weights_to_bytes(plain, metadata={}))


def test_blob_for_a_deeper_net_names_the_missing_tensor(connect4):
    shallow = tiny(connect4)
    deep = build_network(input_shape=(6, 7, 3), num_actions=7, blocks=2, filters=8)
    with pytest.raises(WeightsError, match="block1_"):
        weights_from_bytes(shallow, weights_to_bytes(deep, metadata={}))


@pytest.mark.parametrize(
    "damage",
    [
        lambda blob: blob[: len(blob) // 2],  # cut in the data
        lambda blob: blob[:200],  # cut in the header
        lambda blob: blob[:5],
        lambda blob: b"",
        lambda blob: b"\xff" * 8 + blob[8:],  # absurd header length
        lambda blob: blob[:8] + b"#" + blob[9:],  # header no longer JSON
        lambda blob: pickle.dumps({"stem_conv/kernel": np.zeros(3)}),
    ],
    ids=["half", "header-cut", "5-bytes", "empty", "bad-length", "bad-json", "a-pickle"],
)
def test_damaged_blobs_fail_with_weights_error(c4_model, damage):
    blob = weights_to_bytes(c4_model, metadata={})
    with pytest.raises(WeightsError):
        weights_from_bytes(c4_model, damage(blob))


def test_unknown_format_version_or_tag_is_refused(c4_model):
    tensors = {name: v.numpy() for name, v in model_variables(c4_model).items()}
    future = pack_tensors(tensors, fmt=WEIGHTS_FORMAT, version="2", metadata={})
    with pytest.raises(WeightsError, match="format_version '2'"):
        weights_from_bytes(c4_model, future)

    other = pack_tensors(tensors, fmt="tengen-checkpoint", version="1", metadata={})
    with pytest.raises(WeightsError, match="not a tengen-weights blob"):
        weights_from_bytes(c4_model, other)


def test_sha256_depends_on_the_content_only(connect4, c4_model):
    # safetensors writes its metadata in hash order; the blob must not
    hashes = {blob_sha256(weights_to_bytes(c4_model, metadata={"a": 1, "b": 2})) for _ in range(20)}
    assert len(hashes) == 1
    assert len(next(iter(hashes))) == 64

    other = tiny(connect4)
    assert blob_sha256(weights_to_bytes(other, metadata={"a": 1, "b": 2})) not in hashes
    assert blob_sha256(weights_to_bytes(c4_model, metadata={"a": 1})) not in hashes


def test_weights_file_round_trip_leaves_no_temp_file(tmp_path, connect4, c4_model):
    path = tmp_path / "models" / "000003.safetensors"
    sha = save_weights_file(c4_model, path, metadata={"generation": "000003"})
    assert sha == blob_sha256(path.read_bytes())
    assert [p.name for p in path.parent.iterdir()] == ["000003.safetensors"]

    fresh = tiny(connect4)
    assert load_weights_file(fresh, path) == {"generation": "000003"}
    planes = random_planes(connect4, 2)
    np.testing.assert_array_equal(CompiledModel(fresh)(planes)[0], CompiledModel(c4_model)(planes)[0])


def test_mixed_precision_keeps_float32_outputs_and_the_global_policy(connect4):
    import keras

    model = tiny(connect4, mixed_precision=True)
    assert keras.config.dtype_policy().name == "float32"
    # float16 on TensorFlow (with loss scaling), bfloat16 on JAX and PyTorch
    assert model.get_layer("stem_conv").compute_dtype == mixed_precision_policy().removeprefix("mixed_")
    policy, value = CompiledModel(model)(random_planes(connect4, 2))
    assert policy.dtype == np.float32 and value.dtype == np.float32
    np.testing.assert_allclose(policy.sum(axis=1), 1.0, rtol=1e-3)


def test_global_pooling_carries_the_whole_board_into_every_point_of_the_trunk():
    # One block on 9x9: three 3x3 convolutions see 7x7 around a point, so a stone on
    # A1 cannot reach the trunk's J9 without global pooling, and reaches it with it.
    go = make_game("go", size=9)
    far_corner = {}
    for every in (0, 1):
        model = build_network(input_shape=go.planes_shape, num_actions=go.num_actions, blocks=1, filters=12,
                              global_pooling_every=every)
        trunk = keras.Model(model.input, model.get_layer("block0_relu2").output)
        planes = random_planes(go, 1, seed=3)
        moved = planes.copy()
        moved[0, 8, 0, 0] = 1.0 - moved[0, 8, 0, 0]  # a stone on A1 (row 8, column 0) put or taken
        before, after = (keras.ops.convert_to_numpy(trunk(p, training=False)) for p in (planes, moved))
        far_corner[every] = float(np.abs(after[0, 0, 8] - before[0, 0, 8]).max())  # J9's features
        assert ("block0_gpool_dense" in [layer.name for layer in model.layers]) == bool(every)
    assert far_corner[0] == 0.0 and far_corner[1] > 0.0
