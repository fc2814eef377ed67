"""`ad.ListArray` as a careless or hostile caller uses it: offsets written after the list was
made, broadcast inputs that claim billions of rows, and random offsets, lengths, pad values and
indexes (hypothesis). Cases that crashed or aborted the process before their fix run in a child
process, so that a regression fails one test instead of ending the run."""

import json
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import arrow_dlpack as ad

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run_child(script, *arguments):
    """Runs `script` in a fresh interpreter; its standard output, after checking that it ended
    normally (a crash or an abort fails here, naming its exit status and standard error)."""
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, arguments)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"exit status {done.returncode}: {done.stderr[-3000:]}"
    return done.stdout.strip()


WRITES_AFTER_FROM_OFFSETS = """
import json
import numpy as np, pyarrow as pa
import arrow_dlpack as ad

values = np.arange(5)
offsets = np.array([0, 2, 5], np.{dtype})
column = ad.ListArray.from_offsets(values, offsets)
offsets[1] = 2_000_000_000
offsets[2] = -7
values[0] = 100  # the values are shared: a change of elements, never of rows
print(json.dumps({{
    "repr": repr(column).split("\\n", 1)[1],
    "item": column[1],
    "rows": column.to_pylist(),
    "slice": column[0:1].to_pylist(),
    "lengths": np.from_dlpack(column.lengths()).tolist(),
    "offsets": np.from_dlpack(column.offsets).tolist(),
    "padded": np.from_dlpack(column.to_padded(-1)).tolist(),
    "pyarrow": pa.array(column).to_pylist(),
    "pyarrow offsets": pa.array(column).offsets.to_pylist(),
}}))
"""


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_writes_into_the_callers_offsets_after_from_offsets_change_no_row(dtype):
    # The list kept a view of the caller's offsets: afterwards repr, [1], to_pylist() and slices
    # raised PanicException, lengths() gave negative lengths, and pyarrow read the heap or died
    # with SIGSEGV.
    seen = json.loads(run_child(WRITES_AFTER_FROM_OFFSETS.format(dtype=dtype)))
    rows = [[100, 1], [2, 3, 4]]
    assert seen["repr"] == "[\n  [\n    100,\n    1\n  ],\n  [\n    2,\n    3,\n    4\n  ]\n]"
    assert seen["item"] == [2, 3, 4]
    assert seen["rows"] == seen["pyarrow"] == rows
    assert seen["slice"] == rows[:1]
    assert seen["lengths"] == [2, 3]
    assert seen["offsets"] == seen["pyarrow offsets"] == [0, 2, 5]
    assert seen["padded"] == [[100, 1, -1], [2, 3, 4]]


def test_from_offsets_shares_the_values_and_copies_the_offsets():
    values = np.arange(6, dtype=np.float32)
    offsets = np.array([0, 4, 6], np.int64)
    column = ad.ListArray.from_offsets(values, offsets)
    assert np.from_dlpack(column.values).ctypes.data == values.ctypes.data
    copied = np.from_dlpack(column.offsets)
    assert copied.ctypes.data != offsets.ctypes.data
    assert copied.tolist() == [0, 4, 6] and not copied.flags.writeable
    assert column.type == "large_list<item: float>"


HUGE_BROADCAST_FROM_PADDED = """
import resource, sys
import numpy as np
import arrow_dlpack as ad

def virtual_memory():
    for line in open("/proc/self/status"):
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024

rows = 2**31
padded = np.broadcast_to(np.zeros((1, 4), np.int32), (rows, 4))  # 64 bytes standing for 32 GiB
lengths = np.broadcast_to(np.{dtype}(1), (rows,))
limit = virtual_memory() + 2 * 2**30
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
try:
    ad.ListArray.from_padded(padded, lengths)
except MemoryError as error:
    print("MemoryError")
"""


@pytest.mark.parametrize("dtype", ["int64", "uint8"])
def test_from_padded_of_a_broadcast_of_2_31_rows_is_a_memory_error_not_an_abort(dtype):
    # The lengths were collected into an infallible vector of 16 bytes per row: 32 GiB, and the
    # process aborted ("memory allocation of 34359738368 bytes failed").
    assert run_child(HUGE_BROADCAST_FROM_PADDED.format(dtype=dtype)) == "MemoryError"


# Hostile calls: each either works, with the values the oracles give, or raises one of the
# exceptions the contract lists; never a panic, another exception or a crash.
ALLOWED = (ValueError, TypeError, IndexError, BufferError, MemoryError)

offset_dtypes = st.sampled_from([np.int32, np.int64, np.uint32, np.int16, np.float64])
value_dtypes = st.sampled_from([np.int8, np.int32, np.float32, np.float64, np.bool_, np.uint64])


def refused(call):
    """Calls `call`; the exception it raised (one of ALLOWED), or None."""
    try:
        call()
    except ALLOWED as error:
        return error
    return None


@SETTINGS
@given(
    offsets=st.lists(st.integers(min_value=-(2**40), max_value=2**40), min_size=0, max_size=6),
    offset_dtype=offset_dtypes,
    value_dtype=value_dtypes,
    values=st.integers(min_value=0, max_value=12),
    inner=st.sampled_from([(), (2,), (0,), (3, 1)]),
    reverse=st.booleans(),
)
def test_from_offsets_of_any_offsets_is_exact_or_refused(offsets, offset_dtype, value_dtype, values, inner, reverse):
    raw = np.array(offsets).astype(offset_dtype) if offsets else np.array([], offset_dtype)
    if reverse:
        raw = raw[::-1]
    elements = (np.arange(values * int(np.prod(inner, dtype=int))) % 7).astype(value_dtype).reshape((values, *inner))
    column = None

    def make():
        nonlocal column
        column = ad.ListArray.from_offsets(elements, raw)

    if refused(make) is not None:
        return
    # Accepted: the offsets are int32 or int64, start at 0, never decrease and end at N.
    assert raw.dtype in (np.int32, np.int64)
    assert raw[0] == 0 and raw[-1] == values and np.all(np.diff(raw) >= 0)
    expected = [elements[raw[i] : raw[i + 1]].tolist() for i in range(len(raw) - 1)]
    assert column.to_pylist() == pa.array(column).to_pylist() == expected
    assert np.from_dlpack(column.lengths()).tolist() == np.diff(raw).tolist()


@SETTINGS
@given(
    index=st.one_of(st.integers(min_value=-(2**70), max_value=2**70), st.integers(-6, 6)),
    start=st.one_of(st.none(), st.integers(-(2**66), 2**66), st.integers(-6, 6)),
    stop=st.one_of(st.none(), st.integers(-(2**66), 2**66), st.integers(-6, 6)),
    step=st.one_of(st.none(), st.integers(-3, 3), st.integers(-(2**66), 2**66)),
)
def test_indexes_and_slices_of_any_size_match_pyarrow_or_are_refused(index, start, stop, step):
    theirs = pa.array([[1, 2, 3], [], None, [4, 5], [6]], pa.list_(pa.int32()))
    ours = ad.array(theirs)
    expected = theirs.to_pylist()
    try:
        wanted = expected[index]
    except IndexError:
        assert isinstance(refused(lambda: ours[index]), IndexError)
    else:
        assert ours[index] == wanted
    try:
        wanted = expected[start:stop:step]
    except ValueError:  # step 0
        assert isinstance(refused(lambda: ours[start:stop:step]), ValueError)
    else:
        assert ours[start:stop:step].to_pylist() == wanted


@SETTINGS
@given(
    pad_value=st.one_of(
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True),
        st.booleans(),
        st.none(),
        st.text(max_size=2),
    ),
    max_length=st.one_of(st.none(), st.integers(-(2**65), 2**65), st.integers(-2, 5)),
    multiple=st.one_of(st.none(), st.integers(-(2**65), 2**65), st.integers(-2, 5)),
    side=st.sampled_from(["left", "right", "middle"]),
    dtype=st.sampled_from([pa.int8(), pa.uint16(), pa.int64(), pa.float16(), pa.float64()]),
)
def test_to_padded_of_any_arguments_is_exact_or_refused(pad_value, max_length, multiple, side, dtype):
    rows = [[1, 2, 3], [], [4, 5]]
    column = ad.array(pa.array(rows, pa.list_(dtype)))
    padded = None
    # A multiple of 2**28 asks for a padded tensor of gigabytes, which is made as asked: such
    # sizes are left out (they test the machine's memory, not the padding), while sizes past any
    # machine's memory (2**40 bytes and more) stay in, and must be refused.
    asked = 3 * max(abs(multiple or 0), 3) * 8
    assume(not (1 << 26) < asked < (1 << 40))

    def pad():
        nonlocal padded
        padded = column.to_padded(pad_value, max_length=max_length, pad_to_multiple_of=multiple, padding_side=side)

    if refused(pad) is not None:
        return
    result = np.from_dlpack(padded)
    keep = 3 if max_length is None else max_length
    width = min(3, keep)
    if multiple:
        width = -(-width // multiple) * multiple
    assert result.shape == (3, width)
    # The values are at the row's start (or end), within its first (or last) 3 columns.
    edge = min(width, 3)
    for index, values in enumerate(rows):
        kept = values[:keep]
        row = (result[index, :edge] if side == "right" else result[index, width - edge :]).tolist()
        assert (row[: len(kept)] if side == "right" else row[edge - len(kept) :]) == kept


@SETTINGS
@given(
    lengths=st.lists(st.integers(min_value=-(2**66), max_value=2**66), min_size=0, max_size=5),
    dtype=st.sampled_from([np.int8, np.uint64, np.int64, np.float32]),
    width=st.integers(0, 4),
    broadcast=st.booleans(),
)
def test_from_padded_of_any_lengths_is_exact_or_refused(lengths, dtype, width, broadcast):
    if np.issubdtype(dtype, np.integer):
        # Wrapped into the dtype's range, as a C cast would.
        low, high = int(np.iinfo(dtype).min), int(np.iinfo(dtype).max)
        lengths = [(length - low) % (high - low + 1) + low for length in lengths]
    raw = np.array(lengths, dtype)
    padded = np.arange(len(lengths) * width, dtype=np.int32).reshape(len(lengths), width)
    if broadcast and lengths:
        raw = np.broadcast_to(raw[:1], raw.shape)
    column = None

    def unpad():
        nonlocal column
        column = ad.ListArray.from_padded(padded, raw)

    if refused(unpad) is not None:
        return
    assert raw.dtype.kind in "iu" and all(0 <= length <= width for length in raw.tolist())
    assert column.to_pylist() == [padded[i, : raw[i]].tolist() for i in range(len(raw))]
