"""The hand-written explanations of the exchange page's misses (`EXPLANATIONS`, keyed by row id),
with the profiles that say why; `exchange_notes.py` looks them up for `bench_exchange.py`.
"""

from __future__ import annotations


# Why each missed target is missed, with the profile that says so; keyed by row id (a Rust id
# "rust:group/function" falls back to its longest matching prefix). Written by hand after
# profiling, so that a regenerated page keeps it: `perf record -e cpu-clock --call-graph dwarf` on
# a Python process running one row in a loop for a few seconds (`--only ROW` here runs one row);
# shares are of the whole call, from the profile of 2026-11-29 against the wheel of commit bc62298
# (pyo3 0.30, abi3-py39).
CALLING_CONVENTION = (
    "The wheel is built for `abi3-py39`, and under the limited API before 3.10 pyo3 cannot use "
    "`METH_FASTCALL`: every method that takes keywords is `METH_VARARGS | METH_KEYWORDS`, so "
    "CPython builds an argument tuple and a keyword dict per call (`_PyDict_FromItems`) and pyo3 "
    "copies every keyword name into a new UTF-8 bytes object (`PyBackedStr`) to match it. "
)
FASTCALL_FIX = (
    "Fix: build with pyo3's `abi3-py310` (and `requires-python >= 3.10`): the same sources built "
    "that way took `np.from_dlpack(ad.Tensor)` from 0.77 to 0.38 µs (ratio 2.1 to 1.0) and "
    "`np.from_dlpack(ad.Array)` from 1.9 to 1.27 µs in an alternating run. "
)
MISSING_ATTRIBUTE = (
    "looks the attribute up with `getattr` on the instance; when it is absent CPython builds an "
    "`AttributeError` with a formatted message (`PyErr_Format`, `PyUnicode_FromFormatV`), "
    "normalises it and pyo3 drops it. "
)
MISSING_ATTRIBUTE_FIX = (
    "Fix: look protocol attributes up on the type, and remember an absence per type for "
    "immutable types (`PyType_GetFlags(t) & Py_TPFLAGS_IMMUTABLETYPE`, true of numpy's and "
    "pyarrow's classes), or use `PyObject_GetOptionalAttr` where the build targets 3.13; either "
    "way no exception is made for the common case. "
)
PAGE_FAULTS = (
    "Copies into fresh memory on this kernel are bound by page faults: transparent huge pages "
    "are on `madvise`, numpy advises `MADV_HUGEPAGE` for allocations of 4 MiB and more and "
    "copies 80 MB at about 5.5 GB/s, but the same numpy copy with the advice switched off runs "
    "at about 1.2 GB/s (the `4 KiB pages` column), which is where our copies land: the profile "
    "of every large copy is 70-75% page faults (`asm_exc_page_fault`, `clear_page_erms`). "
)
WARM_POOL = (
    "Warm-page pool (tensor crate, `alloc/pool.rs`): outputs of 4 MiB and more are blocks "
    "rounded up to 2 MiB, 2 MiB-aligned and advised for huge pages, that return to a "
    "process-wide cache when their buffer is dropped (by us, numpy or torch) and are handed to "
    "the next output that fits within 1.25x, pages still mapped: a repeated copy takes no page "
    "faults, as PyArrow's jemalloc/mimalloc pool. Measured side by side (same period, 12 rounds "
    "each, main's wheel then this one, 10 million elements): ours/PyArrow `copy_chunks` 1.51 to "
    "0.98, `copy_true_export` 1.63 to 1.00, `copy_true_tensor_import` 1.02 to 1.00, "
    "`to_contiguous/reversed` 1.79 to 0.90, `/gapped` 1.62 to 1.14, `/transposed` 0.25 to 0.15, "
    "`table_to_tensor/column_major` 1.44 to 1.08, `/column_major/mixed` 1.75 to 1.10, "
    "`/row_major` 0.26 to 0.16; ours/alloc+memcpy `copy_chunks` 1.03 to 1.64, "
    "`copy_true_export` 0.95 to 2.03. The limit: `copy_true_export` with "
    "`ARROW_DLPACK_MEMORY_POOL_LIMIT` 0 (off) 1.63 of PyArrow, 80 MiB (one output) 0.99, "
    "256 MiB 0.99; the default, 256 MiB, is one output plus room for a loop that keeps two or "
    "three alive while it frees older ones. Freed blocks go back to the system after 1 s "
    "unused (PyArrow's pools purge after about a second too). "
)

PAGE_FAULTS_FIX = (
    "Fix (arrow-dlpack and tensor crates): allocate large outputs uninitialised "
    "(`MutableBuffer::with_capacity`, set the length once written) instead of "
    "`MutableBuffer::from_len_zeroed`, which with Arrow's 64-byte alignment is `posix_memalign` "
    "plus a full `memset` pass before the copy, and advise `MADV_HUGEPAGE` on the 2 MiB-aligned "
    "interior of outputs of 4 MiB and more, as numpy does (`libc::madvise`, Linux only). "
)
EXPLANATIONS: dict[str, str] = {
    "np_fixed_shape": (
        "`FixedShapeTensorArray.__dlpack__` used to re-parse the extension metadata JSON on every "
        "export (32% of the call); the export tensor is now built once per object. The calling "
        "convention of `np_array` is the rest of the gap."
    ),
    "array_from_dlpack": (
        "34% of `ad.Array.from_dlpack(np_array)` was a failed attribute lookup: dlpark's "
        "`ExchangeApi::from_object` "
        + MISSING_ATTRIBUTE
        + "That lookup is now answered from a per-type cache (`protocols.rs`), which took the "
        "ratio from 1.7 to 1.2. Second import round (ratio 1.15 to 0.98, alternating): "
        "`__dlpack__`, `__dlpack_device__` and the exchange-API absence are read from a table "
        "built once per immutable type (`arrow_ffi/methods.rs`) and called as `f(obj)`, with no "
        "bound method (their `getattr` and `meth_dealloc` were 12% of the call); the "
        "`__dlpack__` keywords `{max_version: (1, 3)}` are one dict made once (building and "
        "freeing it was 13%). What is left, profiled with `perf record --call-graph dwarf` on 1 "
        "million calls: numpy's own `__dlpack__` and `__dlpack_device__` (28%, through the "
        "keyword unpacking CPython does for a dict, `_PyStack_UnpackDict`), the tensor crate's "
        "import of the managed tensor (`consume_capsule`: 20%, half of it `check_foreign`, which "
        "collects shape and strides into `Vec`s, and `Tensor::try_new`'s `check_view`), and "
        "arrow-dlpack's `tensor_to_array` (18%: an `ArrayDataBuilder` with its buffer `Vec`, "
        "`ArrayData::validate` and `make_array`, where a `PrimitiveArray` built from the "
        "`ScalarBuffer` would do). `tensor_to_array` now builds the `PrimitiveArray` from its "
        "`ScalarBuffer` directly (alternating, two wheels: 0.95 to 0.89). Final round "
        "(alternating with main's wheel, three runs each: 0.87-0.88 to 0.63-0.64, about 1.01 "
        "to 0.72 µs): `__dlpack__` is called by vectorcall with keyword names built once "
        "(`arrow_ffi/methods.rs`; CPython had turned the shared keyword dict into a fresh names "
        "tuple and argument array on every call: 0.83 to 0.67 by itself), `__dlpack_device__` "
        "answers that are a tuple of two exact ints are read with the C API, the unnamed field "
        "of each data type is made once, and the tensor crate keeps shape and strides inline "
        "up to 4 dimensions (`dims.rs`), checking the view once in `check_foreign`."
    ),
    "tensor_from_dlpack": (
        "44% of `ad.Tensor.from_dlpack(np_2d)` was dlpark's `ExchangeApi::from_object`, which "
        + MISSING_ATTRIBUTE
        + "It is now answered from a per-type cache, which took the ratio from 0.9 to 0.54."
    ),
    "fixed_shape_from_dlpack": (
        "26% of `ad.FixedShapeTensorArray.from_dlpack(np_3d)` was the failed "
        "`__dlpack_c_exchange_api__` lookup of `array_from_dlpack`, now cached per type (0.74 to "
        "0.55). Second import round (0.56 to 0.41, alternating): the field of an array made "
        "from a tensor (extension metadata serialised to JSON into a `HashMap`: 15% of the call "
        "in perf) is made once per type and shared, and the `__dlpack__` call is the cheaper one "
        "of `array_from_dlpack`."
    ),
    "array_from_torch": (
        "Our import of a torch tensor uses torch's C exchange API; it used to call "
        "`torch.Tensor.__dlpack_device__()` first (Python code in torch, about 2.7 µs, half of "
        "our call). The device is now checked on the imported tensor instead (0.88 to 0.22)."
    ),
    "wrap_array": (
        "39% of `ad.array(pa_arr)` was a failed lookup of `__arrow_c_stream__` (pa.Array has "
        "only `__arrow_c_array__`, and streams are tried first); it is now cached per immutable "
        "type, which took the ratio from 4.9 to 3.7. Second import round (5.80 to 2.62-2.74 "
        "over four runs, "
        "alternating): the protocol methods of an immutable type are read once from its MRO "
        "and called as `f(obj)` through `PyObject_CallFunctionObjArgs` (uninterned names missed "
        "CPython's type cache and walked the MRO on each of five lookups: 36% of the call); the "
        "parsed `Field` is remembered by the schema's content, which `check_schema` encodes as "
        "it checks; fixed-width arrays and fixed-size lists of them are built straight from the "
        "checked `ArrowArray` instead of arrow-rs's `ArrayData` import and validation; each "
        "capsule's name is compared once, and the remembered-field lookup takes one lock. "
        "Profile (`perf record --call-graph dwarf`, 1.5 million calls, shares of our call with "
        "its deallocation): PyArrow's own `__arrow_c_array__` and the capsule tuple it returns "
        "42%, our import of the structs 23% (schema check and remembered-field lookup 8%, "
        "direct build 8%: three allocations, the owner of the struct, the buffer and the "
        "array), the `__dlpack_device__` probe 11% (PyArrow's method, its tuple and our "
        "reading of it), the Python object and its deallocation, which runs PyArrow's release "
        "callback, 15%. The probe is what the device-first dispatch costs (a pa.Array may hold "
        "CUDA memory, so its device is asked before `__arrow_c_array__` hands out pointers we "
        "would read), yet a wheel built without it, as an experiment, went only from 2.74 to "
        "2.62 (about 50 ns): no single piece closes the gap. Final round (alternating with "
        "main's wheel, three runs each: 2.64-2.68 to 2.51-2.54): the protocol methods are "
        "called by vectorcall, and a `__dlpack_device__` answer that is a tuple of two exact "
        "ints is read with the C API (pyo3's extraction was half the probe). Asking "
        "`__arrow_c_device_array__` instead, to learn the device from the struct without the "
        "probe, measured slower (2.66 to 2.70): PyArrow 26's method takes `**kwargs` and costs "
        "about 90 ns more than `__arrow_c_array__`, more than the 60 ns probe. Profile after "
        "(`perf record --call-graph dwarf`, 3 million calls, shares of our call and its "
        "deallocation): PyArrow's own work 49% (its `__arrow_c_array__` 35.5%, freeing the "
        "capsule tuple it returns, which runs its schema release, 10.6%, its array release when "
        "our object dies 2.5%), which the floor pays too; the device probe 8.1%; our import of "
        "the structs 22.9% (schema check and remembered-field lookup 8.1%, building the array "
        "9.0%: three allocations, the least arrow-rs allows for a foreign buffer, as "
        "`Buffer::from_custom_allocation` takes an `Arc` owner and makes its own `Bytes`; array "
        "checks 3.8%); the Python object 4.2%, its deallocation 8.2%, the type-table lookup "
        "1.8%. The last 1-2% would need about 20 ns off these fixed costs, none of which can go "
        "without dropping a check or the device probe that keeps CUDA pointers from being read "
        "on the CPU. The caches (`cache.rs`) then lost their lock: a lookup takes a `Python` "
        "token and the GIL serialises it; alternating with main's wheel on a loaded machine "
        "(load 4-5 on 2 cores), 2.70-2.93 to 2.61-2.92 over ten and six clean runs, within "
        "the noise. A few runs of either wheel read 4-20 (ours 1.2-11.5 µs, the floor at its "
        "usual 300 ns in the same alternating batches); the cause was not found, and a whole "
        "process sampled at 499 Hz did not separate it. Profile after (`perf record "
        "--call-graph dwarf`, 6 million calls, shares of the loop's samples): PyArrow's "
        "`__arrow_c_array__` 28.6% and the release of its tuple 6.2%; our import of the structs "
        "20.1% (schema check and remembered-field lookup 7.5%, of which `check_schema` 3.8%; "
        "direct build 8.0%; array checks 2.8%), the device probe 6.7%, the Python object 4.3% "
        "and its deallocation 8.5%, the type-table lookup 1.5%; no lock is left on the path, "
        "and nothing else of ours is both cheap to take off and not a check."
    ),
    "wrap_fixed_shape": (
        "As `wrap_array`; the `arrow.fixed_shape_tensor` metadata JSON is now parsed once per "
        "remembered field, not per import (4.55 to 2.27)."
    ),
    "table_to_tensor": (
        "`Tensor.from_arrow` (`record_batch::transpose_group`) spent 72% of its time in page "
        "faults writing a fresh 80 MB tensor with 4 KiB pages; PyArrow's `to_tensor` allocates "
        "from its memory pool. " + PAGE_FAULTS_FIX + WARM_POOL + "Column-major output is then "
        "level with PyArrow's (0.95-1.06 in four alternating runs on a quiet machine; 1.5 in "
        "runs where other tenants loaded the memory bus, when every copy row swung): both copy "
        "each column as one contiguous run into warm memory, at the machine's memory "
        "bandwidth. An explicit `memcpy` per same-typed column in place of the vectorised "
        "element loop (for glibc's non-temporal stores) measured no change (0.96-1.05 against "
        "0.95-1.03 in the same runs) and was not kept. 0.8 would need a copy 20% faster than "
        "PyArrow's `memcpy` of the same bytes, which a kernel with plain stores cannot do. "
        "Non-temporal stores can: a store into uncached memory first reads the destination "
        "line, and glibc's `memcpy` streams only runs above about three quarters of the "
        "last-level cache, which 10 MB columns never reach. Outputs of 16 MiB and more now "
        "write their columns with non-temporal stores (`alloc::copy_to_uninit`, and the AVX2 "
        "widening kernel of `table/copy/fused.rs` for float32 and int32 columns of float64 "
        "output): alternating with the previous wheel, 8 float64 columns 0.98-1.01 to "
        "0.59-0.71, mixed int32, float32 and float64 columns 0.90-0.93 to 0.66-0.68."
    ),
    "copy_to_contiguous": (
        WARM_POOL + "The gapped copy (every other int64) then still took 1.14x PyArrow's "
        "`pa.array(gapped)`: the general strided loop moved one element per iteration with a "
        "stride known only at run time. Stride 2 now has its own loop over pairs "
        "(now `strided_copy/gather.rs`, with AVX2 or SSE2 shuffles), which the compiler "
        "vectorises: criterion "
        "`copy/to_contiguous/gapped` (10 MB out of 20 MB) 1.90 to 1.48 ms, 23% less time, "
        "against a saved baseline; through Python 1.66 (main) to 0.90 of PyArrow and 1.39 of "
        "alloc+memcpy in one side-by-side run."
    ),
    "rust:copy/concat_chunks": "See `copy_chunks`: page faults of a fresh allocation.",
    "rust:copy/record_batch_to_tensor/row_major": (
        "Profile (`perf` on the criterion binary with `--profile-time`): for same-typed "
        "columns 95% is `record_batch::transpose_group` itself, the column-to-row transpose, "
        "whose writes stride across the row; the column-major cases, which write each column "
        "contiguously, reach memcpy. Blocked transposition (a few rows of every column at a "
        "time, 8 x 8 SIMD transposes) is the known fix."
    ),
    "rust:copy/record_batch_to_tensor/row_major/int32+float32": (
        "The earlier profile (63% page faults in a fresh float64 staging buffer) is gone: the "
        "output comes from the warm-page pool and the staging runs are reused per block. "
        "Profile after (`perf record` on the criterion binary, `--profile-time 4`): 56% "
        "`table::copy::transpose_group`, the portable transpose for 8-byte elements, which the "
        "compiler leaves scalar (the SSE2 4 x 4 register transposes cover 4-byte elements "
        "only), and 40% `table::copy::write`, which promotes each int32 or float32 column into "
        "a float64 run before that run is transposed: two passes over the values. The same "
        "kernel through Python at 80 MB is 2.6x numpy's alloc+memcpy and 0.15 of PyArrow's "
        "`to_tensor` in time (the rows above); here the reference is an 8 MB `Vec::clone`, "
        "which stays in the last-level cache. Since then (`table/copy/fused.rs`): float64 "
        "output on x86-64 with AVX2 goes 4 rows of every column at a time through 4 x 4 "
        "register transposes of 8-byte values, float32 and int32 columns widened in the loads "
        "(`vcvtps2pd`, `vcvtdq2pd`), so each column is read once and each output line written "
        "once, without the staging pass; alternating with the old binary (medians of 3): "
        "int32+float32 0.42-0.44 to 0.94-1.17, int32+float32+float64 0.53-0.69 to 0.91-1.19. "
        "Profile after: 90% in the kernel, half of it on stores and shuffles, half on choosing "
        "each column's load per tile."
    ),
    "rust:copy/tables_to_tensor/row_major/int32+float32": (
        "The kernel of `record_batch_to_tensor/row_major/int32+float32` (one call per record "
        "batch at its row offset); see that row."
    ),
    "rust:copy/to_contiguous/gapped": (
        "Every other int64: the copy reads twice the bytes it writes (20 MB for 10 MB out), and "
        "the reference is a copy of the 10 MB written. The gather is now AVX2 or SSE2 "
        "even-lane shuffles (`strided_copy/x86.rs`), streamed past the cache for outputs of 8 "
        "MiB and more: 0.38-0.50 to 0.47-0.70 of `memcpy` (0.70 in the one quiet run; in thread "
        "CPU time 0.61 to 0.74-0.84). It stays at or above `copy/reference/read_20_write_10`, "
        "the plainest loop that reads the same 20 MB and writes 10 MB into a warm output, in "
        "every run (0.70 against 0.52 in the quiet one): the copy is bound by the bytes it "
        "must read, and perf puts 80% of the kernel's samples on the shuffles waiting for the "
        "source stream. Through Python the same copy is 0.88-0.92 of PyArrow's time."
    ),
    "rust:exchange/export+drop": (
        "Criterion measures 10 and 10 million one after another, not alternately; the Python "
        "rows of the same export, alternated, show 10M/10 at 1.0. Export copies only shape and "
        "strides, so its cost cannot depend on the length."
    ),
    "rust:tensor/export+drop": (
        "Tens of nanoseconds measured one size after another (criterion does not alternate): "
        "a few nanoseconds of drift make the ratio. Export copies only shape and strides; the "
        "alternated Python rows show 10M/10 at 1.0."
    ),
    "rust:": (
        "Criterion measures one benchmark after another, not alternately, on a shared machine; "
        "rerun `cargo xtask bench` before reading more into this row."
    ),
    "np_array": (
        'Earlier profile of the producer call alone (`perf record -e cpu-clock` on a loop of '
        '25 million `x.__dlpack__(max_version=(1, 0))`, abi3-py311 wheel): per call, four '
        '`malloc`/`free` pairs (the shared export tensor cloned with its shape and strides '
        "`Vec`s, dlpark's managed-tensor allocation, the boxed `Buffer` context: 15% with "
        "`Tensor::clone`), pyo3's generic `(u32, u32)` extraction of `max_version` "
        '(`PyTuple_Size`, `PyTuple_GetItem`, `PyLong_AsLong` through `FromPyObject` layers: '
        "13%), dlpark's re-validation of the tensor it was just handed before making the "
        "capsule (`TensorRef::from_raw`: 3%) and pyo3's keyword matching "
        '(`extract_arguments_fastcall`, `PyUnicode_AsUTF8AndSize`, `memcmp`: 9%). Fixed: the '
        'tensor crate builds each managed tensor in one allocation (header, the `Buffer` '
        'reference and the shape and strides inline, its own deleter, which frees by the size '
        'recorded in the header, never by the consumer-writable `ndim`); `dlpack_export` makes '
        'the capsule itself; `max_version` is read with the C API; the shared export tensor is '
        "borrowed, not cloned. Ratio of `__dlpack__(max_version=(1, 0))` alone to PyArrow's, "
        'alternating: `Array` 1.31 to 0.93, `Tensor` 1.00 to 0.79, `FixedShapeTensorArray` 0.09'
        " to 0.05; legacy `__dlpack__()` (against PyArrow's versioned call, since PyArrow "
        'refuses legacy exports of read-only data) 1.02 to 0.68, 0.74 to 0.56 and 0.07 to 0.04.'
        ' What is left of the `Array` call: any keyword argument costs about 55 ns over a call '
        'without one (225 against 280 ns measured alone): CPython 3.11 does not specialise '
        'calls with keywords to method descriptors, and pyo3 matches each keyword name by its '
        "UTF-8 text; PyArrow's Cython method pays the first part too. The rest of our call is "
        '`Column::export_tensor` (a `OnceLock` read), the one allocation and `PyCapsule_New`. '
        'The exchange `np.from_dlpack(ad_array)` went from 1.25 to 1.03 (int64, 10 and 10 '
        "million): numpy's own share of the exchange is about half of PyArrow's total, so 0.8 "
        'of the exchange needs a `__dlpack__` at about 0.1 µs, below what a Python method call '
        'with a keyword costs.'
        ' Second round (perf on 15 million `x.__dlpack__(dl_device=None, copy=None, '
        "max_version=(1, 0))`, numpy's own keywords, and on 10 million `np.from_dlpack(x)`): "
        "pyo3's wrapper was about a quarter of our call (`extract_arguments_fastcall` 5.5%, "
        '`memcmp` 3.1%, `PyUnicode_AsUTF8AndSize` 2.5%, `to_str` 1.5%, the trampoline and the '
        'moves of its `PyResult`s through `no_panic` most of the 10% and 7% of the two frames '
        'around it), and reading `max_version` 5% (`PyTuple_Size`, `PyTuple_GetItem`, '
        "`PyType_GetFlags`, `PyLong_AsLong`). With numpy's three keywords our call took 200 ns "
        "against PyArrow's 183, which is the 'inside numpy' part of the old gap: the bench's "
        "consumer check calls `__dlpack__` with `max_version` alone. Fixed: `Array.__dlpack__` "
        'and `Tensor.__dlpack__` are a raw `METH_FASTCALL | METH_KEYWORDS` method '
        '(`dlpack_method.rs`) that matches keyword names by pointer against interned names, '
        'and `max_version` tuples seen before are read by address. Alternating, same run: '
        "`__dlpack__` with numpy's keywords 1.09 to 0.84 of PyArrow's; `np.from_dlpack(ad_array)` "
        '1.04 to 0.87 (bench rows, `--only np_`); the exchange beyond the call (numpy\'s work, '
        "our deleter and capsule destructor) was 139 ns against PyArrow's 127 and is now 126 "
        "against 136: no cost of ours is left inside numpy."
        " The remembered `max_version` tuples (and every other cache, `cache.rs`) are now read "
        "without a lock, the GIL serialising the lookups: alternating with main's wheel on a "
        "loaded machine, `x.__dlpack__(max_version=(1, 3))` went from 1.03-1.16 (median 1.12) "
        "to 0.99-1.07 (median 1.05) of PyArrow's over five and eight runs where PyArrow's call "
        "kept its usual 115-125 ns; `np.from_dlpack(ad_array)` from 1.08-1.23 to 1.09-1.17, "
        "within the noise."
        " A whole run of `bench_exchange.py` after the global allocator landed (release wheel, "
        "2026-12-06, a review helper running beside it) measured `x.__dlpack__(max_version=(1, "
        "3))` of an int64 array at 127 ns against PyArrow's 118 (1.07-1.08), the legacy call "
        "0.96-1.04, `np.from_dlpack` 1.06 and `ad.array(pa_arr)` 2.89 of its floor: the page's "
        "0.67-0.72 for the first (run of 2026-12-02) had PyArrow's call at 175-193 ns, which no "
        "run since has seen, and a plain loop of 200,000 calls gives 133-135 ns against "
        "PyArrow's 138-144 ns whether the array's memory is numpy's (16-byte aligned) or "
        "Arrow's (64). The 0.8 target for this row, and 1.0 for `np.from_dlpack`, stay missed."
        " Profile of that call (`perf record`, 20 million calls, release wheel): 8% of it in "
        "`dlpack_export::export`, at loads of the export tensor that had just been stored through "
        "the stack in pieces of another width (a failed store-to-load forwarding after a "
        "160-byte `memcpy` of the Arrow `Result` that `Column::export_tensor` returned, then of "
        "the `Cow` of `dlpack_tensor`). The remembered tensor is now taken first, as a reference "
        "(`DlpackSource::shared_tensor`). Alternating wheels before and after, `--only _array` "
        "twice each: the versioned call 0.86-1.07 to 0.86-0.96 of PyArrow's, the legacy one "
        "0.98-1.05 to 0.62-0.69, `np.from_dlpack` 1.03-1.11 to 1.02-1.05, `torch.from_dlpack` "
        "0.99-1.41 to 0.89-0.96 (PyArrow's own call measured 110 to 220 ns between runs of one "
        "hour, which moves every ratio of these rows)."
    ),
    "jnp_array": (
        "Not the exchange: the bench's int64 arrays lay in numpy's 16-byte-aligned memory, which "
        "JAX copies for either side (it shares only 64-byte-aligned host memory), and JAX's import "
        "returns before that copy is done, so each timed call paid for the copies of the calls "
        "before it (76.78x at 10 million elements in the run of 2026-12-02). The arrays are now "
        "aligned as Arrow allocates, and each JAX call waits for its array "
        "(`block_until_ready`); then JAX shares both sides' memory at both sizes. Measured after "
        "the change (release wheel, 2026-12-06): `--only jnp_array` 0.91-0.92 at 10 million "
        "elements and 1.05-1.08 at 10 in three runs, and in a plain loop of 200 calls (the "
        "calling thread's CPU time, as the bench counts it, median of 30) 0.96-0.98 at both "
        "sizes (26.2-26.7 us against 27.2-27.6 us); our `__dlpack__(stream=None)`, the legacy "
        "call JAX makes, takes 0.38 us against PyArrow's 0.93 us. The small row's excess was the "
        "harness's (traced 2026-12-07): it sized each side's batch from its first call, and "
        "JAX's first import of a process compiles, so the side timed first (ours, at 10 "
        "elements) got batches of one call, whose time per call held the timer's own overhead "
        "(about 1 us). The first calls are now run untimed before the batch is sized: 0.92-0.95 "
        "at 10 elements and 0.93-0.98 at 10 million in three runs, as in the plain loop. A later "
        "run had the tensor row at 1.08 with three rounds of four faster for ours (per-round "
        "quartiles 0.90-0.98): the machine's speed drifted during the row, and the ratio of the "
        "two medians took them from different phases; a row's ratio is now the median of its "
        "per-round ratios."
    ),
    "torch_array": (
        "torch 2.15's `torch.from_dlpack` is Python code (`torch/utils/dlpack.py`) that calls "
        '`__dlpack_device__()`, `__dlpack__(max_version=(1, 0))` and '
        '`torch._C._from_dlpack(capsule)`; it never reads `__dlpack_c_exchange_api__` (torch '
        'publishes the API only as a producer), so the exchange-API target of 0.5 cannot be met'
        " through `torch.from_dlpack`: torch's own work is about 90% of PyArrow's exchange. "
        'With the producer call fixed (see `np_array`) the ratio went from 1.08 to 1.02. '
        "Second round: torch calls `__dlpack_device__()` before every `__dlpack__(**kwargs)`; "
        'ours built a new `(1, 0)` tuple each time (59 ns, PyArrow 57) and now hands out one '
        'tuple made once (29 ns); with the raw `__dlpack__` method of `np_array` the row went '
        "from 1.06 to 0.97 (`Tensor`: 1.03 to 0.95) in alternating runs. torch's own work "
        "(`hasattr`, the keyword dict, `torch._C._from_dlpack`, the tensor's deleter) is about "
        "1.6 µs of PyArrow's 1.75 µs, so the row's noise is as large as its margin. With the "
        "caches read without a lock (`cache.rs`): 0.98-1.02 to 0.98-1.03 over ten alternating "
        "runs each, unchanged."
    ),
    "torch_tensor": (
        "See `torch_array`: the same consumer path, and the same two fixes (the shared CPU "
        "`__dlpack_device__` tuple and the raw `__dlpack__` method); 1.03 to 0.95."
    ),
    "np_tensor": (
        'See `np_array` for the producer call: `Tensor.__dlpack__(max_version=(1, 0))` alone '
        "went from 1.00 to 0.79 of PyArrow's `Tensor.__dlpack__`. The exchange "
        "`np.from_dlpack(ad_tensor)` is at 1.01-1.03 (from 1.03-1.04): numpy's own work is "
        'about half of the exchange, the same for both producers. Second round (see '
        '`np_array`): the raw `__dlpack__` method took the call alone to 0.47 of PyArrow and '
        'the exchange from 0.97 to 0.76.'
    ),
    "copy_bool_export": (
        'Unpacking wrote into `MutableBuffer::from_len_zeroed` (every byte twice). It now '
        'extends a `Vec<u64>` reserved with `try_vec_with_capacity` (huge-page advice, no '
        'zeroing) with one 256-entry-table word per input byte (unaligned offsets read a 16-bit'
        ' window). Python, alternating: ours/alloc+memcpy 0.49 to 0.74, and 30x faster than '
        '`pa_bool.to_numpy(zero_copy_only=False)`; criterion `bool_unpack` 1.14x the speed of '
        '`memcpy/alloc/10000000` in the same run (0.62 before). Later runs (2026-12-07) had '
        'alloc+memcpy of the 10 MB at 45-57 GB/s (in cache, warm pages) and ours at 0.58-0.66 '
        'of it: the table loop stores 8 bytes per input byte. With AVX2, eight input bytes are '
        'now broadcast and spread by two byte shuffles, a mask and a compare into 64 output bytes'
        ' (two stores); a first version that assembled each 32-bit word from four bounds-checked'
        ' byte loads ran slower than the table (377 against 321 us). `dist` wheels alternating: '
        '307 to 97-103 us per 10 million values, 0.58 to 1.61 of alloc+memcpy.'
    ),
    "copy_bool_import": (
        'Packing was `BooleanBuffer::collect_bool` with a bounds-checked closure (1.1 ns per '
        'element). It now packs 64 bytes into one `u64`: on x86-64 four SSE2 compares with zero'
        ' and `movemask`s (sixteen bytes each), elsewhere a branch-free SWAR step per eight '
        'bytes (`((v & 0x7f..) + 0x7f..) | v) & 0x80..`, gathered by one multiply), into '
        'unzeroed memory. The auto-vectorised SWAR version reached only 0.65 of `memcpy/alloc` '
        '(a plain `chunk[i] != 0` loop is not turned into `pmovmskb` by LLVM either). Python: '
        "0.04 to 0.93 of alloc+memcpy of the input bytes, and 0.03 of `pa.array(np_bool)`'s "
        'time; criterion `bool_pack` (new) 1.26x the speed of `memcpy/alloc/10000000` (it '
        'writes an eighth of what it reads).'
    ),
    "copy_chunks": (
        '`arrow_select::concat` was 67% of the call, 75% of it 4 KiB page faults: it writes '
        'into a `MutableBuffer` that gets no huge-page advice. Primitive chunks without nulls '
        '(all that DLPack exports) are now joined with one `memcpy` per chunk into an '
        '`UninitBuffer` (huge-page advice, no zeroing); others still go to `arrow_select`. '
        "Python, 80 MB of int64 in two chunks: 0.21 to 0.97 of alloc+memcpy. PyArrow's "
        '`combine_chunks()` remains 1.6x faster in time (6.9x before): its memory pool '
        '(jemalloc) hands back pages that are already mapped, so it takes no page faults at all'
        " and beats numpy's own alloc+memcpy; matching it needs an allocator that keeps freed "
        'pages warm, which the warm-page pool now adds (below). Criterion '
        '`concat_chunks/4x2500000`: 4.1x '
        'the speed of `memcpy/alloc/40000000` (whose `Vec` clone has no huge-page advice; 0.92 '
        'before). ' + WARM_POOL
    ),
    "copy_true_export": (
        'With huge-page advice (on main) `np.from_dlpack(x, copy=True)` of 80 MB is at 1.01 of '
        'alloc+memcpy (0.98 before this change, 0.22 before the advice). It stays a miss '
        'against PyArrow, whose same call is 1.57x faster in time: PyArrow copies into its '
        'memory pool, whose pages are already mapped (see `copy_chunks`). ' + WARM_POOL + "Then "
        "level with PyArrow (0.98-1.01): both `memcpy` into warm pages. Copies into outputs of "
        "16 MiB and more now use non-temporal stores (`alloc::copy_to_uninit`), which skip the "
        "read of each destination line that a plain store makes: alternating with the previous "
        "wheel, 0.98-0.99 to 0.66-0.68 of PyArrow's time; two chunks 0.93-1.00 to 0.68-0.70; "
        "`Tensor.from_dlpack(np_2d, copy=True)` 0.80-0.84 to 0.36-0.41."
    ),
    "scale:jnp_array": (
        "JAX's copies, not ours: see `jnp_array`. With the arrays aligned and each call waited "
        "for, JAX shares both sides' memory and the row no longer grows with the size "
        "(`--only jnp_array`: 10M/10 0.85-0.88 ours, 1.00-1.01 PyArrow's)."
    ),
    "rust:copy/bool_unpack": (
        'See `copy_bool_export`: now 1.14x `memcpy/alloc/10000000` in the same criterion run.'
    ),
    "rust:copy/to_contiguous/reversed": (
        'The backwards run is now a reversed zip of slices into `MaybeUninit` output, which the'
        ' compiler vectorises (forward loads, lane reversal), into unzeroed memory: 0.79 to '
        '0.94 of `memcpy` (10 MB, alloc included) in the same run.'
    ),
    "rust:copy/to_contiguous/transposed": (
        'Now (`strided_copy/transpose.rs`, `x86.rs`): the plane is cut into strips one 64-byte '
        'output line wide, each band of tile-wide columns read top to bottom 2048 rows at a '
        'time, through AVX2 8 x 8 (4-byte) and 4 x 4 (8-byte) register tiles, SSE2 4 x 4 and '
        '2 x 2 without AVX2: 0.20-0.28 to 0.56-1.10 of `memcpy` (1.10 in the quiet run; thread '
        'CPU time 0.34 to 0.96-1.18). Profile after: 98.6% in the AVX2 tile, 70% of it on the '
        'eight strided source loads (columns 5,000 bytes apart on 4 KiB pages): memory, not '
        'arithmetic. Before: '
        'Earlier profile: 97% in the copy loop, all of it scalar 4-byte loads and stores '
        'through the stack (the 32 x 32 tile loop was not vectorised), and each run of a tile '
        'read from a different page (column stride 5000 bytes). Now: planes with unit row '
        'stride (a transposed matrix) go through 8 x 8 tiles visited in 64 x 64 blocks (64 '
        'source pages and 16 KiB per block, so the TLB and L1 are not thrashed), and for '
        'four-byte elements on x86-64 each tile is four SSE2 4 x 4 transposes (four unaligned '
        'loads, eight unpacks, four stores). Criterion: 2.7x faster than before against a saved'
        ' baseline, 0.18 to 0.21 of `memcpy` in the same runs; through Python '
        '(`np.from_dlpack(ad.Tensor(m.T), copy=True)`, 40 MB float32) 0.42 to 0.53 of '
        'alloc+memcpy and 2.5x faster than `np.ascontiguousarray(m.T)`. Still a miss: in the '
        'profile after the change most samples sit at the strided 16-byte source loads (one '
        'cache line, and one 4 KiB page of an input without huge pages, per column of a block):'
        ' the kernel waits on memory, not on arithmetic. What remains to try: 16 x 16 tiles of '
        'AVX2 8 x 8 transposes with runtime feature detection, software prefetch of the next '
        "block's columns, and other element sizes (only four-byte elements use SIMD; 1-, 2- and"
        ' 8-byte elements use the portable tile, which the compiler leaves scalar).'
    ),
}
