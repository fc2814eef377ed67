//! Who owns the memory: a foreign producer's deleter runs exactly once, when the last Arrow
//! reference drops (or at once when the import is refused), and an Arrow buffer exported through
//! DLPack lives as long as the consumer holds it.

use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow_array::types::{Float64Type, Int32Type};
use arrow_array::{Array, Float64Array, cast::AsArray};
use arrow_buffer::{Buffer, ScalarBuffer};
use arrow_dlpack::{
    ArrayToTensorOptions, FixedShapeTensorArray, TensorToArrayOptions, array_to_tensor,
    tensor_to_array, tensor_to_fixed_size_list,
};
use arrow_dlpack_tensor::{ExportOptions, Tensor};
use dlpack_sys::{
    DLDataType, DLDataTypeCode, DLDevice, DLDeviceType, DLManagedTensorVersioned, DLPackVersion,
    DLTensor, DlpackFlags,
};

/// A hand-written foreign producer: the managed tensor, its shape, strides and data live in one
/// box that the deleter frees, counting its calls.
struct Producer {
    managed: DLManagedTensorVersioned,
    shape: Vec<i64>,
    strides: Vec<i64>,
    data: Vec<i32>,
    deleted: Arc<AtomicUsize>,
}

/// The producer's deleter.
///
/// # Safety
///
/// `managed` must come from [`foreign_tensor`] and not have been deleted yet.
unsafe extern "C" fn delete_producer(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: `manager_ctx` is the box leaked by `foreign_tensor`, and this is the only call.
    let producer = unsafe { Box::from_raw((*managed).manager_ctx.cast::<Producer>()) };
    producer.deleted.fetch_add(1, Ordering::SeqCst);
}

/// Builds a foreign int32 managed tensor over `data` with explicit strides.
fn foreign_tensor(
    data: Vec<i32>,
    shape: &[i64],
    strides: &[i64],
    deleted: &Arc<AtomicUsize>,
) -> *mut DLManagedTensorVersioned {
    let mut producer = Box::new(Producer {
        managed: DLManagedTensorVersioned {
            version: DLPackVersion { major: 1, minor: 3 },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_producer),
            flags: DlpackFlags::empty(),
            dl_tensor: DLTensor {
                data: std::ptr::null_mut(),
                device: DLDevice {
                    device_type: DLDeviceType::CPU,
                    device_id: 0,
                },
                ndim: shape.len() as i32,
                dtype: DLDataType {
                    code: DLDataTypeCode::INT,
                    bits: 32,
                    lanes: 1,
                },
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
        },
        shape: shape.to_vec(),
        strides: strides.to_vec(),
        data,
        deleted: Arc::clone(deleted),
    });
    // The vectors' heap storage does not move when the box is leaked.
    producer.managed.dl_tensor.data = producer.data.as_mut_ptr().cast();
    producer.managed.dl_tensor.shape = producer.shape.as_mut_ptr();
    producer.managed.dl_tensor.strides = producer.strides.as_mut_ptr();
    let producer = Box::into_raw(producer);
    // SAFETY: `producer` is a valid, uniquely owned allocation that lives until the deleter runs.
    unsafe {
        (*producer).managed.manager_ctx = producer.cast();
        &raw mut (*producer).managed
    }
}

/// Imports a foreign tensor as the consumer would.
fn import(managed: *mut DLManagedTensorVersioned) -> arrow_dlpack_tensor::Result<Tensor> {
    // SAFETY: `managed` comes from `foreign_tensor`: owned, valid, deleted only by its deleter.
    unsafe { Tensor::from_raw_versioned(managed) }
}

#[test]
fn foreign_memory_is_released_once_when_the_last_array_drops() {
    let deleted = Arc::new(AtomicUsize::new(0));
    let data: Vec<i32> = (10..16).collect();
    let data_ptr = data.as_ptr();
    let tensor = import(foreign_tensor(data, &[6], &[1], &deleted)).unwrap();

    let array = tensor_to_array(&tensor, TensorToArrayOptions::default()).unwrap();
    let slice = array.slice(2, 3);
    // Zero-copy: the array's values are the producer's memory.
    assert_eq!(
        array.as_primitive::<Int32Type>().values().as_ptr(),
        data_ptr
    );
    drop(tensor);
    drop(array);
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    assert_eq!(
        slice.as_primitive::<Int32Type>().values().as_ref(),
        &[12, 13, 14]
    );
    drop(slice);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

#[test]
fn refused_conversions_release_the_producer_once() {
    let deleted = Arc::new(AtomicUsize::new(0));
    // A 2-D tensor cannot become a primitive array.
    let tensor = import(foreign_tensor((0..6).collect(), &[2, 3], &[3, 1], &deleted)).unwrap();
    assert!(tensor_to_array(&tensor, TensorToArrayOptions::default()).is_err());
    drop(tensor);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);

    // A transposed one cannot become fixed-size lists.
    let tensor = import(foreign_tensor((0..6).collect(), &[3, 2], &[1, 3], &deleted)).unwrap();
    assert!(tensor_to_fixed_size_list(&tensor, TensorToArrayOptions::default()).is_err());
    drop(tensor);
    assert_eq!(deleted.load(Ordering::SeqCst), 2);

    // A tensor the tensor layer refuses (here, for a negative extent) is released before the
    // error returns.
    assert!(import(foreign_tensor(vec![0; 4], &[-1], &[1], &deleted)).is_err());
    assert_eq!(deleted.load(Ordering::SeqCst), 3);
}

#[test]
fn fixed_shape_tensor_arrays_keep_foreign_memory_through_re_export() {
    let deleted = Arc::new(AtomicUsize::new(0));
    // Two 2x3 cells stored column-major: logical strides (6, 1, 2).
    let tensor = import(foreign_tensor(
        (0..12).collect(),
        &[2, 2, 3],
        &[6, 1, 2],
        &deleted,
    ))
    .unwrap();
    let array =
        FixedShapeTensorArray::from_tensor(&tensor, TensorToArrayOptions::default()).unwrap();
    assert_eq!(array.extension_type().permutation(), Some(&[1, 0][..]));
    drop(tensor);

    let exported = array
        .to_tensor(ArrayToTensorOptions::default())
        .unwrap()
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    drop(array);
    assert_eq!(deleted.load(Ordering::SeqCst), 0);
    drop(exported);
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}

/// An Arrow allocation that counts its release.
struct CountingOwner {
    _values: Vec<f64>,
    released: Arc<AtomicUsize>,
}

impl Drop for CountingOwner {
    fn drop(&mut self) {
        self.released.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn exported_arrow_memory_lives_until_the_consumer_releases_it() {
    let released = Arc::new(AtomicUsize::new(0));
    let values: Vec<f64> = vec![1.5, 2.5, 3.5, 4.5];
    let ptr = NonNull::new(values.as_ptr().cast_mut().cast::<u8>()).unwrap();
    let len = values.len() * size_of::<f64>();
    let owner = Arc::new(CountingOwner {
        _values: values,
        released: Arc::clone(&released),
    });
    // SAFETY: `ptr` points at `len` initialized bytes owned by `owner`'s vector, which does not
    // move or change while `owner` lives.
    let buffer = unsafe { Buffer::from_custom_allocation(ptr, len, owner) };
    let array = Float64Array::new(ScalarBuffer::new(buffer, 0, 4), None).slice(1, 2);

    let managed = array_to_tensor(&array, ArrayToTensorOptions::default())
        .unwrap()
        .to_dlpack_versioned(ExportOptions::default())
        .unwrap();
    drop(array);
    assert_eq!(released.load(Ordering::SeqCst), 0);

    // The consumer imports it back as an array and drops everything but that array.
    let back = tensor_to_array(
        &Tensor::from_managed(managed).unwrap(),
        TensorToArrayOptions::default(),
    )
    .unwrap();
    assert_eq!(
        back.as_primitive::<Float64Type>().values().as_ref(),
        &[2.5, 3.5]
    );
    assert_eq!(released.load(Ordering::SeqCst), 0);
    drop(back);
    assert_eq!(released.load(Ordering::SeqCst), 1);
}

#[test]
fn device_tensors_never_become_arrow_arrays() {
    let deleted = Arc::new(AtomicUsize::new(0));
    let managed = foreign_tensor((0..6).collect(), &[3, 2], &[2, 1], &deleted);
    // SAFETY: `managed` was just built and is not yet owned by anyone; the device field is ours
    // to set before the import (the host storage then plays device memory, never read).
    unsafe {
        (*managed).dl_tensor.device = DLDevice {
            device_type: DLDeviceType::CUDA,
            device_id: 0,
        }
    };
    let options = arrow_dlpack::tensor::ImportOptions { any_device: true };
    // SAFETY: as in `import`.
    let tensor = unsafe { Tensor::from_raw_versioned_with(managed, options) }.unwrap();
    let refused = |result: arrow_dlpack::Result<()>| {
        let error = result.unwrap_err();
        assert!(
            matches!(
                error,
                arrow_dlpack::Error::Tensor(arrow_dlpack_tensor::Error::DeviceMemory { .. })
            ),
            "{error}"
        );
    };
    refused(tensor_to_fixed_size_list(&tensor, TensorToArrayOptions::default()).map(drop));
    refused(
        arrow_dlpack::FixedShapeTensorArray::from_tensor(
            &tensor,
            TensorToArrayOptions { allow_copy: true },
        )
        .map(drop),
    );
    let row = tensor.permuted(&[1, 0]).unwrap();
    refused(
        arrow_dlpack::tensor_to_array(&row, TensorToArrayOptions { allow_copy: true }).map(drop),
    );
    drop((tensor, row));
    assert_eq!(deleted.load(Ordering::SeqCst), 1);
}
