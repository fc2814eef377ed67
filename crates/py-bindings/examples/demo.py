"""Every example of PyArrow's DLPack guide, with arrow_dlpack objects in place of PyArrow's,
then what arrow_dlpack does beyond PyArrow (booleans, chunks, validity masks, tables, a
Parquet file turned into torch batches for a training loop, a Parquet file of JPEGs turned into
decoded, resized image batches, a tokenized Parquet file turned into padded and packed batches,
a Hugging Face Dataset after map as a source, and a run stopped and resumed exactly).

Run it with `cargo xtask demo`, or with any Python that has arrow_dlpack, numpy, pyarrow, torch
and jax installed: `python crates/py-bindings/examples/demo.py`.
Each step prints the code it runs and what it gives.
"""

import numpy as np
import pyarrow as pa

import arrow_dlpack as ad


def step(title):
    print()
    print(f"== {title}")


def show(code, value):
    print(f">>> {code}")
    print(value if isinstance(value, str) else repr(value))


def optional(name):
    """Imports a peer framework, or says it is missing and returns None."""
    try:
        return __import__(name)
    except ImportError:
        print(f"(skipped: {name} is not installed)")
        return None


def producing():
    step("A PyArrow array, imported zero-copy through the Arrow PyCapsule interface")
    source = pa.array([2, 0, 2, 4])
    array = ad.array(source)
    show("array = ad.array(pa.array([2, 0, 2, 4]))", array)
    show("array.type, len(array), array.null_count", (array.type, len(array), array.null_count))

    step("To NumPy, sharing memory")
    result = np.from_dlpack(array)
    show("np.from_dlpack(array)", result)
    show(
        "np.from_dlpack(array).ctypes.data == source.buffers()[1].address",
        result.ctypes.data == source.buffers()[1].address,
    )

    step("To PyTorch")
    torch = optional("torch")
    if torch is not None:
        show("torch.from_dlpack(array)", torch.from_dlpack(array))

    step("To JAX (which asks for legacy capsules only)")
    jax = optional("jax")
    if jax is not None:
        import jax.dlpack
        import jax.numpy

        show("jax.numpy.from_dlpack(array)", jax.numpy.from_dlpack(array))
        show("jax.dlpack.from_dlpack(array)", jax.dlpack.from_dlpack(array))

    step("A fixed-size list array to a tensor with its full shape")
    list_array = ad.array(
        pa.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], pa.list_(pa.float64(), 2))
    )
    show("list_array.type", list_array.type)
    show("list_array.to_tensor()", list_array.to_tensor())
    show("np.from_dlpack(list_array.to_tensor())", np.from_dlpack(list_array.to_tensor()))

    step("A fixed-shape tensor array exports the (len, *cell_shape) tensor")
    nested = ad.array(
        pa.array([[[1, 2], [3, 4]], [[5, 6], [7, 8]]], pa.list_(pa.list_(pa.int32(), 2), 2))
    )
    tensor_array = ad.FixedShapeTensorArray.from_tensor(nested.to_tensor())
    show("tensor_array.type", tensor_array.type)
    show("np.from_dlpack(tensor_array).shape", np.from_dlpack(tensor_array).shape)
    show("pa.array(tensor_array).type  # back to PyArrow, zero-copy", pa.array(tensor_array).type)

    step("Nulls are refused, unless the conversion to a tensor allows them")
    array_with_nulls = ad.array(pa.array([2, None, 4], pa.int32()))
    try:
        np.from_dlpack(array_with_nulls)
    except TypeError as error:
        show("np.from_dlpack(array_with_nulls)", f"{type(error).__name__}: {error}")
    try:
        array_with_nulls.to_tensor()
    except ValueError as error:
        show("array_with_nulls.to_tensor()", f"{type(error).__name__}: {error}")
    values = np.from_dlpack(array_with_nulls.to_tensor(allow_nulls=True))
    show(
        "np.from_dlpack(array_with_nulls.to_tensor(allow_nulls=True))  # the middle is unspecified",
        f"array([{values[0]}, ..., {values[2]}], dtype={values.dtype})",
    )


def consuming():
    step("NumPy to an Array, without copying")
    show(
        "ad.Array.from_dlpack(np.array([2, 0, 2, 4]))",
        ad.Array.from_dlpack(np.array([2, 0, 2, 4])),
    )

    step("NumPy to a Tensor")
    show(
        "ad.Tensor.from_dlpack(np.array([[2, 0], [2, 4]], np.int32))",
        ad.Tensor.from_dlpack(np.array([[2, 0], [2, 4]], np.int32)),
    )

    step("Array.from_dlpack accepts only 1-D contiguous tensors")
    try:
        ad.Array.from_dlpack(np.arange(12, dtype=np.int32).reshape(3, 4))
    except ValueError as error:
        show("ad.Array.from_dlpack(<a 3x4 array>)", f"{type(error).__name__}: {error}")

    step("Multi-dimensional data becomes a FixedShapeTensorArray")
    array = ad.FixedShapeTensorArray.from_dlpack(np.arange(12, dtype=np.int32).reshape(3, 2, 2))
    show("array.type", array.type)
    show("len(array)", len(array))

    step("JAX arrays (legacy-only producers) are accepted too")
    jax = optional("jax")
    if jax is not None:
        import jax.numpy

        show(
            "ad.Tensor.from_dlpack(jax.numpy.arange(6.0).reshape(2, 3))",
            ad.Tensor.from_dlpack(jax.numpy.arange(6.0).reshape(2, 3)),
        )


def beyond_pyarrow():
    step("Beyond PyArrow: booleans export as bool tensors (an unpacking copy)")
    flags = ad.array(pa.array([True, False, True]))
    show("np.from_dlpack(ad.array(pa.array([True, False, True])))", np.from_dlpack(flags))
    try:
        np.from_dlpack(flags, copy=False)
    except BufferError as error:
        show("np.from_dlpack(flags, copy=False)", f"{type(error).__name__}: {error}")
    show(
        "ad.Array.from_dlpack(np.array([True, False])).type  # packed into Arrow bits",
        ad.Array.from_dlpack(np.array([True, False])).type,
    )

    step("Beyond PyArrow: chunked columns keep their chunks")
    chunked = ad.array(pa.chunked_array([[1, 2, 3], [4, 5]]))
    show("chunked.num_chunks", chunked.num_chunks)
    show("np.from_dlpack(chunked)  # concatenated: a copy", np.from_dlpack(chunked))
    try:
        np.from_dlpack(chunked, copy=False)
    except BufferError as error:
        show("np.from_dlpack(chunked, copy=False)", f"{type(error).__name__}: {error}")
    show(
        "pa.chunked_array(chunked).num_chunks  # back to PyArrow, chunks and all, zero-copy",
        pa.chunked_array(chunked).num_chunks,
    )

    step("Beyond PyArrow: nulls travel as a validity mask beside the values")
    with_nulls = ad.array(pa.array([1.0, None, 3.0]))
    show("np.from_dlpack(with_nulls.validity())", np.from_dlpack(with_nulls.validity()))
    torch = optional("torch")
    if torch is not None:
        values = torch.from_dlpack(with_nulls.to_tensor(allow_nulls=True))
        valid = torch.from_dlpack(with_nulls.validity())
        show("values[valid]  # in PyTorch", values[valid])

    step("Beyond PyArrow: a table to one 2-D tensor, as RecordBatch.to_tensor, for any producer")
    table = pa.table(
        {"a": pa.array([1, 2, 3], pa.int16()), "b": pa.array([0.5, 1.5, 2.5], pa.float32())}
    )
    show("ad.Tensor.from_arrow(table)", ad.Tensor.from_arrow(table))
    show("np.from_dlpack(ad.Tensor.from_arrow(table))", np.from_dlpack(ad.Tensor.from_arrow(table)))
    polars = optional("polars")
    if polars is not None:
        frame = polars.DataFrame({"x": [1.0, None], "y": [2.0, 3.0]})
        show(
            "np.from_dlpack(ad.Tensor.from_arrow(polars_frame, null_to_nan=True))",
            np.from_dlpack(ad.Tensor.from_arrow(frame, null_to_nan=True)),
        )

    step("Beyond PyArrow: one zero-copy tensor per column")
    columns = ad.column_tensors(table)
    show(
        "{name: tensor.shape for name, tensor in ad.column_tensors(table).items()}",
        {name: tensor.shape for name, tensor in columns.items()},
    )
    show(
        "np.from_dlpack(columns['a']).ctypes.data == table['a'].chunk(0).buffers()[1].address",
        np.from_dlpack(columns["a"]).ctypes.data == table["a"].chunk(0).buffers()[1].address,
    )

    step("Beyond PyArrow: the DLPack C exchange API is published on every class")
    show("ad.Array.__dlpack_c_exchange_api__", ad.Array.__dlpack_c_exchange_api__)


def training_batches():
    step("Beyond PyArrow: a Parquet file becomes torch batches for a training loop")
    import tempfile
    import time

    import pyarrow.parquet as pq

    torch = optional("torch")
    if torch is None:
        return
    rows = 200_000
    rng = np.random.default_rng(0)
    table = pa.table(
        {
            **{f"f{i}": rng.standard_normal(rows, dtype=np.float32) for i in range(16)},
            "label": pa.array(rng.integers(0, 10, rows)),
        }
    )
    with tempfile.TemporaryDirectory() as directory:
        path = f"{directory}/train.parquet"
        pq.write_table(table, path, row_group_size=50_000)
        features = [f"f{i}" for i in range(16)]
        code = (
            'for batch in ad.batches(path, 1024, groups={"features": features}, '
            'columns=["label"]):\n'
            '    x, y = torch.from_dlpack(batch["features"]), torch.from_dlpack(batch["label"])'
        )
        start = time.perf_counter()
        count = 0
        for batch in ad.batches(path, 1024, groups={"features": features}, columns=["label"]):
            x, y = torch.from_dlpack(batch["features"]), torch.from_dlpack(batch["label"])
            count += 1
        elapsed = time.perf_counter() - start
        show(code, f"{count} batches; the last: x {tuple(x.shape)} {x.dtype}, y {tuple(y.shape)} {y.dtype}")
        show("len(ad.batches(path, 1024))", len(ad.batches(path, 1024)))
        print(f"({rows:,} rows decoded and batched in {elapsed:.2f} s on background threads)")
        np.testing.assert_array_equal(x.numpy()[:, 0], table["f0"].to_numpy()[-len(x):])


def image_batches():
    step("Beyond PyArrow: a Parquet file of JPEGs becomes (B, 3, 224, 224) uint8 image batches")
    import io
    import tempfile
    import time

    import pyarrow.parquet as pq

    torch = optional("torch")
    pil = optional("PIL")
    if torch is None or pil is None:
        return
    from PIL import Image

    def jpeg(seed):
        y, x = np.mgrid[0:240, 0:320]
        pixels = np.stack([x * 255 // 320, y * 255 // 240, (x + y + seed * 40) % 256], axis=-1)
        out = io.BytesIO()
        Image.fromarray(pixels.astype(np.uint8)).save(out, "JPEG", quality=90)
        return out.getvalue()

    rows = 80
    table = pa.table({"image": pa.array([jpeg(i) for i in range(rows)], pa.binary()), "label": np.arange(rows) % 10})
    with tempfile.TemporaryDirectory() as directory:
        path = f"{directory}/images.parquet"
        pq.write_table(table, path, row_group_size=64)
        show("pq.read_schema(path)", str(pq.read_schema(path)).split("\n-- schema")[0])
        code = (
            'for b in ad.batches(path, 64, images={"image": {"size": 224, "resize": 256}}, '
            'columns=["label"]):\n'
            '    x, y = torch.from_dlpack(b["image"]), torch.from_dlpack(b["label"])'
        )
        start = time.perf_counter()
        shapes = []
        for b in ad.batches(path, 64, images={"image": {"size": 224, "resize": 256}}, columns=["label"]):
            x, y = torch.from_dlpack(b["image"]), torch.from_dlpack(b["label"])
            shapes.append(tuple(x.shape))
        elapsed = time.perf_counter() - start
        show(code, f"shapes {shapes}; the last: x {x.dtype}, y {tuple(y.shape)} {y.dtype}")
        show('b["image_sizes"][:2].tolist()  # height, width as decoded', torch.from_dlpack(b["image_sizes"])[:2].tolist())
        print(f"({rows} JPEGs of 320 x 240 decoded, resized and cropped in {elapsed:.2f} s on the loader's threads)")
        assert shapes == [(64, 3, 224, 224), (16, 3, 224, 224)]


def token_batches():
    step("Beyond PyArrow: a tokenized Parquet file becomes padded and packed torch batches")
    import tempfile

    import pyarrow.parquet as pq

    torch = optional("torch")
    if torch is None:
        return
    rows = [[101, 7592, 2088, 102], [101, 2023, 102], [101, 2003, 1037, 3231, 6251, 102]]
    with tempfile.TemporaryDirectory() as directory:
        path = f"{directory}/tokens.parquet"
        table = pa.table({"input_ids": pa.array(rows, pa.list_(pa.int32())), "label": [1, 0, 1]})
        pq.write_table(table, path)
        show("pq.read_schema(path)", str(pq.read_schema(path)).split("\n-- schema")[0])
        padded = 'sequences={"input_ids": {"mode": "pad", "pad_value": 0}}'
        for batch in ad.BatchDataset(path, 3, sequences={"input_ids": {"mode": "pad", "pad_value": 0}}):
            show(f"next(iter(ad.BatchDataset(path, 3, {padded})))", {k: v.tolist() for k, v in batch.items()})
        packed = 'sequences={"input_ids": "pack"}'
        for batch in ad.BatchDataset(path, 3, sequences={"input_ids": "pack"}):
            show(f"next(iter(ad.BatchDataset(path, 3, {packed})))", {k: v.tolist() for k, v in batch.items()})
        budget = 'sequences={"input_ids": "pack"}, max_tokens=8'
        sizes = [len(b["label"]) for b in ad.BatchDataset(path, 32, sequences={"input_ids": "pack"}, max_tokens=8)]
        show(f"[len(b['label']) for b in ad.BatchDataset(path, 32, {budget})]", sizes)


def hf_datasets():
    step("Beyond PyArrow: a Hugging Face Dataset after map, shuffle and filter becomes packed batches")
    datasets = optional("datasets")
    if datasets is None:
        return
    datasets.disable_progress_bars()
    ds = datasets.Dataset.from_dict({"text": ["a b c", "d e", "f g h i", "j", "k l m"], "label": [0, 1, 0, 1, 1]})
    words = "abcdefghijklm"
    ds = ds.map(lambda b: {"input_ids": [[words.index(w) + 1 for w in t.split()] for t in b["text"]]}, batched=True)
    ds = ds.shuffle(seed=0).filter(lambda row: len(row["input_ids"]) > 1)
    show("ds['input_ids'][:]  # after map, shuffle(seed=0) and filter", ds["input_ids"][:])
    code = 'ad.batches(ds, 4, columns=["label"], sequences={"input_ids": "pack"})'
    for batch in ad.batches(ds, 4, columns=["label"], sequences={"input_ids": "pack"}):
        show(f"next(iter({code}))", {k: np.from_dlpack(v).tolist() for k, v in batch.items()})
        assert np.from_dlpack(batch["input_ids"]).tolist() == [t for row in ds["input_ids"][:] for t in row]


def resuming():
    step("Beyond PyArrow: a run stops, saves the loader's position as JSON, and resumes exactly")
    import json
    import tempfile

    import pyarrow.parquet as pq

    table = pa.table({"x": pa.array(np.arange(100, dtype=np.float32)), "label": pa.array(np.arange(100) % 3)})
    with tempfile.TemporaryDirectory() as directory:
        path = f"{directory}/train.parquet"
        pq.write_table(table, path, row_group_size=25)
        options = dict(columns=["x", "label"], shuffle=True, seed=7)
        uninterrupted = [np.from_dlpack(b["x"]).tolist() for b in ad.batches(path, 8, **options)]
        batches = ad.batches(path, 8, **options)
        for _ in range(5):
            next(batches)
        saved = json.dumps(batches.state_dict())
        show("len(json.dumps(batches.state_dict()))  # after 5 of 13 batches", len(saved))
        resumed = [np.from_dlpack(b["x"]).tolist() for b in ad.batches(path, 8, **options, state=json.loads(saved))]
        show("resumed == uninterrupted[5:]", resumed == uninterrupted[5:])
        assert resumed == uninterrupted[5:]


if __name__ == "__main__":
    print(f"arrow_dlpack {ad.__version__}, pyarrow {pa.__version__}, numpy {np.__version__}")
    producing()
    consuming()
    beyond_pyarrow()
    training_batches()
    image_batches()
    token_batches()
    hf_datasets()
    resuming()
