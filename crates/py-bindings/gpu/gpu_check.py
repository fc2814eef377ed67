"""The device paths of arrow_dlpack on a real NVIDIA GPU; run by `cargo xtask gpu-check`.

Checks, each with real peers and device memory:

1. ``cupy``: a CuPy array -> ``ad.Tensor.from_dlpack`` -> ``torch.from_dlpack``, same pointer;
2. ``cudf``: a cuDF column's ``__arrow_c_device_array__`` -> ``ad.array`` -> ``torch.from_dlpack``,
   same pointer (skipped only with ``--no-cudf``, when no cuDF wheel installed);
3. ``fixed_shape_tensor``: a 3-D torch tensor -> ``ad.Tensor`` -> ``__arrow_c_device_array__``
   (``arrow.fixed_shape_tensor``) -> ``ad.array`` -> torch, same pointer, shape and values;
4. ``stream_order``: a kernel on a side stream writes the data and records an event, handed over
   as the Arrow device array's ``sync_event``; ``__dlpack__(stream=consumer)`` makes the consumer
   stream wait on it, and a read on the consumer stream sees the kernel's values.

Prints one summary line, ``gpu-check: PASS ...`` or ``gpu-check: FAIL ...``, and exits 1 on any
failure.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import traceback

_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_GetPointer.restype = ctypes.c_void_p
_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
# ArrowDeviceArray: ArrowArray (80 bytes), int64 device_id, int32 device_type, void* sync_event.
_SYNC_EVENT_OFFSET = 96
_KEEP: list = []


class Only:
    """Exposes one protocol method of ``inner``, so that ``ad.array`` takes that one."""

    def __init__(self, inner, name):
        self._inner = inner
        self._name = name

    def __getattr__(self, name):
        if name == self._name:
            return getattr(self._inner, name)
        raise AttributeError(name)


def check_cupy(ad, torch):
    import cupy

    x = cupy.arange(12, dtype=cupy.float32).reshape(3, 4)
    tensor = ad.Tensor.from_dlpack(x)
    assert tensor.__dlpack_device__() == (2, x.device.id), tensor.__dlpack_device__()
    y = torch.from_dlpack(tensor)
    assert y.is_cuda and y.data_ptr() == x.data.ptr, (y.data_ptr(), x.data.ptr)
    assert y.cpu().tolist() == x.get().tolist()
    return f"cupy {cupy.__version__}"


def check_cudf(ad, torch):
    import cudf

    series = cudf.Series([1.0, 2.0, 3.0, 4.0], dtype="float32")
    candidates = [series]
    column = getattr(series, "_column", None)
    if column is not None and hasattr(column, "to_pylibcudf"):
        candidates.append(column.to_pylibcudf(mode="read"))
    producer = next(
        (c for c in candidates if hasattr(c, "__arrow_c_device_array__")), None
    )
    assert producer is not None, "no cuDF object publishes __arrow_c_device_array__"
    pointer = series.__cuda_array_interface__["data"][0]
    tensor = ad.array(Only(producer, "__arrow_c_device_array__"))
    assert isinstance(tensor, ad.Tensor), type(tensor)
    assert tensor.__dlpack_device__()[0] == 2, tensor.__dlpack_device__()
    y = torch.from_dlpack(tensor)
    assert y.is_cuda and y.data_ptr() == pointer, (y.data_ptr(), pointer)
    assert y.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]
    return f"cudf {cudf.__version__}"


def check_fixed_shape_tensor(ad, torch):
    x = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 2, 3)
    tensor = ad.Tensor.from_dlpack(x)
    again = ad.array(Only(tensor, "__arrow_c_device_array__"))
    assert again.shape == (4, 2, 3) and again.__dlpack_device__() == (2, x.device.index)
    y = torch.from_dlpack(again)
    assert y.data_ptr() == x.data_ptr() and y.shape == x.shape
    assert torch.equal(y, x)
    return "fixed_shape_tensor"


def with_sync_event(tensor, event_handle):
    """``tensor``'s device capsules, their ``sync_event`` pointing to ``event_handle``."""
    schema, array = tensor.__arrow_c_device_array__()
    slot = ctypes.c_void_p(event_handle)
    _KEEP.append(slot)
    pointer = _GetPointer(array, b"arrow_device_array")
    ctypes.c_void_p.from_address(pointer + _SYNC_EVENT_OFFSET).value = ctypes.addressof(slot)

    class Producer:
        def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
            return schema, array

    return Producer()


def check_stream_order(ad, torch):
    n = 1 << 22
    x = torch.zeros(n, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    event = torch.cuda.Event()
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)  # a long kernel, so that an unordered read comes first
        x.fill_(7.0)
        event.record(side)
    producer = with_sync_event(ad.Tensor.from_dlpack(x), event.cuda_event)
    tensor = ad.array(producer)
    consumer = torch.cuda.Stream()
    capsule = tensor.__dlpack__(stream=consumer.cuda_stream, max_version=(1, 0))
    with torch.cuda.stream(consumer):
        y = torch.from_dlpack(capsule)
        total = y.sum()
    consumer.synchronize()
    assert total.item() == 7.0 * n, total.item()
    torch.cuda.synchronize()
    return "stream_order"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-cudf", action="store_true", help="skip the cuDF check")
    args = parser.parse_args()
    import arrow_dlpack as ad
    import torch

    if not torch.cuda.is_available():
        print("gpu-check: FAIL torch sees no CUDA device")
        return 1
    checks = [("cupy", check_cupy), ("fixed_shape_tensor", check_fixed_shape_tensor),
              ("stream_order", check_stream_order)]
    if not args.no_cudf:
        checks.insert(1, ("cudf", check_cudf))
    passed, failed = [], []
    for name, check in checks:
        try:
            passed.append(check(ad, torch))
        except Exception as error:  # noqa: BLE001 - every failure goes into the summary
            traceback.print_exc()
            failed.append(f"{name}: {type(error).__name__}: {error}")
    versions = (
        f"arrow_dlpack {ad.__version__}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
        f"GPU {torch.cuda.get_device_name(0)}"
    )
    skipped = " | skipped: cudf (no cudf-cu12/pylibcudf-cu12 wheel installed)" if args.no_cudf else ""
    if failed:
        print(f"gpu-check: FAIL {'; '.join(failed)} | passed: {', '.join(passed)}{skipped} | {versions}")
        return 1
    print(f"gpu-check: PASS {', '.join(passed)}{skipped} | {versions}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
