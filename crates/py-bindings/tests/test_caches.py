"""The caches behind the per-call speed (parsed schema fields, the fields of tensors, protocol
tables, `max_version` tuples) are bounded: more distinct keys than they hold still give the right
answers, and what they replace is released."""

import sys

import numpy as np
import pyarrow as pa

import arrow_dlpack as ad


def test_more_distinct_schemas_than_remembered_keep_their_types():
    # Each struct has its own field name: every schema is another key, cycled twice.
    arrays = [pa.array([{f"f{index}": index}]) for index in range(100)]
    for _ in range(2):
        for index, array in enumerate(arrays):
            imported = ad.array(array)
            assert imported.type == str(array.type) == f"struct<f{index}: int64>"
            assert imported.to_pylist() == array.to_pylist()


def test_more_distinct_tensor_shapes_than_remembered_keep_their_types():
    for _ in range(2):
        for width in range(1, 40):
            values = np.arange(2 * width, dtype=np.float32).reshape(2, width, 1)
            ours = ad.FixedShapeTensorArray.from_dlpack(values)
            assert ours.type == (
                f"extension<arrow.fixed_shape_tensor[value_type=float, shape=[{width},1]]>"
            )
            np.testing.assert_array_equal(np.from_dlpack(ours), values)


def test_more_distinct_imported_types_than_remembered_keep_their_types():
    for _ in range(2):
        for dtype in [np.int8, np.uint16, np.float32, np.int64, np.float64, np.uint8]:
            values = np.arange(3, dtype=dtype)
            imported = ad.Array.from_dlpack(values)
            assert imported.type == str(pa.array(values).type)
            np.testing.assert_array_equal(np.from_dlpack(imported), values)


def test_replaced_max_version_tuples_are_released():
    array = ad.array(pa.array([1, 2, 3]))
    first = tuple([1, 5])
    before = sys.getrefcount(first)
    assert '"dltensor_versioned"' in repr(array.__dlpack__(max_version=first))
    # Remembered: the cache holds one reference while the entry lives.
    assert sys.getrefcount(first) == before + 1
    others = [tuple([1, minor]) for minor in range(100, 164)]
    for other in others:
        assert '"dltensor_versioned"' in repr(array.__dlpack__(max_version=other))
    # Replaced by later tuples: its reference is given back. `__dlpack__` is a raw method, outside
    # pyo3's bookkeeping, so the release waits in pyo3's reference pool until the next call into
    # the module that goes through pyo3 (`len`).
    assert len(array) == 3
    assert sys.getrefcount(first) == before
    # Still read right when it comes back.
    assert '"dltensor_versioned"' in repr(array.__dlpack__(max_version=first))
    assert '"dltensor"' in repr(array.__dlpack__(max_version=tuple([0, 9])))


def test_many_producer_types_are_answered_right():
    # Immutable producer types (pyarrow's, numpy's) fill the protocol caches; classes made at
    # run time pass through them too, and each still gets its own answer.
    classes = []
    for index in range(80):
        values = pa.array([index, index + 1])
        cls = type(f"Producer{index}", (), {"__arrow_c_array__": (
            lambda self, requested_schema=None, values=values: values.__arrow_c_array__()
        )})
        classes.append((cls, values))
    for _ in range(2):
        for cls, values in classes:
            assert ad.array(cls()).to_pylist() == values.to_pylist()
