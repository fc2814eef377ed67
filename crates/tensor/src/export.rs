//! DLPack export: a [`Tensor`] becomes a managed tensor whose context keeps the buffer alive.

use std::alloc::Layout;
use std::ptr::NonNull;

use arrow_buffer::Buffer;
use dlpack_sys::{DLManagedTensor, DLManagedTensorVersioned, DLTensor, DlpackFlags};
use dlpark::{Managed, ManagedTensorBase};

use crate::alloc::recycle;
use crate::{Error, Result, Tensor};

/// What a consumer asked for when it requested an export, and what the producer knows.
///
/// `copy` follows the Python array API: `Some(true)` always copies, `Some(false)` never copies,
/// `None` copies only when the data cannot be shared as it is (never, for a [`Tensor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportOptions {
    /// The consumer's `copy` argument. Default `None`.
    pub copy: Option<bool>,
    /// The producer made this tensor's memory for this export alone (unpacked booleans,
    /// concatenated chunks) and keeps no other reference to it: the export is flagged `IS_COPIED`
    /// and `copy=Some(true)` does not copy it a second time. Default `false`.
    pub made_for_export: bool,
}

impl ExportOptions {
    /// Options with the given `copy` request.
    pub const fn copy(copy: Option<bool>) -> Self {
        ExportOptions {
            copy,
            made_for_export: false,
        }
    }

    /// Declares whether the tensor's memory was made for this export alone.
    pub const fn made_for_export(self, made_for_export: bool) -> Self {
        ExportOptions {
            made_for_export,
            ..self
        }
    }
}

impl Tensor {
    /// Exports a `DLManagedTensorVersioned` stamped with DLPack 1.3.
    ///
    /// Shape and strides are always explicit, `byte_offset` is 0 (the offset is folded into
    /// `data`) except on devices whose data pointer is an opaque handle
    /// ([`Device::has_opaque_handles`](crate::Device::has_opaque_handles): OpenCL, Vulkan, Metal,
    /// WebGPU), where `data` is the handle and `byte_offset` the distance to the first element,
    /// and `data` is NULL for a tensor without elements.
    /// Flags: `READ_ONLY` when the tensor is read-only and shared, `IS_COPIED` when `copy` was
    /// `Some(true)` (then the data is a fresh row-major copy of exactly the logical elements) or
    /// the memory was [made for the export](ExportOptions::made_for_export).
    ///
    /// ```
    /// # mod arrow_dlpack { pub use arrow_dlpack_tensor::*; pub use arrow_dlpack_tensor as tensor; pub use arrow_buffer::{Buffer, ScalarBuffer}; }
    /// use arrow_dlpack::{ExportOptions, Tensor};
    ///
    /// let tensor = Tensor::from_vec(vec![1i64, 2, 3, 4], vec![2, 2])?;
    /// // The managed tensor keeps the buffer alive until its deleter runs, when it is dropped
    /// // here or released by a consumer that was handed `Managed::into_raw`.
    /// let managed = tensor.to_dlpack_versioned(ExportOptions::default())?;
    /// let imported = Tensor::from_managed(managed)?;
    /// assert_eq!(imported.data_ptr(), tensor.data_ptr()); // zero-copy
    /// assert!(imported.is_read_only()); // the READ_ONLY flag went with it
    /// assert_eq!(imported.as_slice::<i64>()?, &[1, 2, 3, 4]);
    /// # Ok::<(), arrow_dlpack::Error>(())
    /// ```
    pub fn to_dlpack_versioned(
        &self,
        options: ExportOptions,
    ) -> Result<Managed<DLManagedTensorVersioned>> {
        self.to_managed(options)
    }

    /// Exports a legacy `DLManagedTensor` (no version, no flags), for consumers such as JAX that
    /// only understand the pre-1.0 ABI. `copy` is honoured as for the versioned form.
    pub fn to_dlpack_legacy(&self, options: ExportOptions) -> Result<Managed<DLManagedTensor>> {
        self.to_managed(options)
    }

    /// Exports into either managed-tensor ABI.
    pub fn to_managed<M: ManagedTensorBase>(&self, options: ExportOptions) -> Result<Managed<M>> {
        if options.made_for_export && (options.copy != Some(true) || self.is_row_major()) {
            return self.managed_view(DlpackFlags::IS_COPIED);
        }
        if options.copy == Some(true) {
            let copy = self.to_contiguous()?;
            return copy.managed_view(DlpackFlags::IS_COPIED);
        }
        let flags = if self.is_read_only() {
            DlpackFlags::READ_ONLY
        } else {
            DlpackFlags::empty()
        };
        self.managed_view(flags)
    }

    /// Builds the managed tensor that views `self.buffer`, in one allocation: the managed-tensor
    /// header, a clone of the buffer that keeps the data alive, and the shape and strides inline.
    fn managed_view<M: ManagedTensorBase>(&self, flags: DlpackFlags) -> Result<Managed<M>> {
        let ndim = self.ndim();
        let layout = export_layout::<M>(ndim)?;
        // SAFETY: the layout has a non-zero size (it holds at least the header).
        let raw = unsafe { recycle::take(layout) };
        if raw.is_null() {
            return Err(Error::Allocation {
                reason: format!("no memory for a managed tensor of {} bytes", layout.size()),
            });
        }
        let header = raw.cast::<ExportHeader<M>>();
        // On devices whose data pointer is an opaque handle, the handle is handed back as it
        // came and the distance to the first element goes into `byte_offset`; elsewhere the
        // offset is folded into `data`.
        let (data, byte_offset) = if self.is_empty() {
            (std::ptr::null_mut(), 0)
        } else if self.device().has_opaque_handles() {
            let bytes = self.offset() * self.dtype().size();
            (self.buffer().as_ptr().cast_mut(), bytes as u64)
        } else {
            (self.data_ptr().cast_mut(), 0)
        };
        // SAFETY: `raw` is an allocation of `layout` that nothing else uses (fresh, or a block
        // this thread kept from an earlier export), which starts with an `ExportHeader<M>`
        // and continues, aligned for `i64`, with room for `2 * ndim` values (`export_layout`);
        // every field is written before the pointer is handed to `Managed`. The shape and strides
        // pointers address that trailing room, which lives until the deleter frees it.
        unsafe {
            let dims = raw.add(header_size::<M>()).cast::<i64>();
            for (dim, (&extent, &stride)) in self.shape().iter().zip(self.strides()).enumerate() {
                // Extents and strides were checked to fit `isize` when the tensor was built.
                dims.add(dim).write(extent as i64);
                dims.add(ndim + dim).write(stride as i64);
            }
            let (shape, strides) = if ndim == 0 {
                (std::ptr::null_mut(), std::ptr::null_mut())
            } else {
                (dims, dims.add(ndim))
            };
            let tensor = DLTensor {
                data: data.cast(),
                device: self.device().to_dlpack(),
                // `MAX_NDIM` keeps the rank far below `i32::MAX`.
                ndim: ndim as i32,
                dtype: self.dtype().to_dlpack(),
                shape,
                strides,
                byte_offset,
            };
            let mut managed = M::from_parts(tensor, raw.cast(), Some(delete_export::<M>));
            // `IS_COPIED` is only passed by `to_managed` for the fresh buffer made by
            // `to_contiguous`, or for memory the caller declared made for this export alone
            // (flags are promises to the consumer, not memory safety); `READ_ONLY` only
            // restricts consumers.
            managed.set_flags_unchecked(flags);
            header.write(ExportHeader {
                managed,
                buffer: self.buffer().clone(),
                size: layout.size(),
            });
            // `data` addresses only elements inside the buffer (checked when the tensor was
            // built), kept alive by the clone in the header until the deleter runs; the version
            // of a versioned header is the current one (`from_parts`).
            match Managed::from_raw(header.cast::<M>()) {
                Ok(managed) => Ok(managed),
                Err(error) => {
                    delete_export(header.cast::<M>());
                    Err(Error::Allocation {
                        reason: error.to_string(),
                    })
                }
            }
        }
    }
}

/// The start of every allocation [`Tensor::managed_view`] makes: the managed tensor first (so that
/// a pointer to it is a pointer to the header), the buffer that keeps the data alive, and the
/// allocation's size, which the deleter reads (never the consumer-writable `ndim`). `2 * ndim`
/// `i64` values follow: the shape, then the strides.
#[repr(C)]
struct ExportHeader<M> {
    managed: M,
    buffer: Buffer,
    size: usize,
}

/// The offset of the shape and strides: the header rounded up to the alignment of `i64`.
const fn header_size<M>() -> usize {
    std::mem::size_of::<ExportHeader<M>>().next_multiple_of(std::mem::align_of::<i64>())
}

/// The layout of one export allocation of rank `ndim`.
fn export_layout<M>(ndim: usize) -> Result<Layout> {
    let overflow = || Error::Overflow {
        what: "the managed tensor allocation",
    };
    let dims = ndim
        .checked_mul(2 * std::mem::size_of::<i64>())
        .ok_or_else(overflow)?;
    let size = header_size::<M>().checked_add(dims).ok_or_else(overflow)?;
    let align = std::mem::align_of::<ExportHeader<M>>().max(std::mem::align_of::<i64>());
    Layout::from_size_align(size, align).map_err(|_| overflow())
}

/// The deleter of every export: drops the buffer clone and frees the one allocation.
///
/// # Safety
///
/// `managed` is NULL or a pointer made by [`Tensor::managed_view`] that has not been deleted.
unsafe extern "C" fn delete_export<M>(managed: *mut M) {
    if managed.is_null() {
        return;
    }
    let header = managed.cast::<ExportHeader<M>>();
    // SAFETY: by the caller's guarantee `header` is a live allocation made by `managed_view`
    // with this header (non-null, checked above); the buffer is dropped once, here, then the
    // memory is freed (kept for this thread's next export, or given back to the allocator) with
    // the size recorded at allocation and the alignment `export_layout` used.
    unsafe {
        let size = (*header).size;
        std::ptr::drop_in_place(std::ptr::addr_of_mut!((*header).buffer));
        let align = std::mem::align_of::<ExportHeader<M>>().max(std::mem::align_of::<i64>());
        recycle::give(
            NonNull::new_unchecked(header.cast()),
            Layout::from_size_align_unchecked(size, align),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape and strides a managed tensor describes, read through its raw pointers.
    fn dims<M: ManagedTensorBase>(managed: &Managed<M>) -> (Vec<i64>, Vec<i64>) {
        // SAFETY: `as_ptr` points at a live managed tensor made by `managed_view`, whose shape
        // and strides pointers address `ndim` values each (or are NULL for rank 0).
        unsafe {
            let tensor = (*managed.as_ptr()).tensor();
            let ndim = tensor.ndim as usize;
            if ndim == 0 {
                assert!(tensor.shape.is_null() && tensor.strides.is_null());
                return (vec![], vec![]);
            }
            (
                std::slice::from_raw_parts(tensor.shape, ndim).to_vec(),
                std::slice::from_raw_parts(tensor.strides, ndim).to_vec(),
            )
        }
    }

    #[test]
    fn shape_and_strides_live_inline_for_every_rank() {
        let buffer = Buffer::from_vec((0..64u8).collect::<Vec<_>>());
        for ndim in [0usize, 1, 2, 7, 33] {
            let shape = vec![1; ndim];
            let strides: Vec<isize> = (0..ndim as isize).map(|dim| dim - 3).collect();
            let tensor =
                Tensor::try_new(buffer.clone(), crate::DType::UInt8, shape, strides, 8).unwrap();
            let versioned = tensor
                .to_dlpack_versioned(ExportOptions::default())
                .unwrap();
            let legacy = tensor.to_dlpack_legacy(ExportOptions::default()).unwrap();
            let expected = (
                vec![1i64; ndim],
                (0..ndim as i64).map(|dim| dim - 3).collect::<Vec<_>>(),
            );
            assert_eq!(dims(&versioned), expected, "rank {ndim}");
            assert_eq!(dims(&legacy), expected, "rank {ndim}");
        }
    }

    #[test]
    fn the_deleter_frees_by_the_recorded_size_not_the_public_ndim() {
        let buffer = Buffer::from_vec(vec![0u32; 12]);
        let tensor = Tensor::try_new(
            buffer.clone(),
            crate::DType::UInt32,
            vec![3, 4],
            vec![-4, 0],
            8,
        )
        .unwrap();
        let managed = tensor
            .to_dlpack_versioned(ExportOptions::default())
            .unwrap();
        assert_eq!(dims(&managed), (vec![3, 4], vec![-4, 0]));
        // SAFETY: a consumer may scribble on the fields it was handed; the deleter must not
        // trust them.
        unsafe { (*managed.as_ptr()).tensor_mut().ndim = 1000 };
        drop(tensor);
        drop(managed);
        assert_eq!(
            buffer.strong_count(),
            1,
            "the export's reference was released once"
        );
    }

    #[test]
    fn exports_in_a_loop_reuse_one_block_and_each_describes_its_own_tensor() {
        let buffer = Buffer::from_vec((0..24i32).collect::<Vec<_>>());
        let flat =
            Tensor::try_new(buffer.clone(), crate::DType::Int32, vec![24], vec![1], 0).unwrap();
        let square = Tensor::try_new(
            buffer.clone(),
            crate::DType::Int32,
            vec![4, 4],
            vec![4, 1],
            8,
        )
        .unwrap();
        let first = flat.to_dlpack_versioned(ExportOptions::default()).unwrap();
        let address = first.as_ptr() as usize;
        drop(first);
        for _ in 0..3 {
            let again = flat.to_dlpack_versioned(ExportOptions::default()).unwrap();
            assert_eq!(
                again.as_ptr() as usize,
                address,
                "the freed block is taken again"
            );
            assert_eq!(dims(&again), (vec![24], vec![1]));
            // An export of another rank has another layout: it gets a block of its own, and
            // the recycled one keeps describing its own tensor.
            let other = square
                .to_dlpack_versioned(ExportOptions::default())
                .unwrap();
            assert_ne!(other.as_ptr() as usize, address);
            assert_eq!(dims(&other), (vec![4, 4], vec![4, 1]));
            // SAFETY: `other` is a live managed tensor; its data starts 8 elements in.
            assert_eq!(unsafe { *(*other.as_ptr()).tensor().data.cast::<i32>() }, 8);
        }
        drop((flat, square));
        assert_eq!(
            buffer.strong_count(),
            1,
            "every export released its reference once"
        );
    }
}
