//! `Column`: one Arrow column (a field and its chunks), the data behind `Array`,
//! `FixedShapeTensorArray` and the tables that `Tensor.from_arrow` reads.
//!
//! It imports no other file of the crate, so that every class and `tables` can share it.

use std::borrow::Cow;
use std::sync::OnceLock;

use arrow_array::{ArrayRef, new_empty_array};
use arrow_dlpack::{
    ArrayToTensorOptions, ConcatOptions, array_to_tensor, chunks_need_copy, concat_chunks,
    validity_to_tensor,
};
use arrow_dlpack_tensor::{DType, Tensor};
use arrow_schema::FieldRef;

/// One Arrow column: its field and its chunks, each sharing the memory of whoever produced it.
///
/// Several chunks are concatenated only when an export needs one array and copying is allowed.
/// Cloning is cheap (reference counts).
#[derive(Clone)]
pub(crate) struct Column {
    // Read by the classes that hold a column; never changed once the column is made, since
    // `shared_export` is built from them.
    pub(crate) field: FieldRef,
    pub(crate) chunks: Vec<ArrayRef>,
    /// The tensor that DLPack exports share, built by the first export that did not copy.
    /// Arrow data is immutable, so it stays right; rebuilding it (`to_data`, metadata parsing,
    /// checks) would cost more than the rest of an export.
    shared_export: OnceLock<Tensor>,
}

impl Column {
    /// A column of `chunks` (possibly none: an empty stream), described by `field`.
    pub(crate) fn new(field: FieldRef, chunks: Vec<ArrayRef>) -> Self {
        Column {
            field,
            chunks,
            shared_export: OnceLock::new(),
        }
    }

    /// The tensor that an earlier export made and that shares the column's memory, if any (what
    /// [`Column::export_tensor`] hands out again without work).
    #[inline]
    pub(crate) fn shared_export(&self) -> Option<&Tensor> {
        self.shared_export.get()
    }

    /// The tensor for one DLPack export, and whether it is a copy made for that export alone.
    ///
    /// `build(allow_copy)` makes it; a tensor that shares the column's memory is remembered and
    /// handed out again, while copies (unpacked booleans, concatenated chunks) are made afresh for
    /// each export, since each consumer owns its copy.
    pub(crate) fn export_tensor(
        &self,
        allow_copy: bool,
        build: impl FnOnce(bool) -> arrow_dlpack::Result<Tensor>,
    ) -> arrow_dlpack::Result<(Cow<'_, Tensor>, bool)> {
        if let Some(shared) = self.shared_export.get() {
            return Ok((Cow::Borrowed(shared), false));
        }
        let tensor = build(allow_copy)?;
        if self.copies_to_export(&tensor) {
            return Ok((Cow::Owned(tensor), true));
        }
        // Another thread may have set it meanwhile: both built the same tensor, either will do.
        Ok((
            Cow::Borrowed(self.shared_export.get_or_init(|| tensor)),
            false,
        ))
    }

    /// The field: name, storage type, nullability and extension metadata.
    pub(crate) fn field(&self) -> &FieldRef {
        &self.field
    }

    /// The chunks as one array: the chunk itself when there is one, an empty array when there
    /// is none, else a concatenation when `allow_copy`.
    pub(crate) fn combined(&self, allow_copy: bool) -> arrow_dlpack::Result<ArrayRef> {
        if self.chunks.is_empty() {
            return Ok(new_empty_array(self.field.data_type()));
        }
        concat_chunks(&self.chunks, ConcatOptions { allow_copy })
    }

    /// The validity of every element as one 1-D `bool` tensor (1 = valid), a copy.
    pub(crate) fn validity(&self) -> arrow_dlpack::Result<Tensor> {
        match self.chunks.as_slice() {
            [chunk] => validity_to_tensor(chunk.as_ref()),
            chunks => {
                // Each chunk's mask is a fresh byte buffer; one more copy joins them.
                let len = self.len();
                let mut joined = arrow_dlpack_tensor::alloc::PooledVec::try_with_capacity(len)?;
                for chunk in chunks {
                    let mask = validity_to_tensor(chunk.as_ref())?;
                    let bytes = mask
                        .row_major_buffer()
                        .expect("a validity tensor is 1-D and row-major");
                    joined.extend_from_slice(bytes.as_slice());
                }
                let buffer = joined.into_buffer();
                Ok(
                    Tensor::try_new_row_major(buffer, DType::Bool, vec![len])?
                        .with_read_only(false),
                )
            }
        }
    }

    /// The column as one tensor: 1-D for primitive arrays, n-D for (nested) fixed-size lists.
    pub(crate) fn tensor_with(
        &self,
        options: ArrayToTensorOptions,
    ) -> arrow_dlpack::Result<Tensor> {
        let array = self.combined(options.allow_copy)?;
        array_to_tensor(array.as_ref(), options)
    }

    pub(crate) fn len(&self) -> usize {
        self.chunks.iter().map(|chunk| chunk.len()).sum()
    }

    /// Whether `tensor`, made from this column for an export, is a copy that nothing else
    /// references: several non-empty chunks are concatenated, and booleans are unpacked, into
    /// new memory. One non-empty chunk among empty ones is shared as it is, so it is not a copy.
    pub(crate) fn copies_to_export(&self, tensor: &Tensor) -> bool {
        chunks_need_copy(&self.chunks) || tensor.dtype() == arrow_dlpack_tensor::DType::Bool
    }
}
