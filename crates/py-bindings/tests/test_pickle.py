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
        with pytest.raises(ValueError, match="cannot unpickle Array"):
            native._array_from_ipc(data)


def test_bad_tensor_parts_are_refused():
    float32 = (2, 32)
    with pytest.raises(ValueError, match="cannot unpickle Tensor: data has .* bytes; expected"):
        native._tensor_from_parts(*float32, [2, 2], None, b"\0" * 15)
    with pytest.raises(ValueError, match="cannot unpickle Tensor: data has .* bytes; expected"):
        native._tensor_from_parts(*float32, [2**62, 2**62], None, b"")
    with pytest.raises(ValueError):
        native._tensor_from_parts(*float32, [2], ["one", "two", "three"], b"\0" * 8)
    with pytest.raises(ValueError):
        native._tensor_from_parts(2, 12, [1], None, b"\0" * 2)  # a 12-bit float
    with pytest.raises(TypeError):
        native._tensor_from_parts(*float32, [2], None, "not bytes")


def tampered(rebuild, arguments):
    """A pickle whose reduce tuple is `(rebuild, arguments)`: what a tampered pickle holds."""

    class Tampered:
        def __reduce__(self):
            return rebuild, arguments

    return pickle.dumps(Tampered())


def tensor_arguments(x, protocol=4):
    return ad.Tensor.from_dlpack(x).__reduce_ex__(protocol)[1]


@pytest.mark.parametrize(
    "field, value, error, message",
    [
        (2, (2, -3), ValueError, r"cannot unpickle Tensor: shape\[1\] is -3; expected a non-negative integer"),
        (2, (2, 2**70), ValueError, r"shape\[1\] is 1180591620717411303424"),
        (2, (2, "3"), TypeError, r"shape\[1\] is str; expected an int"),
        (2, 6, TypeError, r"shape is int; expected a tuple"),
        (0, -1, ValueError, r"code is -1; expected an integer from 0 to 255"),
        (0, 2**64, ValueError, r"code is 18446744073709551616"),
        (1, 1.5, TypeError, r"bits is float; expected an int"),
        (1, 12, ValueError, r"code 2 with 12 bits is not a dtype"),
        (3, ["h"], ValueError, r"dim_names has 1 names; expected 2"),
        (3, ["h", 5], TypeError, r"dim_names\[1\] is int; expected a str"),
        (4, "not bytes", TypeError, r"data is str; expected a C-contiguous bytes-like object"),
        (4, b"\0" * 23, ValueError, r"data has 23 bytes; expected 24 for shape \[2, 3\] of float"),
    ],
)
def test_a_tampered_tensor_pickle_names_the_field(field, value, error, message):
    # A shape entry of -3 was OverflowError("out of range integral type conversion attempted"),
    # naming neither the pickle nor the field.
    arguments = list(tensor_arguments(np.zeros((2, 3), np.float32)))
    arguments[field] = value
    with pytest.raises(error, match=message) as raised:
        pickle.loads(tampered(native._tensor_from_parts, tuple(arguments)))
    assert isinstance(raised.value, ad.ArrowDLPackError)


def test_protocol_5_hands_the_elements_out_of_band_without_a_copy_in_the_pickle():
    x = np.arange(24, dtype=np.float64).reshape(4, 6)[:, ::2]  # strided: copied once, here
    buffers = []
    data = pickle.dumps(ad.Tensor.from_dlpack(x), protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1
    assert buffers[0].raw().nbytes == x.nbytes
    assert len(data) < 200  # the elements are not in the pickle
    restored = pickle.loads(data, buffers=[memoryview(buffers[0]).tobytes()])
    np.testing.assert_array_equal(np.from_dlpack(restored), x)
    assert restored.is_row_major and restored.is_mutable
    # In band, protocol 5 stores the same bytes.
    again = pickle.loads(pickle.dumps(ad.Tensor.from_dlpack(x), protocol=5))
    np.testing.assert_array_equal(np.from_dlpack(again), x)
    # Any C-contiguous buffer is taken out of band (a float64 numpy array here).
    restored = pickle.loads(data, buffers=[np.ascontiguousarray(x)])
    np.testing.assert_array_equal(np.from_dlpack(restored), x)


@pytest.mark.parametrize(
    "make",
    [
        lambda: np.arange(6 * 7 * 5, dtype=np.int16).reshape(6, 7, 5).transpose(2, 0, 1),
        lambda: np.arange(40, dtype=np.float32).reshape(8, 5)[::-2, 1:4],
        lambda: np.broadcast_to(np.arange(3, dtype=np.uint8), (5, 4, 3)),
    ],
    ids=["transposed", "reversed and gapped", "broadcast"],
)
def test_tensors_that_are_not_row_major_are_written_in_row_major_order(make):
    x = make()
    for protocol in (2, 4, 5):
        restored = pickle.loads(pickle.dumps(ad.Tensor.from_dlpack(x), protocol=protocol))
        np.testing.assert_array_equal(np.from_dlpack(restored), x)


def test_a_non_row_major_tensor_larger_than_a_staging_block_is_written_in_blocks():
    # 3 blocks of the 4 MiB staging size along the first dimension, and an outer dimension walked
    # index by index (its trailing block of 8 MiB does not fit one staging block).
    x = np.arange(2 * 1024 * 1024 * 3, dtype=np.float32).reshape(2, 3, 1024, 1024).transpose(0, 1, 3, 2)
    restored = pickle.loads(pickle.dumps(ad.Tensor.from_dlpack(x)))
    np.testing.assert_array_equal(np.from_dlpack(restored), x)


CHILD_UNDER_A_MEMORY_LIMIT = """
import pickle, resource, sys
import numpy as np
import arrow_dlpack as ad

def virtual_memory():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024

tensor = ad.Tensor.from_dlpack(np.broadcast_to(np.float32(1), (2**26,)))  # 256 MiB, one element
limit = virtual_memory() + int(float(sys.argv[1]) * 2**28)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
protocol = int(sys.argv[2])
buffers = []
try:
    data = pickle.dumps(tensor, protocol=protocol, buffer_callback=buffers.append if protocol == 5 else None)
except MemoryError:
    print("MemoryError")
else:
    print(len(data) + sum(buffer.raw().nbytes for buffer in buffers))
"""


def pickle_under_a_memory_limit(size, protocol):
    """What the child prints: the pickled bytes, or MemoryError. `size` is the limit in units of
    the tensor's 256 MiB, above what the process holds before it pickles."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD_UNDER_A_MEMORY_LIMIT, str(size), str(protocol)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


@pytest.mark.parametrize("size, protocol", [(2.6, 4), (1.25, 5)])
def test_pickling_a_large_broadcast_makes_one_copy_under_a_memory_limit(size, protocol):
    # The elements were copied twice (a contiguous tensor, then a Vec) before pickle's own copy,
    # and the process aborted under a limit that the bytes and pickle's copy fit in. Protocol 5
    # with a buffer callback needs only the bytes themselves.
    assert int(pickle_under_a_memory_limit(size, protocol)) >= 2**28


def test_pickling_beyond_a_memory_limit_is_a_memory_error():
    assert pickle_under_a_memory_limit(0.5, 4) == "MemoryError"
