"""The hostile DLPack case tables, shared by `test_hostile_producers.py` and `test_no_panics.py`
(which runs every case once more and fails on any `BaseException` that is not an `Exception`).

:data:`MALFORMED` (every malformed field of a `DLTensor`), :data:`DEVICE_CASES` (tensors on other
devices, refused by Arrow arrays and kept by `Tensor`) and :data:`BAD_VERSIONS` (versioned ABI
only) are ``(id, spec, exception, message pattern)`` rows; :data:`DEVICE_CASES` rows are
``(id, spec, message pattern)``, the pattern of the Arrow arrays' ``BufferError``.
The tests are not a package, so `conftest.py` loads this module by path, after `_dlpack_ctypes`.
"""

import numpy as np

import _dlpack_ctypes as dl

import arrow_dlpack as ad

#: The three import entry points; each validates the tensor before anything else.
ENTRY_POINTS = {
    "Tensor": ad.Tensor.from_dlpack,
    "Array": ad.Array.from_dlpack,
    "FixedShapeTensorArray": ad.FixedShapeTensorArray.from_dlpack,
}

I64_MAX = 2**63 - 1
U64_MAX = 2**64 - 1


def dlpack_f32(**changes):
    return dl.float32_spec(**changes)


# (id, spec, exception, message pattern): every malformed field of a DLTensor.
MALFORMED = [
    # shape and ndim
    ("null_shape_with_ndim_2", dlpack_f32(shape=None, ndim=2), ValueError, r"shape is NULL but ndim is 2"),
    ("null_shape_with_ndim_1", dlpack_f32(shape=None, ndim=1), ValueError, r"shape is NULL but ndim is 1"),
    ("negative_ndim", dlpack_f32(ndim=-1), ValueError, r"invalid ndim -1"),
    ("ndim_above_the_maximum", dlpack_f32(ndim=5000), ValueError, r"invalid ndim 5000"),
    ("negative_extent", dlpack_f32(shape=(2, -3)), ValueError, r"shape\[1\] is -3"),
    (
        "most_negative_extent",
        dlpack_f32(shape=(-(2**63),)),
        ValueError,
        r"shape\[0\] is -9223372036854775808",
    ),
    # sizes and strides whose products overflow 64 bits
    (
        "element_count_overflows",
        dlpack_f32(shape=(2**62, 2**62), strides=(1, 1)),
        ValueError,
        r"overflow computing the element count",
    ),
    (
        "implicit_row_major_strides_overflow",
        dlpack_f32(shape=(2**62, 2**62), strides=None),
        ValueError,
        r"overflow computing (row-major strides|the element count)",
    ),
    (
        "strides_times_extents_overflow",
        dlpack_f32(shape=(2**20, 2**20, 4), strides=(I64_MAX, I64_MAX, 1)),
        ValueError,
        r"overflow computing the address range",
    ),
    (
        "stride_times_extent_overflows_in_one_dimension",
        dlpack_f32(shape=(3,), strides=(2**62,)),
        ValueError,
        r"overflow computing the address range",
    ),
    (
        "negative_stride_times_extent_overflows",
        dlpack_f32(shape=(3,), strides=(-(2**62),)),
        ValueError,
        r"overflow computing the address range",
    ),
    (
        "most_negative_stride",
        dlpack_f32(shape=(2,), strides=(-(2**63),)),
        ValueError,
        r"overflow computing the address range",
    ),
    # byte offsets and data pointers outside the address space
    (
        "byte_offset_overflows_the_address",
        dlpack_f32(byte_offset=U64_MAX - 3),
        ValueError,
        r"overflow computing the data address",
    ),
    (
        "aligned_byte_offset_overflows_the_address",
        dlpack_f32(byte_offset=2**64 - 64),
        ValueError,
        r"overflow computing the data address",
    ),
    (
        "data_end_overflows_the_address",
        dlpack_f32(shape=(4,), data_address=2**64 - 8),
        ValueError,
        r"overflow computing the address range",
    ),
    (
        "negative_stride_reaches_below_address_zero",
        dlpack_f32(shape=(6,), strides=(-1,), data_address=16),
        ValueError,
        r"overflow computing the address range",
    ),
    # NULL data
    (
        "null_data_with_elements",
        dlpack_f32(shape=(2, 3), data_address=0),
        ValueError,
        r"data is NULL but the tensor has 6 elements",
    ),
    (
        "null_data_with_a_byte_offset",
        dlpack_f32(data_address=0, byte_offset=64),
        ValueError,
        r"data is NULL",
    ),
    (
        "null_data_zero_dimensional",
        dlpack_f32(shape=(), data_address=0),
        ValueError,
        r"data is NULL but the tensor has 1 element;",
    ),
    # alignment
    (
        "misaligned_float32_data",
        dlpack_f32(data_offset=1),
        ValueError,
        r"not aligned for float; expected a multiple of 4",
    ),
    (
        "misaligned_float32_byte_offset",
        dlpack_f32(byte_offset=2),
        ValueError,
        r"not aligned for float; expected a multiple of 4",
    ),
    (
        "misaligned_float64",
        dl.array_spec(np.arange(4.0), data_offset=4),
        ValueError,
        r"not aligned for double; expected a multiple of 8",
    ),
    (
        "misaligned_int16",
        dl.array_spec(np.arange(4, dtype=np.int16), byte_offset=1),
        ValueError,
        r"not aligned for int16; expected a multiple of 2",
    ),
    # dtype: lanes, bits, codes
    ("lanes_0", dlpack_f32(dtype=(dl.FLOAT, 32, 0)), ValueError, r"lanes is 0; expected 1"),
    ("lanes_2", dlpack_f32(dtype=(dl.FLOAT, 32, 2)), ValueError, r"lanes is 2; expected 1"),
    ("lanes_65535", dlpack_f32(dtype=(dl.FLOAT, 32, 65535)), ValueError, r"lanes is 65535; expected 1"),
    ("float_bits_0", dlpack_f32(dtype=(dl.FLOAT, 0, 1)), ValueError, r"float with dtype.bits 0"),
    ("int_bits_1", dlpack_f32(dtype=(dl.INT, 1, 1)), ValueError, r"int with dtype.bits 1"),
    ("uint_bits_4", dlpack_f32(dtype=(dl.UINT, 4, 1)), ValueError, r"uint with dtype.bits 4"),
    ("int_bits_7", dlpack_f32(dtype=(dl.INT, 7, 1)), ValueError, r"int with dtype.bits 7"),
    ("float_bits_128", dlpack_f32(dtype=(dl.FLOAT, 128, 1)), ValueError, r"float with dtype.bits 128"),
    ("int_bits_128", dlpack_f32(dtype=(dl.INT, 128, 1)), ValueError, r"int with dtype.bits 128"),
    ("bool_bits_1", dlpack_f32(dtype=(dl.BOOL, 1, 1)), ValueError, r"bool with dtype.bits 1"),
    ("bfloat_bits_32", dlpack_f32(dtype=(dl.BFLOAT, 32, 1)), ValueError, r"bfloat with dtype.bits 32"),
    ("complex_bits_32", dlpack_f32(dtype=(dl.COMPLEX, 32, 1)), ValueError, r"complex with dtype.bits 32"),
    (
        "float4_sub_byte",
        dlpack_f32(dtype=(dl.FLOAT4_E2M1FN, 4, 1)),
        ValueError,
        r"float4 with dtype.bits 4",
    ),
    (
        "opaque_handle_type_code",
        dlpack_f32(dtype=(dl.OPAQUE_HANDLE, 64, 1)),
        ValueError,
        r"unknown DLPack type code 3",
    ),
    ("unknown_type_code_200", dlpack_f32(dtype=(200, 32, 1)), ValueError, r"unknown DLPack type code 200"),
    ("unknown_type_code_255", dlpack_f32(dtype=(255, 8, 1)), ValueError, r"unknown DLPack type code 255"),
    # devices that dlpack.h does not name (refused even by `Tensor`, which keeps the others)
    ("unknown_device_99", dlpack_f32(device=(99, 0)), BufferError, r"device_type 99"),
    ("device_type_0", dlpack_f32(device=(0, 0)), BufferError, r"device_type 0"),
]

# Tensors on devices dlpack.h names, at addresses no host code may read: Arrow arrays refuse them
# (BufferError), and `Tensor` keeps them without reading them.
DEVICE_CASES = [
    ("cuda_device", dlpack_f32(device=(dl.CUDA, 0), data_address=0x1000), r"device_type 2 \(CUDA\)"),
    (
        "cuda_device_1",
        dlpack_f32(device=(dl.CUDA, 1), data_address=0x1000),
        r"device_type 2 \(CUDA\) with device_id 1",
    ),
    ("cuda_host_device", dlpack_f32(device=(dl.CUDA_HOST, 0), data_address=0x1000), r"device_type 3"),
    ("rocm_device", dlpack_f32(device=(10, 0), data_address=0x1000), r"device_type 10"),
]

# Version cases exist only in the versioned ABI.
BAD_VERSIONS = [
    (
        "major_version_0",
        dlpack_f32(version=(0, 8)),
        ValueError,
        r"unsupported DLPack version 0\.8; expected major version 1",
    ),
    (
        "major_version_2",
        dlpack_f32(version=(2, 0)),
        ValueError,
        r"unsupported DLPack version 2\.0; expected major version 1",
    ),
    (
        "major_version_max",
        dlpack_f32(version=(2**32 - 1, 0)),
        ValueError,
        r"unsupported DLPack version 4294967295\.0",
    ),
]
