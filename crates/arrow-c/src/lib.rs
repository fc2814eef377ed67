//! The Arrow C Data Interface, C Stream Interface and C Device Data Interface, checked: import
//! of `ArrowSchema`, `ArrowArray`, `ArrowArrayStream`, `ArrowDeviceArray` and
//! `ArrowDeviceArrayStream` from any producer, and export of arrays, streams and device tensors.
//!
//! arrow-rs imports `ArrowSchema` and `ArrowArray` trusting them, and has no Device Data
//! Interface. This crate walks every struct first, field by field and recursively, against the
//! layout its format prescribes, and refuses a mismatch with an [`ArrowCError`] that names the
//! field by its path (`ArrowArray.children[1].n_buffers`): a released struct, a NULL buffer where
//! the length needs memory, a wrong buffer or child count, lengths and offsets whose sizes
//! overflow, a child shorter than its parent needs. Structs handed to the crate are owned by it
//! from then on and released exactly once, on success when the last imported buffer dies and on
//! any error before the call returns.
//!
//! Device arrays are never read: a fixed-width numeric column, a fixed-size list of one, or an
//! `arrow.fixed_shape_tensor` column on a device becomes a [`DeviceTensor`]: a tensor of the
//! `arrow-dlpack-tensor` crate that keeps the device type and id, owns the Arrow array, and comes
//! with the producer's sync event. Waiting on that event is the caller's: this crate knows no
//! device runtime.
//!
//! No Python here: the Python package's capsules wrap these structs.
//!
//! | module | what it holds |
//! |---|---|
//! | `checks` | [`check_schema`], [`check_array`], [`validate_imported`]: the checks, before and after arrow-rs reads a struct |
//! | `import` | [`import_array`], [`import_stream`], [`CheckedStream`]: checked, zero-copy import |
//! | `export` | [`export_stream`]: an `ArrowArrayStream` of a column's chunks |
//! | `device` | [`ArrowDeviceArray`], [`ArrowDeviceArrayStream`] (layouts asserted), their import and export |
//! | `error` | [`ArrowCError`] |
//!
//! # Example
//!
//! An `ArrowDeviceArray` of four `float`s on CUDA device 0, built by hand as a C producer
//! builds it, imported as a device tensor and exported again; the producer's release callback
//! runs once, when the last of them is gone.
//!
//! ```
//! use std::ffi::c_void;
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! use arrow_array::ffi::FFI_ArrowArray;
//! use arrow_dlpack_c::{ArrowDeviceArray, DeviceImported, export_tensor, import_device_array};
//! use arrow_dlpack::Device;
//! use arrow_schema::{DataType, Field};
//!
//! /// `struct ArrowArray`, as C declares it.
//! #[repr(C)]
//! struct RawArray {
//!     length: i64,
//!     null_count: i64,
//!     offset: i64,
//!     n_buffers: i64,
//!     n_children: i64,
//!     buffers: *mut *const c_void,
//!     children: *mut *mut RawArray,
//!     dictionary: *mut RawArray,
//!     release: Option<unsafe extern "C" fn(*mut RawArray)>,
//!     private_data: *mut c_void,
//! }
//!
//! static RELEASES: AtomicUsize = AtomicUsize::new(0);
//!
//! /// The producer's release callback: frees the buffer pointers and marks the array released.
//! unsafe extern "C" fn release(array: *mut RawArray) {
//!     // SAFETY: called once with the array built below, whose `buffers` is a boxed pair.
//!     unsafe {
//!         drop(Box::from_raw((*array).buffers.cast::<[*const c_void; 2]>()));
//!         (*array).release = None;
//!     }
//!     RELEASES.fetch_add(1, Ordering::SeqCst);
//! }
//!
//! # fn main() -> Result<(), arrow_dlpack_c::ArrowCError> {
//! // Stands for memory on the GPU: this crate hands the address on and never reads it.
//! let memory = vec![0.0f32; 4];
//! let data = memory.as_ptr().cast::<c_void>();
//! let buffers = Box::into_raw(Box::new([std::ptr::null::<c_void>(), data]));
//! let mut raw = RawArray {
//!     length: 4,
//!     null_count: 0,
//!     offset: 0,
//!     n_buffers: 2,
//!     n_children: 0,
//!     buffers: buffers.cast(),
//!     children: std::ptr::null_mut(),
//!     dictionary: std::ptr::null_mut(),
//!     release: Some(release),
//!     private_data: std::ptr::null_mut(),
//! };
//! // SAFETY: `RawArray` is laid out as `struct ArrowArray`; `from_raw` moves it out and leaves
//! // a released struct behind.
//! let array = unsafe { FFI_ArrowArray::from_raw((&raw mut raw).cast()) };
//! let cuda = Device { device_type: 2, device_id: 0 };
//! let device_array = ArrowDeviceArray::new(array, cuda, std::ptr::null_mut());
//!
//! // Import: checked, never read; the tensor keeps the device and owns the array.
//! let field = Arc::new(Field::new("x", DataType::Float32, false));
//! let DeviceImported::Device(imported) = import_device_array(field, device_array)? else {
//!     unreachable!("CUDA data is imported as a device tensor");
//! };
//! assert_eq!(imported.tensor.device(), cuda);
//! assert_eq!(imported.tensor.shape(), &[4]);
//! assert_eq!(imported.tensor.data_ptr(), data.cast());
//! assert!(imported.sync_event.is_none());
//!
//! // Export: the same memory, on the same device, with no event to wait for.
//! let (field, exported) = export_tensor(&imported.tensor, std::ptr::null_mut(), None::<()>)?;
//! assert_eq!(field.data_type(), &DataType::Float32);
//! assert_eq!((exported.device_type(), exported.device_id()), (2, 0));
//! assert_eq!(exported.array().buffer(1), data.cast());
//!
//! // The export keeps the import alive; the producer's array is released once, at the end.
//! drop(imported);
//! assert_eq!(RELEASES.load(Ordering::SeqCst), 0);
//! drop(exported);
//! assert_eq!(RELEASES.load(Ordering::SeqCst), 1);
//! # Ok(())
//! # }
//! ```

mod checks;
mod device;
mod error;
mod export;
mod import;

pub use checks::{check_array, check_schema, validate_imported};
pub use device::{
    ArrowDeviceArray, ArrowDeviceArrayStream, DeviceImported, DeviceTensor, MAX_DEVICE_TYPE,
    check_exportable, cpu_device_array, cpu_device_stream, device_of, device_tensor, export_tensor,
    import_device_array, import_device_stream,
};
pub use error::{ArrowCError, Result};
pub use export::export_stream;
pub use import::{
    CheckedStream, FieldOfSchema, Imported, field_of_schema, import_array, import_array_data,
    import_stream,
};
