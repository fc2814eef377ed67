"""`__dlpack__` reads `max_version` with the C API: every accepted value selects the same capsule
as before, and every refused one gets the error pyo3's tuple extraction gives."""

import numpy as np
import pyarrow as pa
import pytest

import arrow_dlpack as ad


def producers():
    return [
        ad.array(pa.array([1, 2, 3], type=pa.int64())),
        ad.Tensor.from_dlpack(np.arange(6.0).reshape(2, 3)),
        ad.FixedShapeTensorArray.from_dlpack(np.arange(12.0, dtype=np.float32).reshape(2, 2, 3)),
    ]


@pytest.mark.parametrize("index", range(3))
@pytest.mark.parametrize(
    ("max_version", "name"),
    [
        (None, "dltensor"),
        ((0, 8), "dltensor"),
        ((1, 0), "dltensor_versioned"),
        ((1, 3), "dltensor_versioned"),
        ((2, 0), "dltensor_versioned"),
        ((True, 0), "dltensor_versioned"),
        ((2**32 - 1, 2**32 - 1), "dltensor_versioned"),
    ],
)
def test_accepted_max_versions_select_the_capsule(index, max_version, name):
    capsule = producers()[index].__dlpack__(max_version=max_version)
    assert f'"{name}"' in repr(capsule)


@pytest.mark.parametrize("index", range(3))
@pytest.mark.parametrize(
    ("max_version", "error"),
    [
        ("1.0", TypeError),
        ([1, 0], TypeError),
        ((1.0, 0), TypeError),
        ((1, "0"), TypeError),
        ((1,), ValueError),
        ((1, 0, 0), ValueError),
        ((-1, 0), OverflowError),
        ((1, 2**32), OverflowError),
        ((2**70, 0), OverflowError),
    ],
)
def test_refused_max_versions_raise_and_leave_no_error_set(index, max_version, error):
    producer = producers()[index]
    with pytest.raises(error):
        producer.__dlpack__(max_version=max_version)
    # No stale exception is left behind: the next call succeeds.
    assert "dltensor_versioned" in repr(producer.__dlpack__(max_version=(1, 0)))
