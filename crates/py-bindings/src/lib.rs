//! The native module `arrow_dlpack._arrow_dlpack` of the Python package `arrow_dlpack`.
//!
//! This crate is thin: the conversions live in `arrow-dlpack` (Arrow arrays <-> tensors),
//! `arrow-dlpack-tensor` (tensors <-> DLPack) and `arrow-dlpack-c` (the Arrow C interfaces,
//! checked); this crate only speaks Python's protocols.
//!
//! | module | what it holds |
//! |---|---|
//! | `array` | `Array` and `array()`: Arrow columns from any Arrow PyCapsule producer |
//! | `tensor` | `Tensor`'s Python methods: n-D strided views, DLPack both ways |
//! | `py_tensor` | `PyTensor`, the Rust struct of `Tensor`, which arrays, tables and the loader build |
//! | `column` | `Column`: one Arrow column (field and chunks), the data of arrays and tables |
//! | `fixed_shape_tensor` | `FixedShapeTensorArray`: `arrow.fixed_shape_tensor` columns |
//! | `variable_shape_tensor` | `VariableShapeTensorArray`: `arrow.variable_shape_tensor` columns, each row a zero-copy tensor |
//! | `list_array` | `ListArray`: variable-length list columns as ragged tensors (values and offsets, padded, packed, jagged) |
//! | `conveniences` | PyArrow's conveniences over chunks and tensors: slices, indexing, `nbytes`, `equals`, `is_null` |
//! | `numpy` | `to_numpy` and friends through `np.from_dlpack`, numpy imported only when called |
//! | `tables` | `Tensor.from_arrow` and `column_tensors()`: tables and record batches to tensors |
//! | `loader` | `_Batches`, behind `ad.batches`: the loader crate's exact-size batches as dicts of tensors, made without the GIL; `_collate`, behind `ad.ray`: one batch of a table's rows on the calling thread; `_merge_states`, behind `ad.merge_states` |
//! | `images` | `decode_images`: a column of encoded images decoded into one tensor without the GIL, and the one conversion of a dict of image spec keys into `ImageSpec` |
//! | `text` | `ad.tokenize` and `_tokenize_column` over the loader's tokenizer |
//! | `tokenizer` | the one conversion of a Python tokenizer (a path, a `tokenizers.Tokenizer`, a `transformers` fast tokenizer), for `text` and the loader's `sequences=` |
//! | `dlpack_export` | `__dlpack__`: argument rules and capsules (dlpark's capsule machinery) |
//! | `dlpack_method` | `__dlpack__` of `Array` and `Tensor` as a raw vectorcall method: keywords matched by pointer |
//! | `dlpack_import` | `from_dlpack`: negotiation with producers, legacy retry, capsule consumption |
//! | `exchange` | the DLPack C exchange API (`__dlpack_c_exchange_api__`) of each class |
//! | `counters` | the exchange API's counters, read by tests through `_exchange_calls()` |
//! | `arrow_ffi` | the Arrow PyCapsule interface: capsules around `arrow-dlpack-c`'s checked import and export, the fields of schemas remembered, producers' protocol methods |
//! | `arrow_device` | `__arrow_c_device_array__` and `__arrow_c_device_stream__` capsules both ways, over `arrow-dlpack-c`; device columns become device tensors, never read |
//! | `device_sync` | `__dlpack__(stream=...)`: the array API's stream table, and the consumer's stream made to wait on the producer's sync event through the CUDA or ROCm runtime, loaded at run time |
//! | `protocols` | cheap probes for optional protocols, remembered per immutable type |
//! | `cache` | the one bounded cache that every remembered answer (fields, protocol tables, `max_version` tuples) is kept in |
//! | `pickling` | `__reduce__` of arrays (an Arrow IPC stream of the column) and tensors (type, shape, row-major bytes), and the objects made back |
//! | `copies` | large copies (`copy=True`, tables to tensors) run without the GIL |
//! | `errors` | the exception classes and the mapping of every Rust error variant to them |
//! | `type_names`, `pretty` | PyArrow's type names and Python objects' type names; reprs and `to_pylist` |
//!
//! Imports between these files run one way (base files first: `cache`, `type_names`, `counters`,
//! `protocols`, `copies`, `column`, `py_tensor`, ...; `tokenizer`, `exchange`, `loader` and `text` last); only `array`
//! and its subclasses `fixed_shape_tensor`, `variable_shape_tensor` and `list_array` refer to each
//! other. `cargo xtask tidy` checks it (`xtask/src/tidy/imports.rs`), and `docs/architecture.md` gives the order.

mod array;
mod arrow_device;
mod arrow_ffi;
mod cache;
mod column;
mod conveniences;
mod copies;
mod counters;
mod device_sync;
mod dlpack_export;
mod dlpack_import;
mod dlpack_method;
/// Every allocation of the extension module's Rust code; the large ones (4 MiB and more: a
/// Parquet decoder's buffers, decompressed IPC bodies, image batches) come from the warm-page
/// pool that `memory_pool_stats()` describes, and keep their pages mapped for the next one.
#[global_allocator]
static ALLOCATOR: arrow_dlpack_tensor::alloc::WarmPages = arrow_dlpack_tensor::alloc::WarmPages;

mod errors;
mod exchange;
mod fixed_shape_tensor;
mod images;
mod list_array;
mod loader;
mod memory_pool;
mod numpy;
mod pickling;
mod pretty;
mod protocols;
mod py_tensor;
mod tables;
mod tensor;
mod text;
mod tokenizer;
mod type_names;
mod variable_shape_tensor;

use pyo3::prelude::*;

/// The native module; `arrow_dlpack/__init__.py` re-exports its public names.
///
/// It declares that it relies on the GIL (`gil_used = true`): a free-threaded CPython turns its
/// GIL on when it imports the module, and the caches (`cache.rs`) are serialised by the GIL alone.
#[pymodule(gil_used = true)]
fn _arrow_dlpack(module: &Bound<'_, PyModule>) -> PyResult<()> {
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    module.add_function(wrap_pyfunction!(array::array, module)?)?;
    module.add_function(wrap_pyfunction!(array::_array_from_ipc, module)?)?;
    module.add_function(wrap_pyfunction!(tensor::_tensor_from_parts, module)?)?;
    module.add_function(wrap_pyfunction!(tables::column_tensors, module)?)?;
    module.add_function(wrap_pyfunction!(counters::exchange_calls, module)?)?;
    module.add_function(wrap_pyfunction!(memory_pool::memory_pool_stats, module)?)?;
    module.add_function(wrap_pyfunction!(
        memory_pool::set_memory_pool_limit,
        module
    )?)?;
    module.add_function(wrap_pyfunction!(
        memory_pool::set_memory_pool_decay_ms,
        module
    )?)?;
    module.add_function(wrap_pyfunction!(
        memory_pool::release_unused_memory,
        module
    )?)?;
    module.add_function(wrap_pyfunction!(
        device_sync::_testing_record_device_runtime,
        module
    )?)?;
    module.add_class::<array::PyArray>()?;
    module.add_class::<py_tensor::PyTensor>()?;
    module.add_class::<fixed_shape_tensor::PyFixedShapeTensorArray>()?;
    module.add_class::<variable_shape_tensor::PyVariableShapeTensorArray>()?;
    module.add_class::<list_array::PyListArray>()?;
    module.add_class::<loader::PyBatches>()?;
    module.add_function(wrap_pyfunction!(loader::collate_table, module)?)?;
    module.add_function(wrap_pyfunction!(loader::merge_states, module)?)?;
    module.add_function(wrap_pyfunction!(loader::check_options, module)?)?;
    module.add_function(wrap_pyfunction!(images::decode_images, module)?)?;
    images::register(module)?;
    module.add_function(wrap_pyfunction!(text::tokenize, module)?)?;
    module.add_function(wrap_pyfunction!(text::tokenize_column_py, module)?)?;
    errors::register(module)?;
    dlpack_method::install(module.py())?;
    exchange::install(module.py())?;
    Ok(())
}
