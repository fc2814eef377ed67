"""`Array.type`, `FixedShapeTensorArray.type` and `value_type`, and `Tensor.type` read exactly as
PyArrow prints the same types: `str(pyarrow_type)` is the oracle."""

import datetime
import decimal

import numpy as np
import pyarrow as pa
import pytest

import arrow_dlpack as ad


def _struct():
    return pa.array(
        [{"a": 1, "b": 2.0}],
        pa.struct([("a", pa.int32()), pa.field("b", pa.float32(), nullable=False)]),
    )


def _ordered_dictionary():
    return pa.DictionaryArray.from_arrays(pa.array([0], pa.int8()), pa.array(["a"]), ordered=True)


def _opaque():
    return pa.ExtensionArray.from_storage(
        pa.opaque(pa.binary(), "geometry", "postgis"), pa.array([b"x"])
    )


ARRAYS = {
    **{
        str(t): pa.array([1, 0], t)
        for t in [
            pa.int8(), pa.int16(), pa.int32(), pa.int64(),
            pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64(),
            pa.float32(), pa.float64(),
        ]
    },
    "halffloat": pa.array(np.array([1, 2], np.float16)),
    "bool": pa.array([True, None]),
    "null": pa.array([None]),
    "string": pa.array(["a"]),
    "large_string": pa.array(["a"], pa.large_string()),
    "string_view": pa.array(["a"], pa.string_view()),
    "binary": pa.array([b"a"]),
    "fixed_size_binary": pa.array([b"1234"], pa.binary(4)),
    "date32": pa.array([datetime.date(2020, 1, 1)]),
    "date64": pa.array([datetime.date(2020, 1, 1)], pa.date64()),
    "timestamp": pa.array([1], pa.timestamp("ms")),
    "timestamp_tz": pa.array([1], pa.timestamp("us", "UTC")),
    "time32": pa.array([1], pa.time32("s")),
    "time64": pa.array([1], pa.time64("ns")),
    "duration": pa.array([1], pa.duration("ns")),
    "month_day_nano_interval": pa.array([pa.MonthDayNano([1, 2, 3])]),
    "decimal128": pa.array([decimal.Decimal("1.00")], pa.decimal128(10, 2)),
    "list": pa.array([[1]]),
    "list_not_null": pa.array([[1]], pa.list_(pa.field("x", pa.int8(), nullable=False))),
    "large_list": pa.array([[1]], pa.large_list(pa.int32())),
    "list_view": pa.array([[1]], pa.list_view(pa.int32())),
    "fixed_size_list": pa.array([[1, 2]], pa.list_(pa.int32(), 2)),
    "nested_fixed_size_list": pa.array([[[1, 2]]], pa.list_(pa.list_(pa.float32(), 2), 1)),
    "struct": _struct(),
    "empty_struct": pa.array([{}], pa.struct([])),
    "list_of_struct": pa.array([[{"a": 1}]], pa.list_(pa.struct([("a", pa.int64())]))),
    "map": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int32())),
    "map_sorted": pa.array([[("a", 1)]], pa.map_(pa.string(), pa.int32(), keys_sorted=True)),
    "map_named": pa.array(
        [[("a", 1)]], pa.map_(pa.string(), pa.field("v", pa.int32(), nullable=False))
    ),
    "dictionary": pa.array(["a"]).dictionary_encode(),
    "ordered_dictionary": _ordered_dictionary(),
    "struct_of_ordered_dictionary": pa.StructArray.from_arrays(
        [_ordered_dictionary()], fields=[pa.field("d", _ordered_dictionary().type)]
    ),
    "run_end_encoded": pa.RunEndEncodedArray.from_arrays(
        pa.array([2, 3], pa.int32()), pa.array([1, 2])
    ),
    "sparse_union": pa.UnionArray.from_sparse(
        pa.array([0], pa.int8()), [pa.array([1]), pa.array(["a"])]
    ),
    "uuid": pa.array([b"0" * 16], pa.uuid()),
    "list_of_uuid": pa.ListArray.from_arrays(
        pa.array([0, 1], pa.int32()), pa.array([b"0" * 16], pa.uuid())
    ),
    "bool8": pa.array([1], pa.bool8()),
    "json": pa.array(["{}"], pa.json_()),
    "large_json": pa.array(["{}"], pa.json_(pa.large_string())),
    "opaque": _opaque(),
    "fixed_shape_tensor": pa.FixedShapeTensorArray.from_numpy_ndarray(
        np.zeros((2, 2, 3), np.int32)
    ),
    "fixed_shape_tensor_plain": pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.float32(), [2]), pa.array([[1, 2]], pa.list_(pa.float32(), 2))
    ),
    "fixed_shape_tensor_named": pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.float64(), [1, 2], dim_names=["x", "y"], permutation=[1, 0]),
        pa.array([[1, 2]], pa.list_(pa.float64(), 2)),
    ),
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_array_type_is_named_as_pyarrow_names_it(name):
    array = ARRAYS[name]
    assert ad.array(array).type == str(array.type)


@pytest.mark.parametrize("name", list(ARRAYS))
def test_chunked_array_type_is_named_as_pyarrow_names_it(name):
    chunked = pa.chunked_array([ARRAYS[name], ARRAYS[name]])
    assert ad.array(chunked).type == str(chunked.type)


def test_list_type_is_lowercase():
    assert ad.array(pa.array([[1]])).type == "list<item: int64>"


DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
          np.float16, np.float32, np.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: dtype.__name__)
def test_tensor_type_is_named_as_pyarrow_names_it(dtype):
    values = np.arange(6).astype(dtype).reshape(2, 3)
    assert ad.Tensor.from_dlpack(values).type == str(pa.Tensor.from_numpy(values).type)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda dtype: dtype.__name__)
@pytest.mark.parametrize("shape", [(2, 3, 2), (4, 1), (2, 2, 2, 2)])
def test_fixed_shape_tensor_array_types_are_named_as_pyarrow_names_them(dtype, shape):
    values = np.arange(np.prod(shape)).astype(dtype).reshape(shape)
    ours = ad.FixedShapeTensorArray.from_dlpack(values)
    # PyArrow names the type our array exports (it writes no identity permutation, where
    # PyArrow's `from_numpy_ndarray` writes one).
    theirs = pa.array(ours)
    assert ours.type == str(theirs.type)
    assert ours.value_type == str(theirs.type.value_type)
    made_by_pyarrow = pa.FixedShapeTensorArray.from_numpy_ndarray(values)
    assert ad.array(made_by_pyarrow).type == str(made_by_pyarrow.type)


def test_permuted_fixed_shape_tensor_array_type_is_named_as_pyarrow_names_it():
    values = np.arange(24, dtype=np.float32).reshape(2, 3, 4).transpose(0, 2, 1)
    ours = ad.FixedShapeTensorArray.from_dlpack(values)
    theirs = pa.array(ours)
    assert "permutation=[1,0]" in str(theirs.type)
    assert ours.type == str(theirs.type)
