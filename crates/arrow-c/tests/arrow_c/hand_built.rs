//! `struct ArrowArray` built by hand, with a release callback that counts its calls.

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::ffi::FFI_ArrowArray;

/// `struct ArrowArray`, as C declares it.
#[repr(C)]
pub(crate) struct RawArray {
    pub(crate) length: i64,
    pub(crate) null_count: i64,
    pub(crate) offset: i64,
    pub(crate) n_buffers: i64,
    pub(crate) n_children: i64,
    pub(crate) buffers: *mut *const c_void,
    pub(crate) children: *mut *mut RawArray,
    pub(crate) dictionary: *mut RawArray,
    pub(crate) release: Option<unsafe extern "C" fn(*mut RawArray)>,
    pub(crate) private_data: *mut c_void,
}

const _: () = assert!(size_of::<RawArray>() == size_of::<FFI_ArrowArray>());

/// What the release callback frees: the buffer pointers, and the counter it increments.
struct Private {
    _buffers: Vec<*const c_void>,
    releases: Arc<AtomicUsize>,
}

unsafe extern "C" fn release(array: *mut RawArray) {
    // SAFETY: called by the consumer with a live array built by `build`.
    let array = unsafe { &mut *array };
    // SAFETY: the private data of a live array built by `build` is its boxed `Private`.
    let private = unsafe { Box::from_raw(array.private_data.cast::<Private>()) };
    private.releases.fetch_add(1, Ordering::SeqCst);
    array.release = None;
    array.private_data = std::ptr::null_mut();
}

/// The number of times a hand-built array has been released.
#[derive(Clone)]
pub(crate) struct Releases(Arc<AtomicUsize>);

impl Releases {
    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::SeqCst)
    }
}

/// An array of `length` slots over `buffers` (no children), altered by `edit` before it is
/// handed over, as a hostile producer would.
pub(crate) fn build(
    length: i64,
    null_count: i64,
    buffers: &[*const c_void],
    edit: impl FnOnce(&mut RawArray),
) -> (FFI_ArrowArray, Releases) {
    let releases = Arc::new(AtomicUsize::new(0));
    let mut pointers = buffers.to_vec();
    let buffers = pointers.as_mut_ptr();
    // The pointer array moves into the private data; its heap address stays the same.
    let private = Box::into_raw(Box::new(Private {
        _buffers: pointers,
        releases: releases.clone(),
    }));
    let mut raw = RawArray {
        length,
        null_count,
        offset: 0,
        n_buffers: buffers_len(private),
        n_children: 0,
        buffers,
        children: std::ptr::null_mut(),
        dictionary: std::ptr::null_mut(),
        release: Some(release),
        private_data: private.cast(),
    };
    edit(&mut raw);
    // SAFETY: `RawArray` is laid out as `struct ArrowArray` (size asserted above); `from_raw`
    // moves it out and leaves a released struct behind.
    let array = unsafe { FFI_ArrowArray::from_raw((&raw mut raw).cast()) };
    (array, Releases(releases))
}

fn buffers_len(private: *mut Private) -> i64 {
    // SAFETY: `private` was just made by `Box::into_raw` and is not shared yet.
    unsafe { (*private)._buffers.len() as i64 }
}

/// Frees the private data of an array whose `release` a test cleared (it will never be
/// released, so nothing else frees it).
pub(crate) fn free_unreleased(private_data: *mut c_void) {
    // SAFETY: the private data of an array made by `build`, never released.
    drop(unsafe { Box::from_raw(private_data.cast::<Private>()) });
}

/// The address of `values`, as a buffer pointer.
pub(crate) fn pointer<T>(values: &[T]) -> *const c_void {
    values.as_ptr().cast()
}
