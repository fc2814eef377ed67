"""No Rust panic reaches Python: every hostile input of both boundaries, through every entry point.

pyo3 turns a Rust panic into ``pyo3_runtime.PanicException``, which derives from ``BaseException``
so that ``except Exception`` does not catch it; docs/contract.md promises documented
exceptions instead. This test runs every case of the hostile tables (``_dlpack_cases``'s
``MALFORMED`` and ``BAD_VERSIONS``, ``_arrow_c_cases``'s ``ARROW_C_CASES``) once more and fails on
any exception that is a ``BaseException`` but not an ``Exception``, listing them all.
Which ``Exception`` each case raises is the hostile suites' business, not this test's.
"""

import gc

import arrow_dlpack as ad

# `conftest.py` loads the helpers by path and registers them (the tests are not a package).
import _arrow_c_ctypes as ac  # noqa: E402
import _arrow_device_ctypes as adev  # noqa: E402
import _dlpack_ctypes as dl  # noqa: E402
from _arrow_c_cases import ARROW_C_CASES  # noqa: E402
from _dlpack_cases import BAD_VERSIONS, DEVICE_CASES, MALFORMED  # noqa: E402

DLPACK_ENTRY_POINTS = {
    "Tensor.from_dlpack": ad.Tensor.from_dlpack,
    "Array.from_dlpack": ad.Array.from_dlpack,
    "FixedShapeTensorArray.from_dlpack": ad.FixedShapeTensorArray.from_dlpack,
}

ARROW_C_ENTRY_POINTS = {
    "array": ad.array,
    "column_tensors": ad.column_tensors,
    "Tensor.from_arrow": ad.Tensor.from_arrow,
}


def _outcome(call, argument):
    """What ``call(argument)`` raised: ``None``, an ``Exception``, or (the failure this test
    looks for) any other ``BaseException``, caught here so that the run goes on."""
    try:
        call(argument)
    except Exception as error:  # the documented outcome: any exception the suites check
        return error
    except BaseException as error:  # noqa: BLE001 - a panic, what this test exists to catch
        return error
    return None


def _dlpack_runs():
    """(label, entry, capsule or producer, what to keep alive) for every DLPack case."""
    for name, spec, _exception, _pattern in MALFORMED:
        for abi in ("versioned", "legacy"):
            for entry_name, entry in DLPACK_ENTRY_POINTS.items():
                managed = dl.ManagedTensor(spec.replace(versioned=abi == "versioned"))
                yield f"dlpack {name} {abi} {entry_name}", entry, managed.capsule()
    for name, spec, _pattern in DEVICE_CASES:
        for entry_name, entry in DLPACK_ENTRY_POINTS.items():
            yield f"dlpack {name} {entry_name}", entry, dl.ManagedTensor(spec).capsule()
    for name, spec, _exception, _pattern in BAD_VERSIONS:
        for entry_name, entry in DLPACK_ENTRY_POINTS.items():
            yield f"dlpack {name} {entry_name}", entry, dl.ManagedTensor(spec).capsule()
    for name, spec, _exception, _pattern in MALFORMED + BAD_VERSIONS:
        producer = dl.Producer(spec, device=(dl.CPU, 0))
        yield f"dlpack {name} producer", ad.Tensor.from_dlpack, producer


def _arrow_c_runs():
    """(label, entry, producer) for every Arrow C case, transport and entry point."""
    for case in ARROW_C_CASES:
        for transport in case.transports:
            for entry_name, entry in ARROW_C_ENTRY_POINTS.items():
                built = case.build()
                if isinstance(built, ac.Stream):
                    producer = ac.StreamProducer(built)
                elif transport == "array":
                    producer = ac.ArrayProducer(*built)
                else:
                    producer = ac.StreamProducer(ac.Stream(built[0], [built[1]]))
                yield f"arrow-c {case.id} {transport} {entry_name}", entry, producer


# Device fields of the C Device Data Interface that the checks must refuse (or accept).
DEVICE_FIELDS = [
    ("cpu", adev.CPU, -1),
    ("cuda", adev.CUDA, 0),
    ("rocm", adev.ROCM, 3),
    ("unknown_type", 5, 0),
    ("negative_type", -1, 0),
    ("negative_id", adev.CUDA, -1),
    ("huge_id", adev.CUDA, 2**40),
    ("cpu_bad_id", adev.CPU, 9),
]


def _device_runs():
    """(label, entry, producer) for every Arrow C array case wrapped in an ArrowDeviceArray, on
    every device field pair, and for every device stream of one such chunk."""
    for case in ARROW_C_CASES:
        if "array" not in case.transports:
            continue
        for field_name, device_type, device_id in DEVICE_FIELDS:
            for entry_name, entry in ARROW_C_ENTRY_POINTS.items():
                built = case.build()
                if isinstance(built, ac.Stream):
                    continue
                schema, array = built
                device = adev.DeviceArray(array, device_type=device_type, device_id=device_id,
                                          sync_event=adev.event(0xE7E7))
                producer = adev.DeviceArrayProducer(schema, device)
                yield f"device {case.id} {field_name} {entry_name}", entry, producer
        built = case.build()
        if not isinstance(built, ac.Stream):
            schema, array = built
            stream = adev.DeviceStream(schema, [adev.DeviceArray(array)])
            yield f"device-stream {case.id}", ad.array, adev.DeviceStreamProducer(stream)


def test_no_hostile_input_raises_a_base_exception_that_is_not_an_exception():
    escaped = []
    runs = 0
    # Capsules and producers are kept until the end: their destructors are Python code, which
    # must not run while an exception propagates (see the helpers).
    kept = []
    for label, entry, argument in [*_dlpack_runs(), *_arrow_c_runs(), *_device_runs()]:
        kept.append(argument)
        outcome = _outcome(entry, argument)
        runs += 1
        if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
            escaped.append(f"{label}: {type(outcome).__module__}.{type(outcome).__name__}: {outcome}")
        del outcome
    del kept
    gc.collect()
    assert runs >= 3 * 2 * len(MALFORMED) + 3 * 40
    assert escaped == [], "\n".join(escaped)
