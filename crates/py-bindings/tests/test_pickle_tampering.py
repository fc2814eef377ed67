"""Tampered pickles: every field of an `Array` and a `Tensor` pickle replaced by hostile values
(hypothesis), and the bytes of array pickles flipped, cut and spliced. Unpickling either gives a
sound object or raises ValueError or TypeError (an `ArrowDLPackError`), never another exception,
a panic or a crash."""

import pickle
import struct
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import arrow_dlpack as ad
import arrow_dlpack._arrow_dlpack as native

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TENSORS = {
    "float32 (2, 3) with names": lambda: ad.array(
        pa.ExtensionArray.from_storage(
            pa.fixed_shape_tensor(pa.float32(), [3], dim_names=["w"]),
            pa.array([[1, 2, 3], [4, 5, 6]], pa.list_(pa.float32(), 3)),
        )
    ).to_tensor(),
    "int8 0-d": lambda: ad.Tensor.from_dlpack(np.array(7, np.int8)),
    "bool (4,)": lambda: ad.Tensor.from_dlpack(np.array([True, False, True, True])),
    "complex128 (0, 2)": lambda: ad.Tensor.from_dlpack(np.zeros((0, 2), np.complex128)),
}

ARRAYS = {
    "int64 with nulls": lambda: pa.array([1, None, 3]),
    "chunked int16": lambda: pa.chunked_array([[1, 2], [], [3]], pa.int16()),
    "list<int32>": lambda: pa.array([[1, 2], None, [], [3]], pa.list_(pa.int32())),
    "fixed-shape tensor": lambda: pa.ExtensionArray.from_storage(
        pa.fixed_shape_tensor(pa.float32(), [2, 2], permutation=[1, 0]),
        pa.array([[0, 1, 2, 3], [4, 5, 6, 7]], pa.list_(pa.float32(), 4)),
    ),
    "string": lambda: pa.array(["a", None, "ccc"]),
}

# Values a field may be replaced by: the wrong types, integers beyond every width, negative
# numbers, nested sequences of anything.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=-4, max_value=300),
    st.floats(allow_nan=True),
    st.text(max_size=4),
    st.binary(max_size=48),
)
values = st.one_of(
    scalars,
    st.lists(scalars, max_size=6),
    st.lists(scalars, max_size=6).map(tuple),
    st.lists(st.integers(min_value=-3, max_value=2**64 + 1), max_size=5).map(tuple),
)


class Tampered:
    """An object whose pickle holds `(rebuild, arguments)`: a tampered pickle."""

    def __init__(self, rebuild, arguments):
        self.rebuild, self.arguments = rebuild, arguments

    def __reduce__(self):
        return self.rebuild, self.arguments


def unpickle(rebuild, arguments):
    """Unpickles a tampered pickle; the result, or the refusal (only ValueError and TypeError of
    this package)."""
    data = pickle.dumps(Tampered(rebuild, tuple(arguments)))
    try:
        return pickle.loads(data)
    except (ValueError, TypeError) as error:
        assert isinstance(error, ad.ArrowDLPackError), repr(error)
        assert "cannot unpickle" in str(error), str(error)
        return None


def check_tensor(tensor):
    """An unpickled tensor is sound: row-major, writable, and a copy reads every element (numpy
    has no float8 and bfloat16 types to read it with)."""
    assert isinstance(tensor, ad.Tensor)
    assert tensor.is_row_major and tensor.is_mutable
    assert tensor.nbytes == tensor.size * (tensor.strides[-1] if tensor.ndim else tensor.nbytes)
    copy = ad.Tensor.from_dlpack(tensor, copy=True)
    assert (copy.shape, copy.type, copy.nbytes) == (tensor.shape, tensor.type, tensor.nbytes)


@pytest.mark.parametrize("name", list(TENSORS))
@pytest.mark.parametrize("field", range(5), ids=["code", "bits", "shape", "dim_names", "data"])
@SETTINGS
@given(value=values)
def test_every_tensor_field_tampered_is_refused_or_sound(name, field, value):
    arguments = list(TENSORS[name]().__reduce_ex__(4)[1])
    arguments[field] = value
    tensor = unpickle(native._tensor_from_parts, arguments)
    if tensor is not None:
        check_tensor(tensor)


@SETTINGS
@given(code=values, bits=values, shape=values, dim_names=values, data=values)
def test_every_tensor_field_tampered_at_once_is_refused_or_sound(code, bits, shape, dim_names, data):
    tensor = unpickle(native._tensor_from_parts, [code, bits, shape, dim_names, data])
    if tensor is not None:
        check_tensor(tensor)


def check_array(array):
    """An unpickled array is sound: its length, type, repr and (for short arrays) its values and
    pyarrow's full validation work; a type `to_pylist` cannot show is a TypeError."""
    assert isinstance(array, ad.Array)
    assert len(array) >= 0
    assert isinstance(array.type, str)
    repr(array)
    try:
        theirs = pa.chunked_array(array)
    except ad.ArrowDLPackValueError as error:
        # A name with a NUL byte is valid Arrow but cannot cross the Arrow C Data Interface.
        assert "Null byte" in str(error), str(error)
    else:
        theirs.validate(full=True)
    if len(array) <= 10_000:
        try:
            array.to_pylist()
        except TypeError as error:
            assert "to_pylist does not support" in str(error)


def pickled_data(name):
    """The bytes of an array's pickle (the one argument of its rebuild function)."""
    return ad.array(ARRAYS[name]()).__reduce__()[1][0]


@pytest.mark.parametrize("name", list(ARRAYS))
@SETTINGS
@given(edits=st.lists(st.tuples(st.integers(min_value=0), st.integers(0, 255)), min_size=1, max_size=4))
# A fixed-size list whose declared length overflows arrow's count of its values: arrow's reader
# asserts on it, and the refusal must read as every other one (found by this test).
@example(edits=[(21863, 64)])
def test_array_bytes_with_flipped_bytes_are_refused_or_sound(name, edits):
    data = bytearray(pickled_data(name))
    for position, byte in edits:
        data[position % len(data)] = byte
    array = unpickle(native._array_from_ipc, [bytes(data)])
    if array is not None:
        check_array(array)


@pytest.mark.parametrize("name", list(ARRAYS))
@SETTINGS
@given(cut=st.integers(min_value=0), insert=st.binary(max_size=64))
def test_array_bytes_cut_and_spliced_are_refused_or_sound(name, cut, insert):
    data = pickled_data(name)
    cut %= len(data) + 1
    for spliced in (data[:cut], data[:cut] + insert + data[cut:], insert):
        array = unpickle(native._array_from_ipc, [spliced])
        if array is not None:
            check_array(array)


@SETTINGS
@given(value=values)
def test_array_data_of_any_other_type_is_refused(value):
    array = unpickle(native._array_from_ipc, [value])
    if array is not None:
        check_array(array)


def refusal_in_a_child(array, declared, forged):
    """What rebuilding the pickle of ``array`` (the Python source of an expression over ``np``,
    ``pa`` and ``ad``) with the bytes ``declared`` replaced by ``forged`` prints of its refusal,
    in a child, so that its stderr is the test's to read: it stays empty (the refusals these
    tests check were panics caught after their message and backtrace reached stderr)."""
    script = f"""
import numpy as np, pyarrow as pa, arrow_dlpack as ad
array = {array}
rebuild, (data,) = array.__reduce_ex__(2)[:2]
assert data.count({declared!r}) == 1
try:
    rebuild(data.replace({declared!r}, {forged!r}))
except ad.ArrowDLPackValueError as error:
    print(error)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    return result.stdout


def test_an_offsets_buffer_of_part_of_an_offset_is_refused_before_the_reader_sees_it():
    # The offsets of a large_list array, 5 offsets of 8 bytes, declared 76 bytes long: arrow's
    # validation reads them as a slice of i64 and asserts whole elements.
    printed = refusal_in_a_child(
        "ad.array(pa.array([[1, 2, 3], [], None, [4, 5]], pa.large_list(pa.int32())))",
        struct.pack("<qq", 64, 40),
        struct.pack("<qq", 64, 76),
    )
    assert "of 76 bytes at offset 64 of the body, does not hold whole elements of 8 bytes" in printed


def test_a_fixed_size_list_of_more_values_than_64_bits_count_is_refused_before_the_reader_sees_it():
    # A fixed-shape tensor array of 3 rows of 2 x 2 values, its rows declared as 2^62 + 3 (the
    # nodes of the column and of its values: rows and nulls each): arrow's validation multiplies
    # them by the 4 values a row and asserts on the overflow.
    printed = refusal_in_a_child(
        "ad.FixedShapeTensorArray.from_numpy_ndarray(np.arange(12, dtype=np.int32).reshape(3, 2, 2))",
        struct.pack("<qqqq", 3, 0, 12, 0),
        struct.pack("<qqqq", 2**62 + 3, 0, 12, 0),
    )
    assert "a fixed-size list column declares 4611686018427387907 rows of 4 values" in printed


def test_a_list_view_whose_offsets_are_not_whole_elements_is_refused_before_the_reader_sees_it():
    # The offsets buffer of a list_view array (its (offset, length) in the record batch: 8 bytes
    # at the body's start) declared 9 bytes long: arrow asserts whole elements as it reads them.
    printed = refusal_in_a_child(
        "ad.array(pa.array([[1], [2, 3]], pa.list_view(pa.int32())))",
        struct.pack("<qq", 0, 8),
        struct.pack("<qq", 0, 9),
    )
    assert "buffer 1 of a batch, of 9 bytes at offset 0 of the body, does not hold whole elements of 4 bytes" in printed


@pytest.mark.parametrize("outer, inner", [("a\x00b", "item"), ("a", "x\x00")])
def test_an_array_whose_field_names_hold_a_nul_is_refused_when_unpickled(outer, inner):
    # It unpickled, and every export of it then failed (the C Data interface refuses the name).
    table = pa.table({outer: pa.array([[1, 2]], pa.list_(pa.field(inner, pa.int32())))})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    with pytest.raises(ad.ArrowDLPackValueError, match=r"holds a NUL character, which no Arrow field name may hold"):
        native._array_from_ipc(sink.getvalue().to_pybytes())
