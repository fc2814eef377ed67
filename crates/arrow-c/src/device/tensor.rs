//! Device chunks as device [`Tensor`]s, never read: a `DLManagedTensorVersioned` that owns the
//! Arrow device array and releases it once.

use std::ffi::c_void;
use std::ptr::NonNull;

use arrow_array::ffi::FFI_ArrowArray;
use arrow_dlpack::{EXTENSION_NAME, FixedShapeTensorType, dtype_of};
use arrow_dlpack_tensor::{DType, Device, ImportOptions, Tensor};
use arrow_schema::{DataType, Field};
use dlpack_sys::{DLManagedTensorVersioned, DLPACK_VERSION, DLTensor, DlpackFlags};

use super::{ArrowDeviceArray, DeviceTensor};
use crate::checks;
use crate::error::{ArrowCError, Result, malformed};

/// The owner of a device chunk seen as a DLPack tensor: the managed tensor handed to the tensor
/// crate, its shape and strides, and the Arrow array, released when the owner is freed.
struct DeviceOwner {
    managed: DLManagedTensorVersioned,
    shape: Vec<i64>,
    strides: Vec<i64>,
    /// Dropped with the owner, which releases the Arrow array.
    _array: ArrowDeviceArray,
}

/// The deleter: frees the owner, which releases the Arrow array once.
unsafe extern "C" fn delete_owner(managed: *mut DLManagedTensorVersioned) {
    // SAFETY: the tensor crate calls the deleter once with the managed tensor made by
    // `device_tensor`, whose `manager_ctx` is the owner's `Box`.
    let owner = unsafe { (*managed).manager_ctx.cast::<DeviceOwner>() };
    // SAFETY: as above: the `Box` made by `Box::into_raw` in `device_tensor`, freed once here.
    drop(unsafe { Box::from_raw(owner) });
}

/// The element type, the inner shape and, for `arrow.fixed_shape_tensor`, the extension type of
/// a column that can stay on a device; [`ArrowCError::DeviceColumnType`] otherwise.
fn device_layout(
    field: &Field,
    device: Device,
) -> Result<(DType, Vec<usize>, Option<FixedShapeTensorType>)> {
    let tensor_type = if field.extension_type_name() == Some(EXTENSION_NAME) {
        Some(FixedShapeTensorType::try_from_field(field).map_err(ArrowCError::Arrow)?)
    } else {
        None
    };
    let mut inner = Vec::new();
    let mut data_type = field.data_type();
    while let DataType::FixedSizeList(child, size) = data_type {
        inner.push(usize::try_from(*size).unwrap_or(0));
        data_type = child.data_type();
    }
    match dtype_of(data_type) {
        Ok(dtype) => Ok((dtype, inner, tensor_type)),
        Err(_) => Err(ArrowCError::DeviceColumnType {
            data_type: field.data_type().clone(),
            device,
        }),
    }
}

/// Refuses nulls in a device chunk without reading its bitmap: a known `null_count` above 0 is
/// [`ArrowCError::Nulls`] (tensors hold no nulls), an unknown one (`-1`) with a validity bitmap
/// [`ArrowCError::DeviceNullCount`] (counting would read device memory).
fn require_no_nulls(array: &FFI_ArrowArray, device: Device, path: &str) -> Result {
    match array.null_count_opt() {
        Some(0) => Ok(()),
        Some(count) => Err(ArrowCError::Nulls {
            field: path.to_string(),
            nulls: count as i64,
            device,
        }),
        None if array.buffer(0).is_null() => Ok(()),
        None => Err(ArrowCError::DeviceNullCount {
            field: path.to_string(),
            device,
        }),
    }
}

/// A device chunk as a [`Tensor`] on `device`, without reading its memory: the chunk's shape is
/// `(length, *inner)`, and for `arrow.fixed_shape_tensor` the type's dimension names and
/// permutation apply, as on the CPU. The tensor owns the array, released once when the tensor's
/// last view dies; the array's sync event is handed back with it.
///
/// `device` is where the array's memory lives ([`super::device_of`] of its fields); the array
/// is checked against `field`'s type as an `ArrowArray` is, reading only host memory.
pub fn device_tensor(
    array: ArrowDeviceArray,
    field: &Field,
    device: Device,
) -> Result<DeviceTensor> {
    let (dtype, inner, tensor_type) = device_layout(field, device)?;
    // SAFETY: the struct is live and ours. For the types `device_layout` accepts (fixed-width
    // values and fixed-size lists of them), `check_array` reads the struct fields, the `buffers`
    // and `children` pointer arrays (host memory, as the C Device Data Interface requires) and no
    // buffer memory: only view types make it read a buffer.
    unsafe { checks::check_array(&array.array, field.data_type(), "ArrowDeviceArray.array") }?;
    let mut level = &array.array;
    let mut path = "ArrowDeviceArray.array".to_string();
    require_no_nulls(level, device, &path)?;
    let mut first = level.offset();
    for &size in &inner {
        level = level.child(0);
        path.push_str(".children[0]");
        require_no_nulls(level, device, &path)?;
        first = first
            .checked_mul(size)
            .and_then(|first| first.checked_add(level.offset()))
            .ok_or_else(|| malformed(format!("{path}.offset"), "overflows"))?;
    }
    let data = level.buffer(1);
    let mut shape = vec![array.array.len()];
    match &tensor_type {
        // The fixed-size list holds each tensor flattened; the type gives its shape.
        Some(tensor_type) => shape.extend_from_slice(tensor_type.shape()),
        None => shape.extend_from_slice(&inner),
    }
    let shape: Vec<i64> = shape.iter().map(|&extent| extent as i64).collect();
    let mut strides = vec![1i64; shape.len()];
    for axis in (0..shape.len().saturating_sub(1)).rev() {
        strides[axis] = strides[axis + 1].saturating_mul(shape[axis + 1].max(1));
    }
    let byte_offset = first
        .checked_mul(dtype.size())
        .ok_or_else(|| malformed("ArrowDeviceArray.array.offset", "overflows"))?;
    let sync_event = NonNull::new(array.sync_event);
    let ndim = shape.len() as i32;
    let owner = Box::into_raw(Box::new(DeviceOwner {
        managed: DLManagedTensorVersioned {
            version: DLPACK_VERSION,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(delete_owner),
            flags: DlpackFlags::READ_ONLY,
            dl_tensor: DLTensor {
                data: data.cast_mut().cast::<c_void>(),
                device: device.to_dlpack(),
                ndim,
                dtype: dtype.to_dlpack(),
                shape: std::ptr::null_mut(),
                strides: std::ptr::null_mut(),
                byte_offset: byte_offset as u64,
            },
        },
        shape,
        strides,
        _array: array,
    }));
    // SAFETY: `owner` was just made by `Box::into_raw`; the shape and strides vectors live on the
    // heap as long as the owner, so pointers into them stay valid.
    let managed = unsafe {
        (*owner).managed.manager_ctx = owner.cast::<c_void>();
        (*owner).managed.dl_tensor.shape = (*owner).shape.as_mut_ptr();
        (*owner).managed.dl_tensor.strides = (*owner).strides.as_mut_ptr();
        &raw mut (*owner).managed
    };
    // SAFETY: we own the managed tensor, whose deleter frees the owner once; the tensor crate
    // checks the metadata (the buffers were checked non-NULL where the length needs memory) and,
    // with `any_device`, keeps device memory without reading it.
    let tensor =
        unsafe { Tensor::from_raw_versioned_with(managed, ImportOptions { any_device: true }) }
            .map_err(ArrowCError::Tensor)?;
    let done = |tensor| Ok(DeviceTensor { tensor, sync_event });
    let Some(tensor_type) = tensor_type else {
        return done(tensor);
    };
    let names = tensor_type.dim_names().map(|names| {
        std::iter::once(String::new())
            .chain(names.iter().cloned())
            .collect()
    });
    let tensor = tensor.with_dim_names(names).map_err(ArrowCError::Tensor)?;
    let tensor = match tensor_type.permutation() {
        None => tensor,
        Some(permutation) => {
            let order: Vec<usize> = std::iter::once(0)
                .chain(permutation.iter().map(|&axis| axis + 1))
                .collect();
            tensor.permuted(&order).map_err(ArrowCError::Tensor)?
        }
    };
    done(tensor)
}
