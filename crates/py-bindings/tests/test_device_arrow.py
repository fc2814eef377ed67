"""The Arrow C Device Data Interface and device stream ordering, tested on the CPU.

Device memory is faked (pointers that are never dereferenced, built with ctypes in
``_arrow_device_ctypes``), and the device runtime is replaced by the recording fake that
``_testing_record_device_runtime()`` installs.
"""

from __future__ import annotations

import gc

import numpy as np
import pyarrow as pa
import pytest

import _arrow_c_ctypes as c
import _arrow_device_ctypes as d
import arrow_dlpack as ad
from arrow_dlpack import _arrow_dlpack as native

# In the kernel half of the x86_64 address space (from 0xffff800000000000 with 4-level paging,
# from 0xff00000000000000 with 5-level paging, as Linux's x86_64 memory map documents), where no
# user-space mapping can ever be: a fake device pointer that cannot alias host memory.
POINTER = 0xFFFF_9000_0000_0000


@pytest.fixture
def recorded():
    calls = native._testing_record_device_runtime()
    yield calls
    native._testing_record_device_runtime(False)


def cuda_column(length=5, *, fmt="f", buffers=None, device_type=d.CUDA, device_id=0,
                sync_event=None, **array_fields):
    array = c.Array(length, buffers if buffers is not None else [None, POINTER], **array_fields)
    device = d.DeviceArray(array, device_type=device_type, device_id=device_id,
                           sync_event=sync_event)
    return d.DeviceArrayProducer(c.Schema(fmt), device), device


def released_once(*devices):
    gc.collect()
    return [device.released for device in devices] == [1] * len(devices)


# --- Device type, id and pointer survive, both ways ----------------------------------------------


@pytest.mark.parametrize("device_type,device_id", [(d.CUDA, 0), (d.CUDA, 3), (d.ROCM, 1),
                                                   (d.CUDA_HOST, 0)])
def test_device_column_becomes_a_device_tensor_keeping_device_and_pointer(device_type, device_id):
    producer, device = cuda_column(device_type=device_type, device_id=device_id, offset=2)
    tensor = ad.array(producer)
    assert isinstance(tensor, ad.Tensor)
    assert tensor.__dlpack_device__() == (device_type, device_id)
    assert tensor.shape == (5,) and tensor.type == "float"
    _, capsule = tensor.__arrow_c_device_array__()
    fields = d.read_device_array(capsule)
    assert (fields["device_type"], fields["device_id"]) == (device_type, device_id)
    assert fields["array"]["buffers"][1] == POINTER + 2 * 4
    assert fields["array"]["length"] == 5
    del tensor, capsule, producer
    assert released_once(device)


def test_device_tensor_goes_round_trip_through_the_device_interface():
    event = d.event(0xE7E7)
    producer, device = cuda_column(sync_event=event, device_id=1)
    first = ad.array(producer)
    second = ad.array(d.Only(first, "__arrow_c_device_array__"))
    assert second.__dlpack_device__() == (d.CUDA, 1)
    _, capsule = second.__arrow_c_device_array__()
    fields = d.read_device_array(capsule)
    assert fields["array"]["buffers"][1] == POINTER
    assert fields["sync_event"] == ctypes_address(event)
    del first, second, capsule, producer
    assert released_once(device)


def ctypes_address(value):
    import ctypes

    return ctypes.addressof(value)


def test_fixed_size_list_and_fixed_shape_tensor_keep_their_shape_on_the_device():
    child = c.Array(12, [None, POINTER])
    parent = c.Array(4, [None], children=[child])
    device = d.DeviceArray(parent)
    schema = c.Schema("+w:3", children=[c.Schema("f", name="item")])
    tensor = ad.array(d.DeviceArrayProducer(schema, device))
    assert tensor.shape == (4, 3)

    child = c.Array(12, [None, POINTER])
    parent = c.Array(2, [None], children=[child])
    device2 = d.DeviceArray(parent, device_id=2)
    metadata = {
        "ARROW:extension:name": "arrow.fixed_shape_tensor",
        "ARROW:extension:metadata": '{"shape":[2,3],"dim_names":["r","c"]}',
    }
    schema = c.Schema("+w:6", children=[c.Schema("f", name="item")],
                      metadata=c.encode_metadata(metadata))
    tensor2 = ad.array(d.DeviceArrayProducer(schema, device2))
    assert tensor2.shape == (2, 2, 3)
    assert tensor2.dim_names == ["", "r", "c"]
    assert tensor2.__dlpack_device__() == (d.CUDA, 2)
    # Handed on as arrow.fixed_shape_tensor, on the same device and pointer.
    schema_capsule, capsule = tensor2.__arrow_c_device_array__()
    fields = d.read_device_array(capsule)
    assert fields["array"]["children"][0]["buffers"][1] == POINTER
    field = pa.Field._import_from_c_capsule(schema_capsule)
    assert field.type.extension_name == "arrow.fixed_shape_tensor"
    del tensor, tensor2, capsule
    assert released_once(device, device2)


def test_dlpack_device_tensor_is_handed_on_through_the_device_interface(recorded):
    import _dlpack_ctypes as dl

    producer = dl.Producer(dl.float32_spec(device=(2, 4)))
    tensor = ad.Tensor.from_dlpack(producer)
    assert tensor.__dlpack_device__() == (2, 4)
    again = ad.array(d.Only(tensor, "__arrow_c_device_array__"))
    assert again.__dlpack_device__() == (2, 4)
    assert again.shape == (6,)
    # The producer ordered its work before the legacy default stream; the export says so with an
    # event recorded there, which the second tensor's consumers wait on.
    again.__dlpack__(stream=5)
    assert list(recorded)[:3] == [("enter", 2, 4), ("record", 4, 1, 0xEE01), ("exit", 2, 4, 0)]
    assert list(recorded)[3:6] == [("enter", 2, 4), ("wait", 4, 5, 0xEE01), ("exit", 2, 4, 0)]


# --- CPU device arrays and pyarrow -----------------------------------------------------------------


def test_cpu_device_array_becomes_an_ordinary_array():
    values = np.arange(4, dtype=np.int32)
    array = c.Array(4, [None, values])
    device = d.DeviceArray(array, device_type=d.CPU, device_id=-1)
    result = ad.array(d.DeviceArrayProducer(c.Schema("i"), device))
    assert isinstance(result, ad.Array)
    assert result.to_pylist() == [0, 1, 2, 3]
    del result
    assert released_once(device)


def test_reads_pyarrow_device_array_and_stream_on_cpu():
    source = pa.array([1.5, None, 3.0])
    ours = ad.array(d.Only(source, "__arrow_c_device_array__"))
    assert ours.to_pylist() == [1.5, None, 3.0]


def test_pyarrow_reads_our_device_array_and_tensor():
    ours = ad.array(pa.array([1, 2, None], type=pa.int64()))
    schema, array = ours.__arrow_c_device_array__()
    assert d.read_device_array(array)["device_type"] == d.CPU
    assert d.read_device_array(array)["device_id"] == -1
    assert d.read_device_array(array)["sync_event"] == 0
    assert pa.Array._import_from_c_device_capsule(schema, array).to_pylist() == [1, 2, None]
    # pa.array prefers the device protocol.
    assert pa.array(d.Only(ours, "__arrow_c_device_array__")).to_pylist() == [1, 2, None]
    tensor = ad.Tensor.from_dlpack(np.arange(6, dtype=np.float32).reshape(2, 3))
    back = pa.array(d.Only(tensor, "__arrow_c_device_array__"))
    assert back.type.extension_name == "arrow.fixed_shape_tensor"
    assert back.storage.flatten().to_pylist() == [0, 1, 2, 3, 4, 5]


def test_fixed_shape_tensor_array_publishes_the_device_protocol():
    storage = pa.array([[1, 2, 3, 4]], pa.list_(pa.float32(), 4))
    tensor_array = pa.ExtensionArray.from_storage(pa.fixed_shape_tensor(pa.float32(), [2, 2]),
                                                  storage)
    ours = ad.array(tensor_array)
    back = pa.array(d.Only(ours, "__arrow_c_device_array__"))
    assert back.type == tensor_array.type


def test_device_stream_of_cpu_chunks_keeps_the_chunks():
    source = ad.array(pa.chunked_array([[1], [2, 3]]))
    again = ad.array(d.Only(source, "__arrow_c_device_stream__"))
    assert again.num_chunks == 2 and again.to_pylist() == [1, 2, 3]


def test_device_protocol_kwargs_other_than_none_are_refused():
    ours = ad.array(pa.array([1]))
    ours.__arrow_c_device_array__(future_keyword=None)
    with pytest.raises(NotImplementedError):
        ours.__arrow_c_device_array__(future_keyword=1)
    with pytest.raises(NotImplementedError):
        ours.__arrow_c_device_stream__(future_keyword=1)


def test_cpu_protocol_is_asked_when_the_producer_says_cpu():
    producer, device = cuda_column(device_type=d.CPU, device_id=-1)
    producer.cpu_protocol = True
    with pytest.raises(RuntimeError, match="CPU protocol"):
        ad.array(producer)
    assert producer.calls == ["cpu"]
    producer.dlpack_device = (2, 0)
    producer.device_array = cuda_column()[1]
    assert isinstance(ad.array(producer), ad.Tensor)
    assert producer.calls == ["cpu", "device"]


# --- Refusals ------------------------------------------------------------------------------------


def test_boolean_device_column_is_refused_naming_the_device():
    producer, device = cuda_column(fmt="b", device_id=1)
    with pytest.raises(BufferError, match="CUDA device 1"):
        ad.array(producer)
    del producer
    assert released_once(device)


def test_device_nulls_are_refused():
    producer, device = cuda_column(null_count=2, buffers=[POINTER, POINTER])
    with pytest.raises(TypeError, match="nulls"):
        ad.array(producer)
    producer2, device2 = cuda_column(null_count=-1, buffers=[POINTER, POINTER])
    with pytest.raises(BufferError, match="null_count is -1"):
        ad.array(producer2)
    producer3, device3 = cuda_column(null_count=-1, buffers=[None, POINTER])
    assert ad.array(producer3).shape == (5,)
    del producer, producer2, producer3
    assert released_once(device, device2, device3)


def test_reading_operations_refuse_device_data():
    producer, device = cuda_column()
    with pytest.raises(BufferError, match="CUDA device 0"):
        ad.Tensor.from_arrow(producer)
    tensor = ad.array(cuda_column()[0])
    with pytest.raises(BufferError, match="CUDA"):
        tensor.to_numpy()
    del producer
    assert released_once(device)


def test_several_device_chunks_are_refused():
    schema = c.Schema("f")
    chunks = [d.DeviceArray(c.Array(2, [None, POINTER])) for _ in range(2)]
    stream = d.DeviceStream(schema, chunks)
    producer = d.DeviceStreamProducer(stream)
    with pytest.raises(BufferError, match="2 chunks"):
        ad.array(producer)
    del producer
    gc.collect()
    assert stream.released == 1
    assert released_once(*chunks)


def test_one_device_chunk_stream_becomes_a_tensor():
    chunk = d.DeviceArray(c.Array(3, [None, POINTER]), device_id=5)
    stream = d.DeviceStream(c.Schema("f"), [chunk])
    tensor = ad.array(d.DeviceStreamProducer(stream))
    assert tensor.__dlpack_device__() == (d.CUDA, 5)
    del tensor
    gc.collect()
    assert stream.released == 1
    assert released_once(chunk)


@pytest.mark.parametrize(
    "device_type,device_id,match",
    [
        (5, 0, "device_type is 5"),
        (17, 0, r"device_type is 17 \(MAIA\), a DLPack device type that the Arrow C Device"),
        (18, 0, r"device_type is 18 \(Trainium\)"),
        (-3, 0, "device_type is -3"),
        (99, 0, "device_type is 99"),
        (d.CUDA, -1, "device_id is -1"),
        (d.CUDA, 2**40, "device_id"),
        (d.CPU, 7, "device_id is 7"),
    ],
)
def test_malformed_device_fields_are_refused_and_released_once(device_type, device_id, match):
    producer, device = cuda_column(device_type=device_type, device_id=device_id)
    with pytest.raises(ValueError, match=match):
        ad.array(producer)
    del producer
    assert released_once(device)


def test_malformed_array_inside_a_device_struct_is_refused():
    producer, device = cuda_column(n_buffers=3, buffers=[None, POINTER, None])
    with pytest.raises(ValueError, match="n_buffers"):
        ad.array(producer)
    producer2, device2 = cuda_column(buffers=[None, None])
    with pytest.raises(ValueError, match="NULL"):
        ad.array(producer2)
    del producer, producer2
    assert released_once(device, device2)


def test_released_and_consumed_device_capsules_are_refused():
    array = c.Array(3, [None, POINTER], release=False)
    device = d.DeviceArray(array)
    producer = d.DeviceArrayProducer(c.Schema("f"), device)
    with pytest.raises(ValueError, match="already been consumed"):
        ad.array(producer)
    producer2, device2 = cuda_column()
    schema, capsule = producer2.__arrow_c_device_array__()
    tensor = native.Tensor  # noqa: F841 - the import below is what is tested
    first = ad.array(d.Only(type("P", (), {"__arrow_c_device_array__":
                                           lambda self, *a, **k: (schema, capsule)})(),
                            "__arrow_c_device_array__"))
    assert first.shape == (5,)
    with pytest.raises(ValueError, match="already been consumed"):
        ad.array(type("P", (), {"__arrow_c_device_array__":
                                lambda self, *a, **k: (schema, capsule)})())
    del first, producer, producer2
    assert released_once(device2)
    assert device.released == 0


def test_wrong_capsule_names_are_type_errors():
    class Wrong:
        def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
            return ad.array(pa.array([1])).__arrow_c_array__()

    with pytest.raises(TypeError, match="arrow_device_array"):
        ad.array(Wrong())

    class NotATuple:
        def __arrow_c_device_array__(self, requested_schema=None, **kwargs):
            return 3

    with pytest.raises(TypeError, match="tuple"):
        ad.array(NotATuple())


# --- Stream ordering -----------------------------------------------------------------------------


def waits(device_type, device_id, *calls):
    """What the fake runtime records for each wait (or host synchronisation) in `calls`, each
    run with the data's device current and the caller's device 0 current again afterwards."""
    recorded = []
    for call in calls:
        recorded += [("enter", device_type, device_id), call, ("exit", device_type, device_id, 0)]
    return recorded


def test_cuda_stream_waits_on_the_producer_event_as_the_array_api_says(recorded):
    event = d.event(0xE7E7)
    tensor = ad.array(cuda_column(sync_event=event, device_id=1)[0])
    tensor.__dlpack__()
    tensor.__dlpack__(stream=None, max_version=(1, 0))
    tensor.__dlpack__(stream=1)
    tensor.__dlpack__(stream=2)
    tensor.__dlpack__(stream=0xABC000)
    tensor.__dlpack__(stream=-1)
    assert list(recorded) == waits(
        d.CUDA, 1,
        ("wait", 1, 1, 0xE7E7),
        ("wait", 1, 1, 0xE7E7),
        ("wait", 1, 1, 0xE7E7),
        ("wait", 1, 2, 0xE7E7),
        ("wait", 1, 0xABC000, 0xE7E7),
        ("synchronize", 1, 0xE7E7),
    )
    with pytest.raises(BufferError, match="ambiguous"):
        tensor.__dlpack__(stream=0)
    with pytest.raises(BufferError, match="stream"):
        tensor.__dlpack__(stream=-5)
    with pytest.raises(BufferError, match="stream"):
        tensor.__dlpack__(stream="main")
    assert len(recorded) == 18


def test_rocm_stream_follows_the_rocm_row(recorded):
    event = d.event(0xBEEF)
    tensor = ad.array(cuda_column(device_type=d.ROCM, sync_event=event)[0])
    tensor.__dlpack__()
    tensor.__dlpack__(stream=0)
    tensor.__dlpack__(stream=0x5000)
    assert list(recorded) == waits(d.ROCM, 0, ("wait", 0, 0, 0xBEEF), ("wait", 0, 0, 0xBEEF),
                                   ("wait", 0, 0x5000, 0xBEEF))
    for stream in (1, 2):
        with pytest.raises(BufferError, match="ROCm"):
            tensor.__dlpack__(stream=stream)


def test_a_null_sync_event_means_ready_for_every_stream(recorded):
    tensor = ad.array(cuda_column()[0])
    for stream in (None, 1, 2, -1, 0xABC000):
        tensor.__dlpack__(stream=stream)
    _, capsule = tensor.__arrow_c_device_array__()
    assert d.read_device_array(capsule)["sync_event"] == 0
    assert list(recorded) == []


def test_other_devices_and_cpu_accept_no_stream(recorded):
    tensor = ad.array(cuda_column(device_type=8)[0])
    tensor.__dlpack__(stream=-1)
    with pytest.raises(BufferError, match="CUDA and ROCm only"):
        tensor.__dlpack__(stream=3)
    cpu = ad.Tensor.from_dlpack(np.arange(3.0))
    with pytest.raises(BufferError, match="CPU"):
        cpu.__dlpack__(stream=1)
    assert list(recorded) == []


def test_no_callback_errors_or_stray_releases():
    gc.collect()
    assert c.CALLBACK_ERRORS == []
    assert c.STRAY_RELEASES == []


def test_nanoarrow_device_arrays_both_ways():
    import nanoarrow as na
    import nanoarrow.device as nd

    theirs = nd.c_device_array(na.c_array([1, 2, 3], na.int32()))
    assert ad.array(d.Only(theirs, "__arrow_c_device_array__")).to_pylist() == [1, 2, 3]
    ours = ad.array(pa.array([1.5, None]))
    read = nd.c_device_array(ours)
    assert read.device_type == nd.DeviceType.CPU and read.array.length == 2
    assert na.Array(read.array).to_pylist() == [1.5, None]


def test_record_batches_go_both_ways_through_the_device_interface():
    batch = pa.record_batch({"a": [1, 2], "b": [0.5, None]})
    ours = ad.array(d.Only(batch, "__arrow_c_device_array__"))
    assert isinstance(ours, ad.Array)
    assert ours.to_pylist() == [{"a": 1, "b": 0.5}, {"a": 2, "b": None}]
    back = pa.RecordBatch._import_from_c_device_capsule(*ours.__arrow_c_device_array__())
    assert back.equals(batch)


def test_malformed_device_streams_are_refused_and_released_once():
    # A stream whose device type is unknown.
    chunk = d.DeviceArray(c.Array(3, [None, POINTER]))
    stream = d.DeviceStream(c.Schema("f"), [chunk], device_type=42)
    producer = d.DeviceStreamProducer(stream)
    with pytest.raises(ValueError, match="device_type is 42"):
        ad.array(producer)
    # A chunk on another device type than its stream.
    chunk2 = d.DeviceArray(c.Array(3, [None, POINTER]), device_type=d.ROCM)
    stream2 = d.DeviceStream(c.Schema("f"), [chunk2])
    producer2 = d.DeviceStreamProducer(stream2)
    with pytest.raises(ValueError, match="stream's device_type is 2"):
        ad.array(producer2)
    # A malformed chunk (a CUDA chunk with a negative device id).
    chunk3 = d.DeviceArray(c.Array(3, [None, POINTER]), device_id=-4)
    stream3 = d.DeviceStream(c.Schema("f"), [chunk3])
    producer3 = d.DeviceStreamProducer(stream3)
    with pytest.raises(ValueError, match="device_id is -4"):
        ad.array(producer3)
    # A CPU stream of CPU chunks is an ordinary array.
    values = np.arange(3, dtype=np.float32)
    chunk4 = d.DeviceArray(c.Array(3, [None, values]), device_type=d.CPU, device_id=-1)
    stream4 = d.DeviceStream(c.Schema("f"), [chunk4], device_type=d.CPU)
    assert ad.array(d.DeviceStreamProducer(stream4)).to_pylist() == [0.0, 1.0, 2.0]
    del producer, producer2, producer3
    gc.collect()
    assert [s.released for s in (stream, stream2, stream3, stream4)] == [1, 1, 1, 1]
    assert released_once(chunk, chunk2, chunk3, chunk4)


def test_consumed_device_stream_capsule_is_refused():
    chunk = d.DeviceArray(c.Array(3, [None, POINTER]))
    stream = d.DeviceStream(c.Schema("f"), [chunk])
    capsule = stream.capsule()

    class Twice:
        def __arrow_c_device_stream__(self, requested_schema=None, **kwargs):
            return capsule

    producer = Twice()
    assert ad.array(producer).shape == (3,)
    with pytest.raises(ValueError, match="already been released or consumed"):
        ad.array(producer)
    gc.collect()
    assert stream.released == 1
