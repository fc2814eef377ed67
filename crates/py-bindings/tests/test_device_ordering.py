"""Stream ordering of device data, tested on the CPU with fakes only.

Device memory is a made-up address that is never dereferenced, producers are the recording
fakes of ``_dlpack_ctypes`` (which keep the keywords ``__dlpack__`` was called with) and
``_arrow_device_ctypes``, and the device runtime is the recording fake that
``_testing_record_device_runtime()`` installs: no made-up stream or event ever reaches a real
driver, so these tests mean the same on a machine with a GPU.
"""

from __future__ import annotations

import ctypes
import gc

import pytest

import _arrow_c_ctypes as c
import _arrow_device_ctypes as d
import _dlpack_ctypes as dl
import arrow_dlpack as ad
from _dlpack_cases import dlpack_f32 as f32
from arrow_dlpack import _arrow_dlpack as native

# In the kernel half of the x86_64 address space (from 0xffff800000000000 with 4-level paging,
# from 0xff00000000000000 with 5-level paging, as Linux's x86_64 memory map documents), where no
# user-space mapping can ever be: a fake device pointer that cannot alias host memory.
DEVICE_POINTER = 0xFFFF_9000_0000_0000
ROCM, ROCM_HOST, CUDA_MANAGED, METAL = 10, 11, 13, 8


@pytest.fixture
def recorded():
    calls = native._testing_record_device_runtime()
    yield calls
    native._testing_record_device_runtime(False)


def device_producer(device=(dl.CUDA, 0), **knobs):
    return dl.Producer(f32(device=device, data_address=DEVICE_POINTER), device=device, **knobs)


class NoKeywordsProducer(dl.Producer):
    """A producer from before the array API: ``__dlpack__`` takes no argument at all."""

    def __dlpack__(self):  # type: ignore[override]
        self.calls.append({})
        return self.export(self.spec.replace(versioned=False))


def arrow_device_tensor(device_type=d.CUDA, device_id=0, sync_event=None):
    array = c.Array(4, [None, DEVICE_POINTER])
    device = d.DeviceArray(array, device_type=device_type, device_id=device_id,
                           sync_event=sync_event)
    producer = d.DeviceArrayProducer(c.Schema("f"), device)
    return ad.array(producer), device


def sync_event_value(capsule):
    """The event handle an exported device array's ``sync_event`` points to (0 for NULL)."""
    pointer = d.read_device_array(capsule)["sync_event"]
    return 0 if not pointer else ctypes.c_size_t.from_address(pointer).value


# --- The import passes its stream --------------------------------------------------------------


@pytest.mark.parametrize("device,stream", [((dl.CUDA, 0), 1), ((dl.CUDA, 1), 1),
                                           ((ROCM, 0), 0), ((CUDA_MANAGED, 0), 1)])
def test_import_passes_the_default_stream_to_a_device_producer(device, stream):
    producer = device_producer(device)
    tensor = ad.Tensor.from_dlpack(producer)
    assert producer.calls == [{"stream": stream, "max_version": (1, 3)}]
    assert tensor.__dlpack_device__() == device


def test_import_of_cpu_data_passes_no_stream():
    producer = dl.Producer(f32())
    ad.Tensor.from_dlpack(producer)
    assert producer.calls == [{"max_version": (1, 3)}]


def test_device_copy_is_asked_with_the_stream():
    producer = dl.Producer(
        f32(device=(dl.CUDA, 0), data_address=DEVICE_POINTER, flags=dl.IS_COPIED),
        device=(dl.CUDA, 0))
    ad.Tensor.from_dlpack(producer, copy=True)
    assert producer.calls == [{"stream": 1, "max_version": (1, 3), "copy": True}]


def test_a_pre_1_0_producer_is_asked_with_the_stream_alone_and_stays_ordered(recorded):
    producer = device_producer(mode="legacy_signature")
    tensor = ad.Tensor.from_dlpack(producer)
    assert producer.calls == [{"stream": 1}]
    # Ordered before the legacy default stream: nothing to do for it or for no stream.
    tensor.__dlpack__(stream=None)
    tensor.__dlpack__(stream=1)
    tensor.__dlpack__(stream=-1)
    assert list(recorded) == []


def test_a_producer_that_takes_no_stream_leaves_the_ordering_unknown(recorded, dlpack):
    producer = NoKeywordsProducer(f32(device=(dl.CUDA, 0), data_address=DEVICE_POINTER),
                                  device=(dl.CUDA, 0))
    tensor = ad.Tensor.from_dlpack(producer)
    assert producer.calls == [{}]
    for stream in (None, 1, 2, 0xABC000):
        with pytest.raises(BufferError, match="took no stream"):
            tensor.__dlpack__(max_version=(1, 3), stream=stream)
    with pytest.raises(BufferError, match="took no stream"):
        tensor.__arrow_c_device_array__()
    # The consumer that takes the ordering on itself still gets the data.
    assert dlpack.read(tensor.__dlpack__(max_version=(1, 3), stream=-1)).data == DEVICE_POINTER
    # Our own tensor imported again keeps not knowing.
    again = ad.Tensor.from_dlpack(tensor)
    with pytest.raises(BufferError, match="took no stream"):
        again.__dlpack__(max_version=(1, 3))
    assert list(recorded) == []
    del tensor, again
    gc.collect()
    assert producer.deleted == 1


def test_a_bare_device_capsule_leaves_the_ordering_unknown():
    managed = dl.ManagedTensor(f32(device=(dl.CUDA, 0), data_address=DEVICE_POINTER))
    tensor = ad.Tensor.from_dlpack(managed.capsule())
    with pytest.raises(BufferError, match="took no stream"):
        tensor.__dlpack__(max_version=(1, 3))
    del tensor
    gc.collect()
    assert managed.deleted == 1


def test_other_streams_wait_on_an_event_recorded_on_the_default_stream(recorded):
    tensor = ad.Tensor.from_dlpack(device_producer((dl.CUDA, 1)))
    tensor.__dlpack__(stream=2)
    tensor.__dlpack__(stream=0xABC000)
    assert list(recorded) == [
        ("enter", dl.CUDA, 1), ("record", 1, 1, 0xEE01), ("wait", 1, 2, 0xEE01),
        ("destroy", 1, 0xEE01), ("exit", dl.CUDA, 1, 0),
        ("enter", dl.CUDA, 1), ("record", 1, 1, 0xEE02), ("wait", 1, 0xABC000, 0xEE02),
        ("destroy", 1, 0xEE02), ("exit", dl.CUDA, 1, 0),
    ]


def test_rocm_streams_wait_on_an_event_recorded_on_the_null_stream(recorded):
    tensor = ad.Tensor.from_dlpack(device_producer((ROCM, 0)))
    tensor.__dlpack__(stream=0)
    tensor.__dlpack__(stream=0x5000)
    assert list(recorded) == [("enter", ROCM, 0), ("record", 0, 0, 0xEE01),
                              ("wait", 0, 0x5000, 0xEE01), ("destroy", 0, 0xEE01),
                              ("exit", ROCM, 0, 0)]


def test_device_interface_export_hands_out_an_event_recorded_on_the_default_stream(recorded):
    tensor = ad.Tensor.from_dlpack(device_producer((dl.CUDA, 1)))
    _, capsule = tensor.__arrow_c_device_array__()
    assert sync_event_value(capsule) == 0xEE01
    assert list(recorded) == [("enter", dl.CUDA, 1), ("record", 1, 1, 0xEE01),
                              ("exit", dl.CUDA, 1, 0)]
    # The event lives as long as the exported array, and is destroyed on its device once.
    del capsule
    gc.collect()
    assert list(recorded)[3:] == [("enter", dl.CUDA, 1), ("destroy", 1, 0xEE01),
                                  ("exit", dl.CUDA, 1, 0)]


# --- Producer events on every device type whose event type is known -----------------------------


@pytest.mark.parametrize("device_type,default", [(d.CUDA, 1), (d.CUDA_HOST, 1),
                                                 (CUDA_MANAGED, 1), (ROCM, 0), (ROCM_HOST, 0)])
def test_a_producer_event_is_waited_on_for_every_known_device_type(recorded, device_type,
                                                                   default):
    event = d.event(0xE7E7)
    tensor, device = arrow_device_tensor(device_type=device_type, sync_event=event)
    tensor.__dlpack__()
    tensor.__dlpack__(stream=-1)
    assert list(recorded) == [
        ("enter", device_type, 0), ("wait", 0, default, 0xE7E7), ("exit", device_type, 0, 0),
        ("enter", device_type, 0), ("synchronize", 0, 0xE7E7), ("exit", device_type, 0, 0),
    ]


def test_cupy_managed_memory_stream_is_ordered(recorded):
    tensor, _ = arrow_device_tensor(device_type=CUDA_MANAGED, sync_event=d.event(0xE7E7))
    tensor.__dlpack__(stream=0xC0FFEE)
    assert ("wait", 0, 0xC0FFEE, 0xE7E7) in list(recorded)


def test_an_event_on_a_device_without_a_known_event_type_is_refused():
    producer_event = d.event(0xE7E7)
    array = c.Array(4, [None, DEVICE_POINTER])
    device = d.DeviceArray(array, device_type=METAL, sync_event=producer_event)
    # The producer outlives the call: its capsule's ctypes destructor must not run while the
    # error is set.
    producer = d.DeviceArrayProducer(c.Schema("f"), device)
    with pytest.raises(BufferError, match="Metal device 0 cannot be waited on"):
        ad.array(producer)
    del producer
    gc.collect()
    assert device.released == 1


# --- The wait runs on the data's device ---------------------------------------------------------


@pytest.mark.parametrize("device_type,default", [(d.CUDA, 1), (ROCM, 0)])
def test_the_wait_runs_on_the_data_device_whatever_the_caller_has_current(device_type, default):
    calls = native._testing_record_device_runtime(current_device=0)
    try:
        tensor, _ = arrow_device_tensor(device_type=device_type, device_id=1,
                                        sync_event=d.event(0xE7E7))
        tensor.__dlpack__()
        assert list(calls) == [("enter", device_type, 1), ("wait", 1, default, 0xE7E7),
                               ("exit", device_type, 1, 0)]
    finally:
        native._testing_record_device_runtime(False)


def test_per_thread_default_stream_is_ordered_after_an_event(recorded):
    tensor, _ = arrow_device_tensor(sync_event=d.event(0xE7E7), device_id=2)
    tensor.__dlpack__(stream=2)
    assert list(recorded) == [("enter", d.CUDA, 2), ("wait", 2, 2, 0xE7E7),
                              ("exit", d.CUDA, 2, 0)]


# --- The C exchange API -------------------------------------------------------------------------


# PYFUNCTYPE keeps the GIL held during the call and raises the Python error the table sets.
_FROM_PY = ctypes.PYFUNCTYPE(ctypes.c_int, ctypes.py_object, ctypes.POINTER(ctypes.c_void_p))
_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def exchange_export(obj):
    """Asks ``ad.Tensor``'s C exchange table for ``obj``'s managed tensor."""
    address = _get_pointer(ad.Tensor.__dlpack_c_exchange_api__, b"dlpack_exchange_api")
    # The header (two uint32 and a pointer), then the allocator, then this function.
    from_py = _FROM_PY(ctypes.c_void_p.from_address(address + 24).value)
    out = ctypes.c_void_p()
    from_py(obj, ctypes.byref(out))
    return out.value


@pytest.mark.parametrize("make", ["event", "default_stream", "unknown"])
def test_the_exchange_api_refuses_device_data_that_must_be_waited_for(make):
    if make == "event":
        tensor, _ = arrow_device_tensor(sync_event=d.event(0xE7E7))
    elif make == "default_stream":
        tensor = ad.Tensor.from_dlpack(device_producer())
    else:
        tensor = ad.Tensor.from_dlpack(
            dl.ManagedTensor(f32(device=(dl.CUDA, 0), data_address=DEVICE_POINTER)).capsule())
    with pytest.raises(BufferError, match="C exchange API cannot do"):
        exchange_export(tensor)
