"""The rows of the exchange benchmark: one `Case` per row, with the data it is built from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional

import numpy as np
import pyarrow as pa
import arrow_dlpack as ad

from exchange_notes import (
    ARRAY_IMPORT_TARGET,
    COPY_PYARROW_TARGET,
    EXCHANGE_TARGET,
    FIXED_SHAPE_TARGET,
    PRODUCER_TARGET,
    TABLE_TARGET,
    WRAP_TARGET,
)
from exchange_common import Side, jnp, torch


# --------------------------------------------------------------------------------------------
# The cases: one record per row


# The kinds of row, in the order the page shows them.
PRODUCER = "producer"  # `__dlpack__` called alone
EXCHANGE = "exchange"  # a zero-copy exchange through DLPack
WRAP = "wrap"  # `ad.array` of an Arrow object, against its bare `__arrow_c_array__()`
COPY = "copy"  # a copying path, against alloc+memcpy and PyArrow's nearest equivalent
TABLE = "table"  # a table to a 2-D tensor, against PyArrow's `to_tensor()` and alloc+memcpy

# The kinds that copy no data: timed at every `--sizes`, with the 10M/10 growth judged.
ZERO_COPY_KINDS = (PRODUCER, EXCHANGE, WRAP)


@dataclass
class Call:
    """A callable and its arguments, timed as `f(a0, ..., name=k_name)` with no wrapper frame in
    between, so that a call of a few hundred nanoseconds is not padded by the harness."""

    f: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def side(self, label: str) -> Side:
        namespace: dict[str, Any] = {"f": self.f}
        arguments: list[str] = []
        for index, value in enumerate(self.args):
            namespace[f"a{index}"] = value
            arguments.append(f"a{index}")
        for name, value in self.kwargs.items():
            namespace[f"k_{name}"] = value
            arguments.append(f"{name}=k_{name}")
        return Side(label, f"f({', '.join(arguments)})", namespace)


def call(f: Callable[..., Any], *args: Any, **kwargs: Any) -> Call:
    return Call(f, args, kwargs)


@dataclass
class Case:
    """One row: our call and its anchor, built from the row's data for each size, and the target.

    `setup(n)` builds the data once per size (both sides share it); `ours(data)` and
    `anchor(data)` give the calls that are timed. `target` bounds ours / anchor in time, except
    that copy and table rows are also judged against alloc+memcpy of `bytes_per_element` bytes per
    element written (`COPY_TARGET`). `needs` names an optional peer (torch, JAX) without which
    the row is left out, and said so.
    """

    row_id: str
    title: str
    kind: str
    target: float
    setup: Callable[[int], Any]
    ours: Callable[[Any], Call]
    anchor: Callable[[Any], Call]
    anchor_label: str = "pyarrow"
    # What the anchor is, where it is not PyArrow's same call (copy rows show it).
    anchor_note: str = ""
    bytes_per_element: int = 0
    needs: Optional[str] = None

    def sizes(self, zero_copy_sizes: tuple[int, ...], copy_elements: int) -> tuple[int, ...]:
        return zero_copy_sizes if self.kind in ZERO_COPY_KINDS else (copy_elements,)

    def available(self) -> bool:
        return {"torch": torch, "jax": jnp}.get(self.needs or "", True) is not None


class Pair(NamedTuple):
    """The same data as our object and as PyArrow's."""

    ours: Any
    theirs: Any


def int64_array(n: int) -> pa.Array:
    """An int64 array of n elements in 64-byte-aligned memory, as Arrow allocates (JAX shares
    only aligned memory: over numpy's 16-byte-aligned buffer it copied for both sides)."""
    return pa.array(aligned(np.arange(n, dtype=np.int64)))


def aligned(values: np.ndarray) -> np.ndarray:
    """`values` copied to a 64-byte-aligned address, as Arrow allocates: numpy's large arrays are
    only 16-byte aligned, and JAX shares aligned memory only (it copies the rest)."""
    raw = np.empty(values.nbytes + 64, dtype=np.uint8)
    offset = -raw.ctypes.data % 64
    out = raw[offset : offset + values.nbytes].view(values.dtype).reshape(values.shape)
    out[...] = values
    return out


def matrix(n: int) -> np.ndarray:
    """A row-major float32 matrix of n elements: (2, 5) or (1_000_000, 10)."""
    cols = 5 if n < 100 else 10
    return aligned(np.arange(n, dtype=np.float32).reshape(n // cols, cols))


def cube(n: int) -> np.ndarray:
    """A float32 array of n elements shaped (len, 2, 5): n // 10 tensors of 2 x 5."""
    return aligned(np.arange(n, dtype=np.float32).reshape(n // 10, 2, 5))


def arrays(n: int) -> Pair:
    theirs = int64_array(n)
    return Pair(ad.array(theirs), theirs)


def tensors(n: int) -> Pair:
    source = matrix(n)
    return Pair(ad.Tensor.from_dlpack(source), pa.Tensor.from_dlpack(source))


def fixed_shape_arrays(n: int) -> Pair:
    theirs = pa.FixedShapeTensorArray.from_numpy_ndarray(cube(n))
    ours = ad.array(theirs)
    assert isinstance(ours, ad.FixedShapeTensorArray)
    return Pair(ours, theirs)


def torch_vector(n: int) -> Any:
    return torch.arange(n, dtype=torch.int64)


def torch_cube(n: int) -> Any:
    return torch.arange(n, dtype=torch.float32).reshape(n // 10, 2, 5)


# The consumers, None when their framework is missing (their rows are left out then).
TORCH_FROM_DLPACK = torch.from_dlpack if torch is not None else None
# JAX imports asynchronously: the call returns before a copy it makes is done, so that calls
# timed in a loop pay for the copies of the calls before them. Each JAX call waits for its array.
JNP_FROM_DLPACK = (lambda x: jnp.from_dlpack(x).block_until_ready()) if jnp is not None else None


def consume(consumer: Optional[Callable[[Any], Any]]) -> dict[str, Callable[[Pair], Call]]:
    """`consumer(ours)` against `consumer(theirs)`."""
    return {
        "ours": lambda pair: call(consumer, pair.ours),
        "anchor": lambda pair: call(consumer, pair.theirs),
    }


def produce(**kwargs: Any) -> dict[str, Callable[[Pair], Call]]:
    """`ours.__dlpack__(**kwargs)` against PyArrow's `__dlpack__(max_version=...)`.

    Without `max_version` (a legacy export) ours is still judged against PyArrow's versioned
    call: PyArrow's legacy export raises a DeprecationWarning on every call, which would flatter
    us.
    """
    theirs = {"max_version": kwargs.get("max_version", (1, 0))}
    return {
        "ours": lambda pair: call(pair.ours.__dlpack__, **kwargs),
        "anchor": lambda pair: call(pair.theirs.__dlpack__, **theirs),
    }


def import_with(ours: Callable[..., Any], theirs: Callable[..., Any], **kwargs: Any) -> dict[str, Any]:
    """`ours(data, **kwargs)` against `theirs(data, **kwargs)`."""
    return {
        "ours": lambda data: call(ours, data, **kwargs),
        "anchor": lambda data: call(theirs, data, **kwargs),
    }


def wrap(source: Callable[[int], Any]) -> dict[str, Any]:
    """`ad.array(obj)` against the bare `obj.__arrow_c_array__()`, its floor."""
    return {
        "setup": source,
        "ours": lambda obj: call(ad.array, obj),
        "anchor": lambda obj: call(obj.__arrow_c_array__),
        "anchor_label": "floor",
    }


def fixed_shape_source(n: int) -> pa.Array:
    return pa.FixedShapeTensorArray.from_numpy_ndarray(cube(n))


def bools(n: int) -> Pair:
    theirs = pa.array(np.arange(n) % 3 == 0)
    return Pair(ad.array(theirs), theirs)


def chunked(n: int) -> Pair:
    half = np.arange(n // 2, dtype=np.int64)
    theirs = pa.chunked_array([pa.array(half), pa.array(half)])
    return Pair(ad.array(theirs), theirs)


def strided(view: Callable[[int], np.ndarray]) -> Callable[[int], Pair]:
    """A strided numpy view of about n elements, as our zero-copy `Tensor` and as itself."""

    def setup(n: int) -> Pair:
        source = view(n)
        return Pair(ad.Tensor.from_dlpack(source), source)

    return setup


def transposed(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32).reshape(n // 2000, 2000).T


def reversed_vector(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float64)[::-1]


def gapped(n: int) -> np.ndarray:
    """Every other element of 2n: a 1-D view with gaps between its elements."""
    return np.arange(2 * n, dtype=np.int64)[::2]


TABLE_COLUMNS = 8
MIXED_TYPES = (pa.int32(), pa.float32(), pa.float64())


def record_batch(n: int, mixed: bool) -> pa.RecordBatch:
    """n elements in `TABLE_COLUMNS` columns: all float64, or int32, float32 and float64 in turn
    (promoted to float64 by both sides)."""
    rows = n // TABLE_COLUMNS
    types = MIXED_TYPES if mixed else (pa.float64(),)
    return pa.record_batch(
        [
            pa.array(np.arange(rows) + column, types[column % len(types)])
            for column in range(TABLE_COLUMNS)
        ],
        names=[f"c{column}" for column in range(TABLE_COLUMNS)],
    )


def table_of_batches(n: int) -> pa.Table:
    """The mixed columns of `record_batch` in a table of 4 record batches."""
    batch = record_batch(n, mixed=True)
    step = batch.num_rows // 4
    return pa.Table.from_batches([batch.slice(start, step) for start in range(0, 4 * step, step)])


def from_arrow(row_major: bool) -> dict[str, Any]:
    """`Tensor.from_arrow(x, row_major=...)` against PyArrow's `x.to_tensor(row_major=...)`."""
    return {
        "ours": lambda data: call(ad.Tensor.from_arrow, data, row_major=row_major),
        "anchor": lambda data: call(data.to_tensor, row_major=row_major),
    }


def copy_true(pair: Pair) -> Call:
    return call(np.from_dlpack, pair.ours, copy=True)


CASES: list[Case] = [
    # The producer call alone, on the same data as PyArrow's.
    Case("dlpack_array", "`x.__dlpack__(max_version=(1, 3))`, x an int64 array", PRODUCER,
         PRODUCER_TARGET, arrays, **produce(max_version=(1, 3))),
    Case("dlpack_array_legacy", "`x.__dlpack__()`, x an int64 array (PyArrow's versioned call)",
         PRODUCER, PRODUCER_TARGET, arrays, **produce()),
    Case("dlpack_tensor", "`x.__dlpack__(max_version=(1, 3))`, x a 2-D float32 tensor", PRODUCER,
         PRODUCER_TARGET, tensors, **produce(max_version=(1, 3))),
    Case("dlpack_tensor_legacy", "`x.__dlpack__()`, x a 2-D float32 tensor (PyArrow's versioned "
         "call)", PRODUCER, PRODUCER_TARGET, tensors, **produce()),
    Case("dlpack_fixed_shape", "`x.__dlpack__(max_version=(1, 3))`, x a fixed-shape-tensor array",
         PRODUCER, PRODUCER_TARGET, fixed_shape_arrays, **produce(max_version=(1, 3))),
    Case("dlpack_fixed_shape_legacy", "`x.__dlpack__()`, x a fixed-shape-tensor array (PyArrow's "
         "versioned call)", PRODUCER, PRODUCER_TARGET, fixed_shape_arrays, **produce()),
    # Zero-copy exports to numpy, torch and JAX.
    Case("np_array", "`np.from_dlpack(x)`, x an int64 array", EXCHANGE, EXCHANGE_TARGET, arrays,
         **consume(np.from_dlpack)),
    Case("torch_array", "`torch.from_dlpack(x)`, x an int64 array", EXCHANGE, EXCHANGE_TARGET,
         arrays, **consume(TORCH_FROM_DLPACK), needs="torch"),
    Case("jnp_array", "`jnp.from_dlpack(x)`, x an int64 array", EXCHANGE, EXCHANGE_TARGET, arrays,
         **consume(JNP_FROM_DLPACK), needs="jax"),
    Case("np_tensor", "`np.from_dlpack(x)`, x a 2-D float32 tensor", EXCHANGE, EXCHANGE_TARGET,
         tensors, **consume(np.from_dlpack)),
    Case("torch_tensor", "`torch.from_dlpack(x)`, x a 2-D float32 tensor", EXCHANGE,
         EXCHANGE_TARGET, tensors, **consume(TORCH_FROM_DLPACK), needs="torch"),
    Case("jnp_tensor", "`jnp.from_dlpack(x)`, x a 2-D float32 tensor", EXCHANGE, EXCHANGE_TARGET,
         tensors, **consume(JNP_FROM_DLPACK), needs="jax"),
    Case("np_fixed_shape", "`np.from_dlpack(x)`, x a fixed-shape-tensor array of 2 x 5 float32",
         EXCHANGE, FIXED_SHAPE_TARGET, fixed_shape_arrays, **consume(np.from_dlpack)),
    Case("torch_fixed_shape", "`torch.from_dlpack(x)`, x a fixed-shape-tensor array of 2 x 5 "
         "float32", EXCHANGE, FIXED_SHAPE_TARGET, fixed_shape_arrays,
         **consume(TORCH_FROM_DLPACK), needs="torch"),
    # No `jnp.from_dlpack` of a fixed-shape tensor array: JAX asks for a legacy capsule, which
    # PyArrow refuses for its (immutable) fixed-shape tensors, so there is nothing to compare with.
    # Zero-copy imports: every from_dlpack of ours.
    Case("array_from_dlpack", "`Array.from_dlpack(np_1d)`, int64", EXCHANGE, ARRAY_IMPORT_TARGET,
         lambda n: np.arange(n, dtype=np.int64),
         **import_with(ad.Array.from_dlpack, pa.Array.from_dlpack)),
    Case("tensor_from_dlpack", "`Tensor.from_dlpack(np_2d)`, float32", EXCHANGE, EXCHANGE_TARGET,
         matrix, **import_with(ad.Tensor.from_dlpack, pa.Tensor.from_dlpack)),
    Case("fixed_shape_from_dlpack", "`FixedShapeTensorArray.from_dlpack(np_3d)`, (len, 2, 5) "
         "float32", EXCHANGE, FIXED_SHAPE_TARGET, cube,
         **import_with(ad.FixedShapeTensorArray.from_dlpack, pa.FixedShapeTensorArray.from_dlpack)),
    Case("array_from_torch", "`Array.from_dlpack(torch_1d)`, int64 (ours through torch's C "
         "exchange API)", EXCHANGE, EXCHANGE_TARGET, torch_vector,
         **import_with(ad.Array.from_dlpack, pa.Array.from_dlpack), needs="torch"),
    Case("tensor_from_torch", "`Tensor.from_dlpack(torch_1d)`, int64 (ours through torch's C "
         "exchange API)", EXCHANGE, EXCHANGE_TARGET, torch_vector,
         **import_with(ad.Tensor.from_dlpack, pa.Tensor.from_dlpack), needs="torch"),
    Case("fixed_shape_from_torch", "`FixedShapeTensorArray.from_dlpack(torch_3d)`, (len, 2, 5) "
         "float32", EXCHANGE, FIXED_SHAPE_TARGET, torch_cube,
         **import_with(ad.FixedShapeTensorArray.from_dlpack, pa.FixedShapeTensorArray.from_dlpack),
         needs="torch"),
    # Wrapping an Arrow object.
    Case("wrap_array", "`ad.array(pa_arr)`, int64, beside `pa_arr.__arrow_c_array__()` alone", WRAP,
         WRAP_TARGET, **wrap(int64_array)),
    Case("wrap_fixed_shape", "`ad.array(pa_fsta)`, a fixed-shape-tensor array, beside its "
         "`__arrow_c_array__()`", WRAP, WRAP_TARGET, **wrap(fixed_shape_source)),
    # Copies.
    Case("copy_bool_export", "bool export: `np.from_dlpack(ad.array(pa_bool))` unpacks bits to "
         "bytes", COPY, COPY_PYARROW_TARGET, bools,
         ours=lambda pair: call(np.from_dlpack, pair.ours),
         anchor=lambda pair: call(pair.theirs.to_numpy, zero_copy_only=False),
         anchor_note="`pa_bool.to_numpy(zero_copy_only=False)` (PyArrow's DLPack refuses bool)",
         bytes_per_element=1),
    Case("copy_bool_import", "bool import: `ad.Array.from_dlpack(np_bool)` packs bytes to bits "
         "(reads n bytes)", COPY, COPY_PYARROW_TARGET, lambda n: np.arange(n) % 3 == 0,
         **import_with(ad.Array.from_dlpack, pa.array),
         anchor_note="`pa.array(np_bool)` (PyArrow's DLPack refuses bool)", bytes_per_element=1),
    Case("copy_chunks", "two chunks: `np.from_dlpack(ad.array(pa_chunked))` concatenates int64",
         COPY, COPY_PYARROW_TARGET, chunked, ours=lambda pair: call(np.from_dlpack, pair.ours),
         anchor=lambda pair: call(pair.theirs.combine_chunks),
         anchor_note="`pa_chunked.combine_chunks()` (no DLPack on ChunkedArray)",
         bytes_per_element=8),
    Case("copy_true_export", "`np.from_dlpack(x, copy=True)`, int64", COPY, COPY_PYARROW_TARGET,
         arrays, ours=copy_true, anchor=lambda pair: call(np.from_dlpack, pair.theirs, copy=True),
         anchor_note="the same call on `pa_arr`", bytes_per_element=8),
    Case("copy_true_import", "`ad.Array.from_dlpack(np_1d, copy=True)`, int64", COPY,
         COPY_PYARROW_TARGET, lambda n: np.arange(n, dtype=np.int64),
         ours=lambda data: call(ad.Array.from_dlpack, data, copy=True),
         anchor=lambda data: call(lambda x: pa.array(x.copy()), data),
         anchor_note="`pa.array(np_1d.copy())` (`pa.Array.from_dlpack` has no `copy`)",
         bytes_per_element=8),
    Case("copy_true_tensor_import", "`ad.Tensor.from_dlpack(np_2d, copy=True)`, float32", COPY,
         COPY_PYARROW_TARGET, matrix, ours=lambda data: call(ad.Tensor.from_dlpack, data, copy=True),
         anchor=lambda data: call(lambda x: pa.Tensor.from_numpy(x.copy()), data),
         anchor_note="`pa.Tensor.from_numpy(np_2d.copy())` (`pa.Tensor.from_dlpack` has no "
         "`copy`)", bytes_per_element=4),
    Case("copy_to_contiguous/transposed", "`to_contiguous` of a transposed float32 matrix: "
         "`np.from_dlpack(ad.Tensor.from_dlpack(m.T), copy=True)`", COPY, COPY_PYARROW_TARGET,
         strided(transposed), ours=copy_true,
         anchor=lambda pair: call(np.ascontiguousarray, pair.theirs),
         anchor_note="numpy's `np.ascontiguousarray(m.T)` (PyArrow has no strided copy of a "
         "matrix: its `Tensor` keeps the strides)", bytes_per_element=4),
    Case("copy_to_contiguous/reversed", "`to_contiguous` of a reversed float64 vector: "
         "`np.from_dlpack(ad.Tensor.from_dlpack(v[::-1]), copy=True)`", COPY, COPY_PYARROW_TARGET,
         strided(reversed_vector), ours=copy_true, anchor=lambda pair: call(pa.array, pair.theirs),
         anchor_note="`pa.array(v[::-1])`", bytes_per_element=8),
    Case("copy_to_contiguous/gapped", "`to_contiguous` of every other int64: "
         "`np.from_dlpack(ad.Tensor.from_dlpack(v[::2]), copy=True)`", COPY, COPY_PYARROW_TARGET,
         strided(gapped), ours=copy_true, anchor=lambda pair: call(pa.array, pair.theirs),
         anchor_note="`pa.array(v[::2])`", bytes_per_element=8),
    # Tables to 2-D tensors (every value copied, promoted to float64).
    Case("table_to_tensor/row_major", "`Tensor.from_arrow(batch)`, 8 float64 columns", TABLE,
         TABLE_TARGET, lambda n: record_batch(n, mixed=False), **from_arrow(row_major=True),
         bytes_per_element=8),
    Case("table_to_tensor/column_major", "`Tensor.from_arrow(batch, row_major=False)`, 8 float64 "
         "columns", TABLE, TABLE_TARGET, lambda n: record_batch(n, mixed=False),
         **from_arrow(row_major=False), bytes_per_element=8),
    Case("table_to_tensor/row_major/mixed", "`Tensor.from_arrow(batch)`, 8 int32, float32 and "
         "float64 columns", TABLE, TABLE_TARGET, lambda n: record_batch(n, mixed=True),
         **from_arrow(row_major=True), bytes_per_element=8),
    Case("table_to_tensor/column_major/mixed", "`Tensor.from_arrow(batch, row_major=False)`, 8 "
         "int32, float32 and float64 columns", TABLE, TABLE_TARGET,
         lambda n: record_batch(n, mixed=True), **from_arrow(row_major=False),
         bytes_per_element=8),
    Case("table_to_tensor/table/mixed", "`Tensor.from_arrow(table)`, a table of 4 record batches "
         "of 8 mixed columns", TABLE, TABLE_TARGET, table_of_batches, **from_arrow(row_major=True),
         anchor_note="`Table.to_tensor()`", bytes_per_element=8),
]
