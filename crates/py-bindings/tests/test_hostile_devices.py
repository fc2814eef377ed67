"""Hostile DLPack producers about devices: `__dlpack_device__` answers that lie or fail, and
tensors on devices no host code may read (a `Tensor` keeps them, Arrow arrays refuse them).

Every case checks the documented exception type (``BufferError`` for devices, ``TypeError`` for a
malformed answer), the producer's deleter called exactly once or the producer never asked to
export, and the process alive. The data pointers of device tensors point at an address no host
code may read, so a dereference would crash the test.
"""

import gc
import pickle

import numpy as np
import pytest

import arrow_dlpack as ad

# `conftest.py` loads the helper by path and registers it (the tests are not a package).
import _dlpack_ctypes as dl  # noqa: E402
from _dlpack_cases import DEVICE_CASES  # noqa: E402
from _dlpack_cases import dlpack_f32 as f32  # noqa: E402


# --- `__dlpack_device__` lying -------------------------------------------------------------------


def test_device_claiming_cuda_for_cpu_data_is_refused_before_export():
    producer = dl.Producer(f32(), device=(dl.CUDA, 0))
    pattern = r"holds data on DLPack device \(2, 0\); expected the CPU"
    with pytest.raises(BufferError, match=pattern):
        ad.Array.from_dlpack(producer)
    assert producer.device_calls == 1
    assert producer.calls == [], "a producer on another device must not be asked to export"
    assert producer.tensors == []


def test_device_claiming_cpu_for_cuda_data_is_caught_in_the_capsule():
    producer = dl.Producer(f32(device=(dl.CUDA, 0), data_address=0x1000), device=(dl.CPU, 0))
    with pytest.raises(BufferError, match=r"device_type 2 \(CUDA\)"):
        ad.Array.from_dlpack(producer)
    assert producer.calls == [{"max_version": (1, 3)}]
    assert producer.deleted == 1


@pytest.mark.parametrize("answer", ["cpu", (1,), None], ids=["str", "short_tuple", "None"])
def test_device_answering_garbage_is_a_type_error_naming_dlpack_device(answer):
    producer = dl.Producer(f32(), device=answer)
    with pytest.raises(TypeError, match=r"__dlpack_device__"):
        ad.Tensor.from_dlpack(producer)
    assert producer.calls == []


def test_device_raising_propagates_unchanged():
    exception = RuntimeError("device query failed")

    class Raising(dl.Producer):
        def __dlpack_device__(self):
            raise exception

    producer = Raising(f32())
    with pytest.raises(RuntimeError) as raised:
        ad.Tensor.from_dlpack(producer)
    assert raised.value is exception
    assert producer.calls == []


@pytest.mark.parametrize("device", ["cuda", (dl.CUDA, 0), (dl.CPU, 1), "gpu"])
def test_requested_device_other_than_the_cpu_is_refused_before_asking(device):
    producer = dl.Producer(f32())
    pattern = r"unsupported device .*expected None, \"cpu\" or \(1, 0\)"
    with pytest.raises(BufferError, match=pattern):
        ad.Array.from_dlpack(producer, device=device)
    # A Tensor may keep device data, but a CPU producer's data is not on the device asked for.
    pattern = r"unsupported device|was requested: that would need a device move"
    with pytest.raises(BufferError, match=pattern):
        ad.Tensor.from_dlpack(producer, device=device)
    assert producer.calls == []


# Device tensors: a `Tensor` keeps memory on any device dlpack.h names, zero-copy and never read;
# Arrow arrays hold CPU data only. The data pointers point at an address no host code may read, so
# a dereference would crash the test.

ARRAY_ENTRY_POINTS = {
    "Array": ad.Array.from_dlpack,
    "FixedShapeTensorArray": ad.FixedShapeTensorArray.from_dlpack,
}


@pytest.mark.parametrize("entry", list(ARRAY_ENTRY_POINTS))
@pytest.mark.parametrize("abi", ["versioned", "legacy"])
@pytest.mark.parametrize("name, spec, pattern", DEVICE_CASES, ids=[case[0] for case in DEVICE_CASES])
def test_arrays_refuse_device_tensors_and_release_them_once(name, spec, pattern, abi, entry):
    managed = dl.ManagedTensor(spec.replace(versioned=abi == "versioned"))
    capsule = managed.capsule()
    with pytest.raises(BufferError, match=pattern) as raised:
        ARRAY_ENTRY_POINTS[entry](capsule)
    assert isinstance(raised.value, ad.ArrowDLPackError)
    assert managed.deleted == 1


@pytest.mark.parametrize("abi", ["versioned", "legacy"])
@pytest.mark.parametrize("name, spec, pattern", DEVICE_CASES, ids=[case[0] for case in DEVICE_CASES])
def test_tensor_keeps_a_device_tensor_without_reading_it(name, spec, pattern, abi, dlpack):
    managed = dl.ManagedTensor(spec.replace(versioned=abi == "versioned"))
    capsule = managed.capsule()
    tensor = ad.Tensor.from_dlpack(capsule)
    device = tuple(spec.device)
    assert tensor.__dlpack_device__() == device
    assert tensor.shape == (6,)
    assert "shape" in repr(tensor)
    # Exported again zero-copy, on its device, through both capsule kinds and the exchange API.
    # A bare capsule says nothing of its producer's stream, so only a consumer that orders its
    # own work (stream=-1) is handed the data.
    for max_version in [(1, 3), None]:
        read = dlpack.read(tensor.__dlpack__(max_version=max_version, stream=-1))
        assert read.device == device
        assert read.data == 0x1000
    again = ad.Tensor.from_dlpack(tensor)
    assert again.__dlpack_device__() == device
    assert dlpack.read(
        again.__dlpack__(max_version=(1, 3), dl_device=device, stream=-1)
    ).data == 0x1000
    with pytest.raises(BufferError, match="took no stream"):
        again.__dlpack__(max_version=(1, 3))
    # Everything that would read the memory refuses, naming the device.
    for read_it in (
        lambda: tensor.__dlpack__(max_version=(1, 3), copy=True),
        lambda: ad.Tensor.from_dlpack(tensor, copy=True),
        lambda: tensor.to_numpy(),
        lambda: ad.Array.from_dlpack(tensor),
        lambda: ad.FixedShapeTensorArray.from_dlpack(tensor),
        lambda: pickle.dumps(tensor),
    ):
        with pytest.raises(BufferError, match=r"device|CUDA|ROCM"):
            read_it()
    del tensor, again, capsule
    gc.collect()
    assert managed.deleted == 1


def test_device_tensors_follow_the_dl_device_and_stream_rules(dlpack):
    managed = dl.ManagedTensor(f32(device=(dl.CUDA, 1), data_address=0x1000))
    tensor = ad.Tensor.from_dlpack(managed.capsule())
    assert ad.Tensor.from_dlpack(tensor, device=(dl.CUDA, 1)).__dlpack_device__() == (dl.CUDA, 1)
    for device in [(dl.CPU, 0), (dl.CUDA, 0), "cpu"]:
        with pytest.raises(BufferError, match="device"):
            ad.Tensor.from_dlpack(tensor, device=device)
    for dl_device in [(dl.CPU, 0), (dl.CUDA, 0)]:
        with pytest.raises(BufferError, match=r"dl_device=.*makes no device moves"):
            tensor.__dlpack__(max_version=(1, 3), dl_device=dl_device, stream=-1)
    # A bare capsule's producer ordered its work before no known stream: only -1 (the consumer
    # orders its own work) is accepted, and no stream is handed to the device runtime.
    assert dlpack.read(tensor.__dlpack__(max_version=(1, 3), stream=-1)).data == 0x1000
    for stream in [None, 1, 2, 12345]:
        with pytest.raises(BufferError, match="took no stream"):
            tensor.__dlpack__(max_version=(1, 3), stream=stream)
    with pytest.raises(BufferError, match="expected None or an integer"):
        tensor.__dlpack__(max_version=(1, 3), stream="stream")
    # CPU tensors keep refusing any stream.
    with pytest.raises(BufferError, match="stream=1 is not supported for CPU data"):
        ad.Tensor.from_dlpack(np.arange(3.0)).__dlpack__(stream=1)
    del tensor
    gc.collect()
    assert managed.deleted == 1


def test_copy_true_of_device_data_is_asked_of_its_producer():
    # No host code may read device memory, so its producer makes the copy (IS_COPIED says so).
    spec = f32(device=(dl.CUDA, 0), data_address=0x1000, flags=dl.IS_COPIED)
    producer = dl.Producer(spec, device=(dl.CUDA, 0))
    tensor = ad.Tensor.from_dlpack(producer, copy=True)
    assert tensor.__dlpack_device__() == (dl.CUDA, 0)
    assert producer.calls == [{"stream": 1, "max_version": (1, 3), "copy": True}]
    del tensor
    gc.collect()
    assert producer.deleted == 1


def test_a_producer_on_a_device_is_asked_for_its_tensor():
    producer = dl.Producer(f32(device=(dl.CUDA, 0), data_address=0x1000), device=(dl.CUDA, 0))
    tensor = ad.Tensor.from_dlpack(producer)
    assert tensor.__dlpack_device__() == (dl.CUDA, 0)
    assert producer.calls == [{"stream": 1, "max_version": (1, 3)}]
    del tensor
    gc.collect()
    assert producer.deleted == 1
