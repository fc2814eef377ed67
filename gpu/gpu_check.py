"""The device paths of arrow_dlpack on a real NVIDIA GPU, with real peers and device memory.

Self-contained: it needs the installed arrow_dlpack wheel, a CUDA build of torch and CuPy, and
nothing else (no network, no file of the source tree); cuDF is checked when it imports, and
skipped with a note in the summary otherwise. Run it as
``python gpu/gpu_check.py`` (``cargo xtask gpu-check`` builds and installs
the wheel first). Checks:

1. ``cupy``: a CuPy array -> ``ad.Tensor.from_dlpack`` -> ``torch.from_dlpack``, same pointer;
2. ``cudf``: a cuDF column's ``__arrow_c_device_array__`` -> ``ad.array`` -> torch, same pointer;
3. ``device_interface``: a 3-D torch tensor -> ``ad.Tensor`` -> ``__arrow_c_device_array__``
   (``arrow.fixed_shape_tensor``, with a real event recorded on the default stream, which the
   driver accepts) -> ``ad.array`` -> torch, same pointer, shape and values;
4. ``import_order``: a long kernel then ``fill_`` on a side stream, ``ad.Tensor.from_dlpack`` on
   that stream, then ``torch.from_dlpack(t).sum()`` on the default stream sees the filled values;
5. ``export_order``: the same kernel's event handed over as an Arrow device array's
   ``sync_event``; ``__dlpack__(stream=consumer)`` makes a non-blocking consumer stream wait on
   it, and a read on that stream sees the values; an imported tensor handed to another
   non-blocking stream is ordered by an event recorded on the default stream;
6. ``other_device`` (two GPUs or more): data on cuda:1 with its event, read while cuda:0 is
   current, and cuda:0 current again afterwards;
7. ``loader``: the loader's batches moved to the GPU (``torch.from_dlpack(...).cuda()``) keep
   their values.

Prints one summary line, ``gpu-check: PASS ...`` or ``gpu-check: FAIL ...``, and exits 1 on any
failure.
"""

from __future__ import annotations

import ctypes
import sys
import tempfile
import traceback

_GetPointer = ctypes.pythonapi.PyCapsule_GetPointer
_GetPointer.restype = ctypes.c_void_p
_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
# ArrowDeviceArray: ArrowArray (80 bytes), int64 device_id, int32 device_type, void* sync_event.
_SYNC_EVENT_OFFSET = 96
_KEEP: list = []
# A kernel long enough (in GPU cycles) that an unordered read would run before the write.
_SLEEP_CYCLES = 500_000_000


class Only:
    """Exposes one protocol method of ``inner``, so that ``ad.array`` takes that one."""

    def __init__(self, inner, name):
        self._inner = inner
        self._name = name

    def __getattr__(self, name):
        if name == self._name:
            return getattr(self._inner, name)
        raise AttributeError(name)


def sync_event_of(capsule):
    """The event handle an ``arrow_device_array`` capsule's ``sync_event`` points to, or 0."""
    pointer = _GetPointer(capsule, b"arrow_device_array")
    slot = ctypes.c_void_p.from_address(pointer + _SYNC_EVENT_OFFSET).value
    return ctypes.c_void_p.from_address(slot).value if slot else 0


def with_sync_event(tensor, event_handle):
    """A producer of ``tensor``'s device capsules, their ``sync_event`` pointing to
    ``event_handle`` (a ``cudaEvent_t`` kept alive by the caller)."""
    schema, array = tensor.__arrow_c_device_array__()
    slot = ctypes.c_void_p(event_handle)
    _KEEP.append(slot)
    pointer = _GetPointer(array, b"arrow_device_array")
    ctypes.c_void_p.from_address(pointer + _SYNC_EVENT_OFFSET).value = ctypes.addressof(slot)

    class Producer:
        def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
            return schema, array

    return Producer()


def written_on_a_side_stream(torch, n, value, device="cuda"):
    """A tensor that a long kernel, then ``fill_``, write on a side stream, with the side stream
    and an event recorded after the write."""
    x = torch.zeros(n, dtype=torch.float32, device=device)
    torch.cuda.synchronize(device)
    side = torch.cuda.Stream(device=device)
    event = torch.cuda.Event()
    with torch.cuda.stream(side):
        torch.cuda._sleep(_SLEEP_CYCLES)
        x.fill_(value)
        event.record(side)
    return x, side, event


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
    producer = next((c for c in candidates if hasattr(c, "__arrow_c_device_array__")), None)
    assert producer is not None, "no cuDF object publishes __arrow_c_device_array__"
    pointer = series.__cuda_array_interface__["data"][0]
    tensor = ad.array(Only(producer, "__arrow_c_device_array__"))
    assert isinstance(tensor, ad.Tensor), type(tensor)
    assert tensor.__dlpack_device__()[0] == 2, tensor.__dlpack_device__()
    y = torch.from_dlpack(tensor)
    assert y.is_cuda and y.data_ptr() == pointer, (y.data_ptr(), pointer)
    assert y.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]
    return f"cudf {cudf.__version__}"


def check_device_interface(ad, torch):
    x = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 2, 3)
    tensor = ad.Tensor.from_dlpack(x)
    schema, array = tensor.__arrow_c_device_array__()
    event = sync_event_of(array)
    assert event, "an imported CUDA tensor was exported without a sync_event"
    # The driver knows the event (a made-up handle would be an error here).
    cuda = ctypes.CDLL("libcuda.so.1")
    assert cuda.cuEventSynchronize(ctypes.c_void_p(event)) == 0, "cuEventSynchronize failed"

    class Producer:
        def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
            return schema, array

    again = ad.array(Producer())
    assert again.shape == (4, 2, 3) and again.__dlpack_device__() == (2, x.device.index)
    y = torch.from_dlpack(again)
    assert y.data_ptr() == x.data_ptr() and y.shape == x.shape
    assert torch.equal(y, x)
    return "device_interface"


def check_import_order(ad, torch):
    n = 1 << 22
    x, side, _ = written_on_a_side_stream(torch, n, 7.0)
    with torch.cuda.stream(side):
        # torch orders its current stream (the side stream) before the stream we pass (1).
        tensor = ad.Tensor.from_dlpack(x)
    total = torch.from_dlpack(tensor).sum()
    assert total.item() == 7.0 * n, total.item()
    torch.cuda.synchronize()
    return "import_order"


def check_export_order(ad, torch):
    n = 1 << 22
    x, _, event = written_on_a_side_stream(torch, n, 5.0)
    tensor = ad.array(with_sync_event(ad.Tensor.from_dlpack(x), event.cuda_event))
    consumer = torch.cuda.Stream()  # torch's streams do not synchronise with the default one
    capsule = tensor.__dlpack__(stream=consumer.cuda_stream, max_version=(1, 0))
    with torch.cuda.stream(consumer):
        total = torch.from_dlpack(capsule).sum()
    consumer.synchronize()
    assert total.item() == 5.0 * n, total.item()
    # An imported tensor, ordered before the legacy default stream, handed to a non-blocking
    # stream: the stream waits on an event recorded on the default stream.
    y, side, _ = written_on_a_side_stream(torch, n, 3.0)
    with torch.cuda.stream(side):
        imported = ad.Tensor.from_dlpack(y)
    other = torch.cuda.Stream()
    capsule = imported.__dlpack__(stream=other.cuda_stream, max_version=(1, 3))
    with torch.cuda.stream(other):
        total = torch.from_dlpack(capsule).sum()
    other.synchronize()
    assert total.item() == 3.0 * n, total.item()
    torch.cuda.synchronize()
    return "export_order"


def check_other_device(ad, torch):
    n = 1 << 20
    x, _, event = written_on_a_side_stream(torch, n, 2.0, device="cuda:1")
    with torch.cuda.device(1):
        source = ad.Tensor.from_dlpack(x)
    tensor = ad.array(with_sync_event(source, event.cuda_event))
    with torch.cuda.device(0):
        capsule = tensor.__dlpack__(max_version=(1, 3))
        assert torch.cuda.current_device() == 0, torch.cuda.current_device()
        y = torch.from_dlpack(capsule)
        assert y.device.index == 1, y.device
        assert y.sum().item() == 2.0 * n
    torch.cuda.synchronize(1)
    return "other_device"


def check_loader(ad, torch):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = 1000
    table = pa.table({"x": pa.array(range(rows), pa.float32()),
                      "y": pa.array(range(rows), pa.int64())})
    with tempfile.TemporaryDirectory() as folder:
        path = f"{folder}/data.parquet"
        pq.write_table(table, path)
        seen = 0
        for batch in ad.batches(path, 128):
            x = torch.from_dlpack(batch["x"]).cuda()
            y = torch.from_dlpack(batch["y"]).cuda()
            expected = torch.arange(seen, seen + len(x), device="cuda")
            assert torch.equal(x, expected.float()) and torch.equal(y, expected)
            seen += len(x)
    assert seen == rows, seen
    return "loader"


def main() -> int:
    import arrow_dlpack as ad
    import torch

    if not torch.cuda.is_available():
        print("gpu-check: FAIL torch sees no CUDA device")
        return 1
    checks = [("cupy", check_cupy), ("device_interface", check_device_interface),
              ("import_order", check_import_order), ("export_order", check_export_order),
              ("loader", check_loader)]
    skipped = []
    try:
        import cudf  # noqa: F401
    except ImportError as error:
        skipped.append(f"cudf (not importable: {error})")
    else:
        checks.insert(1, ("cudf", check_cudf))
    if torch.cuda.device_count() >= 2:
        checks.append(("other_device", check_other_device))
    else:
        skipped.append("other_device (one GPU)")
    passed, failed = [], []
    for name, check in checks:
        try:
            passed.append(check(ad, torch))
        except Exception as error:  # noqa: BLE001 - every failure goes into the summary
            traceback.print_exc()
            failed.append(f"{name}: {type(error).__name__}: {error}")
    versions = (
        f"arrow_dlpack {ad.__version__}, torch {torch.__version__} (CUDA {torch.version.cuda}), "
        f"GPU {torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
    )
    skipped_text = f" | skipped: {'; '.join(skipped)}" if skipped else ""
    if failed:
        print(f"gpu-check: FAIL {'; '.join(failed)} | passed: {', '.join(passed)}"
              f"{skipped_text} | {versions}")
        return 1
    print(f"gpu-check: PASS {', '.join(passed)}{skipped_text} | {versions}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
