//! DLPack export: a [`Tensor`] becomes a managed tensor whose context keeps the buffer alive.

use dlpack_sys::{DLManagedTensor, DLManagedTensorVersioned, DlpackFlags};
use dlpark::metadata::Dynamic;
use dlpark::{Managed, ManagedTensorBase};

use crate::{Error, Result, Tensor};

/// What a consumer asked for when it requested an export, and what the producer knows.
///
/// `copy` follows the Python array API: `Some(true)` always copies, `Some(false)` never copies,
/// `None` copies only when the data cannot be shared as it is (never, for a [`Tensor`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExportOptions {
    /// The consumer's `copy` argument.
    pub copy: Option<bool>,
    /// The producer made this tensor's memory for this export alone (unpacked booleans,
    /// concatenated chunks) and keeps no other reference to it: the export is flagged `IS_COPIED`
    /// and `copy=Some(true)` does not copy it a second time.
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
    /// `data`), and `data` is NULL for a tensor without elements.
    /// Flags: `READ_ONLY` when the tensor is read-only and shared, `IS_COPIED` when `copy` was
    /// `Some(true)` (then the data is a fresh row-major copy of exactly the logical elements) or
    /// the memory was [made for the export](ExportOptions::made_for_export).
    ///
    /// ```
    /// use arrow_dlpack_tensor::{ExportOptions, Tensor};
    ///
    /// let tensor = Tensor::from_vec(vec![1i64, 2, 3, 4], vec![2, 2])?;
    /// // The managed tensor keeps the buffer alive until its deleter runs, when it is dropped
    /// // here or released by a consumer that was handed `Managed::into_raw`.
    /// let managed = tensor.to_dlpack_versioned(ExportOptions::default())?;
    /// let imported = Tensor::from_managed(managed)?;
    /// assert_eq!(imported.data_ptr(), tensor.data_ptr()); // zero-copy
    /// assert!(imported.is_read_only()); // the READ_ONLY flag went with it
    /// assert_eq!(imported.as_slice::<i64>()?, &[1, 2, 3, 4]);
    /// # Ok::<(), arrow_dlpack_tensor::Error>(())
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

    /// Builds the managed tensor that views `self.buffer`, owned by a boxed clone of the buffer.
    fn managed_view<M: ManagedTensorBase>(&self, flags: DlpackFlags) -> Result<Managed<M>> {
        let mut initialized = Dynamic::new(self.shape(), self.strides())
            .initialize_as::<M>(Box::new(self.buffer().clone()))
            .map_err(|error| Error::Allocation {
                reason: error.to_string(),
            })?;
        let data = if self.is_empty() {
            std::ptr::null_mut()
        } else {
            self.data_ptr().cast_mut()
        };
        initialized
            .set_data(data.cast())
            .set_device(self.device().to_dlpack())
            .set_dtype(self.dtype().to_dlpack())
            .set_byte_offset(0);
        // SAFETY: `IS_COPIED` is only passed by `to_managed` for the fresh buffer made by
        // `to_contiguous`, or for memory the caller declared made for this export alone (flags are
        // promises to the consumer, not memory safety); `READ_ONLY` only restricts consumers.
        unsafe { initialized.set_flags_unchecked(flags) };
        // SAFETY: `data` addresses only elements inside the buffer (checked when the tensor was
        // built), and the buffer is kept alive by the boxed clone installed as the context until
        // the deleter runs; shape and strides were copied into the allocation and are explicit.
        Ok(unsafe { initialized.finish() })
    }
}
