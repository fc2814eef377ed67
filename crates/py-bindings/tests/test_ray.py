"""``arrow_dlpack.ray`` against a real local Ray instance (2 CPUs, a small object store): the
collate function inside ``iter_torch_batches`` and ``map_batches``, and ``ad.batches`` over a
``ray.data.Dataset``, shuffled and not, each row exactly once and every tensor equal to what
``ad.batches`` makes of the same rows."""

import pathlib
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
import torch

import arrow_dlpack as ad

ROWS = 1_000
FEATURES = [f"f{i}" for i in range(4)]
# What each batch holds: a group, a single column, a fixed-shape tensor column, a padded
# sequence and a validity mask.
OPTIONS = dict(
    groups={"features": FEATURES},
    columns=["id", "embedding"],
    sequences={"tokens": "pad"},
    masks=["w"],
)


def make_table(rows: int = ROWS) -> pa.Table:
    rng = np.random.default_rng(5)
    columns = {name: pa.array(rng.standard_normal(rows, dtype=np.float32)) for name in FEATURES}
    columns["id"] = pa.array(np.arange(rows, dtype=np.int64))
    # A column with nulls, whose validity comes as a mask.
    columns["w"] = pa.array([None if i % 7 == 3 else float(i) for i in range(rows)], pa.float64())
    storage = pa.FixedSizeListArray.from_arrays(
        pa.array(rng.standard_normal(rows * 6, dtype=np.float32)), 6
    )
    columns["embedding"] = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.float32(), [2, 3]), storage
    )
    lengths = rng.integers(0, 7, rows)
    columns["tokens"] = pa.array(
        [list(range(i, i + n)) for i, n in enumerate(lengths)], pa.list_(pa.int32())
    )
    return pa.table(columns)


@pytest.fixture(scope="module")
def ray_data():
    import ray

    ray.init(
        num_cpus=2,
        object_store_memory=100 << 20,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
    )
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.execution_options.preserve_order = True
    yield ray.data
    ray.shutdown()


@pytest.fixture(scope="module")
def table() -> pa.Table:
    return make_table()


@pytest.fixture(scope="module")
def dataset(ray_data, table):
    # Blocks of 300 rows, so that Ray's batches of 128 rows cross blocks (one fused copy each)
    # and others lie inside one (zero-copy views).
    blocks = [table.slice(start, 300) for start in range(0, ROWS, 300)]
    return ray_data.from_arrow(blocks).materialize()


def expected(table: pa.Table, ids: np.ndarray):
    """What ``ad.batches`` makes of the rows ``ids`` of ``table``, in that order, as torch
    tensors: the oracle of every batch."""
    rows = table.take(pa.array(ids))
    (batch,) = list(ad.batches(rows, len(ids), **OPTIONS))
    return {name: torch.from_dlpack(tensor) for name, tensor in batch.items()}


def assert_batch_equal(batch, table: pa.Table) -> np.ndarray:
    ids = batch["id"].numpy()
    oracle = expected(table, ids)
    assert set(batch) == set(oracle) == {
        "features", "id", "embedding", "tokens", "tokens_lengths", "w_mask"
    }
    for name, tensor in oracle.items():
        assert batch[name].dtype == tensor.dtype, name
        assert batch[name].shape == tensor.shape, name
        assert torch.equal(batch[name], tensor), name
    return ids


def test_importing_arrow_dlpack_does_not_import_ray():
    code = (
        "import sys, arrow_dlpack as ad\n"
        "assert 'ray' not in sys.modules, 'ray imported'\n"
        "ad.batches\n"
        "assert 'ray' not in sys.modules, 'ray imported by ad.batches'\n"
        "assert ad.ray.collate_fn is not None and 'ray' in sys.modules\n"
        "import arrow_dlpack.ray\n"
        "assert arrow_dlpack.ray is ad.ray\n"
        "print('ok')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "ok"


@pytest.mark.parametrize("shuffle", [None, 256])
def test_collate_fn_gives_the_tensors_of_ad_batches(dataset, table, shuffle):
    collate = ad.ray.collate_fn(**OPTIONS)
    seen = []
    sizes = []
    nulls = 0
    for batch in dataset.iter_torch_batches(
        batch_size=128,
        collate_fn=collate,
        local_shuffle_buffer_size=shuffle,
        local_shuffle_seed=7 if shuffle else None,
    ):
        assert batch["features"].shape == (len(batch["id"]), 4)
        assert batch["embedding"].shape == (len(batch["id"]), 2, 3)
        seen.extend(assert_batch_equal(batch, table).tolist())
        sizes.append(len(batch["id"]))
        nulls += int((~batch["w_mask"]).sum())
    assert sorted(seen) == list(range(ROWS))
    assert nulls == table.column("w").null_count > 0
    assert sizes == [128] * 7 + [ROWS - 7 * 128]
    if shuffle is None:
        assert seen == list(range(ROWS))
    else:
        assert seen != list(range(ROWS))


def test_collate_fn_hands_out_arrow_dlpack_or_numpy(table):
    rows = table.slice(10, 5)
    tensors = ad.ray.collate_fn(**OPTIONS, format="dlpack")(rows)
    assert all(isinstance(tensor, ad.Tensor) for tensor in tensors.values())
    arrays = ad.ray.collate_fn(**OPTIONS, format="numpy")(rows)
    assert all(isinstance(array, np.ndarray) for array in arrays.values())
    oracle = expected(table, np.arange(10, 15))
    for name, tensor in oracle.items():
        np.testing.assert_array_equal(np.from_dlpack(tensors[name]), tensor.numpy())
        np.testing.assert_array_equal(arrays[name], tensor.numpy())


def test_collate_fn_in_map_batches(dataset, table):
    collate = ad.ray.collate_fn(groups={"features": FEATURES}, columns=["id"], format="numpy")
    out = dataset.map_batches(collate, batch_format="pyarrow", batch_size=100).take_all()
    assert [row["id"] for row in out] == list(range(ROWS))
    features = np.stack([row["features"] for row in out])
    expected_features = np.stack([table.column(name).to_numpy() for name in FEATURES], axis=1)
    np.testing.assert_array_equal(features, expected_features)


def test_collate_fn_of_a_table_with_no_rows_gives_empty_tensors(table):
    tensors = ad.ray.collate_fn(**OPTIONS)(table.slice(0, 0))
    assert tensors["features"].shape == (0, 4)
    assert tensors["embedding"].shape == (0, 2, 3)
    assert tensors["tokens"].shape[0] == 0
    assert tensors["id"].dtype == torch.int64


def test_collate_fn_gives_private_copies_of_one_record_batch_or_several(table):
    # Ray's blocks are its object store's, which torch would write through a view.
    collate = ad.ray.collate_fn(columns=["id"], format="dlpack")
    one = collate(table.slice(0, 8))
    assert one["id"].is_mutable
    address = np.asarray(table.column("id").chunk(0)).ctypes.data
    assert np.from_dlpack(one["id"]).ctypes.data != address
    assert np.from_dlpack(one["id"]).tolist() == list(range(8))
    joined = collate(pa.concat_tables([table.slice(0, 4), table.slice(100, 4)]))
    assert joined["id"].is_mutable  # one fresh copy
    assert np.from_dlpack(joined["id"]).tolist() == [0, 1, 2, 3, 100, 101, 102, 103]


def test_collate_fn_refuses_bad_options_when_made_and_bad_columns_when_called(table):
    with pytest.raises(ValueError, match="format is 'jax'"):
        ad.ray.collate_fn(format="jax")
    with pytest.raises(TypeError, match="allow_nulls is int; expected bool"):
        ad.ray.collate_fn(allow_nulls=1)
    with pytest.raises(TypeError, match="columns is str"):
        ad.ray.collate_fn(columns="id")
    with pytest.raises(TypeError, match="groups is list"):
        ad.ray.collate_fn(groups=["f0"])
    with pytest.raises(ValueError, match='column "nope" not found'):
        ad.ray.collate_fn(columns=["nope"])(table)
    with pytest.raises(TypeError, match="has no __arrow_c_stream__"):
        ad.ray.collate_fn()(object())
    nulls = pa.table({"x": pa.array([1.0, None])})
    with pytest.raises(ValueError, match="null"):
        ad.ray.collate_fn()(nulls)
    allowed = ad.ray.collate_fn(allow_nulls=True, format="dlpack")(nulls)
    assert np.from_dlpack(allowed["x"])[0] == 1.0


def test_ad_batches_reads_a_ray_dataset_in_order(dataset, table):
    ours = list(ad.batches(dataset, 128, **OPTIONS))
    direct = list(ad.batches(table, 128, **OPTIONS))
    assert len(ours) == len(direct) == 8
    for mine, theirs in zip(ours, direct):
        assert set(mine) == set(theirs)
        for name in theirs:
            np.testing.assert_array_equal(np.from_dlpack(mine[name]), np.from_dlpack(theirs[name]))


def test_ad_batches_reads_a_ray_dataset_shuffled_each_row_once(dataset, table):
    seen = []
    for batch in ad.batches(dataset, 100, shuffle=True, seed=3, buffer_size=500, **OPTIONS):
        batch = {name: torch.from_dlpack(tensor) for name, tensor in batch.items()}
        seen.extend(assert_batch_equal(batch, table).tolist())
    assert sorted(seen) == list(range(ROWS))
    assert seen != list(range(ROWS))


def test_ad_batches_reads_a_data_iterator_and_an_empty_dataset(ray_data, dataset):
    ids = [
        i
        for batch in ad.batches(dataset.iterator(), 300, columns=["id"])
        for i in np.from_dlpack(batch["id"]).tolist()
    ]
    assert ids == list(range(ROWS))
    from ray.data.expressions import col

    empty = dataset.filter(expr=col("id") < 0)
    assert list(ad.batches(empty, 10, columns=["id"])) == []


def test_ray_tensor_columns_load_as_fixed_shape_tensors(ray_data):
    cells = [np.arange(6, dtype=np.float32).reshape(2, 3) + 10 * i for i in range(50)]
    made = ray_data.from_items([{"x": cell, "y": i} for i, cell in enumerate(cells)])
    assert "ArrowTensorType" in str(made.schema())  # Ray's own tensor type, not Arrow's
    seen = []
    for batch in made.iter_torch_batches(batch_size=16, collate_fn=ad.ray.collate_fn()):
        assert batch["x"].shape[1:] == (2, 3)
        for y, x in zip(batch["y"].tolist(), batch["x"].numpy()):
            np.testing.assert_array_equal(x, cells[y])
            seen.append(y)
    assert sorted(seen) == list(range(50))
    (whole,) = list(ad.batches(made, 50))
    np.testing.assert_array_equal(np.from_dlpack(whole["x"]), np.stack(cells))
    # A Ray tensor column of rows that are not all one shape stays as it is, and is refused.
    ragged = ray_data.from_items([{"x": np.zeros(i % 3 + 1, np.float32)} for i in range(6)])
    with pytest.raises(TypeError, match='cannot load column "x"'):
        list(ragged.iter_torch_batches(batch_size=6, collate_fn=ad.ray.collate_fn()))


def test_the_output_of_map_batches_reads_back_with_ad_batches(dataset, table):
    collate = ad.ray.collate_fn(
        groups={"features": FEATURES}, columns=["id", "embedding"], format="numpy"
    )
    out = dataset.map_batches(collate, batch_format="pyarrow", batch_size=100)
    (batch,) = list(ad.batches(out, ROWS, columns=["id", "features", "embedding"]))
    np.testing.assert_array_equal(np.from_dlpack(batch["id"]), np.arange(ROWS))
    (direct,) = list(ad.batches(table, ROWS, **OPTIONS))
    for name in ("features", "embedding"):
        np.testing.assert_array_equal(np.from_dlpack(batch[name]), np.from_dlpack(direct[name]))


def test_the_ray_example_of_the_loader_guide_prints_what_the_guide_says(ray_data, capsys):
    guide = pathlib.Path(__file__).resolve().parents[3] / "docs" / "loader.md"
    section = guide.read_text(encoding="utf-8").split("## With Ray Data", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    printed = section.split("```text\n", 1)[1].split("```", 1)[0]
    exec(compile(code, str(guide), "exec"), {})
    assert capsys.readouterr().out == printed


def test_collate_fn_options_are_those_of_ad_batches_with_their_defaults():
    import inspect

    from arrow_dlpack._arrow_dlpack import _Batches

    parameters = inspect.signature(ad.ray.collate_fn).parameters
    defaults = inspect.signature(ad.batches).parameters
    for name, parameter in parameters.items():
        if name == "format":
            assert parameter.default == "torch"
            continue
        assert name in _Batches.OPTIONS, name
        assert parameter.default == defaults[name].default, name
    assert list(inspect.signature(ad.ray.ArrowCollateFn).parameters) == list(parameters)


def test_a_ray_source_is_not_sharded_again_by_the_torch_distributed_group(dataset, monkeypatch):
    # Ray Train's workers form a torch.distributed group and get their shards from Ray: the
    # loader must not split them again by rank.
    import arrow_dlpack._shards as shards_module

    monkeypatch.setattr(shards_module, "_distributed", lambda: (1, 2))
    ids = [
        i
        for batch in ad.batches(dataset, 100, columns=["id"])
        for i in np.from_dlpack(batch["id"]).tolist()
    ]
    assert ids == list(range(ROWS))
    # Explicit ranks still split it, and a table source follows the group.
    half = [
        i
        for batch in ad.batches(dataset, 100, columns=["id"], rank=0, world_size=2)
        for i in np.from_dlpack(batch["id"]).tolist()
    ]
    assert 0 < len(half) < ROWS
    pieces = pa.Table.from_batches(make_table().to_batches(max_chunksize=100))
    table_ids = [
        i
        for batch in ad.batches(pieces, 100, columns=["id"])
        for i in np.from_dlpack(batch["id"]).tolist()
    ]
    assert 0 < len(table_ids) < ROWS


def test_blocks_of_another_type_than_the_first_are_refused_naming_block_and_column(ray_data):
    # Ray infers each block's types from its rows: int64, then double.
    mixed = ray_data.from_items(
        [{"x": 1}, {"x": 2}, {"x": 3.5}, {"x": 4.5}], override_num_blocks=2
    ).materialize()
    with pytest.raises(ValueError, match=r"block 1 .*column 'x' of type double; expected int64"):
        list(ad.batches(mixed, 4))
    # An exact cast is not one: 3.5 is no int64, and it is still refused with cast=True.
    with pytest.raises(ValueError, match="does not cast exactly"):
        ad.ray.arrow_stream(mixed, cast=True).read_all()
    narrow = ray_data.from_arrow(
        [pa.table({"x": pa.array([1, 2], pa.int64())}), pa.table({"x": pa.array([3, 4], pa.int32())})]
    )
    with pytest.raises(ValueError, match=r"block 1 .*column 'x' of type int32; expected int64"):
        list(ad.batches(narrow, 4))
    cast = ad.batches(ad.ray.arrow_stream(narrow, cast=True), 4)
    (batch,) = list(cast)
    assert np.from_dlpack(batch["x"]).tolist() == [1, 2, 3, 4]
    assert np.from_dlpack(batch["x"]).dtype == np.int64
    renamed = ray_data.from_arrow([pa.table({"x": [1, 2]}), pa.table({"y": [3, 4]})])
    with pytest.raises(ValueError, match=r"block 1 .*column 'y' where block 0 has 'x'"):
        list(ad.batches(renamed, 4))


def test_batches_of_a_ray_dataset_are_private_copies(ray_data):
    table = pa.table({"x": np.arange(64, dtype=np.float32), "id": np.arange(64)})
    materialized = ray_data.from_arrow([table.slice(0, 32), table.slice(32)]).materialize()
    for _ in range(2):
        for batch in ad.batches(materialized, 8, columns=["x"]):
            # In place, as a training step may: Ray's blocks must not change.
            torch.from_dlpack(batch["x"]).mul_(-1)
    again = [np.from_dlpack(b["x"]).copy() for b in ad.batches(materialized, 8, columns=["x"])]
    np.testing.assert_array_equal(np.concatenate(again), np.arange(64, dtype=np.float32))
    blocks = materialized.iter_batches(batch_size=None, batch_format="pyarrow")
    column = pa.concat_tables(list(blocks)).column("x").to_numpy()
    np.testing.assert_array_equal(column, np.arange(64, dtype=np.float32))


def test_collate_fn_batches_are_private_copies_of_rays_blocks(ray_data):
    # torch ignores a view's read-only flag: a write into a batch reached Ray's object store.
    table = pa.table({"x": np.arange(16, dtype=np.float32)})
    materialized = ray_data.from_arrow(table).materialize()
    for format in ("torch", "dlpack"):
        collate = ad.ray.collate_fn(format=format)
        for batch in materialized.iter_torch_batches(batch_size=16, collate_fn=collate):
            tensor = batch["x"] if format == "torch" else torch.from_dlpack(batch["x"])
            tensor.mul_(-1)
    blocks = materialized.iter_batches(batch_size=None, batch_format="pyarrow")
    column = pa.concat_tables(list(blocks)).column("x").to_numpy()
    np.testing.assert_array_equal(column, np.arange(16, dtype=np.float32))


def test_a_cast_that_rounds_floats_is_not_exact(ray_data):
    blocks = [pa.table({"x": pa.array([1.0], pa.float32())}), pa.table({"x": pa.array([0.1, 1e300])})]
    with pytest.raises(ValueError, match="block 1 .* does not cast exactly to float, the type of block 0: some values change"):
        list(ad.ray.arrow_stream(ray_data.from_arrow(blocks), cast=True))
    exact = [pa.table({"x": pa.array([1.0], pa.float32())}), pa.table({"x": pa.array([0.5, float("nan"), None])})]
    read = pa.Table.from_batches(list(ad.ray.arrow_stream(ray_data.from_arrow(exact), cast=True)))
    assert read.column("x").type == pa.float32()
    assert read.column("x").to_pylist()[:2] == [1.0, 0.5] and read.column("x").null_count == 1
