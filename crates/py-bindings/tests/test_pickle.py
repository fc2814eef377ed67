"""Pickling arrays and tensors: a copy with the same class, type, chunks, nulls, extension
metadata and values, through every pickle protocol, a deep copy and a child process; bytes that
are not a pickled array or tensor are ValueError."""

import copy
import pickle
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest

import arrow_dlpack as ad
import arrow_dlpack._arrow_dlpack as native


def columns():
    tensor_type = pa.fixed_shape_tensor(pa.float32(), [2, 2], dim_names=["h", "w"], permutation=[1, 0])
    cells = pa.array([[0, 1, 2, 3], [4, 5, 6, 7]], pa.list_(pa.float32(), 4))
    vst = ad.VariableShapeTensorArray.from_numpy_ndarray(
        [np.arange(6, dtype=np.int16).reshape(2, 3), np.arange(2, dtype=np.int16).reshape(1, 2)]
    )
    return {
        "int64 with nulls": pa.array([1, None, 3]),
        "sliced float32": pa.array(np.arange(10, dtype=np.float32)).slice(3, 4),
        "bool": pa.array([True, False, None]),
        "chunked": pa.chunked_array([[1, 2], [], [3]], pa.int16()),
        "empty stream": pa.chunked_array([], pa.float64()),
        "fixed-shape tensor": pa.ExtensionArray.from_storage(tensor_type, cells),
        "list<int32>": pa.array([[1, 2], None, [], [3]], pa.list_(pa.int32())),
        "large_list<float64>": pa.array([[1.5], [2.5, 3.5]], pa.large_list(pa.float64())),
        "variable-shape tensor": vst,
        "string": pa.array(["a", None, "ccc"]),
        "list_view<int8>": pa.array([[1], [2, 3], None], pa.list_view(pa.int8())),
    }


@pytest.mark.parametrize("name", list(columns()))
@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
def test_arrays_round_trip(name, protocol):
    original = ad.array(columns()[name])
    restored = pickle.loads(pickle.dumps(original, protocol=protocol))
    assert type(restored) is type(original)
    assert restored.type == original.type
    assert restored.num_chunks == original.num_chunks
    assert restored.null_count == original.null_count
    assert restored.equals(original)
    theirs = pa.chunked_array(restored)
    assert theirs.type == pa.chunked_array(original).type  # extension metadata kept
    assert theirs.equals(pa.chunked_array(original))
    assert theirs.to_pylist() == pa.chunked_array(columns()[name]).to_pylist()


def test_unpickled_array_owns_its_memory():
    source = pa.array(np.arange(8, dtype=np.int64))
    restored = copy.deepcopy(ad.array(source))
    view = np.from_dlpack(restored)
    np.testing.assert_array_equal(view, np.arange(8))
    assert view.ctypes.data != np.from_dlpack(source).ctypes.data


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(24, dtype=np.float32).reshape(2, 3, 4),
        lambda: np.arange(24, dtype=np.int8).reshape(4, 6)[::2, 1::2],  # strided view
        lambda: np.asfortranarray(np.arange(6, dtype=np.float64).reshape(2, 3)),
        lambda: np.array([True, False, True]),
        lambda: np.zeros((0, 3), np.uint16),
        lambda: np.array(7.5, np.float64),  # 0-d
        lambda: np.arange(4, dtype=np.complex64),
    ],
    ids=["3-d", "strided", "column-major", "bool", "empty", "0-d", "complex"],
)
def test_tensors_round_trip(make):
    x = make()
    original = ad.Tensor.from_dlpack(x)
    restored = pickle.loads(pickle.dumps(original))
    assert restored.type == original.type
    assert restored.shape == original.shape
    assert restored.is_row_major
    assert restored.is_mutable  # a fresh copy that nobody else sees
    np.testing.assert_array_equal(np.from_dlpack(restored), x)


def test_tensor_keeps_dimension_names():
    column = pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.int32(), [2, 2], dim_names=["H", "W"]),
        pa.array([[0, 1, 2, 3]], pa.list_(pa.int32(), 4)),
    )
    tensor = ad.array(column).to_tensor()
    restored = pickle.loads(pickle.dumps(tensor))
    assert restored.dim_names == tensor.dim_names == ["", "H", "W"]
    assert restored.equals(tensor)


def test_pickles_cross_processes():
    payload = pickle.dumps({"array": ad.array(pa.array([1, None, 3])), "tensor": ad.Tensor.from_dlpack(np.eye(2))})
    script = (
        "import pickle, sys, numpy as np\n"
        "objects = pickle.loads(sys.stdin.buffer.read())\n"
        "assert objects['array'].to_pylist() == [1, None, 3]\n"
        "np.testing.assert_array_equal(np.from_dlpack(objects['tensor']), np.eye(2))\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", script], input=payload, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().strip() == "ok"


def test_bad_array_bytes_are_value_errors():
    good = ad.array(pa.array([1, 2, 3])).__reduce__()[1][0]
    two_columns = pa.ipc.new_stream(sink := pa.BufferOutputStream(), pa.schema([("a", pa.int8()), ("b", pa.int8())]))
    two_columns.close()
    cases = [b"", b"not arrow", good[: len(good) // 2], good[:-9] + b"\xff" * 9, sink.getvalue().to_pybytes()]
    for data in cases:
        with pytest.raises(ValueError, match="not a pickled arrow_dlpack array"):
            native._array_from_ipc(data)


def test_bad_tensor_parts_are_refused():
    float32 = (2, 32)
    with pytest.raises(ValueError, match="bytes of data for shape"):
        native._tensor_from_parts(*float32, [2, 2], None, b"\0" * 15)
    with pytest.raises(ValueError, match="bytes of data for shape"):
        native._tensor_from_parts(*float32, [2**62, 2**62], None, b"")
    with pytest.raises(ValueError):
        native._tensor_from_parts(*float32, [2], ["one", "two", "three"], b"\0" * 8)
    with pytest.raises(ValueError):
        native._tensor_from_parts(2, 12, [1], None, b"\0" * 2)  # a 12-bit float
    with pytest.raises(TypeError):
        native._tensor_from_parts(*float32, [2], None, "not bytes")
