//! DLPack import: a managed tensor becomes a [`Tensor`] whose buffer owns it, zero-copy.
//!
//! Ownership rule: from the moment a managed tensor reaches this module, its deleter runs exactly
//! once: when the last clone of the resulting buffer drops, or before the error is returned when
//! the tensor is refused.

use std::ptr::NonNull;
use std::sync::Arc;

use arrow_buffer::{Buffer, MutableBuffer};
use dlpack_sys::{
    DLDataType, DLDataTypeCode, DLManagedTensor, DLManagedTensorVersioned, DLTensor, DlpackFlags,
};
use dlpark::{Managed, ManagedTensorBase};

use crate::dims::Dims;
use crate::{DType, Device, Error, MAX_NDIM, Result, Tensor, layout};

/// What an import accepts beyond the default.
///
/// ```
/// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
/// use arrow_dlpack::ImportOptions;
///
/// // The default: host memory only, as every operation on the data needs.
/// assert!(!ImportOptions::default().any_device);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImportOptions {
    /// Accept memory on any device `dlpack.h` names (CUDA, ROCm, Metal, ...), not only the CPU.
    ///
    /// The tensor then keeps its [`Device`] and can be inspected, viewed and exported again
    /// without a copy, while everything that would read its elements refuses it with
    /// [`Error::DeviceMemory`]: this crate never dereferences device memory. Device types that
    /// `dlpack.h` does not name are refused either way. Default `false`.
    pub any_device: bool,
}

/// The metadata of a foreign `DLTensor` once every field has been checked.
struct Checked {
    device: Device,
    dtype: DType,
    shape: Dims<usize>,
    strides: Dims<isize>,
    /// Lowest addressed byte and byte length of the addressed range (from the handle, for a
    /// device whose data pointer is an opaque handle); `None` for an empty tensor.
    range: Option<(NonNull<u8>, usize)>,
    /// Element index of the logical first element from the start of the range.
    offset: usize,
}

impl Tensor {
    /// Takes ownership of a foreign `DLManagedTensorVersioned` and views it without copying.
    ///
    /// A tensor whose major version is not 1 is released through its deleter (the only field
    /// DLPack lets a consumer touch then) and refused.
    ///
    /// # Safety
    ///
    /// `managed` must be NULL or point to a `DLManagedTensorVersioned` that the caller owns, with
    /// a deleter that may be called once from any thread. If its major version is 1, its shape
    /// and strides arrays must be readable for `ndim` entries, and its data must be readable for
    /// every element the metadata describes, until the deleter runs.
    pub unsafe fn from_raw_versioned(managed: *mut DLManagedTensorVersioned) -> Result<Tensor> {
        // SAFETY: the caller's guarantees.
        unsafe { Tensor::from_raw_versioned_with(managed, ImportOptions::default()) }
    }

    /// [`from_raw_versioned`](Tensor::from_raw_versioned) with [`ImportOptions`].
    ///
    /// # Safety
    ///
    /// As for [`from_raw_versioned`](Tensor::from_raw_versioned); for memory on another device,
    /// "readable" means readable on that device (this crate never reads it).
    pub unsafe fn from_raw_versioned_with(
        managed: *mut DLManagedTensorVersioned,
        options: ImportOptions,
    ) -> Result<Tensor> {
        if managed.is_null() {
            return Err(Error::NullManagedTensor);
        }
        // SAFETY: non-NULL and owned by the caller; `version` sits at offset 0 in every major
        // version of the ABI, so reading it is allowed before the version is known.
        let version = unsafe { (*managed).version };
        if version.major != dlpack_sys::DLPACK_MAJOR_VERSION {
            // SAFETY: the deleter's position is stable across major versions; DLPack requires
            // consumers to call it when they refuse a tensor of another major version.
            if let Some(deleter) = unsafe { (*managed).deleter } {
                // SAFETY: the caller transferred ownership; this is the only call.
                unsafe { deleter(managed) };
            }
            return Err(Error::UnsupportedVersion {
                major: version.major,
                minor: version.minor,
                expected_major: dlpack_sys::DLPACK_MAJOR_VERSION,
            });
        }
        // SAFETY: the caller's guarantees are those of `Managed::from_raw`; the version was checked
        // above, so this cannot fail, and ownership now lies with the returned handle.
        let managed =
            unsafe { Managed::from_raw(managed) }.map_err(|_| Error::NullManagedTensor)?;
        Tensor::from_managed_with(managed, options)
    }

    /// Takes ownership of a foreign legacy `DLManagedTensor` and views it without copying.
    ///
    /// # Safety
    ///
    /// `managed` must be NULL or point to a `DLManagedTensor` that the caller owns, with a deleter
    /// that may be called once from any thread; its shape and strides arrays must be readable for
    /// `ndim` entries and its data for every element the metadata describes, until the deleter
    /// runs.
    pub unsafe fn from_raw_legacy(managed: *mut DLManagedTensor) -> Result<Tensor> {
        // SAFETY: the caller's guarantees.
        unsafe { Tensor::from_raw_legacy_with(managed, ImportOptions::default()) }
    }

    /// [`from_raw_legacy`](Tensor::from_raw_legacy) with [`ImportOptions`].
    ///
    /// # Safety
    ///
    /// As for [`from_raw_legacy`](Tensor::from_raw_legacy); for memory on another device,
    /// "readable" means readable on that device (this crate never reads it).
    pub unsafe fn from_raw_legacy_with(
        managed: *mut DLManagedTensor,
        options: ImportOptions,
    ) -> Result<Tensor> {
        // SAFETY: the caller's guarantees are those of `Managed::from_raw`.
        let managed =
            unsafe { Managed::from_raw(managed) }.map_err(|_| Error::NullManagedTensor)?;
        Tensor::from_managed_with(managed, options)
    }

    /// Views an owned managed tensor without copying.
    ///
    /// Every field is validated: device (the CPU unless the options allow others), dtype (one
    /// lane, whole bytes, known code), ndim, shape (no NULL, no negative extents), strides (NULL means row-major; zero and negative
    /// strides are accepted), data (no NULL for a non-empty tensor, aligned for the dtype,
    /// `byte_offset` honoured) and every size and address computation for overflow.
    /// On success the returned tensor's buffer owns `managed`; on failure `managed` is dropped,
    /// which runs its deleter, before the error is returned.
    /// A tensor without elements releases `managed` at once and holds an empty buffer.
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::{ExportOptions, Tensor};
    ///
    /// let source = Tensor::from_vec(vec![1.5f32, 2.5, 3.5], vec![3])?;
    /// let managed = source.to_dlpack_legacy(ExportOptions::default())?;
    /// let tensor = Tensor::from_managed(managed)?; // either ABI
    /// assert_eq!(tensor.shape(), &[3]);
    /// assert_eq!(tensor.get::<f32>(&[2])?, 3.5);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn from_managed<M: ManagedTensorBase>(managed: Managed<M>) -> Result<Tensor> {
        Tensor::from_managed_with(managed, ImportOptions::default())
    }

    /// [`from_managed`](Tensor::from_managed) with [`ImportOptions`]: with
    /// [`any_device`](ImportOptions::any_device), memory on another device is accepted and the
    /// tensor keeps its [`Device`].
    pub fn from_managed_with<M: ManagedTensorBase>(
        managed: Managed<M>,
        options: ImportOptions,
    ) -> Result<Tensor> {
        // A legacy tensor has no flags, so it cannot say that its memory may be written: it is
        // read-only, as numpy imports it. A versioned one is read-only when it says so.
        // SAFETY: `Managed` owns a live managed tensor until it drops, so its header is readable.
        let legacy = unsafe { (*managed.as_ptr()).version() }.is_none();
        let read_only = legacy || managed.flags().contains(DlpackFlags::READ_ONLY);
        // SAFETY: `Managed`'s contract keeps the descriptor readable and unchanged while we own it.
        let raw = unsafe { managed.tensor() };
        // SAFETY: same contract: shape and strides are readable for `ndim` entries.
        let checked = unsafe { check_foreign(raw, options) }?;
        let (buffer, offset) = match checked.range {
            None => {
                drop(managed);
                (Buffer::from(MutableBuffer::new(0)), 0)
            }
            Some((lowest, len)) => {
                let owner: Arc<ForeignOwner> = Arc::new(ForeignOwner(managed.into_deleter()));
                // SAFETY: `check_foreign` proved that `[lowest, lowest + len)` covers every element
                // of the tensor; the producer keeps it valid until its deleter runs, and the deleter
                // runs only when `owner`, held by every clone of the buffer, drops.
                let buffer = unsafe { Buffer::from_custom_allocation(lowest, len, owner) };
                (buffer, checked.offset)
            }
        };
        // SAFETY: `check_foreign` checked every invariant of `from_dims_unchecked` (what `check_view`
        // would check again): the rank, the element count times the size within `isize`, a
        // buffer that is exactly the addressed range with `offset` the logical first element
        // (or an empty buffer at offset 0 for a tensor without elements), and the alignment of
        // that first element.
        let tensor = unsafe {
            Tensor::from_dims_unchecked(
                buffer,
                checked.dtype,
                checked.shape,
                checked.strides,
                offset,
            )
        };
        Ok(tensor.with_read_only(read_only).on_device(checked.device))
    }
}

/// Holds a foreign managed tensor's deleter; dropping it runs the deleter exactly once.
struct ForeignOwner(#[allow(dead_code)] dlpark::AllocationDeleter);

impl std::panic::RefUnwindSafe for ForeignOwner {}

impl std::fmt::Debug for ForeignOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ForeignOwner")
    }
}

/// Validates every field of a foreign `DLTensor`.
///
/// # Safety
///
/// When `ndim > 0`, a non-NULL `shape` must be readable for `ndim` entries, and so must a
/// non-NULL `strides`.
unsafe fn check_foreign(raw: &DLTensor, options: ImportOptions) -> Result<Checked> {
    let device = Device::from_dlpack(raw.device);
    let accepted = device.is_cpu() || (options.any_device && device.type_name() != "unknown");
    if !accepted {
        return Err(Error::UnsupportedDevice {
            device_type: device.device_type,
            device_id: device.device_id,
            name: device.type_name(),
        });
    }
    let dtype = DType::from_dlpack(raw.dtype)?;
    let ndim = usize::try_from(raw.ndim)
        .ok()
        .filter(|&ndim| ndim <= MAX_NDIM)
        .ok_or(Error::InvalidNdim {
            ndim: i64::from(raw.ndim),
            max: MAX_NDIM,
        })?;
    // Read into `Dims`, which hold up to four dimensions without an allocation.
    let shape: Dims<usize> = if ndim == 0 {
        Dims::from_slice(&[])
    } else if raw.shape.is_null() {
        return Err(Error::NullShape { ndim: raw.ndim });
    } else {
        // SAFETY: non-NULL and readable for `ndim` entries by the caller's guarantee.
        let extents = unsafe { std::slice::from_raw_parts(raw.shape, ndim) };
        match Dims::try_from_fn(ndim, |dim| usize::try_from(extents[dim]).ok()) {
            Some(shape) => shape,
            None => {
                // The first extent that did not convert (the fallback is never taken).
                let (dim, extent) = extents
                    .iter()
                    .copied()
                    .enumerate()
                    .find(|&(_, extent)| usize::try_from(extent).is_err())
                    .unwrap_or((0, extents[0]));
                return Err(Error::NegativeExtent { dim, extent });
            }
        }
    };
    let strides: Dims<isize> = if ndim == 0 {
        Dims::from_slice(&[])
    } else if raw.strides.is_null() {
        layout::row_major_strides(&shape)?.into()
    } else {
        // SAFETY: non-NULL and readable for `ndim` entries by the caller's guarantee.
        let strides = unsafe { std::slice::from_raw_parts(raw.strides, ndim) };
        Dims::try_from_fn(ndim, |dim| isize::try_from(strides[dim]).ok())
            .ok_or(Error::Overflow { what: "a stride" })?
    };
    let size = dtype.size();
    let count = layout::element_count(&shape)?;
    let Some((low, high)) = layout::span(&shape, &strides)? else {
        return Ok(Checked {
            device,
            dtype,
            shape,
            strides,
            range: None,
            offset: 0,
        });
    };
    if raw.data.is_null() {
        return Err(Error::NullData { elements: count });
    }
    let overflow = |what| move || Error::Overflow { what };
    let first = (raw.data as usize)
        .checked_add(usize::try_from(raw.byte_offset).map_err(|_| overflow("the data address")())?)
        .ok_or_else(overflow("the data address"))?;
    if first % dtype.alignment() != 0 {
        return Err(Error::Misaligned {
            address: first,
            alignment: dtype.alignment(),
            dtype,
        });
    }
    // Addresses and lengths in i128: the checks below are exact, whatever the inputs.
    // `span` bounds `low` and `high` only by i128, so even the byte arithmetic is checked.
    let size = size as i128;
    let range_overflow = || Error::Overflow {
        what: "the address range of the data",
    };
    let lowest = low
        .checked_mul(size)
        .and_then(|bytes| bytes.checked_add(first as i128))
        .ok_or_else(range_overflow)?;
    let end = high
        .checked_add(1)
        .and_then(|elements| elements.checked_mul(size))
        .and_then(|bytes| bytes.checked_add(first as i128))
        .ok_or_else(range_overflow)?;
    let len = end - lowest;
    if lowest <= 0 || end > usize::MAX as i128 || len > isize::MAX as i128 {
        return Err(range_overflow());
    }
    // Derive the pointer from `data` so that it keeps the producer allocation's provenance; the
    // checks above make both steps land inside (or at the start of) the addressed range.
    let lowest = raw
        .data
        .cast::<u8>()
        .wrapping_add(raw.byte_offset as usize)
        .wrapping_offset((low * size) as isize);
    let lowest = NonNull::new(lowest).ok_or(Error::Overflow {
        what: "the address range of the data",
    })?;
    // The tensor is built without `Tensor::try_new`'s `check_view`, whose invariants are all
    // checked in this function: this one last, as `check_view` checked it after the others (a
    // tensor without elements has a count of 0).
    if count
        .checked_mul(size as usize)
        .is_none_or(|bytes| bytes > isize::MAX as usize)
    {
        return Err(Error::Overflow {
            what: "the byte size",
        });
    }
    if device.has_opaque_handles() {
        // The data pointer is a handle, not an address: the buffer starts at it, and the
        // distance to the first element stays an element offset, which the export hands back
        // as `byte_offset`, never added to the handle.
        let lead = (raw.byte_offset as i128)
            .checked_add(low * size)
            .ok_or_else(range_overflow)?;
        if lead < 0 || lead % size != 0 || len + lead > isize::MAX as i128 {
            return Err(range_overflow());
        }
        let handle =
            NonNull::new(raw.data.cast::<u8>()).ok_or(Error::NullData { elements: count })?;
        return Ok(Checked {
            device,
            dtype,
            shape,
            strides,
            range: Some((handle, (len + lead) as usize)),
            offset: (raw.byte_offset as i128 / size) as usize,
        });
    }
    Ok(Checked {
        device,
        dtype,
        shape,
        strides,
        range: Some((lowest, len as usize)),
        offset: (-low) as usize,
    })
}

impl DType {
    /// Reads a DLPack descriptor, refusing vector, sub-byte and unknown types.
    pub fn from_dlpack(dtype: DLDataType) -> Result<DType> {
        if dtype.lanes != 1 {
            return Err(Error::UnsupportedLanes { lanes: dtype.lanes });
        }
        let bits = dtype.bits;
        let unsupported = |kind, expected| {
            Err(Error::UnsupportedBits {
                kind,
                bits,
                expected,
            })
        };
        let float8 = |dtype: DType| {
            if bits == 8 {
                Ok(dtype)
            } else {
                unsupported("float8", "8")
            }
        };
        match dtype.code {
            DLDataTypeCode::INT => match bits {
                8 => Ok(DType::Int8),
                16 => Ok(DType::Int16),
                32 => Ok(DType::Int32),
                64 => Ok(DType::Int64),
                _ => unsupported("int", "8, 16, 32 or 64"),
            },
            DLDataTypeCode::UINT => match bits {
                8 => Ok(DType::UInt8),
                16 => Ok(DType::UInt16),
                32 => Ok(DType::UInt32),
                64 => Ok(DType::UInt64),
                _ => unsupported("uint", "8, 16, 32 or 64"),
            },
            DLDataTypeCode::FLOAT => match bits {
                16 => Ok(DType::Float16),
                32 => Ok(DType::Float32),
                64 => Ok(DType::Float64),
                _ => unsupported("float", "16, 32 or 64"),
            },
            DLDataTypeCode::BFLOAT => match bits {
                16 => Ok(DType::BFloat16),
                _ => unsupported("bfloat", "16"),
            },
            DLDataTypeCode::COMPLEX => match bits {
                64 => Ok(DType::Complex64),
                128 => Ok(DType::Complex128),
                _ => unsupported("complex", "64 or 128"),
            },
            DLDataTypeCode::BOOL => match bits {
                8 => Ok(DType::Bool),
                _ => unsupported("bool", "8 (one byte per element)"),
            },
            DLDataTypeCode::FLOAT8_E3M4 => float8(DType::Float8E3M4),
            DLDataTypeCode::FLOAT8_E4M3 => float8(DType::Float8E4M3),
            DLDataTypeCode::FLOAT8_E4M3B11FNUZ => float8(DType::Float8E4M3B11Fnuz),
            DLDataTypeCode::FLOAT8_E4M3FN => float8(DType::Float8E4M3Fn),
            DLDataTypeCode::FLOAT8_E4M3FNUZ => float8(DType::Float8E4M3Fnuz),
            DLDataTypeCode::FLOAT8_E5M2 => float8(DType::Float8E5M2),
            DLDataTypeCode::FLOAT8_E5M2FNUZ => float8(DType::Float8E5M2Fnuz),
            DLDataTypeCode::FLOAT8_E8M0FNU => float8(DType::Float8E8M0Fnu),
            DLDataTypeCode::FLOAT6_E2M3FN | DLDataTypeCode::FLOAT6_E3M2FN => unsupported(
                "float6",
                "that are a whole number of bytes (sub-byte types are not supported)",
            ),
            DLDataTypeCode::FLOAT4_E2M1FN => unsupported(
                "float4",
                "that are a whole number of bytes (sub-byte types are not supported)",
            ),
            other => Err(Error::UnknownTypeCode {
                code: other.0,
                bits,
            }),
        }
    }
}

#[cfg(test)]
mod dtype_tests {
    use super::*;

    #[test]
    fn every_dtype_round_trips_through_its_dlpack_descriptor() {
        for dtype in DType::ALL {
            let raw = dtype.to_dlpack();
            assert_eq!(raw.lanes, 1);
            assert_eq!(usize::from(raw.bits), dtype.size() * 8);
            assert_eq!(DType::from_dlpack(raw), Ok(dtype));
        }
    }

    #[test]
    fn rejects_sub_byte_and_odd_widths() {
        for bits in [0, 1, 4, 7, 12, 128] {
            let raw = DLDataType {
                code: DLDataTypeCode::FLOAT,
                bits,
                lanes: 1,
            };
            assert!(matches!(
                DType::from_dlpack(raw),
                Err(Error::UnsupportedBits { .. })
            ));
        }
        let float4 = DLDataType {
            code: DLDataTypeCode::FLOAT4_E2M1FN,
            bits: 4,
            lanes: 1,
        };
        assert!(matches!(
            DType::from_dlpack(float4),
            Err(Error::UnsupportedBits { .. })
        ));
    }

    #[test]
    fn rejects_lanes_other_than_one() {
        for lanes in [0, 2, 4] {
            let raw = DLDataType {
                code: DLDataTypeCode::FLOAT,
                bits: 32,
                lanes,
            };
            assert_eq!(
                DType::from_dlpack(raw),
                Err(Error::UnsupportedLanes { lanes })
            );
        }
    }

    #[test]
    fn rejects_unknown_and_opaque_type_codes() {
        for code in [3, 18, 200] {
            let raw = DLDataType {
                code: DLDataTypeCode(code),
                bits: 8,
                lanes: 1,
            };
            assert_eq!(
                DType::from_dlpack(raw),
                Err(Error::UnknownTypeCode { code, bits: 8 })
            );
        }
    }
}
