//! A hand-built DLPack producer for tests: every field can be set, including wrong ones, and its
//! deleter counts how often it runs.

#![allow(dead_code, unreachable_pub)]

use std::ffi::c_void;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use dlpack_sys::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned,
    DLPackVersion, DLTensor, DlpackFlags,
};

/// What the producer describes. Shape and strides are stored as given, so they may be nonsense.
#[derive(Clone)]
pub struct Spec {
    /// Backing storage, 16-byte aligned words.
    pub words: Vec<u128>,
    pub dtype: DLDataType,
    pub shape: Option<Vec<i64>>,
    pub strides: Option<Vec<i64>>,
    /// `ndim` to report; defaults to the shape length.
    pub ndim: Option<i32>,
    pub byte_offset: u64,
    /// Replaces the data pointer, for NULL and misaligned cases; an offset in bytes from the start
    /// of `words` otherwise.
    pub data: Data,
    pub device: DLDevice,
    pub version: DLPackVersion,
    pub flags: DlpackFlags,
    pub null_deleter: bool,
}

#[derive(Clone, Copy)]
pub enum Data {
    /// `words` plus this many bytes.
    Offset(usize),
    /// A NULL data pointer.
    Null,
    /// This exact address (never dereferenced by a correct consumer that refuses the tensor).
    Address(usize),
}

impl Spec {
    /// A row-major float32 tensor of `shape` over storage holding 0, 1, 2, ... in memory order,
    /// with at least four floats of slack after the tensor.
    pub fn float32(shape: &[i64]) -> Spec {
        let count: i64 = shape.iter().product();
        let count = count.max(0) as usize;
        let mut words = vec![0u128; count.div_ceil(4) + 1];
        let floats = words.len() * 4;
        // SAFETY: `words` holds exactly `floats` f32 values and u128 is aligned for f32.
        let values =
            unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<f32>(), floats) };
        for (i, value) in values.iter_mut().enumerate() {
            *value = i as f32;
        }
        Spec {
            words,
            dtype: DLDataType {
                code: DLDataTypeCode::FLOAT,
                bits: 32,
                lanes: 1,
            },
            shape: Some(shape.to_vec()),
            strides: None,
            ndim: None,
            byte_offset: 0,
            data: Data::Offset(0),
            device: DLDevice {
                device_type: DLDeviceType::CPU,
                device_id: 0,
            },
            version: DLPackVersion { major: 1, minor: 3 },
            flags: DlpackFlags::empty(),
            null_deleter: false,
        }
    }

    pub fn strides(mut self, strides: &[i64]) -> Spec {
        self.strides = Some(strides.to_vec());
        self
    }
}

/// Owns the storage behind one hand-built managed tensor.
struct Context {
    words: Vec<u128>,
    shape: Option<Vec<i64>>,
    strides: Option<Vec<i64>>,
    deleted: Arc<AtomicUsize>,
}

fn describe(spec: &Spec, context: &mut Context) -> DLTensor {
    let ndim = spec
        .ndim
        .unwrap_or_else(|| spec.shape.as_ref().map_or(0, |s| s.len() as i32));
    let base = context.words.as_mut_ptr().cast::<u8>();
    let data = match spec.data {
        Data::Offset(bytes) => base.wrapping_add(bytes).cast::<c_void>(),
        Data::Null => std::ptr::null_mut(),
        Data::Address(address) => address as *mut c_void,
    };
    DLTensor {
        data,
        device: spec.device,
        ndim,
        dtype: spec.dtype,
        shape: context
            .shape
            .as_mut()
            .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        strides: context
            .strides
            .as_mut()
            .map_or(std::ptr::null_mut(), |s| s.as_mut_ptr()),
        byte_offset: spec.byte_offset,
    }
}

fn context(spec: &Spec, deleted: &Arc<AtomicUsize>) -> Box<Context> {
    Box::new(Context {
        words: spec.words.clone(),
        shape: spec.shape.clone(),
        strides: spec.strides.clone(),
        deleted: Arc::clone(deleted),
    })
}

unsafe extern "C" fn delete_versioned(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: `managed` and its context were made by `versioned` with `Box::into_raw`.
    let managed = unsafe { Box::from_raw(managed) };
    // SAFETY: as above; the context is reclaimed exactly once, here.
    let context = unsafe { Box::from_raw(managed.manager_ctx.cast::<Context>()) };
    context.deleted.fetch_add(1, Ordering::SeqCst);
}

unsafe extern "C" fn delete_legacy(managed: *mut DLManagedTensor) {
    // SAFETY: `managed` and its context were made by `legacy` with `Box::into_raw`.
    let managed = unsafe { Box::from_raw(managed) };
    // SAFETY: as above; the context is reclaimed exactly once, here.
    let context = unsafe { Box::from_raw(managed.manager_ctx.cast::<Context>()) };
    context.deleted.fetch_add(1, Ordering::SeqCst);
}

/// A heap-allocated versioned managed tensor and the counter its deleter bumps.
pub fn versioned(spec: &Spec) -> (*mut DLManagedTensorVersioned, Arc<AtomicUsize>) {
    let deleted = Arc::new(AtomicUsize::new(0));
    let mut context = context(spec, &deleted);
    let dl_tensor = describe(spec, &mut context);
    let managed = Box::new(DLManagedTensorVersioned {
        version: spec.version,
        manager_ctx: Box::into_raw(context).cast(),
        deleter: if spec.null_deleter {
            None
        } else {
            Some(delete_versioned)
        },
        flags: spec.flags,
        dl_tensor,
    });
    (Box::into_raw(managed), deleted)
}

/// A heap-allocated legacy managed tensor and the counter its deleter bumps.
pub fn legacy(spec: &Spec) -> (*mut DLManagedTensor, Arc<AtomicUsize>) {
    let deleted = Arc::new(AtomicUsize::new(0));
    let mut context = context(spec, &deleted);
    let dl_tensor = describe(spec, &mut context);
    let managed = Box::new(DLManagedTensor {
        dl_tensor,
        manager_ctx: Box::into_raw(context).cast(),
        deleter: if spec.null_deleter {
            None
        } else {
            Some(delete_legacy)
        },
    });
    (Box::into_raw(managed), deleted)
}

/// Reclaims a tensor built with `null_deleter`, which the consumer must not free.
///
/// # Safety
///
/// `managed` must come from `versioned` with `null_deleter` set and must not be used afterwards.
pub unsafe fn reclaim_versioned(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: the caller's guarantee; both boxes were made by `versioned`.
    let managed = unsafe { Box::from_raw(managed) };
    // SAFETY: as above.
    drop(unsafe { Box::from_raw(managed.manager_ctx.cast::<Context>()) });
}

pub fn count(counter: &AtomicUsize) -> usize {
    counter.load(Ordering::SeqCst)
}
